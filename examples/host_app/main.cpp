// dgps-host-app [PACKAGE] [--batch B] [--tokens T] [--heads H] [--dtype bf16|f16] [--seed S] [--tune] [--db PATH]
//
// What a deployment looks like: open a generated package, make inputs (here: random, realistic ones
// from the dsl's input generator), run the chunked forward on the GPU through the runtime, and check it
// against the float64 reference. Prints the max relative error of every output.
//
// Exit codes: 0 the outputs are within tolerance; 1 they are not, or an error (bad package, bad option);
// 77 (kExitNoGpu, the automake/ctest "skipped" convention) nothing was run because there is no usable GPU
// here: no CUDA driver, no device, or a GPU the kernels do not support (compute capability 9.0 only);
// the reason is printed first. Scripts treat 77 as "skipped", never as success.
//
// Tile configuration (issue 5): the runtime asks the tuning resolver (dgps/runtime/Tune.h). With --tune the
// first run tunes this shape on this GPU (candidates screened in isolated dgps-tune-trial processes, timed,
// winner appended to the tuning database) and a second run reuses the record without tuning. Without
// --tune the mode comes from $DGPS_TUNE_MODE (default `recorded`: a record if there is one, else the
// manifest default). The app prints which configuration it used and where it came from.
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>

#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Reference.h"
#include "dgps/runtime/DeviceTensor.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Runtime.h"
#include "dgps/runtime/Tune.h"

namespace {

constexpr int kExitNoGpu = 77;

// A whole-string decimal integer in [lo, hi]; the option is named in the error.
long long integerOption(const std::string& option, const std::string& text, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
    throw std::runtime_error(option + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                             "], got '" + text + "'");
  }
  return v;
}

struct Args {
  std::string package = "generated/pgdn";
  std::int64_t batch = 2, tokens = 1000, heads = 4;
  std::string dtype = "bf16";
  std::uint64_t seed = 7;
  bool tune = false;   ///< tune on first use (TuneMode::Tune) instead of $DGPS_TUNE_MODE
  std::string db;      ///< tuning database; "" = $DGPS_TUNING_DB or ~/.cache/dgps/tuning.jsonl
};

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(s + " needs a value");
      return argv[++i];
    };
    if (s == "--batch") a.batch = integerOption(s, next(), 1, 1 << 20);
    else if (s == "--tokens") a.tokens = integerOption(s, next(), 1, 1ll << 31);
    else if (s == "--heads") a.heads = integerOption(s, next(), 1, 4096);
    else if (s == "--dtype") {
      a.dtype = next();
      if (a.dtype != "bf16" && a.dtype != "f16") throw std::runtime_error("--dtype: expected bf16 or f16, got '" + a.dtype + "'");
    } else if (s == "--seed") a.seed = static_cast<std::uint64_t>(integerOption(s, next(), 0, LLONG_MAX));
    else if (s == "--tune") a.tune = true;
    else if (s == "--db") a.db = next();
    else if (s == "-h" || s == "--help") return false;
    else if (!s.empty() && s[0] == '-') throw std::runtime_error("unknown option " + s);
    else a.package = s;
  }
  return true;
}

// max |got - ref| / max |ref| over all elements.
double maxRelError(const dgps::Tensor& got, const dgps::Tensor& ref) {
  double diff = 0, scale = 0;
  for (std::int64_t i = 0; i < ref.numel(); ++i) {
    const double g = got.get(i), r = ref.get(i);
    if (!std::isfinite(g)) return INFINITY;
    diff = std::max(diff, std::fabs(g - r));
    scale = std::max(scale, std::fabs(r));
  }
  return scale > 0 ? diff / scale : diff;
}

