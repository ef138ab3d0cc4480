// CPU check of a package's preconditioner roles (precond_summary and precond_scan printed from tile IR against
// runtime/device/dgps/tile, as every kernel of a package is): the package's kernels.cu is compiled for the CPU
// emulator of tests/emu and launched with the runtime's forward geometry (LaunchContract.h forwardGeometry). Per
// problem, on fresh seeded inputs and NaN-poisoned (0xFF) workspace and outputs:
//   1. the preconditioner roles (precond_summary, precond_scan) run first (both, or precond_scan alone for a
//      clamped OSDN d-scan);
//   2. the remaining roles (chunk_local, state_output) run after them; o, the final state and the
//      final preconditioner state are compared with the float64 reference (dgps::runReference), and the final
//      preconditioner state also with an independent float64 token scan of the reference's own inputs (below:
//      the squash accumulator, or OSDN's d-scan).
// Problems: K = V = each square head dim <= 64 the spec allows (else its smallest) and the smallest square dim
// that is not a multiple of 16, C = 64; T = 100 (a partial chunk) with B = 2; varlen cu = {0, 37, 100} (a
// sequence ending mid-chunk, slack slots) and cu = {0, 1, 1, 90} (a one-token and an empty sequence, a padded
// buffer) when the spec allows it; with and without an initial preconditioner
// state; H = 2 unless the spec fixes it, with the spec's GVA ratio; bf16 inputs, and fp16 once. Every other chunk
// in the spec's tuning once more (dense, and the padded varlen buffer) with 8 warps.
//
//   dgps-tile-precond-emu-check PACKAGE_DIR WORK_DIR
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "dgps/device/abi.h"
#include "dgps/dsl/LaunchContract.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Reference.h"
#include "dgps/dsl/SpecParser.h"
#include "EmuCheck.h"
#include "EmuPackage.h"
#include "ManifestWorkspace.h"

namespace {

using dgps_emu::LoadedPackage;
using dgps_emu::relErr;
using dgps_emu::f32Of;

constexpr double kTolOut = 1e-2;     // bf16 inputs, operands and output (the GPU suite's forward tolerance)
constexpr double kTolState = 1e-2;   // f32 state built from bf16 tensor-core products
// the preconditioner state: an fp32 scan of exact input values (measured up to 3e-7). OSDN's chunk summary
// takes its Gram matrix on tensor cores with split-bf16 operands; with the high parts alone it errs by 2e-6..4e-6
// here, which this bound must catch.
constexpr double kTolPrecond = 1e-6;
constexpr int kChunk = 64, kBlockV = 64, kWarps = 4, kStages = 2;  // the main configuration

int fail(const std::string& msg) {
  std::fprintf(stderr, "dgps-tile-precond-emu-check: %s\n", msg.c_str());
  return 1;
}

/// Compiles a package's kernels.cu for the emulator at head dims K = V (fp16 or bf16 inputs), chunk C and
/// chunk_local / precond_summary warps W, and dlopens it.
void* compileForEmu(const std::string& pkg, const std::string& so, int K, bool f16, int C = kChunk, int W = kWarps) {
  return dgps_emu::loadForEmu(pkg + "/kernels.cu", so, {K, K, f16, C, kBlockV, W, kStages});
}


using dgps_emu::launchRole;

/// An independent float64 model of the squash accumulator's final state (docs/math.md §3.3): per sequence
/// and key head, A ← e^{g^a_t}·A + β^a_t·k̂_t² token by token from the initial state (0 when absent), with
/// k̂ = k/‖k‖ when the spec normalises keys. Only for ema_sq_squash specs.
std::vector<double> squashFinal(const dgps::Spec& spec, const dgps::ReferenceInputs& in, std::int64_t B,
                                std::int64_t T, std::int64_t H, int K, const std::vector<std::int64_t>& cu) {
  const dgps::Tensor& k = in.at("k");
  const std::int64_t N = cu.empty() ? B : (std::int64_t)cu.size() - 1;
  std::vector<double> A((size_t)(N * H * K), 0.0);
  if (in.count("initial_precond_state"))
    for (size_t i = 0; i < A.size(); ++i) A[i] = in.at("initial_precond_state").get((std::int64_t)i);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t t0 = cu.empty() ? n * T : cu[n], t1 = cu.empty() ? (n + 1) * T : cu[n + 1];
      for (std::int64_t t = t0; t < t1; ++t) {
        double ss = 0;
        for (int d = 0; d < K; ++d) ss += std::pow(k.get((t * H + h) * K + d), 2);
        const double r = spec.qk_l2norm ? 1.0 / std::sqrt(ss + spec.l2norm_eps) : 1.0;
        const double g = in.count("precond_g") ? in.at("precond_g").get(t * H + h) : 0.0;
        const double b = in.count("precond_beta") ? in.at("precond_beta").get(t * H + h) : 1.0;
        for (int d = 0; d < K; ++d) {
          double& a = A[(size_t)((n * H + h) * K + d)];
          a = std::exp(g) * a + b * std::pow(r * k.get((t * H + h) * K + d), 2);
        }
      }
    }
  return A;
}

