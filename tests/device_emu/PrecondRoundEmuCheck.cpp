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

#include "EmuPackage.h"
#include "dgps/device/abi.h"
#include "dgps/device/launch_rules.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Reference.h"
#include "dgps/dsl/SpecParser.h"

namespace {

constexpr int kChunk = 64, kK = 64;
constexpr double kTol = 1e-4;  // the accumulator is f32 from the exact input values (docs/math.md §5.1)

int fail(const std::string& msg) {
  std::fprintf(stderr, "dgps-precond-round-emu-check: %s\n", msg.c_str());
  return 1;
}

std::vector<float> f32Of(const dgps::Tensor& t) {
  std::vector<float> v((size_t)t.numel());
  for (std::int64_t i = 0; i < t.numel(); ++i) v[(size_t)i] = (float)t.get(i);
  return v;
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

int run(int argc, char** argv) {
  if (argc != 3) return fail("usage: dgps-precond-round-emu-check PACKAGE_DIR WORK_DIR");
  const std::string pkg = argv[1], work = argv[2];
  dgps::ParseResult parsed = dgps::parseSpecFile(pkg + "/spec.yaml");
  if (!parsed.ok()) return fail("cannot parse " + pkg + "/spec.yaml");
  const dgps::Spec& spec = *parsed.spec;
  if (!dgps::usesSquash(spec)) return fail(spec.name + " is not an ema_sq_squash spec");
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
  const dgps::launch::WorkspaceLayout W = dgps::launch::workspaceLayout(f, ls, tc);
  std::vector<unsigned char> ws((size_t)W.total + 256, 0xFF);  // poison: NaN floats

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
  a.initial_precond_state = nullptr;
  a.final_precond_state = sigma.data();
  if (!launch(dgps::launch::kPrecondScan)) return fail("precond_scan (Σ) failed");
  std::memset(ws.data() + W.psum, 0, (size_t)(W.slots * H * K) * sizeof(float));
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
