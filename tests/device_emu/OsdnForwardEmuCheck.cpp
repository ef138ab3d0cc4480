// CPU emulator check of an OSDN package's whole forward (generated/osdn, generated/osdn_apf): the package's
// kernels.cu is compiled for the emulator of tests/emu and its roles are launched in launch_rules.h order with
// launch_rules.h geometry — for an unclamped hypergrad_ogd spec the chunked d-scan (precond_summary, then
// precond_scan over chunks; fwd_precond_hypergrad.cuh), chunk_local and state_output. Per problem, on seeded
// fresh inputs and NaN-poisoned workspace and outputs:
//   1. the chunked scan's pst (d at every chunk start), pcoef (per-token step coefficients) and
//      final d must equal, to f32 rounding, what the per-token warp scan (fwd_precond.cuh, which a clamped
//      spec still runs) writes for the same inputs on a second poisoned workspace: they are the only thing
//      chunk_local and state_output read from the scan;
//   2. o, the final state and the final preconditioner state must match the float64 reference.
// Problems (K = V = 64 unless said, C = 64, H = 2; GVA is not allowed for hypergrad_ogd, gva_ratio 1): dense B = 2,
// T = 200 (a partial last chunk) with initial states; dense without initial states; varlen with 1-token, empty
// and multi-chunk sequences in a padded token buffer; zero keys (κ = 0) on every third token; the post write
// timing (the package's Traits with kTiming = 1, against the reference with timing post) dense and varlen;
// nearly parallel keys at the d-scan's stability limit η β² = 2 (Traits with kEta = 2, without retention; the
// scan and the final d are gated there, o and S only reported);
// fp16 inputs once where the spec takes them; K = V = 128 once (dense).
//
//   dgps-osdn-forward-emu-check PACKAGE_DIR WORK_DIR        (DGPS_SEED=N fixes the base seed)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "dgps/device/abi.h"
#include "dgps/device/launch_rules.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Reference.h"
#include "dgps/dsl/SpecParser.h"
#include "EmuPackage.h"