/// An independent float64 model of OSDN's final d (docs/math.md §5.2): per sequence and key head, token by token
/// from the initial state (the spec's init when absent), u = k̂², κ = η β/‖k̂‖² (0 for a zero key),
///   d ← r_t d + κ (1 − β ⟨d, u⟩) u,   r_t = e^{precond_g_t} with retention, else 1,
/// then clamped to [clamp_min, clamp_max] where the spec sets them (gva_ratio 1: β at the key head).
std::vector<double> hypergradFinal(const dgps::Spec& spec, const dgps::ReferenceInputs& in, std::int64_t B,
                                   std::int64_t T, std::int64_t H, int K, const std::vector<std::int64_t>& cu) {
  const dgps::HypergradParams& hp = spec.precond.hypergrad;
  const dgps::Tensor& k = in.at("k");
  const std::int64_t N = cu.empty() ? B : (std::int64_t)cu.size() - 1;
  std::vector<double> D((size_t)(N * H * K), hp.init);
  if (in.count("initial_precond_state"))
    for (size_t i = 0; i < D.size(); ++i) D[i] = in.at("initial_precond_state").get((std::int64_t)i);
  std::vector<double> u((size_t)K);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t t0 = cu.empty() ? n * T : cu[n], t1 = cu.empty() ? (n + 1) * T : cu[n + 1];
      double* d = D.data() + (n * H + h) * K;
      for (std::int64_t t = t0; t < t1; ++t) {
        double ss = 0;
        for (int x = 0; x < K; ++x) ss += std::pow(k.get((t * H + h) * K + x), 2);
        const double r = spec.qk_l2norm ? 1.0 / std::sqrt(ss + spec.l2norm_eps) : 1.0;
        const double rho = hp.has_retention ? std::exp(in.at("precond_g").get(t * H + h)) : 1.0;
        const double beta = in.count("beta") ? in.at("beta").get(t * H + h) : 1.0;
        double uu = 0, du = 0;
        for (int x = 0; x < K; ++x) {
          u[(size_t)x] = std::pow(r * k.get((t * H + h) * K + x), 2);
          uu += u[(size_t)x];
          du += d[x] * u[(size_t)x];
        }
        const double c = uu > 0 ? hp.eta * beta / uu * (1.0 - beta * du) : 0.0;
        for (int x = 0; x < K; ++x) {
          d[x] = rho * d[x] + c * u[(size_t)x];
          if (hp.clamp_min) d[x] = std::max(d[x], *hp.clamp_min);
          if (hp.clamp_max) d[x] = std::min(d[x], *hp.clamp_max);
        }
      }
    }
  return D;
}

