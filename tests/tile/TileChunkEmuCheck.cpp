// CPU check of a package's forward chunk_local (printed from tile IR against runtime/device/dgps/tile, as every
// kernel of a package is): the package's kernels.cu is compiled for the CPU emulator of tests/emu and launched
// with the runtime's forward geometry (LaunchContract.h forwardGeometry). Per problem, on fresh seeded inputs and a
// 0xFF-poisoned workspace and NaN-poisoned outputs, every role runs in the launch contract's order; with designed
// per-channel gates chunk_local's Aqk is checked against float64 (checkAqk), and o, the final state and the
// final preconditioner state are compared with the float64 reference (dgps::runReference).
// Problems: K = V = each square head dim <= 64 the spec allows (else its smallest) and the smallest square dim
// that is not a multiple of 16 (120 where the spec lists none and its walks read operand rows chunk_local wrote:
// pitch KP != K), C = 64 (once more at C = 32 and C = 16, first dim, dense); T = 100 (a partial chunk) with B = 2,
// and varlen cu = {0, 37, 100} when the spec allows it; once (first dim, dense) with log-decays g 24 times steeper,
// where a per-channel gate must reach the gated products' direct path (checked); with per-channel gates once more
// with gates designed around the factorisation's limits and Aqk checked against float64 (designGates, checkAqk);
// H = 2 unless the spec fixes it, with the spec's GVA ratio; bf16 inputs, and fp16 once (dense, smallest dim) where
// the spec takes fp16.
//
//   dgps-tile-chunk-emu-check PACKAGE_DIR WORK_DIR
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
#include "emu_hooks.h"
#include "ManifestWorkspace.h"

namespace {

using dgps_emu::LoadedPackage;
using dgps_emu::relErr;
using dgps_emu::f32Of;
using dgps_emu::fmtG;
using dgps_emu::featuresOf;

constexpr double kTolOut = 1e-2;    // bf16 inputs, operands and output (the GPU suite's forward tolerance)
constexpr double kTolState = 1e-2;  // f32 state built from bf16 tensor-core products
constexpr int kChunk = 64, kBlockV = 64, kStages = 2;

int fail(const std::string& msg) {
  std::fprintf(stderr, "dgps-tile-chunk-emu-check: %s\n", msg.c_str());
  return 1;
}

/// Compiles a package's kernels.cu for the emulator at head dims K = V (fp16 or bf16 inputs), chunk_local warps
/// `warps` and chunk `chunk` (4 and 64 unless a check says otherwise) and dlopens it.
void* compileForEmu(const std::string& pkg, const std::string& so, int K, bool f16, int warps = 4,
                    int chunk = kChunk) {
  return dgps_emu::loadForEmu(pkg + "/kernels.cu", so, {K, K, f16, chunk, kBlockV, warps, kStages});
}

using dgps_emu::launchRole;

/// Diagonal 16x16 blocks (of C-token chunks of a dense [B, T, HV, K] per-channel log-decay g) whose span
/// max_d Σ_{i=r+1}^{r+15} −g_id·log2(e) exceeds 100: those the gated products evaluate directly
/// (tile/lower_product_gated.cuh). Rows past T add nothing (pad rows carry the last real cumsum).
int countSteepBlocks(const dgps::Tensor& g, std::int64_t B, std::int64_t T, std::int64_t HV, int K) {
  int n = 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t hv = 0; hv < HV; ++hv)
      for (std::int64_t r = 0; r < T; r += 16) {
        double worst = 0;
        for (int d = 0; d < K; ++d) {
          double span = 0;
          for (std::int64_t i = r + 1; i < r + 16 && i < T && i / kChunk == r / kChunk; ++i)
            span -= g.get(((b * T + i) * HV + hv) * K + d) * M_LOG2E;
          worst = std::max(worst, span);
        }
        n += worst > 100.0 ? 1 : 0;
      }
  return n;
}

