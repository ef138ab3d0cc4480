// dgps-bench-host: the host time of one Runtime::forward / Runtime::decode call (what the CPU spends before
// the GPU sees the work), and the pieces it is made of.
//
//   dgps-bench-host [--dgps_generated=DIR] [--dgps_packages=gdn,pgdn] [Google Benchmark flags]
//
// Read the CPU column (thread CPU time per call, in µs). Benchmarks:
//   cpu/...  run anywhere (no GPU):
//     validate_forward/<pkg>, validate_decode/<pkg>   validateForward / validateDecode (Validation.h)
//     forward_geometry/<pkg>, decode_geometry/<pkg>   the launch geometry of the call (LaunchPlan.h)
//     request_and_sha256_key/<pkg>                    variantRequest + JitCompiler::cacheKey: what every call did
//                                                     before the resolved-variant table (VariantTable.h)
//     variant_table_hit                               what a warm call does instead
//     warm_check_forward/<pkg>, warm_check_decode/<pkg>  what a warm call does instead of validation and
//                                                     geometry: match the warm-call memo's signature and check
//                                                     the pointer rules (CallMemo.h)
//   gpu/...  need a GPU (skipped, and said so, without one); the public API, warm, on a tiny problem so the
//            kernels are short, one caller stream, caller workspace (no allocation):
//     forward/<pkg>/B1_T64/checks:{1,0}               Runtime::forward with pointer checks on / off
//     decode/<pkg>/B{1,8,32}/checks:{1,0}             Runtime::decode
//     empty_launch                                    cuLaunchKernel of an empty kernel: the floor of one launch
//   Host overhead of a call = its CPU time - kernels x empty_launch (the counter "kernels" says how many).
//   The stream is drained every 64 calls with the timer paused, so cuLaunchKernel never waits for a full
//   launch queue (that wait would count as CPU time).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "BenchInputs.h"
#include "BenchContext.h"
// The warm-path internals exist from the resolved-variant table on. Without them (this file dropped into an
// older tree by scripts/host_overhead_compare.sh, for the "before" numbers) their cpu/ rows are left out and
// everything else, the gpu/ rows included, is the same benchmark.
#if __has_include("VariantTable.h")
#define DGPS_HOST_BENCH_INTERNALS 1
#include "LaunchPlan.h"
#include "VariantTable.h"
#else
#define DGPS_HOST_BENCH_INTERNALS 0
#endif
// Likewise the warm-call memo (CallMemo.h), newer still.
#if __has_include("CallMemo.h")
#define DGPS_HOST_BENCH_MEMO 1
#include "CallMemo.h"
#else
#define DGPS_HOST_BENCH_MEMO 0
#endif
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Jit.h"
#include "dgps/runtime/Runtime.h"

namespace {

/// o's shape: q's rows (tokens) with v's last two dims (value heads, V). v may carry several rows per token
/// (Householder steps), o never does.
std::vector<std::int64_t> outputShape(const std::vector<std::int64_t>& q, const std::vector<std::int64_t>& v) {
  std::vector<std::int64_t> o = q;
  o[o.size() - 2] = v[v.size() - 2];
  o[o.size() - 1] = v[v.size() - 1];
  return o;
}

using namespace dgps;
using namespace dgps::bench;

constexpr int kDrainEvery = 64;  // calls between stream drains (x at most 4 kernels stays far below the queue)

struct Options {
  std::string generated_dir;
  std::vector<std::string> packages = {"gdn", "pgdn"};
};

// --dgps_generated / --dgps_packages, removed from argv before Google Benchmark reads it.
bool parseOptions(int* argc, char** argv, Options* o) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--dgps_generated=", 0) == 0) {
      o->generated_dir = a.substr(17);
    } else if (a.rfind("--dgps_packages=", 0) == 0) {
      o->packages.clear();
      std::stringstream ss(a.substr(16));
      for (std::string p; std::getline(ss, p, ',');)
        if (!p.empty()) o->packages.push_back(p);
      if (o->packages.empty()) {
        std::fprintf(stderr, "dgps-bench-host: --dgps_packages needs package names, e.g. gdn,pgdn\n");
        return false;
      }
    } else if (a.rfind("--dgps_", 0) == 0) {
      std::fprintf(stderr, "dgps-bench-host: unknown flag %s (known: --dgps_generated=DIR, --dgps_packages=a,b)\n",
                   a.c_str());
      return false;
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  return true;
}

ReferenceProblem tinyForward(const Spec& spec) {
  ReferenceProblem p;
  p.batch = 1;
  p.seq_len = 64;
  p.heads_qk = spec.heads_qk > 0 ? spec.heads_qk : 16;
  p.heads_v = p.heads_qk * std::max(1, spec.gva_ratio);
  p.key_dim = 128;
  p.value_dim = 128;
  return p;
}

