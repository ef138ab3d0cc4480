// CPU check of a package's decode: the package's kernels.cu, i.e. the decode kernel printed from tile IR plus the
// tile library, is compiled for the CPU emulator of tests/emu
// (the same source NVRTC compiles, with the platform primitives forwarded to the emulator), launched with the
// runtime's decode geometry (LaunchContract.h decodeGeometry) and compared with the float64 reference
// (dgps::runReference, T = 1) on fresh seeded inputs. Outputs are poisoned, shared memory starts as NaN.
//
//   dgps-tile-decode-emu-check PACKAGE_DIR WORK_DIR [OTHER_PACKAGE_DIR]
// With OTHER_PACKAGE_DIR (another package of the same spec, e.g. written before an emitter change) both decodes
// run on the same inputs and must also agree with each other to f32 rounding.
// Exit 0 when o, the state and the preconditioner state match for a one-head, a multi-head and a GVA problem.
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
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

namespace {

using dgps_emu::relErr;
using dgps_emu::f32Of;

constexpr double kTolOut = 1e-2;     // bf16 inputs and output (the GPU suite's decode tolerance)
constexpr double kTolState = 1e-4;   // f32 state

int fail(const std::string& msg) {
  std::fprintf(stderr, "dgps-tile-decode-emu-check: %s\n", msg.c_str());
  return 1;
}

/// One decode step of `spec` at B, H on the emulator vs the reference; prints the errors.
/// max |a − b| / max(max |b|, tiny) over two equally long f32 arrays; infinite when anything is not finite.
double maxRelDiff(const float* a, const float* b, size_t n) {
  double d = 0, m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    d = std::fmax(d, std::fabs((double)a[i] - (double)b[i]));
    m = std::fmax(m, std::fabs((double)b[i]));
  }
  return d / (m > 0 ? m : 1e-30);
}

/// One decode step of `spec` at B, H on the emulator vs the reference; prints the errors. With `libFn` (another
/// package's decode of the same spec) the same step also runs through it on the same inputs, and the two must
/// agree to f32 rounding (only the order of a few scalar operations may differ).
bool checkOnce(const dgps::Spec& spec, void* fn, void* libFn, int K, std::int64_t B, std::int64_t H,
               std::uint64_t seed) {
  dgps::ReferenceProblem s;
  s.batch = B;
  s.seq_len = 1;
  s.heads_qk = spec.heads_qk > 0 ? spec.heads_qk : H;
  s.heads_v = s.heads_qk * spec.gva_ratio;
  s.key_dim = s.value_dim = K;
  const dgps::ReferenceInputs in = dgps::generateInputs(spec, s, seed, dgps::ScalarType::BF16);
  const dgps::ReferenceOutputs ref = dgps::runReference(spec, in);
  const std::int64_t HV = s.heads_v, V = K;

  auto has = [&](const char* n) { return in.count(n) != 0; };
  auto floats = [&](const char* n) { return has(n) ? f32Of(in.at(n)) : std::vector<float>(); };
  std::vector<float> g = floats("g"), beta = floats("beta"), pg = floats("precond_g"), pb = floats("precond_beta"),
                     pc = floats("precond_center");
  std::vector<float> state = has("initial_state") ? f32Of(in.at("initial_state"))
                                                  : std::vector<float>((size_t)(B * HV * K * V), 0.f);
  std::vector<float> pstate;
  const bool pre = spec.precond.kind == dgps::PrecondKind::Diagonal;
  if (pre) {
    pstate = has("initial_precond_state")
                 ? f32Of(in.at("initial_precond_state"))
                 : std::vector<float>((size_t)(B * s.heads_qk * K),
                                      spec.precond.source == dgps::PrecondSource::HypergradOgd
                                          ? (float)spec.precond.hypergrad.init
                                          : 0.f);
  }
  std::vector<std::uint16_t> o((size_t)(B * HV * V), 0x7fc1);  // poison: bf16 NaN
  auto ptr = [](std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };

  dgps::DecodeArgs a{};
  a.q = in.at("q").data();
  a.k = in.at("k").data();
  a.v = in.at("v").data();
  a.g = ptr(g);
  a.beta = ptr(beta);
  a.precond_g = ptr(pg);
  a.precond_beta = ptr(pb);
  a.precond_center = ptr(pc);
  a.state = state.data();
  a.precond_state = ptr(pstate);
  a.o = o.data();
  a.batch = B;
  a.heads_qk = s.heads_qk;
  a.heads_v = HV;
  a.scale = (float)(spec.scale ? *spec.scale : 1.0 / std::sqrt((double)K));

  const dgps::launch::FeatureSet f = dgps::deviceFeatures(spec);
  dgps::launch::ProblemShape ls;
  ls.B = B;
  ls.T = 1;
  ls.H = s.heads_qk;
  ls.HV = HV;
  ls.K = K;
  ls.V = V;
  const dgps::launch::Geometry geo = dgps::launch::decodeGeometry(f, ls, dgps::launch::TileConfig{});
  // The other package's run works on copies of the in-place states and its own poisoned output.
  std::vector<float> libState = state, libPstate = pstate;
  std::vector<std::uint16_t> libO = o;
  auto kernel = reinterpret_cast<void (*)(dgps::DecodeArgs)>(fn);
  char err[512] = {0};
  if (!dgps_emu::launch([&] { kernel(a); }, geo.grid.x, geo.block.x, geo.smem_bytes, err, sizeof err)) {
    std::fprintf(stderr, "emulator: %s\n", err);
    return false;
  }
  bool libOk = true;
  if (libFn) {
    dgps::DecodeArgs la = a;
    la.state = libState.data();
    la.precond_state = ptr(libPstate);
    la.o = libO.data();
    auto lib = reinterpret_cast<void (*)(dgps::DecodeArgs)>(libFn);
    if (!dgps_emu::launch([&] { lib(la); }, geo.grid.x, geo.block.x, geo.smem_bytes, err, sizeof err)) {
      std::fprintf(stderr, "emulator (other package's decode): %s\n", err);
      return false;
    }
    std::vector<float> of(o.size()), lof(o.size());
    for (size_t i = 0; i < o.size(); ++i) {
      std::uint32_t x = (std::uint32_t)o[i] << 16, y = (std::uint32_t)libO[i] << 16;
      std::memcpy(&of[i], &x, 4);
      std::memcpy(&lof[i], &y, 4);
    }
    const double dS = maxRelDiff(state.data(), libState.data(), state.size());
    const double dP = pstate.empty() ? 0.0 : maxRelDiff(pstate.data(), libPstate.data(), pstate.size());
    const double dO = maxRelDiff(of.data(), lof.data(), of.size());
    // f32 state: a few ulps of reordering; bf16 o: one rounding step of 2^-8 relative to the largest output.
    libOk = dS <= 1e-5 && dP <= 1e-5 && dO <= 1.0 / 128;
    std::printf("  vs the other package's decode: max rel diff state %.3g, precond_state %.3g, o %.3g  %s\n", dS, dP, dO,
                libOk ? "ok" : "FAIL");
  }

  std::vector<double> od((size_t)o.size());
  for (size_t i = 0; i < o.size(); ++i) {
    std::uint32_t bits = (std::uint32_t)o[i] << 16;
    float x;
    std::memcpy(&x, &bits, 4);
    od[i] = x;
  }
  const double eo = relErr(od, ref.o);
  const double es = relErr(std::vector<double>(state.begin(), state.end()), ref.final_state);
  double ep = 0;
  if (ref.has_final_precond_state)
    ep = relErr(std::vector<double>(pstate.begin(), pstate.end()), ref.final_precond_state);
  const bool ok = libOk && eo <= kTolOut && (!ref.has_final_state || es <= kTolState) && ep <= kTolState;
  std::printf("  %s B=%lld H=%lld HV=%lld K=V=%d: rel err o %.3g, state %.3g, precond_state %.3g  %s\n",
              spec.name.c_str(), (long long)B, (long long)s.heads_qk, (long long)HV, K, eo, es, ep,
              ok ? "ok" : "FAIL");
  return ok;
}

}  // namespace