/// Designed per-channel log-decays (natural log, dense [B, T, HV, K]) around the gated products' factorisation
/// limits (tile/lower_product_gated.cuh, docs/math.md §4.3), by chunk-local row i = 16·block + r:
///   everywhere a mild decay −0.02·(1 + d mod 4);
///   chunk 0, block 1: channel 0 decays by 99/15 (log2) per row: a span of about 99.4, just below 100, so the
///     block is factorised with a channel multiplier near 2^99;
///   chunk 0, block 2: channel 1 decays by 101/15 (log2) per row: a span above 100, evaluated directly;
///   chunk 0, block 3: every channel −3 per row (a span of 65): products with earlier blocks underflow in the
///     channels steepened above;
///   chunk 1: every channel −4.5 per row (about 6.6 in log2): each block's span stays below 100, while a weight
///     2^{G_i − G_j} across blocks falls below 2^{−126} from about 20 rows apart (underflow).
void designGates(dgps::Tensor& g, std::int64_t B, std::int64_t T, std::int64_t HV, int K) {
  const double perRow99 = -99.0 / (15.0 * M_LOG2E), perRow101 = -101.0 / (15.0 * M_LOG2E);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t hv = 0; hv < HV; ++hv)
        for (int d = 0; d < K; ++d) {
          const std::int64_t c = t / kChunk, i = t % kChunk, block = i / 16;
          const bool inBlock = i % 16 != 0;  // rows r+1 .. r+15 make the block's span
          double v = -0.02 * (1 + d % 4);
          if (c == 0 && block == 1 && d == 0 && inBlock) v = perRow99;
          if (c == 0 && block == 2 && d == 1 && inBlock) v = perRow101;
          if (c == 0 && block == 3) v = -3.0;
          if (c == 1) v = -4.5 - 0.02 * (d % 4);
          g.set(((b * T + t) * HV + hv) * K + d, v);
        }
}

/// Aqk of the chunk_local kernel (bf16 [C, C] per (chunk slot, value head), lower blocks) against float64:
///   Aqk_ij = Σ_d q̂_id k̂_jd e^{G_id − G_jd}  (j <= i in the chunk), q̂ = scale·q/|q|, k̂ = k/|k| (l2norm),
/// G_i − G_j summed in float64 from g. Entry tolerance 3e-2·S_ij (S_ij the same sum of absolute terms: bf16
/// operands, gates and output, each term rounded at most four times at 2^-8) plus 2^-120·Σ_d |q̂_id k̂_jd| for
/// the weights that underflow (docs/math.md §4.3). Dense problems of a spec without a preconditioner (the
/// write key is k̂). Returns the entries out of tolerance; *worst: the largest error / tolerance.
long long checkAqk(const dgps::ReferenceInputs& in, const dgps::Spec& spec, const unsigned char* ws,
                   long long aqkOff, std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t HV, int K,
                   double scale, double* worst) {
  const dgps::Tensor &q = in.at("q"), &k = in.at("k"), &g = in.at("g");
  const std::int64_t nt = (T + kChunk - 1) / kChunk;
  auto unit = [&](const dgps::Tensor& x, std::int64_t b, std::int64_t t, std::int64_t h, double mul) {
    std::vector<double> v(K);
    double ss = 0;
    for (int d = 0; d < K; ++d) {
      v[d] = x.get(((b * T + t) * H + h) * K + d);
      ss += v[d] * v[d];
    }
    const double r = spec.qk_l2norm ? mul / std::sqrt(ss + spec.l2norm_eps) : mul;
    for (double& e : v) e *= r;
    return v;
  };
  long long bad = 0;
  *worst = 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t hv = 0; hv < HV; ++hv)
      for (std::int64_t c = 0; c < nt; ++c) {
        const std::int64_t h = hv / (HV / H), t0 = c * kChunk, Lr = std::min<std::int64_t>(kChunk, T - t0);
        const std::uint16_t* A =
            reinterpret_cast<const std::uint16_t*>(ws + aqkOff) + ((b * nt + c) * HV + hv) * kChunk * kChunk;
        for (std::int64_t i = 0; i < Lr; ++i) {
          const std::vector<double> qi = unit(q, b, t0 + i, h, scale);
          std::vector<double> gsum(K, 0.0);  // G_i − G_j, built as j walks down from i
          for (std::int64_t j = i; j >= 0; --j) {
            if (j < i)
              for (int d = 0; d < K; ++d) gsum[d] += g.get(((b * T + t0 + j + 1) * HV + hv) * K + d);
            const std::vector<double> kj = unit(k, b, t0 + j, h, 1.0);
            double ref = 0, sabs = 0, mag = 0;
            for (int d = 0; d < K; ++d) {
              const double w = std::exp(gsum[d]);
              ref += qi[d] * kj[d] * w;
              sabs += std::fabs(qi[d] * kj[d]) * w;
              mag += std::fabs(qi[d] * kj[d]);
            }
            const double got = dgps::bf16BitsToDouble(A[i * kChunk + j]);
            const double err = std::fabs(got - ref), tol = 3e-2 * sabs + std::ldexp(mag, -120);
            if (!(err <= tol)) ++bad;
            *worst = std::max(*worst, err / tol);
          }
        }
      }
  return bad;
}