/// One forward problem: the preconditioner roles, then the rest of the forward.
bool checkOnce(const dgps::Spec& spec, const LoadedPackage& m, int K, bool f16, std::int64_t B, std::int64_t T,
               std::vector<std::int64_t> cu, std::uint64_t seed, bool initialPrecond) {
  dgps::ReferenceProblem s;
  s.batch = B;
  s.seq_len = T;
  s.heads_qk = spec.heads_qk > 0 ? spec.heads_qk : 2;
  s.heads_v = s.heads_qk * spec.gva_ratio;
  s.key_dim = s.value_dim = K;
  s.cu_seqlens = cu;
  dgps::InputGenOptions opt;
  opt.initial_precond_state = initialPrecond;
  const dgps::ReferenceInputs in =
      dgps::generateInputs(spec, s, seed, f16 ? dgps::ScalarType::F16 : dgps::ScalarType::BF16, opt);
  if (initialPrecond != (in.count("initial_precond_state") != 0)) {
    std::fprintf(stderr, "%s: the generated inputs %s initial_precond_state\n", spec.name.c_str(),
                 initialPrecond ? "lack" : "hold");
    return false;
  }
  const dgps::ReferenceOutputs ref = dgps::runReference(spec, in);
  if (!ref.has_final_precond_state) {
    std::fprintf(stderr, "%s: the reference has no final preconditioner state to compare\n", spec.name.c_str());
    return false;
  }
  const std::int64_t HV = s.heads_v, V = K, N = s.numSeqs(), H = s.heads_qk;

  auto has = [&](const char* n) { return in.count(n) != 0; };
  auto floats = [&](const char* n) { return has(n) ? f32Of(in.at(n)) : std::vector<float>(); };
  std::vector<float> g = floats("g"), beta = floats("beta"), s0 = floats("initial_state"), pg = floats("precond_g"),
                     pb = floats("precond_beta"), pc = floats("precond_center"), p0 = floats("initial_precond_state");
  std::vector<std::int64_t> cuv = cu;
  std::vector<std::uint16_t> o((size_t)(B * T * HV * V), f16 ? 0x7e01 : 0x7fc1);  // poison: NaN
  std::vector<float> sT((size_t)(N * HV * K * V), NAN), pTile((size_t)(N * H * K), NAN);
  auto ptr = [](std::vector<float>& v) -> const float* { return v.empty() ? nullptr : v.data(); };

  dgps::launch::FeatureSet f = dgps::deviceFeatures(spec);
  f.write_key = m.writeKey;  // the compile chose it; not in the spec
  dgps::launch::ProblemShape ls;
  ls.B = B;
  ls.T = T;
  ls.N = N;
  ls.H = H;
  ls.HV = HV;
  ls.K = K;
  ls.V = V;
  ls.varlen = cu.empty() ? 0 : 1;
  ls.f16 = f16 ? 1 : 0;
  dgps::launch::TileConfig tc;
  tc.chunk = m.chunk;
  tc.block_v = kBlockV;
  tc.warps = m.warps;
  tc.stages = kStages;
  const dgps_emu::ManifestWorkspace W = dgps_emu::manifestWorkspace(m.dir, ls, tc);
  const size_t wsBytes = W.bytes;
  std::vector<unsigned char> wsTile(wsBytes + 256, 0xFF);

  dgps::ForwardArgs a{};
  a.q = in.at("q").data();
  a.k = in.at("k").data();
  a.v = in.at("v").data();
  a.g = ptr(g);
  a.beta = ptr(beta);
  a.initial_state = ptr(s0);
  a.precond_g = ptr(pg);
  a.precond_beta = ptr(pb);
  a.precond_center = ptr(pc);
  a.initial_precond_state = ptr(p0);
  a.cu_seqlens = cuv.empty() ? nullptr : cuv.data();
  a.o = o.data();
  a.final_state = ref.has_final_state ? sT.data() : nullptr;
  a.batch = B;
  a.seq_len = T;
  a.num_seqs = N;
  a.heads_qk = H;
  a.heads_v = HV;
  a.scale = (float)(spec.scale ? *spec.scale : 1.0 / std::sqrt((double)K));
  dgps::set_index_divisors(a, m.chunk);  // after the shape fields (abi.h)
  dgps_emu::setWorkspaceOffsets(a, W);  // the plan's region offsets, as the runtime passes them
  // full chunks load q and k by tensor copies (the partial last chunk by cp.async), as on an sm_90 GPU
  dgps_emu::encodeRowMaps(a, a.batch * T, H, K, m.chunk, 1);

  int roles[dgps::launch::kMaxRoles];
  const int nr = dgps::launch::forwardRoles(f, roles);
  const std::string prefix = "dgps_" + spec.name + "_fwd_";
  bool ok = true;
  // 1. the preconditioner roles
  int done = 0, covered = 0;
  a.workspace = wsTile.data();
  if (a.row_maps != 0) dgps_emu::encodeWorkspaceMaps(a, W, ls, m.chunk);
  a.final_precond_state = pTile.data();
  for (; done < nr && ok; ++done) {
    const std::string role = dgps::launch::roleName(roles[done]);
    if (role != "precond_summary" && role != "precond_scan") break;
    ++covered;
    ok = launchRole(m.tile, prefix + role, dgps::launch::forwardGeometry(roles[done], f, ls, tc), a);
  }
  if (!ok) return false;
  // a clamped d-scan has no chunk summary: precond_scan alone
  const int want = (f.source == 1 && !dgps::launch::hypergradChunked(f)) ? 1 : 2;
  if (covered != want) {
    std::fprintf(stderr, "%s: expected %d preconditioner roles (precond_summary, precond_scan) first, found %d\n",
                 spec.name.c_str(), want, covered);
    return false;
  }
  // 2. chunk_local and state_output after them
  for (int i = done; i < nr && ok; ++i) {
    const std::string role = dgps::launch::roleName(roles[i]);
    ok = launchRole(m.tile, prefix + role, dgps::launch::forwardGeometry(roles[i], f, ls, tc), a);
  }
  if (!ok) return false;
  std::vector<double> od(o.size());
  for (size_t i = 0; i < o.size(); ++i) od[i] = f16 ? dgps::f16BitsToDouble(o[i]) : dgps::bf16BitsToDouble(o[i]);
  const double eo = relErr(od, ref.o);
  const double es = ref.has_final_state ? relErr(std::vector<double>(sT.begin(), sT.end()), ref.final_state) : 0.0;
  const std::vector<double> pd(pTile.begin(), pTile.end());
  const double ep = relErr(pd, ref.final_precond_state);
  // the independent token-by-token model of the accumulator, from the same inputs
  double em = 0.0;
  const bool hypergrad = spec.precond.source == dgps::PrecondSource::HypergradOgd;
  if (spec.precond.source == dgps::PrecondSource::EmaSqSquash || hypergrad) {
    const std::vector<double> model =
        hypergrad ? hypergradFinal(spec, in, B, T, H, K, cu) : squashFinal(spec, in, B, T, H, K, cu);
    dgps::Tensor mt = ref.final_precond_state;
    for (size_t i = 0; i < model.size(); ++i) mt.set((std::int64_t)i, model[i]);
    em = relErr(pd, mt);
  }
  const bool pass = eo <= kTolOut && es <= kTolState && ep <= kTolPrecond &&
                    em <= kTolPrecond;
  std::printf("  %s %s K=V=%d B=%lld T=%lld N=%lld H=%lld HV=%lld%s%s: rel err o %.3g, final state %.3g, precond state %.3g (model %.3g)  %s\n",
              spec.name.c_str(), f16 ? "f16" : "bf16", K, (long long)B, (long long)T, (long long)N, (long long)H,
              (long long)HV, cu.empty() ? "" : " varlen", initialPrecond ? " initial precond" : " zero precond start",
              eo, es, ep, em,
              pass ? "ok" : "FAIL");
  return pass;
}

}  // namespace