namespace {

constexpr int kChunk = 64, kBlockV = 64, kWarps = 4, kStages = 2;
constexpr double kTolOut = 1e-2;     // bf16 inputs, operands and output (the GPU suite's forward tolerance)
constexpr double kTolState = 1e-2;   // f32 state built from bf16 tensor-core products
constexpr double kTolPrecond = 1e-4;  // the d-scan is f32 from the exact input values
constexpr double kTolScan = 1e-4;    // chunked vs token scan, both f32 (max abs error over max |token scan|)

int fail(const std::string& msg) {
  std::fprintf(stderr, "dgps-osdn-forward-emu-check: %s\n", msg.c_str());
  return 1;
}

double relErr(const std::vector<double>& got, const dgps::Tensor& ref) {
  double num = 0, den = 0;
  for (std::int64_t i = 0; i < ref.numel(); ++i) {
    if (!std::isfinite(got[(size_t)i])) return INFINITY;
    const double d = got[(size_t)i] - ref.get(i);
    num += d * d;
    den += ref.get(i) * ref.get(i);
  }
  return std::sqrt(num / (den > 0 ? den : 1.0));
}

std::vector<float> f32Of(const dgps::Tensor& t) {
  std::vector<float> v((size_t)t.numel());
  for (std::int64_t i = 0; i < t.numel(); ++i) v[(size_t)i] = (float)t.get(i);
  return v;
}

/// The package's kernels.cu plus entry points the package does not export: the per-token scan on the same
/// Traits, and every forward role with the write timing switched to post.
void* compileForEmu(const std::string& pkg, const std::string& work, const std::string& name, int K, bool f16) {
  const std::string tag = work + "/" + name + "_k" + std::to_string(K) + (f16 ? "_f16" : "_bf16");
  const std::string src = tag + "_osdn_emu.cpp", so = tag + "_osdn_emu.so";
  {
    std::ofstream os(src);
    os << "#include \"" << pkg << "/kernels.cu\"\n"
       << "namespace { struct TraitsPost : Traits { static constexpr int kTiming = 1; };\n"
       << "            struct TraitsEta2 : Traits { static constexpr float kEta = 2.0f; }; }\n";
    for (const auto& [prefix, traits] : {std::pair<const char*, const char*>{"", "Traits"}, {"post_", "TraitsPost"},
                                         {"eta2_", "TraitsEta2"}}) {
      os << "extern \"C\" void dgps_emu_" << prefix << "token_scan(dgps::ForwardArgs a) { "
         << "dgps::fwd_precond_scan_hypergrad<" << traits << ">(a); }\n";
      for (const char* role : {"precond_summary", "precond_scan", "chunk_local", "state_output"})
        os << "extern \"C\" void dgps_emu_" << prefix << role << "(dgps::ForwardArgs a) { dgps::fwd_" << role
           << "<" << traits << ">(a); }\n";
    }
    if (!os) return nullptr;
  }
  return dgps_emu::loadForEmu(src, so, {K, K, f16, kChunk, kBlockV, kWarps, kStages});
}

using dgps_emu::launchRole;

struct Problem {
  const char* what;
  std::int64_t B, T;
  std::vector<std::int64_t> cu;
  bool initialStates = true;
  bool zeroKeys = false;  ///< every third key row set to zero (k̂ = 0: the token takes no step)
  bool post = false;      ///< write timing post
  bool f16 = false;
  int K = 64;  ///< K = V
  /// η = 2 with every gain 1 and every key of a head equal to its first one up to bf16 rounding of a 1e-3
  /// perturbation: η β² = 2 is the d-scan's stability limit without retention (docs/math.md §5.2), and the
  /// chunk's I + 𝒢 is far from the identity
  bool nearlyParallelAtTheLimit = false;
};

/// max |got − ref| / max |ref| over the entries `use` selects; inf when a selected entry is not finite.
double maxRel(const std::vector<float>& got, const std::vector<float>& ref, const std::vector<char>& use) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!use[i]) continue;
    if (!std::isfinite(got[i]) || !std::isfinite(ref[i])) return INFINITY;
    num = std::max(num, (double)std::fabs(got[i] - ref[i]));
    den = std::max(den, (double)std::fabs(ref[i]));
  }
  return num / (den > 0 ? den : 1.0);
}