ReferenceProblem decodeShape(const Spec& spec, std::int64_t batch) {
  ReferenceProblem p = tinyForward(spec);
  p.batch = batch;
  p.seq_len = 1;
  return p;
}

// Views with made-up, 256-byte-spaced device addresses: validation reads only the views, never the memory.
class FakeViews {
 public:
  FakeViews(const HostInputs& host, ScalarType activation) {
    std::uintptr_t next = 0x100000;
    for (const auto& kv : host.full_shapes) {
      const Tensor& tile = host.tiles.at(kv.first);
      ScalarType dt = tile.dtype();
      if (kv.first == "q" || kv.first == "k" || kv.first == "v") dt = activation;
      views_[kv.first] = TensorView(reinterpret_cast<void*>(next), dt, kv.second, 0);
      next += 0x100000;
    }
    views_["o"] = TensorView(reinterpret_cast<void*>(next), activation,
                             outputShape(views_.at("q").shape, views_.at("v").shape), 0);
  }
  TensorView operator()(const std::string& name) const {
    auto it = views_.find(name);
    return it == views_.end() ? TensorView() : it->second;
  }

 private:
  std::map<std::string, TensorView> views_;
};

template <typename Views>
ForwardTensors forwardFrom(const Views& v) {
  ForwardTensors t;
  t.q = v("q");
  t.k = v("k");
  t.v = v("v");
  t.g = v("g");
  t.beta = v("beta");
  t.precond_g = v("precond_g");
  t.precond_beta = v("precond_beta");
  t.precond_center = v("precond_center");
  t.o = v("o");
  return t;
}

template <typename Views>
DecodeTensors decodeFrom(const Views& v) {
  DecodeTensors t;
  t.q = v("q");
  t.k = v("k");
  t.v = v("v");
  t.g = v("g");
  t.beta = v("beta");
  t.precond_g = v("precond_g");
  t.precond_beta = v("precond_beta");
  t.precond_center = v("precond_center");
  t.state = v("state");
  t.precond_state = v("precond_state");
  t.o = v("o");
  return t;
}

// ---- CPU benchmarks --------------------------------------------------------------------------------------

void registerCpu(const std::shared_ptr<const Package>& pkg) {
  const std::string& name = pkg->name();
  const Spec& spec = pkg->spec();
  const Manifest& m = pkg->manifest();
  if (m.has_forward) {
    auto views = std::make_shared<FakeViews>(forwardHostInputs(spec, tinyForward(spec), 64, 1), ScalarType::BF16);
    benchmark::RegisterBenchmark(("cpu/validate_forward/" + name).c_str(), [pkg, views](benchmark::State& s) {
      const ForwardTensors t = forwardFrom(*views);
      for (auto _ : s) benchmark::DoNotOptimize(validateForward(*pkg, t));
    })->Unit(benchmark::kMicrosecond);
#if DGPS_HOST_BENCH_INTERNALS
    benchmark::RegisterBenchmark(("cpu/forward_geometry/" + name).c_str(), [pkg, views](benchmark::State& s) {
      const ForwardProblem p = validateForward(*pkg, forwardFrom(*views));
      for (auto _ : s) {
        benchmark::DoNotOptimize(detail::forwardGeometry(*pkg, p, pkg->manifest().default_config));
      }
    })->Unit(benchmark::kMicrosecond);
#endif
#if DGPS_HOST_BENCH_MEMO
    benchmark::RegisterBenchmark(("cpu/warm_check_forward/" + name).c_str(), [views](benchmark::State& s) {
      const ForwardTensors t = forwardFrom(*views);
      detail::CallSignature<detail::kForwardViews> sig;
      if (!sig.capture(detail::forwardViews(t))) s.SkipWithError("signature not captured");
      for (auto _ : s)
        benchmark::DoNotOptimize(sig.matches(detail::forwardViews(t)) && forwardPointerRulesHold(t));
    })->Unit(benchmark::kMicrosecond);
#endif
  }
  if (m.has_decode) {
    auto views =
        std::make_shared<FakeViews>(decodeHostInputs(spec, decodeShape(spec, 8), 8, 1), ScalarType::BF16);
    benchmark::RegisterBenchmark(("cpu/validate_decode/" + name).c_str(), [pkg, views](benchmark::State& s) {
      const DecodeTensors t = decodeFrom(*views);
      for (auto _ : s) benchmark::DoNotOptimize(validateDecode(*pkg, t));
    })->Unit(benchmark::kMicrosecond);
#if DGPS_HOST_BENCH_INTERNALS
    benchmark::RegisterBenchmark(("cpu/decode_geometry/" + name).c_str(), [pkg, views](benchmark::State& s) {
      const DecodeProblem p = validateDecode(*pkg, decodeFrom(*views));
      for (auto _ : s) benchmark::DoNotOptimize(detail::decodeGeometry(*pkg, p, pkg->manifest().default_config));
    })->Unit(benchmark::kMicrosecond);
#endif
#if DGPS_HOST_BENCH_MEMO
    benchmark::RegisterBenchmark(("cpu/warm_check_decode/" + name).c_str(), [views](benchmark::State& s) {
      const DecodeTensors t = decodeFrom(*views);
      detail::CallSignature<detail::kDecodeViews> sig;
      if (!sig.capture(detail::decodeViews(t))) s.SkipWithError("signature not captured");
      for (auto _ : s) benchmark::DoNotOptimize(sig.matches(detail::decodeViews(t)) && decodePointerRulesHold(t));
    })->Unit(benchmark::kMicrosecond);
#endif
  }
  benchmark::RegisterBenchmark(("cpu/request_and_sha256_key/" + name).c_str(), [pkg](benchmark::State& s) {
    JitCompiler jit;
    JitTarget target;  // what an H200 gets (selectJitTarget); fixed here so no GPU is needed
    target.arch = "sm_90a";
    target.sm = 90;
    benchmark::DoNotOptimize(nvrtcEnvironment());  // probed once per process, not per call
    for (auto _ : s) {
      JitRequest r = variantRequest(*pkg, 128, 128, ScalarType::BF16, pkg->manifest().default_config, target);
      benchmark::DoNotOptimize(jit.cacheKey(r));
    }
    s.counters["source_bytes"] = double(pkg->source().size());
  })->Unit(benchmark::kMicrosecond);
}