int run(int argc, char** argv) {
  if (argc != 3) return fail("usage: dgps-tile-precond-emu-check PACKAGE_DIR WORK_DIR");
  const std::string tilePkg = argv[1], work = argv[2];
  dgps::ParseResult parsed = dgps::parseSpecFile(tilePkg + "/spec.yaml");
  if (!parsed.ok()) return fail("cannot parse " + tilePkg + "/spec.yaml");
  const dgps::Spec& spec = *parsed.spec;
  std::vector<int> dims;
  for (std::int64_t k : spec.key_dims)
    for (std::int64_t v : spec.value_dims)
      if (k == v && k <= 64) dims.push_back((int)k);
  if (dims.empty())
    for (std::int64_t k : spec.key_dims)
      for (std::int64_t v : spec.value_dims)
        if (k == v && (dims.empty() || k < dims[0])) dims = {(int)k};
  if (dims.empty()) return fail(spec.name + " has no square key/value dim");
  // a dim that is not a multiple of 16 runs padded row tiles: checked once at the smallest such dim
  int odd = 0;
  for (std::int64_t k : spec.key_dims)
    if (k % 16 != 0 && std::find(spec.value_dims.begin(), spec.value_dims.end(), k) != spec.value_dims.end() &&
        (odd == 0 || k < odd))
      odd = (int)k;
  if (odd != 0 && std::find(dims.begin(), dims.end(), odd) == dims.end()) dims.push_back(odd);
  bool ok = true;
  for (int K : dims) {
    const std::string tag = work + "/" + spec.name + "_k" + std::to_string(K);
    LoadedPackage m;
    m.tile = compileForEmu(tilePkg, tag + "_tile_precond_emu.so", K, false);
    m.writeKey = dgps_emu::packageWriteKeyOf(tilePkg);
    m.dir = tilePkg;
    if (!m.tile) return fail("cannot build the emulated kernels of " + spec.name);
    ok = checkOnce(spec, m, K, false, 2, 100, {}, 7150 + K, true) && ok;
    if (spec.varlen) ok = checkOnce(spec, m, K, false, 1, 100, {0, 37, 100}, 7151 + K, true) && ok;
    if (K == dims.front()) ok = checkOnce(spec, m, K, false, 2, 100, {}, 7152 + K, false) && ok;
    // a one-token sequence, an empty one and one over several chunks in a padded buffer
    if (spec.varlen && K == dims.front())
      ok = checkOnce(spec, m, K, false, 1, 100, {0, 1, 1, 90}, 7153 + K, true) && ok;
  }
  // every other chunk the spec's tuning allows, at the smallest dim and its other warp count (the kernels' block
  // assignments depend on both): dense, and the padded buffer with a one-token and an empty sequence
  for (int C : spec.tuning.chunk) {
    if (C == kChunk) continue;
    const int K = dims.front(), W = std::find(spec.tuning.warps.begin(), spec.tuning.warps.end(), 8) !=
                                            spec.tuning.warps.end() ? 8 : kWarps;
    const std::string tag = work + "/" + spec.name + "_k" + std::to_string(K) + "_c" + std::to_string(C);
    LoadedPackage m;
    m.tile = compileForEmu(tilePkg, tag + "_tile_precond_emu.so", K, false, C, W);
    m.writeKey = dgps_emu::packageWriteKeyOf(tilePkg);
    m.dir = tilePkg;
    m.chunk = C;
    m.warps = W;
    if (!m.tile) return fail("cannot build the chunk " + std::to_string(C) + " emulated kernels of " + spec.name);
    std::printf("  chunk %d, %d warps:\n", C, W);
    ok = checkOnce(spec, m, K, false, 2, 100, {}, 7350 + K, true) && ok;
    if (spec.varlen) ok = checkOnce(spec, m, K, false, 1, 100, {0, 1, 1, 90}, 7351 + K, true) && ok;
  }
  if (std::find(spec.input_dtypes.begin(), spec.input_dtypes.end(), dgps::DType::F16) != spec.input_dtypes.end()) {
    const int K = *std::min_element(dims.begin(), dims.end());
    const std::string tag = work + "/" + spec.name + "_k" + std::to_string(K) + "_f16";
    LoadedPackage m;
    m.tile = compileForEmu(tilePkg, tag + "_tile_precond_emu.so", K, true);
    m.writeKey = dgps_emu::packageWriteKeyOf(tilePkg);
    m.dir = tilePkg;
    if (!m.tile) return fail("cannot build the fp16 emulated kernels of " + spec.name);
    ok = checkOnce(spec, m, K, true, 2, 100, {}, 7250 + K, true) && ok;
  }
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
