// CPU emulator check of the context-parallel preconditioner round's device steps (Runtime::forwardPrecondSummary,
// docs/context_parallel.md) for an ema_sq_squash package (generated/pgdn, pkda, pdn, atq): the package's kernels.cu
// is compiled for the emulator of tests/emu and the launch sequence of forwardPrecondSummary is run on a varlen
// batch (a rank's local batch of fragments: several documents, a partial last chunk, a one-token one, padding):
//   precond_summary;  precond_scan from A = 0 into Σ;  every chunk's σ_c (psum) zeroed;  precond_scan from A = 1
//   into Γ.
// Then, per sequence, key head and channel, against the float64 reference on the same inputs:
//   Σ          = the end accumulator from A = 0,
//   Γ ⊙ A0 + Σ = the end accumulator from the drawn A0 (the affine map the fold applies),
//   Γ          = exp(Σ_t precond_g_t) over the sequence (1 without the gate), the same in every channel.
// For an unclamped hypergrad_ogd package (generated/osdn, osdn_apf) the K×K map d_end = M d_start + e:
//   precond_summary;  precond_scan from d = 0 into e;  every chunk's a (hgvec) zeroed;  precond_scan from each unit
//   vector e_i (K scans) into column i of M; the same K scans from the runtime's windowed unit starts (one buffer,
//   a window per column) must give the same M bit for bit.
// Then against float64: e = the reference's end d from d = 0; M d0 + e = its end d from the drawn d0; M = the
// product of the tokens' maps r_t I − c_t u_t u_tᵀ (docs/math.md §5.2), composed here from the inputs.
// Fresh seeded inputs; NaN-poisoned workspace and outputs.
//
//   dgps-precond-round-emu-check PACKAGE_DIR WORK_DIR        (DGPS_SEED=N fixes the seed)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "EmuCheck.h"
#include "EmuPackage.h"
#include "ManifestWorkspace.h"
#include "dgps/device/abi.h"
#include "dgps/tile/feedback_scan_layout.h"
#include "dgps/dsl/LaunchContract.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Reference.h"
#include "dgps/dsl/SpecParser.h"

namespace {

using dgps_emu::f32Of;

constexpr int kChunk = 64, kK = 64;
constexpr double kTol = 1e-4;  // the accumulator is f32 from the exact input values (docs/math.md §5.1)

int fail(const std::string& msg) {
  std::fprintf(stderr, "dgps-precond-round-emu-check: %s\n", msg.c_str());
  return 1;
}

/// max |got − ref| / max(1, max |ref|); inf when an entry is not finite.
double maxRel(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0, den = 1;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num = std::max(num, std::fabs(got[i] - ref[i]));
    den = std::max(den, std::fabs(ref[i]));
  }
  return num / den;
}