/// One forward problem: workspace equality of the two chunk_local kernels, then o and the final state.
/// gateScale multiplies the generated log-decays g (1: as generated); designed: designGates replaces them
/// and, without a preconditioner, Aqk is checked against float64 (checkAqk).
bool checkOnce(const dgps::Spec& spec, const LoadedPackage& m, int K, bool f16, std::int64_t B, std::int64_t T,
               std::vector<std::int64_t> cu, std::uint64_t seed, double gateScale = 1.0, bool designed = false) {
  if (m.chunk != kChunk && (gateScale != 1.0 || designed)) {
    std::fprintf(stderr, "steep and designed gates are laid out for C = %d chunks, not %d\n", kChunk, m.chunk);
    return false;
  }
  dgps::ReferenceProblem s;
  s.batch = B;
  s.seq_len = T;
  s.heads_qk = spec.heads_qk > 0 ? spec.heads_qk : 2;
  s.heads_v = s.heads_qk * spec.gva_ratio;
  s.key_dim = s.value_dim = K;
  s.cu_seqlens = cu;
  dgps::ReferenceInputs in =
      dgps::generateInputs(spec, s, seed, f16 ? dgps::ScalarType::F16 : dgps::ScalarType::BF16);
  int unsafeBlocks = -1;  // per-channel gate: 16-row diagonal blocks whose gate span exceeds 100 (log2)
  if (gateScale != 1.0 && in.count("g")) {
    dgps::Tensor& gt = in.at("g");
    for (std::int64_t i = 0; i < gt.numel(); ++i) gt.set(i, gt.get(i) * gateScale);
    if (gt.numel() == B * T * s.heads_v * K) unsafeBlocks = countSteepBlocks(gt, B, T, s.heads_v, K);
  }
  if (designed) {
    dgps::Tensor& gt = in.at("g");
    designGates(gt, B, T, s.heads_v, K);
    unsafeBlocks = countSteepBlocks(gt, B, T, s.heads_v, K);  // chunk 0's block 2 in every (b, hv)
  }
  const dgps::ReferenceOutputs ref = dgps::runReference(spec, in);
  const std::int64_t HV = s.heads_v, V = K, N = s.numSeqs();

  auto has = [&](const char* n) { return in.count(n) != 0; };
  auto floats = [&](const char* n) { return has(n) ? f32Of(in.at(n)) : std::vector<float>(); };
  std::vector<float> g = floats("g"), beta = floats("beta"), s0 = floats("initial_state"), pg = floats("precond_g"),
                     pb = floats("precond_beta"), pc = floats("precond_center"), p0 = floats("initial_precond_state");
  std::vector<std::int64_t> cuv = cu;
  std::vector<std::uint16_t> o((size_t)(B * T * HV * V), f16 ? 0x7e01 : 0x7fc1);  // poison: NaN
  std::vector<float> sT((size_t)(N * HV * K * V), NAN), pT((size_t)(N * s.heads_qk * K), NAN);
  auto ptr = [](std::vector<float>& v) -> const float* { return v.empty() ? nullptr : v.data(); };

  const dgps::launch::FeatureSet f = featuresOf(spec, m);
  dgps::launch::ProblemShape ls;
  ls.B = B;
  ls.T = T * dgps::householderSteps(spec);  // the kernels' row axis: T·n_h steps (abi.h)
  ls.N = N;
  ls.H = s.heads_qk;
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
  a.final_precond_state = ref.has_final_precond_state ? pT.data() : nullptr;
  a.cu_seqlens = cuv.empty() ? nullptr : cuv.data();
  a.o = o.data();
  a.final_state = ref.has_final_state ? sT.data() : nullptr;
  a.batch = B;
  a.seq_len = T * dgps::householderSteps(spec);
  a.num_seqs = N;
  a.heads_qk = s.heads_qk;
  a.heads_v = HV;
  a.scale = (float)(spec.scale ? *spec.scale : 1.0 / std::sqrt((double)K));
  dgps::set_index_divisors(a, m.chunk);  // after the shape fields (abi.h)
  dgps_emu::setWorkspaceOffsets(a, W);  // the plan's region offsets, as the runtime passes them
  // full chunks load q and k by tensor copies (the partial last chunk by cp.async), as on an sm_90 GPU
  const bool maps = dgps_emu::encodeRowMaps(a, a.batch * T, s.heads_qk, K, m.chunk, dgps::householderSteps(spec),
                                           HV, V, kBlockV, spec.decay.kind == dgps::DecayKind::Diagonal);
  const unsigned long long copies0 = dgps_emu::tensor_copies_issued();

  int roles[dgps::launch::kMaxRoles];
  const int nr = dgps::launch::forwardRoles(f, roles);
  const std::string prefix = "dgps_" + spec.name + "_fwd_";
  bool ok = true;
  // 1. the roles up to chunk_local (e.g. precond_scan) on the poisoned workspace
  int local = -1;
  a.workspace = wsTile.data();
  if (maps) dgps_emu::encodeWorkspaceMaps(a, W, ls, m.chunk);
  for (int i = 0; i < nr && ok && local < 0; ++i) {
    const std::string role = dgps::launch::roleName(roles[i]);
    ok = launchRole(m.tile, prefix + role, dgps::launch::forwardGeometry(roles[i], f, ls, tc), a);
    if (role == "chunk_local") local = i;
  }
  if (!ok) return false;
  if (local < 0) {
    std::fprintf(stderr, "%s has no chunk_local role\n", spec.name.c_str());
    return false;
  }
  long long aqkBad = 0;
  double aqkWorst = 0;
  const bool aqkChecked = designed && f.precond == 0;
  if (aqkChecked) aqkBad = checkAqk(in, spec, wsTile.data(), (long long)W.at("aqk"), B, T, s.heads_qk, HV, K, a.scale, &aqkWorst);
  // 2. every other role after chunk_local, in the launch contract's order
  for (int i = local + 1; i < nr && ok; ++i) {
    const std::string role = dgps::launch::roleName(roles[i]);
    ok = launchRole(m.tile, prefix + role, dgps::launch::forwardGeometry(roles[i], f, ls, tc), a);
  }
  if (!ok) return false;
  bool fullChunk = cu.empty() && T >= m.chunk;  // a chunk the tensor copies take
  for (size_t i = 0; i + 1 < cu.size(); ++i) fullChunk = fullChunk || cu[i + 1] - cu[i] >= m.chunk;
  if (maps && fullChunk && dgps_emu::tensor_copies_issued() == copies0) {
    std::fprintf(stderr, "%s: q/k tensor maps were given and a chunk was full, but no tensor copy ran\n",
                 spec.name.c_str());
    return false;
  }
  std::vector<double> od(o.size());
  for (size_t i = 0; i < o.size(); ++i) od[i] = f16 ? dgps::f16BitsToDouble(o[i]) : dgps::bf16BitsToDouble(o[i]);
  const double eo = relErr(od, ref.o);
  const double es = ref.has_final_state ? relErr(std::vector<double>(sT.begin(), sT.end()), ref.final_state) : 0.0;
  const double ep = ref.has_final_precond_state
                       ? relErr(std::vector<double>(pT.begin(), pT.end()), ref.final_precond_state)
                       : 0.0;
  const std::string steep = designed ? " designed gates (" + std::to_string(unsafeBlocks) + " blocks > 100)" +
                                           (aqkChecked ? ", Aqk " + std::to_string(aqkBad) +
                                                             " entries out of tolerance, worst err/tol " + fmtG(aqkWorst)
                                                       : "")
                            : gateScale == 1.0 ? ""
                            : unsafeBlocks < 0 ? " steep gates"
                                               : " steep gates (" + std::to_string(unsafeBlocks) + " blocks > 100)";
  // steep per-channel gates must reach the direct path, or this problem would not test it
  const bool pass =
      eo <= kTolOut && es <= kTolState && ep <= kTolState && unsafeBlocks != 0 && aqkBad == 0;
  std::printf("  %s %s K=V=%d C%d W%d B=%lld T=%lld N=%lld H=%lld HV=%lld%s%s: rel err o %.3g, final state %.3g, "
              "precond state %.3g  %s\n",
              spec.name.c_str(), f16 ? "f16" : "bf16", K, m.chunk, m.warps, (long long)B, (long long)T, (long long)N, (long long)s.heads_qk, (long long)HV,
              cu.empty() ? "" : " varlen", steep.c_str(), eo, es, ep, pass ? "ok" : "FAIL");
  return pass;
}

}  // namespace