void registerTableHit() {
#if DGPS_HOST_BENCH_INTERNALS
  benchmark::RegisterBenchmark("cpu/variant_table_hit", [](benchmark::State& s) {
    detail::VariantTable<int> table;
    detail::VariantKey key;
    key.package_id = 1;
    key.key_dim = key.value_dim = 128;
    for (int d = 0; d < 8; ++d) {  // a few neighbours, as a process with several variants has
      key.device = d;
      table.getOrBuild(key, [d] { return std::make_shared<const int>(d); });
    }
    key.device = 3;
    for (auto _ : s) benchmark::DoNotOptimize(table.getOrBuild(key, [] { return std::make_shared<const int>(-1); }));
  })->Unit(benchmark::kMicrosecond);
#endif
}

// ---- GPU benchmarks --------------------------------------------------------------------------------------

struct GpuState {
  std::unique_ptr<DeviceContextGuard> context;
  CUstream stream = nullptr;
  std::unique_ptr<Runtime> checked;    // check_pointers = true (the default)
  std::unique_ptr<Runtime> unchecked;  // check_pointers = false
  CUmodule empty_module = nullptr;
  CUfunction empty = nullptr;
};

GpuState& gpu() {
  static GpuState g;
  return g;
}

void drain(benchmark::State& s) {
  s.PauseTiming();
  checkCuda(cudaDriver().cuStreamSynchronize(gpu().stream), "cuStreamSynchronize");
  s.ResumeTiming();
}

// Times `call` warm: two untimed calls first (JIT, module load, table fill), then one call per iteration.
template <typename Call>
void timeCalls(benchmark::State& s, int kernels, Call call) {
  try {
    call();
    call();
    checkCuda(cudaDriver().cuStreamSynchronize(gpu().stream), "cuStreamSynchronize");
    int n = 0;
    for (auto _ : s) {
      call();
      if (++n % kDrainEvery == 0) drain(s);
    }
    checkCuda(cudaDriver().cuStreamSynchronize(gpu().stream), "cuStreamSynchronize");
    s.counters["kernels"] = kernels;
  } catch (const std::exception& e) {
    s.SkipWithError(e.what());
  }
}