/// The hypergrad_ogd half of run(): forwardPrecondSummary's K + 1 scans after precond_summary, checked.
template <class Launch>
int checkHypergrad(const dgps::Spec& spec, const dgps::ReferenceInputs& in, const dgps::ReferenceOutputs& fromD0,
                   const dgps::ReferenceOutputs& fromZero, const dgps::ReferenceProblem& s,
                   const dgps_emu::ManifestWorkspace& W, long long slots, std::vector<unsigned char>& ws, dgps::ForwardArgs& a,
                   const Launch& launch) {
  const std::int64_t H = s.heads_qk, N = s.numSeqs(), K = kK;
  const size_t states = (size_t)(N * H * K);
  std::vector<float> start(states, 0.0f), e(states, NAN), col(states, NAN), M((size_t)(N * H * K * K), NAN);
  a.initial_precond_state = start.data();  // an explicit zero: a null start would be the spec's init
  a.final_precond_state = e.data();
  if (!launch(dgps::launch::kPrecondScan)) return fail("precond_scan (e) failed");
  const int VF = dgps::tile::feedbackVecFloats(kChunk);
  float* vec = reinterpret_cast<float*>(ws.data() + W.at("hgvec"));
  for (long long r = 0; r < slots * H; ++r) std::fill(vec + r * VF, vec + r * VF + kChunk, 0.0f);  // a = 0
  a.final_precond_state = col.data();
  for (std::int64_t i = 0; i < K; ++i) {
    for (std::int64_t r = 0; r < N * H; ++r) start[(size_t)(r * K + i)] = 1.0f;
    std::fill(col.begin(), col.end(), NAN);
    if (!launch(dgps::launch::kPrecondScan)) return fail("precond_scan (column " + std::to_string(i) + ") failed");
    for (std::int64_t r = 0; r < N * H; ++r) start[(size_t)(r * K + i)] = 0.0f;
    for (std::int64_t r = 0; r < N * H; ++r)
      for (std::int64_t x = 0; x < K; ++x) M[(size_t)((r * K + x) * K + i)] = col[(size_t)(r * K + x)];
  }
  // The runtime's unit starts are windows of one buffer (Runtime.cpp, hypergradPrecondSummary): N·H·K + K − 1
  // floats, 1 at every K-th from K − 1; the window from float K − 1 − i is e_i in every row. The same scans from
  // them must give M bit for bit.
  std::vector<float> windows(states + (size_t)K - 1, 0.0f), windowM(M.size(), NAN);
  for (std::int64_t r = 0; r < N * H; ++r) windows[(size_t)(K - 1 + r * K)] = 1.0f;
  for (std::int64_t i = 0; i < K; ++i) {
    a.initial_precond_state = windows.data() + (K - 1 - i);
    std::fill(col.begin(), col.end(), NAN);
    if (!launch(dgps::launch::kPrecondScan)) return fail("precond_scan (window " + std::to_string(i) + ") failed");
    for (std::int64_t r = 0; r < N * H; ++r)
      for (std::int64_t x = 0; x < K; ++x) windowM[(size_t)((r * K + x) * K + i)] = col[(size_t)(r * K + x)];
  }
  if (std::memcmp(windowM.data(), M.data(), M.size() * sizeof(float)) != 0)
    return fail(spec.name + ": M from the windowed unit starts differs from M from the unit vectors");
  // float64: M composed token by token from the inputs, e and the affine map against the reference
  const std::vector<double> d0 = in.at("initial_precond_state").toDoubles();
  const std::vector<double> endZero = fromZero.final_precond_state.toDoubles();
  const std::vector<double> endD0 = fromD0.final_precond_state.toDoubles();
  const dgps::HypergradParams& hp = spec.precond.hypergrad;
  std::vector<double> gotM(M.begin(), M.end()), refM(M.size()), affine(states);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t h = 0; h < H; ++h) {
      double* R = refM.data() + (n * H + h) * K * K;
      for (std::int64_t x = 0; x < K * K; ++x) R[x] = x % (K + 1) == 0 ? 1.0 : 0.0;
      for (std::int64_t t = s.cu_seqlens[(size_t)n]; t < s.cu_seqlens[(size_t)n + 1]; ++t) {
        std::vector<double> u(static_cast<size_t>(K));
        double ss = 0.0, uu = 0.0;
        for (std::int64_t x = 0; x < K; ++x) ss += std::pow(in.at("k").get((t * H + h) * K + x), 2);
        const double rk = spec.qk_l2norm ? 1.0 / std::sqrt(ss + spec.l2norm_eps) : 1.0;
        for (std::int64_t x = 0; x < K; ++x) {
          u[(size_t)x] = std::pow(in.at("k").get((t * H + h) * K + x) * rk, 2);
          uu += u[(size_t)x];
        }
        const double b = spec.gain.kind == dgps::GainKind::Scalar ? in.at("beta").get(t * s.heads_v + h) : 1.0;
        const double rt = hp.has_retention ? std::exp(in.at("precond_g").get(t * H + h)) : 1.0;
        const double c = uu > 0.0 ? hp.eta * b * b / uu : 0.0;
        for (std::int64_t j = 0; j < K; ++j) {  // R ← (r I − c u uᵀ) R, column by column
          double ux = 0.0;
          for (std::int64_t x = 0; x < K; ++x) ux += u[(size_t)x] * R[x * K + j];
          for (std::int64_t x = 0; x < K; ++x) R[x * K + j] = rt * R[x * K + j] - c * u[(size_t)x] * ux;
        }
      }
      for (std::int64_t x = 0; x < K; ++x) {
        const size_t row = (size_t)((n * H + h) * K);
        double acc = e[row + (size_t)x];
        for (std::int64_t y = 0; y < K; ++y) acc += (double)M[(row + (size_t)x) * (size_t)K + (size_t)y] * d0[row + (size_t)y];
        affine[(size_t)((n * H + h) * K + x)] = acc;
      }
    }
  const double eE = maxRel(std::vector<double>(e.begin(), e.end()), endZero), eAffine = maxRel(affine, endD0),
               eM = maxRel(gotM, refM);
  const bool pass = eE <= kTol && eAffine <= kTol && eM <= kTol;
  std::printf("  %s varlen N=%lld H=%lld K=%lld (K + 1 = %lld scans): e vs float64 from 0 %.2g, M d0 + e vs float64 "
              "from d0 %.2g, M vs the tokens' composed maps %.2g  %s\n",
              spec.name.c_str(), (long long)N, (long long)H, (long long)K, (long long)(K + 1), eE, eAffine, eM,
              pass ? "ok" : "FAIL");
  return pass ? 0 : 1;
}