bool checkOnce(dgps::Spec spec, void* module, const Problem& p, std::uint64_t seed) {
  if (p.post) spec.precond.hypergrad.timing = dgps::WriteTiming::Post;
  if (p.nearlyParallelAtTheLimit) spec.precond.hypergrad.eta = 2.0;
  dgps::ReferenceProblem s;
  s.batch = p.B;
  s.seq_len = p.T;
  s.heads_qk = spec.heads_qk > 0 ? spec.heads_qk : 2;
  s.heads_v = s.heads_qk * spec.gva_ratio;
  s.key_dim = s.value_dim = p.K;
  s.cu_seqlens = p.cu;
  dgps::InputGenOptions opts;
  opts.initial_state = opts.initial_precond_state = p.initialStates;
  dgps::ReferenceInputs in =
      dgps::generateInputs(spec, s, seed, p.f16 ? dgps::ScalarType::F16 : dgps::ScalarType::BF16, opts);
  if (p.zeroKeys) {
    dgps::Tensor& k = in.at("k");
    const std::int64_t rows = k.numel() / (s.heads_qk * p.K);
    for (std::int64_t r = 0; r < rows; r += 3)
      for (std::int64_t x = 0; x < s.heads_qk * p.K; ++x) k.set(r * s.heads_qk * p.K + x, 0.0);
  }
  if (p.nearlyParallelAtTheLimit) {
    dgps::Tensor& k = in.at("k");
    const std::int64_t HK = s.heads_qk * p.K, rows = k.numel() / HK;
    std::vector<double> first((size_t)HK);
    for (std::int64_t x = 0; x < HK; ++x) first[(size_t)x] = k.get(x);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t x = 0; x < HK; ++x) k.set(r * HK + x, first[(size_t)x] + 1e-3 * k.get(r * HK + x));
    dgps::Tensor& b = in.at("beta");
    for (std::int64_t i = 0; i < b.numel(); ++i) b.set(i, 1.0);
  }
  const dgps::ReferenceOutputs ref = dgps::runReference(spec, in);
  const std::int64_t H = s.heads_qk, HV = s.heads_v, N = s.numSeqs(), V = p.K;

  auto floats = [&](const char* n) { return in.count(n) ? f32Of(in.at(n)) : std::vector<float>(); };
  auto ptr = [](std::vector<float>& v) -> const float* { return v.empty() ? nullptr : v.data(); };
  std::vector<float> beta = floats("beta"), s0 = floats("initial_state"), pg = floats("precond_g"),
                     p0 = floats("initial_precond_state");
  std::vector<std::int64_t> cuv = p.cu;
  std::vector<std::uint16_t> o((size_t)(p.B * p.T * HV * V), p.f16 ? 0x7e01 : 0x7fc1);  // poison: NaN
  std::vector<float> sT((size_t)(N * HV * p.K * V), NAN), pT((size_t)(N * H * p.K), NAN), pTok(pT.size(), NAN);

  const dgps::launch::FeatureSet f = dgps::deviceFeatures(spec);
  if (!dgps::launch::hypergradChunked(f)) {
    std::fprintf(stderr, "%s does not run the chunked d-scan (a clamp?)\n", spec.name.c_str());
    return false;
  }
  dgps::launch::ProblemShape ls;
  ls.B = p.B;
  ls.T = p.T;
  ls.N = N;
  ls.H = H;
  ls.HV = HV;
  ls.K = p.K;
  ls.V = V;
  ls.varlen = p.cu.empty() ? 0 : 1;
  ls.f16 = p.f16 ? 1 : 0;
  dgps::launch::TileConfig tc;
  tc.chunk = kChunk;
  tc.block_v = kBlockV;
  tc.warps = kWarps;
  tc.stages = kStages;
  const dgps::launch::WorkspaceLayout W = dgps::launch::workspaceLayout(f, ls, tc);
  std::vector<unsigned char> ws((size_t)W.total + 256, 0xFF), wsTok(ws.size(), 0xFF);  // poison: NaN floats

  dgps::ForwardArgs a{};
  a.q = in.at("q").data();
  a.k = in.at("k").data();
  a.v = in.at("v").data();
  a.beta = ptr(beta);
  a.initial_state = ptr(s0);
  a.precond_g = ptr(pg);
  a.initial_precond_state = ptr(p0);
  a.cu_seqlens = cuv.empty() ? nullptr : cuv.data();
  a.o = o.data();
  a.final_state = sT.data();
  a.final_precond_state = pT.data();
  a.batch = p.B;
  a.seq_len = p.T;
  a.num_seqs = N;
  a.heads_qk = H;
  a.heads_v = HV;
  a.scale = (float)(spec.scale ? *spec.scale : 1.0 / std::sqrt((double)p.K));
  a.workspace = ws.data();

  int roles[dgps::launch::kMaxRoles];
  const int nr = dgps::launch::forwardRoles(f, roles);
  if (nr != 4 || roles[0] != dgps::launch::kPrecondSummary || roles[1] != dgps::launch::kPrecondScan) {
    std::fprintf(stderr, "%s: expected the roles precond_summary, precond_scan, chunk_local, state_output\n",
                 spec.name.c_str());
    return false;
  }
  // the package's own entry points, or the same roles on the post-timing / η = 2 Traits
  const std::string variant = p.post ? "post_" : p.nearlyParallelAtTheLimit ? "eta2_" : "";
  auto symbol = [&](int role) {
    const std::string r = dgps::launch::roleName(role);
    return variant.empty() ? "dgps_" + spec.name + "_fwd_" + r : "dgps_emu_" + variant + r;
  };
  bool ok = true;
  for (int i = 0; i < 2 && ok; ++i)
    ok = launchRole(module, symbol(roles[i]), dgps::launch::forwardGeometry(roles[i], f, ls, tc), a);
  if (!ok) return false;
  // 1. the per-token scan on its own workspace, at its own (clamped-spec) geometry
  {
    dgps::ForwardArgs t = a;
    t.workspace = wsTok.data();
    t.final_precond_state = pTok.data();
    dgps::launch::FeatureSet clamped = f;
    clamped.clamp = 1;
    ok = launchRole(module, "dgps_emu_" + variant + "token_scan",
                    dgps::launch::forwardGeometry(dgps::launch::kPrecondScan, clamped, ls, tc), t);
    if (!ok) return false;
  }
  // what chunk_local and state_output read: pst of chunk c < ceil(len/C) of every sequence, pcoef of its
  // tokens (the token scan leaves pad rows past its last 32-token block unwritten; the chunked scan zeroes them)
  const long long S = W.slots;
  std::vector<char> usePst((size_t)(S * H * p.K), 0), useCoef((size_t)(S * H * kChunk), 0);
  for (std::int64_t n = 0; n < N; ++n) {
    const std::int64_t bos = p.cu.empty() ? n * p.T : p.cu[(size_t)n];
    const std::int64_t len = p.cu.empty() ? p.T : p.cu[(size_t)n + 1] - bos;
    const std::int64_t first = p.cu.empty() ? n * ((p.T + kChunk - 1) / kChunk) : bos / kChunk + n;
    for (std::int64_t c = 0; c * kChunk < len; ++c)
      for (std::int64_t h = 0; h < H; ++h) {
        std::fill_n(usePst.begin() + ((first + c) * H + h) * p.K, p.K, 1);
        std::fill_n(useCoef.begin() + ((first + c) * H + h) * kChunk, std::min<std::int64_t>(kChunk, len - c * kChunk), 1);
      }
  }
  auto region = [](const std::vector<unsigned char>& w, long long off, size_t count) {
    std::vector<float> v(count);
    std::memcpy(v.data(), w.data() + off, count * sizeof(float));
    return v;
  };
  const double ePst = maxRel(region(ws, W.pst, usePst.size()), region(wsTok, W.pst, usePst.size()), usePst);
  const double eCoef = maxRel(region(ws, W.pcoef, useCoef.size()), region(wsTok, W.pcoef, useCoef.size()), useCoef);
  const double eFin = maxRel(pT, pTok, std::vector<char>(pT.size(), 1));
  // 2. the rest of the forward on the chunked scan's workspace, against the float64 reference
  for (int i = 2; i < nr && ok; ++i)
    ok = launchRole(module, symbol(roles[i]), dgps::launch::forwardGeometry(roles[i], f, ls, tc), a);
  if (!ok) return false;
  std::vector<double> od(o.size());
  for (size_t i = 0; i < o.size(); ++i)
    od[i] = p.f16 ? dgps::f16BitsToDouble(o[i]) : dgps::bf16BitsToDouble(o[i]);
  const double eo = relErr(od, ref.o);
  const double es = relErr(std::vector<double>(sT.begin(), sT.end()), ref.final_state);
  const double ep = relErr(std::vector<double>(pT.begin(), pT.end()), ref.final_precond_state);
  // With every key nearly equal and P·β near 2 the state pass's own bf16 tensor-core products lose the 1e-2
  // bound on o (measured about 2e-2); that problem is about the d-scan, so o and S are reported, not gated.
  const bool gateOutputs = !p.nearlyParallelAtTheLimit;
  const bool pass = ePst <= kTolScan && eCoef <= kTolScan && eFin <= kTolScan && ep <= kTolPrecond &&
                    (!gateOutputs || (eo <= kTolOut && es <= kTolState));
  std::printf("  %s %s %s%s K=V=%d B=%lld T=%lld N=%lld H=%lld: vs token scan pst %.2g pcoef %.2g final d %.2g; "
              "vs float64 o %.3g, final state %.3g%s, precond state %.3g  %s\n",
              spec.name.c_str(), p.what, p.f16 ? "f16" : "bf16", p.post ? " post" : "", p.K, (long long)p.B,
              (long long)p.T, (long long)N, (long long)H, ePst, eCoef, eFin, eo, es, gateOutputs ? "" : " (not gated)", ep,
              pass ? "ok" : "FAIL");
  return pass;
}

}  // namespace