int run(const Args& a) {
  dgps::Package pkg = dgps::Package::open(a.package);
  const dgps::Spec& spec = pkg.spec();
  std::cout << "package " << pkg.name() << " (" << pkg.directory() << "), spec hash " << pkg.manifest().spec_hash
            << "\n";
  std::string why;
  if (!dgps::cudaAvailable(&why)) {
    std::cerr << "dgps-host-app: no usable GPU on this machine, nothing was run: " << why << "\n";
    return kExitNoGpu;
  }
  dgps::ReferenceProblem shape;
  shape.batch = a.batch;
  shape.seq_len = a.tokens;
  shape.heads_qk = spec.heads_qk > 0 ? spec.heads_qk : a.heads;
  shape.heads_v = shape.heads_qk * spec.gva_ratio;
  shape.key_dim = spec.key_dims.back();
  shape.value_dim = spec.value_dims.back();
  const dgps::ScalarType act = a.dtype == "f16" ? dgps::ScalarType::F16 : dgps::ScalarType::BF16;
  dgps::ReferenceInputs inputs = dgps::generateInputs(spec, shape, a.seed, act);

  // Device copies of the inputs, outputs allocated by the app (as a framework would).
  const int device = 0;
  std::map<std::string, dgps::DeviceTensor> dev;
  for (const auto& kv : inputs) dev.emplace(kv.first, dgps::DeviceTensor::upload(kv.second, device));
  auto view = [&](const char* n) { return dev.count(n) ? dev.at(n).view() : dgps::TensorView(); };
  const std::int64_t B = shape.batch, T = shape.seq_len, H = shape.heads_qk, HV = shape.heads_v;
  const std::int64_t K = shape.key_dim, V = shape.value_dim;
  dgps::DeviceTensor o(act, {B, T, HV, V}, device);
  dgps::DeviceTensor final_state(dgps::ScalarType::F32, {B, HV, K, V}, device);
  dgps::DeviceTensor final_precond(dgps::ScalarType::F32, {B, H, K}, device);
  o.poison();
  final_state.poison();
  final_precond.poison();

  dgps::ForwardTensors t;
  t.q = view("q"); t.k = view("k"); t.v = view("v"); t.g = view("g"); t.beta = view("beta");
  t.precond_g = view("precond_g"); t.precond_beta = view("precond_beta"); t.precond_center = view("precond_center");
  t.initial_state = view("initial_state"); t.initial_precond_state = view("initial_precond_state");
  t.o = o.view();
  if (spec.final_state) t.final_state = final_state.view();
  const bool precond_out = dgps::hasPrecond(spec) && spec.final_precond_state;
  if (precond_out) t.final_precond_state = final_precond.view();

  // The tile configuration comes from the tuning resolver (see the header comment).
  dgps::tune::ResolverOptions tuning;
  if (a.tune) tuning.mode = dgps::tune::TuneMode::Tune;
  tuning.db_path = a.db;
  dgps::tune::ProgressPrinter progress(std::cerr, false);
  tuning.progress = [&progress](const dgps::tuning::TuneProgress& p) { progress(p); };
  auto resolver = std::make_shared<dgps::tune::TuningResolver>(tuning);
  dgps::RuntimeOptions options;  // binary cache in $DGPS_CACHE_DIR or ~/.cache/dgps
  options.forward_config = dgps::tune::forwardConfigResolver(resolver);
  dgps::Runtime runtime(options);
  runtime.forward(pkg, t);  // legacy default stream: this app has no other
  {
    dgps::DeviceContextGuard guard(device);
    dgps::checkCuda(dgps::cudaDriver().cuCtxSynchronize(), "cuCtxSynchronize");
  }
  std::cout << "ran forward on " << dgps::deviceName(device) << ": B=" << B << " T=" << T << " H=" << H
            << " HV=" << HV << " K=" << K << " V=" << V << " " << a.dtype << "\n";
  if (auto tuned = resolver->lastTuning(); tuned && !tuned->result.reused) {
    std::cout << dgps::tuning::formatTable(tuned->result);
  }
  for (const auto& d : resolver->decisions()) {
    std::cout << "tile config (tuning mode " << dgps::tune::toString(resolver->mode()) << "): " << d.str() << "\n";
  }

  dgps::ReferenceOutputs ref = dgps::runReference(spec, inputs);
  const double tol = 2e-2;
  double worst = maxRelError(o.download(), ref.o);
  std::cout << "max relative error o:                   " << worst << "\n";
  if (ref.has_final_state) {
    double e = maxRelError(final_state.download(), ref.final_state);
    std::cout << "max relative error final_state:         " << e << "\n";
    worst = std::max(worst, e);
  }
  if (ref.has_final_precond_state && precond_out) {
    double e = maxRelError(final_precond.download(), ref.final_precond_state);
    std::cout << "max relative error final_precond_state: " << e << "\n";
    worst = std::max(worst, e);
  }
  std::cout << (worst <= tol ? "OK" : "MISMATCH") << " (tolerance " << tol << ")\n";
  return worst <= tol ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a;
    if (!parse(argc, argv, a)) {
      std::cout << "usage: dgps-host-app [PACKAGE] [--batch B] [--tokens T] [--heads H] [--dtype bf16|f16] [--seed S] "
                   "[--tune] [--db PATH]\n";
      return 0;
    }
    return run(a);
  } catch (const dgps::RuntimeError& e) {
    std::cerr << "dgps-host-app: " << e.what() << "\n";
    const bool no_gpu = e.code() == dgps::RuntimeErrorCode::NoDriver || e.code() == dgps::RuntimeErrorCode::NoDevice ||
                        e.code() == dgps::RuntimeErrorCode::UnsupportedDevice;
    if (no_gpu) std::cerr << "dgps-host-app: no usable GPU, nothing was run (exit " << kExitNoGpu << ")\n";
    return no_gpu ? kExitNoGpu : 1;
  } catch (const std::exception& e) {
    std::cerr << "dgps-host-app: " << e.what() << "\n";
    return 1;
  } catch (...) {
    std::cerr << "dgps-host-app: internal error\n";
    return 1;
  }
}