int run(int argc, char** argv) {
  if (argc != 3) return fail("usage: dgps-tile-chunk-emu-check PACKAGE_DIR WORK_DIR");
  const std::string tilePkg = argv[1], work = argv[2];
  dgps::ParseResult parsed = dgps::parseSpecFile(tilePkg + "/spec.yaml");
  if (!parsed.ok()) return fail("cannot parse " + tilePkg + "/spec.yaml");
  dgps::Spec spec = *parsed.spec;
  // Head dims the spec allows with K = V: those <= 64 (the emulator's cost grows with K), else the smallest.
  std::vector<int> dims;
  for (std::int64_t k : spec.key_dims)
    for (std::int64_t v : spec.value_dims)
      if (k == v && k <= 64) dims.push_back((int)k);
  if (dims.empty())
    for (std::int64_t k : spec.key_dims)
      for (std::int64_t v : spec.value_dims)
        if (k == v && (dims.empty() || k < dims[0])) dims = {(int)k};
  if (dims.empty()) return fail(spec.name + " has no square key/value dim");
  // A dim that is not a multiple of 16 (e.g. 120) runs padded tiles and o rows that are not 32-byte aligned
  // (stored row by row): checked too, once, at the smallest such dim.
  int odd = 0;
  for (std::int64_t k : spec.key_dims)
    if (k % 16 != 0 && std::find(spec.value_dims.begin(), spec.value_dims.end(), k) != spec.value_dims.end() &&
        (odd == 0 || k < odd))
      odd = (int)k;
  // A forward whose walks read bf16 operand rows that chunk_local wrote (per-channel decay: opq/opk/opw; a
  // preconditioner: the stored pwk/pwq) runs K = V = 120 even where the spec does not list it: those rows have
  // pitch KP = 128 there (launch_rules.h workspaceRowPitch), not K, so a writer or reader at pitch K shows in o.
  // The kernels take any K; the dim is added to this copy of the spec for the reference and the input generator.
  const dgps::launch::FeatureSet features = dgps::deviceFeatures(spec);
  if (odd == 0 && (features.decay == 2 || features.precond == 1)) {
    odd = 120;
    spec.key_dims.push_back(odd);
    spec.value_dims.push_back(odd);
  }
  if (odd != 0 && std::find(dims.begin(), dims.end(), odd) == dims.end()) dims.push_back(odd);
  bool ok = true;
  for (int K : dims) {
    const std::string tag = work + "/" + spec.name + "_k" + std::to_string(K);
    LoadedPackage m;
    m.tile = compileForEmu(tilePkg, tag + "_tile_chunk_emu.so", K, false);
    m.writeKey = dgps_emu::packageWriteKeyOf(tilePkg);
    m.dir = tilePkg;
    if (!m.tile) return fail("cannot build the emulated kernels of " + spec.name);
    ok = checkOnce(spec, m, K, false, 2, 100, {}, 5150 + K) && ok;
    if (spec.varlen) ok = checkOnce(spec, m, K, false, 1, 100, {0, 37, 100}, 5151 + K) && ok;
    // Log-decays 24 times the generated ones (about −36 per token at the steepest): a per-channel gate's
    // 16-row span then exceeds 100 (log2) on most diagonal blocks, which takes the direct-evaluation path of
    // the gated products, and scalar gates take masked exponents far below 0.
    if (K == dims.front()) ok = checkOnce(spec, m, K, false, 2, 100, {}, 5350 + K, 24.0) && ok;
    // Per-channel gates designed around the factorisation's limits (designGates): a span just below and one
    // just above 100 in chunk 0, underflowing cross-block weights in chunk 1; Aqk against float64.
    if (K == dims.front() && dgps::deviceFeatures(spec).decay == 2)
      ok = checkOnce(spec, m, K, false, 1, 100, {}, 5450 + K, 1.0, true) && ok;
  }
  // Per-channel decay at 8 warps too (the default configuration): the gated products' register staging (one
  // block piece and up to three product blocks per thread, tile/lower_product_gated.cuh) differs from 4 warps'.
  // With the generated gates and with gates steep enough for the direct diagonal blocks.
  if (features.decay == 2) {
    const int K = dims.front();
    LoadedPackage m;
    m.warps = 8;
    m.tile = compileForEmu(tilePkg, work + "/" + spec.name + "_k" + std::to_string(K) + "_w8_tile_chunk_emu.so", K,
                           false, m.warps);
    m.writeKey = dgps_emu::packageWriteKeyOf(tilePkg);
    m.dir = tilePkg;
    if (!m.tile) return fail("cannot build the 8-warp emulated kernels of " + spec.name);
    ok = checkOnce(spec, m, K, false, 2, 100, {}, 5550 + K) && ok;
    ok = checkOnce(spec, m, K, false, 2, 100, {}, 5650 + K, 24.0) && ok;
  }
  // The other chunk sizes the device library offers (launch_rules.h kChunkChoices), once each at the first dim:
  // C = 32 with 4 warps (the default configuration of the scalar-decay specs) and C = 16 with 2 warps. Their
  // chunk roles split the same steps differently over the warps (one warp per 16x16 block of the inverse's
  // store: 3 blocks and 1 block; the row norms' row steps), and their state walks take other MMA forms.
  for (const auto [chunk, warps] : {std::pair{32, 4}, std::pair{16, 2}}) {
    const int K = dims.front();
    LoadedPackage m;
    m.warps = warps;
    m.chunk = chunk;
    m.tile = compileForEmu(tilePkg, work + "/" + spec.name + "_k" + std::to_string(K) + "_c" + std::to_string(chunk) +
                                        "_tile_chunk_emu.so", K, false, warps, chunk);
    m.writeKey = dgps_emu::packageWriteKeyOf(tilePkg);
    m.dir = tilePkg;
    if (!m.tile) return fail("cannot build the C = " + std::to_string(chunk) + " emulated kernels of " + spec.name);
    ok = checkOnce(spec, m, K, false, 2, 100, {}, 5750 + K + chunk) && ok;
  }
  // fp16 inputs (re-encoded to bf16 for the tensor cores) once, at the smallest dim, when the spec takes them.
  if (std::find(spec.input_dtypes.begin(), spec.input_dtypes.end(), dgps::DType::F16) != spec.input_dtypes.end()) {
    const int K = *std::min_element(dims.begin(), dims.end());
    const std::string tag = work + "/" + spec.name + "_k" + std::to_string(K) + "_f16";
    LoadedPackage m;
    m.tile = compileForEmu(tilePkg, tag + "_tile_chunk_emu.so", K, true);
    m.writeKey = dgps_emu::packageWriteKeyOf(tilePkg);
    m.dir = tilePkg;
    if (!m.tile) return fail("cannot build the fp16 emulated kernels of " + spec.name);
    ok = checkOnce(spec, m, K, true, 2, 100, {}, 5250 + K) && ok;
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