int run(int argc, char** argv) {
  if (argc != 3) return fail("usage: dgps-osdn-forward-emu-check PACKAGE_DIR WORK_DIR");
  const std::string pkg = argv[1], work = argv[2];
  dgps::ParseResult parsed = dgps::parseSpecFile(pkg + "/spec.yaml");
  if (!parsed.ok()) return fail("cannot parse " + pkg + "/spec.yaml");
  const dgps::Spec& spec = *parsed.spec;
  if (!dgps::usesHypergrad(spec)) return fail(spec.name + " is not a hypergrad_ogd spec");
  for (int K : {64, 128})
    if (std::find(spec.key_dims.begin(), spec.key_dims.end(), K) == spec.key_dims.end() ||
        std::find(spec.value_dims.begin(), spec.value_dims.end(), K) == spec.value_dims.end())
      return fail(spec.name + " does not allow K = V = " + std::to_string(K));
  std::uint64_t seed = (std::uint64_t)std::chrono::steady_clock::now().time_since_epoch().count() % 1000000007ull;
  if (const char* e = std::getenv("DGPS_SEED")) seed = std::strtoull(e, nullptr, 10);
  std::printf("%s: base seed %llu (DGPS_SEED=%llu reproduces)\n", spec.name.c_str(), (unsigned long long)seed,
              (unsigned long long)seed);
  void* bf16 = compileForEmu(pkg, work, spec.name, 64, false);
  if (!bf16) return fail("cannot build the emulated kernels of " + spec.name);
  // lengths 1, 63, 1, 65, 1, 0, 119 in a 260-row buffer (rows 250.. are padding)
  const std::vector<std::int64_t> cu = {0, 1, 64, 65, 130, 131, 131, 250};
  std::vector<Problem> problems = {
      {"dense", 2, 200, {}},
      {"dense no initial states", 1, 130, {}, false},
      {"zero keys", 2, 150, {}, true, true},
      {"post", 2, 200, {}, true, false, true},
  };
  // retention allows only η β² <= 1 (the validator's bound), so the limit case is the plain spec's
  if (!spec.precond.hypergrad.has_retention) {
    Problem hard{"nearly parallel keys, eta beta^2 = 2", 2, 200, {}};
    hard.nearlyParallelAtTheLimit = true;
    problems.push_back(hard);
  }
  if (spec.varlen) {
    problems.push_back({"varlen", 1, 260, cu});
    problems.push_back({"varlen post", 1, 260, cu, true, false, true});
  }
  bool ok = true;
  std::uint64_t k = 0;
  for (const Problem& p : problems) ok = checkOnce(spec, bf16, p, seed + 101 * ++k) && ok;
  if (std::find(spec.input_dtypes.begin(), spec.input_dtypes.end(), dgps::DType::F16) != spec.input_dtypes.end()) {
    void* f16 = compileForEmu(pkg, work, spec.name, 64, true);
    if (!f16) return fail("cannot build the fp16 emulated kernels of " + spec.name);
    Problem p{"dense", 2, 200, {}};
    p.f16 = true;
    ok = checkOnce(spec, f16, p, seed + 101 * ++k) && ok;
  }
  // the production head dim once (dense, a partial chunk)
  void* k128 = compileForEmu(pkg, work, spec.name, 128, false);
  if (!k128) return fail("cannot build the K = 128 emulated kernels of " + spec.name);
  Problem wide{"dense", 1, 150, {}};
  wide.K = 128;
  ok = checkOnce(spec, k128, wide, seed + 101 * ++k) && ok;
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