void startGpu() {
  GpuState& g = gpu();
  g.context = std::make_unique<DeviceContextGuard>(0);
  const CudaDriver& d = cudaDriver();
  checkCuda(d.cuStreamCreate(&g.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  g.checked = std::make_unique<Runtime>();
  RuntimeOptions o;
  o.check_pointers = false;
  g.unchecked = std::make_unique<Runtime>(o);
  JitRequest r;
  r.source = "extern \"C\" __global__ void dgps_bench_empty(void* args) {}\n";
  r.source_name = "empty.cu";
  r.target = selectJitTarget(deviceComputeCapability(0), nvrtcEnvironment().supported_archs);
  const JitBinary bin = g.checked->compiler().compile(r);
  checkCuda(d.cuModuleLoadData(&g.empty_module, bin.image.c_str()), "cuModuleLoadData(empty kernel)");
  checkCuda(d.cuModuleGetFunction(&g.empty, g.empty_module, "dgps_bench_empty"), "cuModuleGetFunction");
}

void stopGpu() {
  GpuState& g = gpu();
  if (!g.context) return;
  g.checked.reset();
  g.unchecked.reset();
  const CudaDriver& d = cudaDriver();
  if (g.empty_module) d.cuModuleUnload(g.empty_module);
  if (g.stream) d.cuStreamDestroy(g.stream);
  g.context.reset();
}

void registerGpu(const std::shared_ptr<const Package>& pkg) {
  const Spec& spec = pkg->spec();
  const Manifest& m = pkg->manifest();
  const std::string& name = pkg->name();
  for (int checks : {1, 0}) {
    const std::string suffix = "/checks:" + std::to_string(checks);
    if (m.has_forward) {
      auto set = std::make_shared<DeviceSet>(uploadInputs(forwardHostInputs(spec, tinyForward(spec), 64, 7), 0));
      addOutput(*set, "o", ScalarType::BF16, outputShape(set->at("q").shape(), set->at("v").shape()), 0);
      ForwardTensors t = forwardFrom([&](const std::string& n) { return set->view(n); });
      const ForwardProblem p = validateForward(*pkg, t);
      Runtime& rt = checks ? *gpu().checked : *gpu().unchecked;
      addWorkspace(*set, rt.forwardWorkspaceBytes(*pkg, p, rt.resolveForwardConfig(*pkg, p)), 0);
      t.workspace = set->view("workspace");
      const int kernels = int(m.forward_symbols.size());
      benchmark::RegisterBenchmark(("gpu/forward/" + name + "/B1_T64" + suffix).c_str(),
                                   [pkg, set, t, &rt, kernels](benchmark::State& s) {
                                     LaunchOptions o;
                                     o.stream = gpu().stream;
                                     timeCalls(s, kernels, [&] { rt.forward(*pkg, t, o); });
                                   })
          ->Unit(benchmark::kMicrosecond);
    }
    if (m.has_decode) {
      for (std::int64_t B : {1, 8, 32}) {
        auto set = std::make_shared<DeviceSet>(uploadInputs(decodeHostInputs(spec, decodeShape(spec, B), 8, 7), 0));
        addOutput(*set, "o", ScalarType::BF16, outputShape(set->at("q").shape(), set->at("v").shape()), 0);
        const DecodeTensors t = decodeFrom([&](const std::string& n) { return set->view(n); });
        Runtime& rt = checks ? *gpu().checked : *gpu().unchecked;
        benchmark::RegisterBenchmark(("gpu/decode/" + name + "/B" + std::to_string(B) + suffix).c_str(),
                                     [pkg, set, t, &rt](benchmark::State& s) {
                                       LaunchOptions o;
                                       o.stream = gpu().stream;
                                       timeCalls(s, 1, [&] { rt.decode(*pkg, t, o); });
                                     })
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

void registerEmptyLaunch() {
  benchmark::RegisterBenchmark("gpu/empty_launch", [](benchmark::State& s) {
    void* arg = nullptr;
    void* params[] = {&arg};
    const CudaDriver& d = cudaDriver();
    timeCalls(s, 1, [&] {
      checkCuda(d.cuLaunchKernel(gpu().empty, 1, 1, 1, 32, 1, 1, 0, gpu().stream, params, nullptr), "cuLaunchKernel");
    });
  })->Unit(benchmark::kMicrosecond);
}

int run(int argc, char** argv) {
  Options o;
  o.generated_dir = defaultGeneratedDir();
  if (!parseOptions(&argc, argv, &o)) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;

  std::vector<std::shared_ptr<const Package>> packages;
  for (const std::string& p : o.packages) {
    packages.push_back(std::make_shared<const Package>(Package::open(o.generated_dir + "/" + p)));
  }
  registerTableHit();
  for (const auto& pkg : packages) registerCpu(pkg);

  std::string why;
  if (!cudaAvailable(&why)) {
    std::printf("dgps-bench-host: no CUDA device (%s); the gpu/ benchmarks are skipped, the cpu/ ones run\n",
                why.c_str());
  } else {
    startGpu();
    registerEmptyLaunch();
    for (const auto& pkg : packages) registerGpu(pkg);
  }
  benchmark::RunSpecifiedBenchmarks();
  // Device memory and modules go before the context and the driver's own teardown at exit.
  benchmark::ClearRegisteredBenchmarks();
  stopGpu();
  benchmark::Shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dgps-bench-host: error: %s\n", e.what());
    return 1;
  }
}