int run(int argc, char** argv) {
  if (argc != 3) return fail("usage: dgps-precond-round-emu-check PACKAGE_DIR WORK_DIR");
  const std::string pkg = argv[1], work = argv[2];
  dgps::ParseResult parsed = dgps::parseSpecFile(pkg + "/spec.yaml");
  if (!parsed.ok()) return fail("cannot parse " + pkg + "/spec.yaml");
  const dgps::Spec& spec = *parsed.spec;
  const bool hypergrad = spec.precond.source == dgps::PrecondSource::HypergradOgd;
  if (!dgps::usesSquash(spec) && !hypergrad) return fail(spec.name + " has no ema_sq_squash or hypergrad_ogd state");
  if (hypergrad && (spec.precond.hypergrad.clamp_min || spec.precond.hypergrad.clamp_max))
    return fail(spec.name + " is clamped: its d-scan has no affine summary");
  std::uint64_t seed = (std::uint64_t)std::chrono::steady_clock::now().time_since_epoch().count() % 1000000007ull;
  if (const char* e = std::getenv("DGPS_SEED")) seed = std::strtoull(e, nullptr, 10);
  std::printf("%s: seed %llu (DGPS_SEED=%llu reproduces)\n", spec.name.c_str(), (unsigned long long)seed,
              (unsigned long long)seed);
  dgps_emu::KernelConfig kc;
  kc.K = kc.V = kK;
  kc.chunk = kChunk;
  kc.block_v = 64;
  kc.warps = 4;
  kc.stages = 2;
  void* module = dgps_emu::loadForEmu(pkg + "/kernels.cu", work + "/" + spec.name + "_precond_round_emu.so", kc);
  if (!module) return fail("cannot build the emulated kernels of " + spec.name);

  // lengths 150 (a partial third chunk), 1, 64, 0, 97, in a 330-row buffer (rows 312.. are padding)
  dgps::ReferenceProblem s;
  s.batch = 1;
  s.seq_len = 330;
  s.heads_qk = s.heads_v = 2;
  s.key_dim = s.value_dim = kK;
  s.cu_seqlens = {0, 150, 151, 215, 215, 312};
  dgps::InputGenOptions opts;
  opts.initial_state = opts.initial_precond_state = true;
  const dgps::ReferenceInputs in = dgps::generateInputs(spec, s, seed, dgps::ScalarType::BF16, opts);
  dgps::ReferenceInputs inZero = in;
  inZero.erase("initial_precond_state");  // A = 0
  if (hypergrad) {  // no initial d means the spec's init; the map's e is the scan from d = 0
    const dgps::Tensor& d0 = in.at("initial_precond_state");
    inZero["initial_precond_state"] =
        dgps::Tensor::fromDoubles(d0.dtype(), d0.shape(), std::vector<double>((size_t)d0.numel(), 0.0));
  }
  const dgps::ReferenceOutputs fromA0 = dgps::runReference(spec, in), fromZero = dgps::runReference(spec, inZero);
  const std::int64_t H = s.heads_qk, N = s.numSeqs(), K = kK;

  auto floats = [&](const char* n) { return in.count(n) ? f32Of(in.at(n)) : std::vector<float>(); };
  auto ptr = [](std::vector<float>& v) -> const float* { return v.empty() ? nullptr : v.data(); };
  std::vector<float> g = floats("g"), beta = floats("beta"), pg = floats("precond_g"), pb = floats("precond_beta"),
                     pc = floats("precond_center"), a0 = floats("initial_precond_state");
  std::vector<std::int64_t> cu = s.cu_seqlens;
  std::vector<std::uint16_t> o((size_t)(s.seq_len * s.heads_v * K), 0x7fc1);  // poison: NaN (not written)
  std::vector<float> sigma((size_t)(N * H * K), NAN), gamma(sigma.size(), NAN), ones(sigma.size(), 1.0f);

  const dgps::launch::FeatureSet f = dgps::deviceFeatures(spec);
  dgps::launch::ProblemShape ls;
  ls.B = 1;
  ls.T = s.seq_len;
  ls.N = N;
  ls.H = H;
  ls.HV = s.heads_v;
  ls.K = K;
  ls.V = K;
  ls.varlen = 1;
  dgps::launch::TileConfig tc;
  tc.chunk = kChunk;
  tc.block_v = 64;
  tc.warps = 4;
  tc.stages = 2;
  const dgps_emu::ManifestWorkspace W = dgps_emu::manifestWorkspace(pkg, ls, tc);
  const long long slots = dgps::launch::chunkSlots(ls, tc.chunk);
  std::vector<unsigned char> ws(W.bytes + 256, 0xFF);  // poison: NaN floats

  dgps::ForwardArgs a{};
  a.q = in.at("q").data();
  a.k = in.at("k").data();
  a.v = in.at("v").data();
  a.g = ptr(g);
  a.beta = ptr(beta);
  a.precond_g = ptr(pg);
  a.precond_beta = ptr(pb);
  a.precond_center = ptr(pc);
  a.cu_seqlens = cu.data();
  a.o = o.data();
  a.batch = 1;
  a.seq_len = s.seq_len;
  a.num_seqs = N;
  a.heads_qk = H;
  a.heads_v = s.heads_v;
  a.scale = 1.0f / std::sqrt((float)K);
  dgps::set_index_divisors(a, kChunk);  // after the shape fields (abi.h)
  dgps_emu::setWorkspaceOffsets(a, W);  // the plan's region offsets, as the runtime passes them
  a.workspace = ws.data();
  int roles[dgps::launch::kMaxRoles];
  if (dgps::launch::forwardRoles(f, roles) < 2 || roles[0] != dgps::launch::kPrecondSummary ||
      roles[1] != dgps::launch::kPrecondScan)
    return fail(spec.name + ": expected the roles precond_summary, precond_scan first");
  auto launch = [&](int role) {
    return dgps_emu::launchRole(module, "dgps_" + spec.name + "_fwd_" + dgps::launch::roleName(role),
                                dgps::launch::forwardGeometry(role, f, ls, tc), a);
  };
  // forwardPrecondSummary's sequence (runtime/lib/Runtime.cpp)
  if (!launch(dgps::launch::kPrecondSummary)) return fail("precond_summary failed");
  if (hypergrad) return checkHypergrad(spec, in, fromA0, fromZero, s, W, slots, ws, a, launch);
  a.initial_precond_state = nullptr;
  a.final_precond_state = sigma.data();
  if (!launch(dgps::launch::kPrecondScan)) return fail("precond_scan (Σ) failed");
  std::memset(ws.data() + W.at("psum"), 0, (size_t)(slots * H * K) * sizeof(float));
  a.initial_precond_state = ones.data();
  a.final_precond_state = gamma.data();
  if (!launch(dgps::launch::kPrecondScan)) return fail("precond_scan (Γ) failed");

  const std::vector<double> endZero = fromZero.final_precond_state.toDoubles();
  const std::vector<double> endA0 = fromA0.final_precond_state.toDoubles();
  std::vector<double> gotSigma(sigma.begin(), sigma.end()), affine(sigma.size()), gammaRef(sigma.size());
  bool uniform = true;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t h = 0; h < H; ++h) {
      double logGamma = 0.0;
      for (std::int64_t t = cu[(size_t)n]; t < cu[(size_t)n + 1] && spec.precond.squash.has_gate; ++t)
        logGamma += in.at("precond_g").get(t * H + h);
      for (std::int64_t k = 0; k < K; ++k) {
        const size_t i = (size_t)((n * H + h) * K + k);
        affine[i] = (double)gamma[i] * a0[i] + sigma[i];
        gammaRef[i] = std::exp(logGamma);
        uniform = uniform && gamma[i] == gamma[(size_t)((n * H + h) * K)];
      }
    }
  const double eSigma = maxRel(gotSigma, endZero), eAffine = maxRel(affine, endA0),
               eGamma = maxRel(std::vector<double>(gamma.begin(), gamma.end()), gammaRef);
  const bool pass = eSigma <= kTol && eAffine <= kTol && eGamma <= kTol && uniform;
  std::printf("  %s varlen N=%lld H=%lld K=%lld: Σ vs float64 from 0 %.2g, Γ⊙A0+Σ vs float64 from A0 %.2g, Γ vs "
              "exp(Σ precond_g) %.2g, Γ uniform per head %s  %s\n",
              spec.name.c_str(), (long long)N, (long long)H, (long long)K, eSigma, eAffine, eGamma,
              uniform ? "yes" : "NO", pass ? "ok" : "FAIL");
  return pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