/// Compiles `pkg`'s kernels.cu for the emulator into WORK/<tag>.so and returns its decode symbol (or null
/// after printing why).
void* emulatedDecode(const std::string& pkg, const std::string& work, const std::string& tag,
                     const dgps::Spec& spec, int K) {
  const std::string so = work + "/" + spec.name + "_" + tag + "_emu.so";
  void* h = dgps_emu::loadForEmu(pkg + "/kernels.cu", so, {K, K, false});
  if (!h) return nullptr;
  const std::string sym = "dgps_" + spec.name + "_decode";
  void* fn = dlsym(h, sym.c_str());
  if (!fn) fail("no symbol " + sym + " in " + pkg + "/kernels.cu");
  return fn;
}

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4)
    return fail("usage: dgps-tile-decode-emu-check PACKAGE_DIR WORK_DIR [OTHER_PACKAGE_DIR]");
  const std::string pkg = argv[1], work = argv[2];
  dgps::ParseResult parsed = dgps::parseSpecFile(pkg + "/spec.yaml");
  if (!parsed.ok()) return fail("cannot parse " + pkg + "/spec.yaml");
  const dgps::Spec& spec = *parsed.spec;
  // The smallest head dim that is both a key and a value dim keeps the emulator fast.
  int K = 0;
  for (std::int64_t k : spec.key_dims)
    for (std::int64_t v : spec.value_dims)
      if (k == v && (K == 0 || k < K)) K = (int)k;
  if (K == 0) return fail(spec.name + " has no square key/value dim");
  void* fn = emulatedDecode(pkg, work, "decode", spec, K);
  if (!fn) return 1;
  // The other package's decode of the same spec, run on the same inputs (both kernels are in one process:
  // the .so files are loaded RTLD_LOCAL, so their equally named symbols do not collide).
  void* libFn = nullptr;
  if (argc == 4 && !(libFn = emulatedDecode(argv[3], work, "other_decode", spec, K))) return 1;
  // A plain problem and one with several batch rows and heads (GVA where the spec has it).
  bool ok = checkOnce(spec, fn, libFn, K, 1, 1, 4242);
  ok = checkOnce(spec, fn, libFn, K, 3, 2, 4243) && ok;
  // Two value heads per key head: a preconditioned CTA then walks 2·V/32 value tiles of two heads, each read
  // ahead while the one before computes (the value_tile grid gets twice the CTAs).
  // (hypergrad_ogd keeps one d per key head stepped with that head's gain, so it takes no GVA.)
  const bool perKeyHeadGain =
      spec.precond.kind == dgps::PrecondKind::Diagonal && spec.precond.source == dgps::PrecondSource::HypergradOgd;
  if (!perKeyHeadGain) {
    dgps::Spec gva = spec;
    gva.gva_ratio = 2;
    ok = checkOnce(gva, fn, libFn, K, 2, 2, 4244) && ok;
  }
  return ok ? 0 : 1;
}
