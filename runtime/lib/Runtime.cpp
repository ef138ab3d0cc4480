#include "dgps/runtime/Runtime.h"

#include "dgps/runtime/DefaultConfig.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>

#include "CallMemo.h"
#include "TensorMaps.h"
#include "LaunchPlan.h"
#include "VariantTable.h"
#include "dgps/device/abi.h"
#include "dgps/dsl/SegmentScan.h"
#include "dgps/runtime/ContextParallelSupport.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Error.h"
#include "dgps/tile/feedback_scan_layout.h"

namespace dgps {

bool parseSummaryPairs(const char* value) {
  const std::string v = value ? value : "";
  if (v == "0") return false;
  if (v.empty() || v == "1") return true;
  throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                     "environment variable DGPS_SUMMARY_PAIRS is '" + v.substr(0, 64) + "'; expected 0 or 1");
}

bool summaryPairsEnabled() {
  static const std::string value = [] {
    const char* e = std::getenv("DGPS_SUMMARY_PAIRS");
    return std::string(e ? e : "");
  }();
  return parseSummaryPairs(value.c_str());
}

std::vector<std::string> variantDefines(std::int64_t key_dim, std::int64_t value_dim, ScalarType input_dtype,
                                        const TileConfig& c) {
  if (input_dtype != ScalarType::BF16 && input_dtype != ScalarType::F16) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       std::string("input dtype must be bf16 or f16 for a kernel variant, got ") + toString(input_dtype));
  }
  std::vector<std::string> defines{"DGPS_K=" + std::to_string(key_dim),
                                   "DGPS_V=" + std::to_string(value_dim),
                                   input_dtype == ScalarType::BF16 ? "DGPS_INPUT_BF16=1" : "DGPS_INPUT_F16=1",
                                   "DGPS_CHUNK=" + std::to_string(c.chunk),
                                   "DGPS_BLOCK_V=" + std::to_string(c.block_v),
                                   "DGPS_WARPS=" + std::to_string(c.warps),
                                   "DGPS_STAGES=" + std::to_string(c.stages)};
  // only when on: with the switch off the options (and so the binary cache keys) are the single-summary form's
  if (summaryPairsEnabled()) defines.push_back("DGPS_SUMMARY_PAIRS=1");
  return defines;
}

std::string unsupportedDeviceMessage(ComputeCapability cc, const std::string& device_name) {
  if (cc.major == kSupportedComputeCapability.major && cc.minor == kSupportedComputeCapability.minor) return "";
  return "DGPS kernels need compute capability 9.0 (Hopper: H100, H200); this GPU is " +
         (device_name.empty() ? std::string("unnamed") : device_name) + ", compute capability " +
         std::to_string(cc.major) + "." + std::to_string(cc.minor);
}

void requireSupportedDevice(int device) {
  const std::string msg = unsupportedDeviceMessage(deviceComputeCapability(device), deviceName(device));
  if (!msg.empty()) throw RuntimeError(RuntimeErrorCode::UnsupportedDevice, "device " + std::to_string(device) + ": " + msg);
}

JitRequest variantRequest(const Package& package, std::int64_t key_dim, std::int64_t value_dim, ScalarType input_dtype,
                          const TileConfig& config, const JitTarget& target) {
  JitRequest r;
  r.source = package.source();
  r.source_name = package.name() + "/" + package.manifest().source;
  r.defines = variantDefines(key_dim, value_dim, input_dtype, config);
  r.target = target;
  return r;
}

namespace {

CUdeviceptr devptr(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p)); }

/// The part of a configuration that selects compiled kernels: the segment length is a launch parameter, so
/// configurations differing only in it share one resolved variant.
TileConfig kernelConfig(TileConfig c) {
  c.segment_chunks = -1;
  return c;
}

// One loaded variant. Kernels are indexed like the manifest: forward roles 0..n-1, the segmented forward's
// kernels from kSegmentedSlot, then decode (kDecodeSlot), so a warm call reaches its CUfunction without a
// name lookup.
constexpr std::size_t kSegmentedSlot = detail::kMaxForwardKernels;
constexpr std::size_t kDecodeSlot = 2 * detail::kMaxForwardKernels;
constexpr std::size_t kKernelSlots = 2 * detail::kMaxForwardKernels + 1;


struct LoadedModule {
  CUcontext context = nullptr;
  int device = 0;
  CUmodule module = nullptr;
  std::array<CUfunction, kKernelSlots> functions{};
  /// Dynamic shared memory limit already set per kernel slot; it only grows (set under Impl::mu).
  mutable std::array<std::atomic<std::size_t>, kKernelSlots> shared_opt_in{};
  VariantInfo info;
};

struct Workspace {
  int device = 0;
  DeviceBuffer buffer;
};

// The warm-call memo of this thread (CallMemo.h).
detail::CallMemo<detail::ForwardMemoEntry<LoadedModule>>& forwardMemo() {
  thread_local detail::CallMemo<detail::ForwardMemoEntry<LoadedModule>> memo;
  return memo;
}
detail::CallMemo<detail::DecodeMemoEntry<LoadedModule>>& decodeMemo() {
  thread_local detail::CallMemo<detail::DecodeMemoEntry<LoadedModule>> memo;
  return memo;
}

std::string loadFailureHint(CUresult r) {
  switch (r) {
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      return " (the PTX is newer than the driver supports: NVRTC is newer than the driver; update the driver or "
             "use an NVRTC no newer than it)";
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_IMAGE:
      return " (the image was built for another architecture)";
    default:
      return "";
  }
}

}  // namespace

struct Runtime::Impl {
  RuntimeOptions options;
  const std::uint64_t id = detail::newRuntimeId();  ///< the warm-call memo's key (CallMemo.h)
  JitCompiler jit;
  std::mutex mu;
  /// Loaded modules by binary-cache key: the slow path, shared by every Package instance of equal content.
  std::map<std::pair<CUcontext, std::string>, std::shared_ptr<LoadedModule>> modules;
  /// The warm path (VariantTable.h): one entry per (package instance, context, K, V, dtype, config).
  detail::VariantTable<LoadedModule> variants;
  std::map<std::pair<CUcontext, CUstream>, std::shared_ptr<Workspace>> workspaces;
  std::map<int, JitTarget> targets;
  std::map<int, int> sm_counts;

  /// The answers of smCount for the first ordinals, read without the lock (-1: not asked yet).
  std::array<std::atomic<int>, 64> sm_known;

  /// Multiprocessors of `device`, or 0 when it cannot be queried (no driver or GPU): the shape-aware default
  /// then keeps the manifest's configuration.
  int smCount(int device) {
    const bool fast = device >= 0 && device < int(sm_known.size());
    if (fast) {
      const int n = sm_known[std::size_t(device)].load(std::memory_order_acquire);
      if (n >= 0) return n;
    }
    std::lock_guard<std::mutex> lock(mu);
    auto it = sm_counts.find(device);
    if (it != sm_counts.end()) return it->second;
    int n = 0;
    try {
      const CudaDriver& d = cudaDriver();
      CUdevice dev = 0;
      if (d.cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
          d.cuDeviceGetAttribute(&n, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != CUDA_SUCCESS)
        n = 0;
    } catch (const std::exception&) {
      n = 0;
    }
    sm_counts[device] = n;
    if (fast) sm_known[std::size_t(device)].store(n, std::memory_order_release);
    return n;
  }

  /// DGPS_SEGMENT_CHUNKS, read once: -1 when unset; an unparsable value is kept as text for the error.
  std::int64_t env_segment_chunks = -1;
  std::string env_segment_error;

  explicit Impl(RuntimeOptions o) : options(std::move(o)), jit(BinaryCache(options.cache_dir)) {
    for (auto& n : sm_known) n.store(-1, std::memory_order_relaxed);
    if (const char* s = std::getenv("DGPS_SEGMENT_CHUNKS")) {
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(s, &end, 10);
      if (*s == '\0' || end == nullptr || *end != '\0' || errno != 0 || v < 0 || v > (1LL << 30))
        env_segment_error = std::string(s).substr(0, 64);
      else
        env_segment_chunks = v;
    }
  }

  ~Impl() {
    for (auto& kv : modules) {
      try {
        DeviceContextGuard guard(kv.second->device);
        cudaDriver().cuModuleUnload(kv.second->module);
      } catch (...) {
        // A dead context (after a kernel fault) cannot unload; the driver reclaims it at exit.
      }
    }
  }

  JitTarget targetFor(int device) {
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = targets.find(device);
      if (it != targets.end()) return it->second;
    }
    requireSupportedDevice(device);  // before NVRTC: other GPUs spill or fail to compile
    JitTarget t = selectJitTarget(deviceComputeCapability(device), nvrtcEnvironment().supported_archs);
    std::lock_guard<std::mutex> lock(mu);
    targets[device] = t;
    return t;
  }

  // Compiles (disk cache) and loads (module cache) one variant in the current context of `device`.
  std::shared_ptr<LoadedModule> load(const Package& pkg, std::int64_t K, std::int64_t V, ScalarType dtype,
                                     const TileConfig& config, int device, CUcontext ctx) {
    JitRequest req = variantRequest(pkg, K, V, dtype, config, targetFor(device));
    std::string key = jit.cacheKey(req);
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = modules.find({ctx, key});
      if (it != modules.end()) return it->second;
    }
    // Compile outside the lock: NVRTC takes seconds, and other variants may be compiled meanwhile.
    JitBinary bin = jit.compile(req);
    const CudaDriver& d = cudaDriver();
    auto m = std::make_shared<LoadedModule>();
    m->context = ctx;
    m->device = device;
    CUresult r = d.cuModuleLoadData(&m->module, bin.image.c_str());
    if (r != CUDA_SUCCESS) {
      throw RuntimeError(RuntimeErrorCode::Cuda,
                         "cuModuleLoadData failed for " + req.source_name + " (" + req.target.arch + ", " +
                             toString(config) + ") on device " + std::to_string(device) + ": " + cudaErrorText(r) +
                             loadFailureHint(r) + "; " + nvrtcEnvironment().describe());
    }
    m->info.cache_key = bin.key;
    m->info.target = req.target;
    m->info.from_cache = bin.from_cache;
    m->info.ptxas = bin.usage;
    auto addFunction = [&](std::size_t slot, const std::string& role, const std::string& symbol) {
      CUfunction f = nullptr;
      CUresult fr = d.cuModuleGetFunction(&f, m->module, symbol.c_str());
      if (fr != CUDA_SUCCESS) {
        d.cuModuleUnload(m->module);
        throw RuntimeError(RuntimeErrorCode::Package,
                           "package " + pkg.name() + ": kernel symbol " + symbol + " (role " + role + ") is not in the "
                           "compiled " + pkg.manifest().source + ": " + cudaErrorText(fr) +
                           " (kernels must be extern \"C\" __global__ with the manifest's names)");
      }
      m->functions[slot] = f;
      KernelInfo k;
      k.role = role;
      k.symbol = symbol;
      d.cuFuncGetAttribute(&k.registers, CU_FUNC_ATTRIBUTE_NUM_REGS, f);
      d.cuFuncGetAttribute(&k.local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f);
      d.cuFuncGetAttribute(&k.static_shared_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f);
      d.cuFuncGetAttribute(&k.max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f);
      m->info.kernels.push_back(k);
    };
    const Manifest& man = pkg.manifest();
    if (man.forward_symbols.size() > detail::kMaxForwardKernels || man.forward_roles.size() != man.forward_symbols.size()) {
      d.cuModuleUnload(m->module);
      throw RuntimeError(RuntimeErrorCode::Package,
                         "package " + pkg.name() + ": the manifest lists " + std::to_string(man.forward_symbols.size()) +
                             " forward symbols for " + std::to_string(man.forward_roles.size()) + " roles (at most " +
                             std::to_string(detail::kMaxForwardKernels) + " roles, one symbol each)");
    }
    for (std::size_t i = 0; i < man.forward_symbols.size(); ++i) addFunction(i, man.forward_roles[i], man.forward_symbols[i]);
    const auto& segmented = man.launch.forward_segmented;
    for (std::size_t i = 0; i < segmented.size() && i < detail::kMaxForwardKernels; ++i)
      addFunction(kSegmentedSlot + i, segmented[i].role, segmented[i].symbol);
    if (man.has_decode) addFunction(kDecodeSlot, "decode", man.decode_symbol);

    std::lock_guard<std::mutex> lock(mu);
    auto inserted = modules.emplace(std::make_pair(ctx, key), m);
    if (!inserted.second) {
      d.cuModuleUnload(m->module);  // another thread loaded the same variant first
      return inserted.first->second;
    }
    return m;
  }

  // The warm path: the variant for this call from the table, compiled/loaded through load() on first use.
  std::shared_ptr<const LoadedModule> resolve(const Package& pkg, std::int64_t K, std::int64_t V, ScalarType dtype,
                                              const TileConfig& config, int device, CUcontext ctx) {
    detail::VariantKey key;
    key.package_id = pkg.instanceId();
    key.context = ctx;
    key.device = device;
    key.key_dim = K;
    key.value_dim = V;
    key.input_dtype = dtype;
    key.config = config;
    return variants.getOrBuild(key, [&]() -> std::shared_ptr<const LoadedModule> {
      return load(pkg, K, V, dtype, config, device, ctx);
    });
  }

  // The scratch buffer for (context, stream), grown on demand. Launches on one stream are ordered, so
  // reuse across calls on that stream is safe; growth waits for the stream before freeing.
  CUdeviceptr workspace(int device, CUcontext ctx, CUstream stream, std::size_t bytes) {
    const CudaDriver& d = cudaDriver();
    std::lock_guard<std::mutex> lock(mu);
    auto& slot = workspaces[{ctx, stream}];
    if (!slot) slot = std::make_shared<Workspace>();
    if (slot->buffer.size() >= bytes) return slot->buffer.ptr();
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    checkCuda(d.cuStreamIsCapturing(stream, &capture), "cuStreamIsCapturing");
    if (capture != CU_STREAM_CAPTURE_STATUS_NONE) {
      throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                         "forward needs a workspace of " + std::to_string(bytes) +
                             " bytes while the stream is being captured into a CUDA graph, where the runtime cannot "
                             "allocate; pass ForwardTensors::workspace (size from Runtime::forwardWorkspaceBytes)");
    }
    if (slot->buffer.size() > 0) checkCuda(d.cuStreamSynchronize(stream), "cuStreamSynchronize (workspace growth)");
    slot->buffer = DeviceBuffer();
    // Round up so that slowly growing T does not reallocate on every call.
    std::size_t rounded = (bytes + (std::size_t(1) << 20) - 1) & ~((std::size_t(1) << 20) - 1);
    slot->buffer = DeviceBuffer(device, rounded);
    slot->device = device;
    return slot->buffer.ptr();
  }

  // Each given pointer must be device memory of the tensors' device (catches a tensor on another
  // GPU, or host memory, before a kernel dereferences it).
  void checkPointer(const char* call, const char* name, const TensorView& t) {
    if (!options.check_pointers || !t.data) return;
    int ordinal = -1;
    CUresult r = cudaDriver().cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, devptr(t.data));
    if (r != CUDA_SUCCESS) {
      throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                         std::string(call) + ": tensor '" + name + "': pointer " + std::to_string(devptr(t.data)) +
                             " is not CUDA device memory known to the driver (" + cudaErrorText(r) + ")");
    }
    if (ordinal != t.device) {
      throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                         std::string(call) + ": tensor '" + name + "': declared on device " + std::to_string(t.device) +
                             " but its memory is on device " + std::to_string(ordinal));
    }
  }

  bool capturing(CUstream stream) {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    checkCuda(cudaDriver().cuStreamIsCapturing(stream, &status), "cuStreamIsCapturing");
    return status != CU_STREAM_CAPTURE_STATUS_NONE;
  }

  void checkStream(const char* call, CUstream stream, CUcontext ctx, int device) {
    if (!stream) return;
    CUcontext sctx = nullptr;
    CUresult r = cudaDriver().cuStreamGetCtx(stream, &sctx);
    if (r != CUDA_SUCCESS) {
      throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                         std::string(call) + ": the stream is not a valid CUDA stream (" + cudaErrorText(r) + ")");
    }
    if (sctx != ctx) {
      throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                         std::string(call) + ": the stream belongs to another context than the primary context of "
                                             "device " + std::to_string(device) + ", where the tensors live");
    }
  }

  void checkCuSeqlens(const TensorView& cu, std::int64_t T, CUstream stream) {
    const CudaDriver& d = cudaDriver();
    std::vector<std::int64_t> host(std::size_t(cu.numel()));
    checkCuda(d.cuMemcpyDtoHAsync(host.data(), devptr(cu.data), host.size() * sizeof(std::int64_t), stream),
              "cuMemcpyDtoHAsync(cu_seqlens)");
    checkCuda(d.cuStreamSynchronize(stream), "cuStreamSynchronize(cu_seqlens)");
    auto bad = [&](const std::string& m) {
      throw RuntimeError(RuntimeErrorCode::InvalidArgument, "forward: tensor 'cu_seqlens': " + m);
    };
    if (host.front() != 0) bad("must start at 0, got " + std::to_string(host.front()));
    for (std::size_t i = 1; i < host.size(); ++i) {
      if (host[i] < host[i - 1]) {
        bad("must be non-decreasing, but cu_seqlens[" + std::to_string(i) + "] = " + std::to_string(host[i]) +
            " < cu_seqlens[" + std::to_string(i - 1) + "] = " + std::to_string(host[i - 1]));
      }
    }
    // cu[N] < T is a padded token buffer: the kernels write rows t >= cu[N] of o as zeros (Runtime.h).
    if (host.back() > T) bad("must end at most at T = " + std::to_string(T) + ", got " + std::to_string(host.back()));
  }

  // Launches kernel `slot` of `m` (role/symbol name it in errors only). The shared-memory opt-in is a
  // driver call the first time a kernel needs more than 48 KiB at a given size; afterwards one atomic load.
  void launch(const LoadedModule& m, std::size_t slot, const std::string& role, const std::string& symbol,
              const detail::LaunchGeometry& k, CUstream stream, void* args, int device) {
    const CudaDriver& d = cudaDriver();
    CUfunction f = m.functions[slot];
    if (k.shared_bytes > 48 * 1024 && m.shared_opt_in[slot].load(std::memory_order_acquire) < k.shared_bytes) {
      std::lock_guard<std::mutex> lock(mu);
      std::atomic<std::size_t>& done = m.shared_opt_in[slot];
      if (done.load(std::memory_order_relaxed) < k.shared_bytes) {
        int optin = 0;
        CUdevice dev = 0;
        d.cuCtxGetDevice(&dev);
        d.cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev);
        if (k.shared_bytes > std::size_t(optin)) {
          throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                             "kernel " + symbol + " needs " + std::to_string(k.shared_bytes) +
                                 " bytes of shared memory, device " + std::to_string(device) + " allows " +
                                 std::to_string(optin) + " per block; choose a smaller tile configuration");
        }
        checkCuda(d.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(k.shared_bytes)),
                  "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) for " + symbol);
        done.store(k.shared_bytes, std::memory_order_release);
      }
    }
    void* params[] = {args};
    CUresult r = d.cuLaunchKernel(f, k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2],
                                  unsigned(k.shared_bytes), stream, params, nullptr);
    if (r != CUDA_SUCCESS) {
      std::ostringstream os;
      os << "launch of " << symbol << " (role " << role << ") with grid [" << k.grid[0] << "," << k.grid[1] << ","
         << k.grid[2] << "] block [" << k.block[0] << "," << k.block[1] << "," << k.block[2] << "] shared "
         << k.shared_bytes << " B on device " << device;
      checkCuda(r, os.str());
    }
  }
};

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Runtime::~Runtime() = default;

const JitCompiler& Runtime::compiler() const { return impl_->jit; }

TileConfig Runtime::resolveForwardConfig(const Package& package, const ForwardProblem& problem) const {
  return resolveForwardConfig(package, problem, LaunchOptions());
}

TileConfig Runtime::resolveForwardConfig(const Package& package, const ForwardProblem& problem,
                                         const LaunchOptions& options) const {
  if (impl_->options.forward_config) {
    if (auto c = impl_->options.forward_config(package, problem, problem.device)) return *c;
  }
  ForwardDefaultInputs in = forwardDefaultInputs(package, problem, impl_->smCount(problem.device));
  // a forced state pass (segmentChunks validates it; an invalid one fails there, not here)
  if (options.segment_chunks && *options.segment_chunks >= 0)
    in.forced_segment_chunks = *options.segment_chunks;
  else if (!options.segment_chunks && impl_->env_segment_error.empty())
    in.forced_segment_chunks = impl_->env_segment_chunks;
  return forwardDefaultConfig(package.manifest(), in);
}

std::size_t Runtime::forwardWorkspaceBytes(const Package& package, const ForwardProblem& problem,
                                           const TileConfig& config) const {
  return forwardWorkspaceBytes(package, problem, config, LaunchOptions());
}

VariantInfo Runtime::prepare(const Package& package, std::int64_t key_dim, std::int64_t value_dim,
                             ScalarType input_dtype, const TileConfig& config, int device) {
  package.checkConfig(config);
  DeviceContextGuard guard(device);
  return impl_->resolve(package, key_dim, value_dim, input_dtype, kernelConfig(config), device, guard.context())->info;
}

std::size_t Runtime::forwardWorkspaceBytes(const Package& package, const ForwardProblem& problem,
                                           const TileConfig& config, const LaunchOptions& options) const {
  const std::int64_t L = segmentChunks(package, problem, config, options);
  return L > 0 ? detail::forwardGeometrySegmented(package, problem, config, L).workspace_bytes
               : detail::forwardGeometry(package, problem, config).workspace_bytes;
}

std::int64_t Runtime::segmentChunks(const Package& package, const ForwardProblem& p, const TileConfig& config,
                                    const LaunchOptions& options) const {
  const bool has = !package.manifest().launch.forward_segmented.empty();
  if (options.segment_chunks) {
    const std::int64_t L = *options.segment_chunks;
    if (L < 0)
      throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                         "forward: LaunchOptions::segment_chunks = " + std::to_string(L) +
                             ": expected 0 (the plain state pass) or a segment length >= 1 in chunks");
    if (L > 0 && !has)
      throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                         "forward: LaunchOptions::segment_chunks = " + std::to_string(L) + " but package " +
                             package.name() + " has no segmented state pass (launch.forward_segmented; the compiler "
                             "writes it for every chunk forward: recompile the package with dgpsc compile); use 0");
    return L;
  }
  if (!impl_->env_segment_error.empty())
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "forward: DGPS_SEGMENT_CHUNKS='" + impl_->env_segment_error +
                           "': expected 0 (the plain state pass) or a segment length in chunks, 1 to 2^30");
  if (!has) return 0;
  if (impl_->env_segment_chunks >= 0) return impl_->env_segment_chunks;
  if (config.segment_chunks >= 0) {
    // a tuned segment length (the record's, for a T bucket): a sequence it would not split runs plain
    const std::int64_t C = config.chunk > 0 ? config.chunk : 64;
    const std::int64_t NT = (p.rows() + C - 1) / C;  // chunks of the kernels' rows (T·n_h steps)
    return config.segment_chunks < NT ? config.segment_chunks : 0;
  }
  return autoSegmentChunks(forwardDefaultInputs(package, p, impl_->smCount(p.device)), config);
}

namespace {

/// forwardSummary's segment length: one segment per sequence. With L > ⌈T/C⌉ the slot of sequence n is n both
/// dense (n·⌈⌈T/C⌉/L⌉) and varlen (⌊bos_n/(C·L)⌋ + n, bos_n <= T < C·L), so it needs no host copy of cu_seqlens.
std::int64_t summarySegmentChunks(const ForwardProblem& p, const TileConfig& config) {
  const std::int64_t C = std::max<std::int64_t>(config.chunk, 1);
  return (p.rows() + C - 1) / C + 1;  // chunks of the kernels' row axis (T·n_h steps)
}

/// Index of workspace buffer `name` among a segmented forward's buffers (launch.workspace, then
/// launch.forward_segmented.buffers), or -1.
int segmentedBufferIndex(const LaunchRules& rules, const std::string& name) {
  for (std::size_t i = 0; i < rules.workspace_segmented.size(); ++i)
    if (rules.workspace_segmented[i].name == name) return int(rules.workspace.size() + i);
  return -1;
}

void requireSummaryTensor(const char* call, const char* name, const TensorView& t,
                          const std::vector<std::int64_t>& shape, int device) {
  auto dims = [](const std::vector<std::int64_t>& d) {
    std::string s = "[";
    for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "]";
  };
  std::string why;
  if (!t.data)
    why = "is not given (null data)";
  else if (t.dtype != ScalarType::F32)
    why = std::string("has dtype ") + toString(t.dtype) + ", expected f32";
  else if (t.shape != shape)
    why = "has shape " + dims(t.shape) + ", expected " + dims(shape);
  else if (!t.isContiguous())
    why = "is strided, expected contiguous row-major";
  else if (t.device != device)
    why = "is on device " + std::to_string(t.device) + ", expected the forward tensors' device " + std::to_string(device);
  else if (reinterpret_cast<std::uintptr_t>(t.data) % 4 != 0)
    why = "is not 4-byte aligned";
  if (!why.empty())
    throw RuntimeError(RuntimeErrorCode::InvalidArgument, std::string(call) + ": tensor '" + name + "' " + why);
}

/// Index of the kernel with role `role` in launch.forward_segmented, or -1.
int segmentedRoleIndex(const LaunchRules& rules, const std::string& role) {
  for (std::size_t i = 0; i < rules.forward_segmented.size(); ++i)
    if (rules.forward_segmented[i].role == role) return int(i);
  return -1;
}

/// Index of workspace buffer `name` among the plain forward's buffers (launch.workspace), or -1.
int workspaceBufferIndex(const LaunchRules& rules, const std::string& name) {
  for (std::size_t i = 0; i < rules.workspace.size(); ++i)
    if (rules.workspace[i].name == name) return int(i);
  return -1;
}

std::size_t alignUp(std::size_t bytes, std::size_t align) { return (bytes + align - 1) / align * align; }

/// forwardPrecondSummary's scratch after the plain forward's workspace: the scans' start and their two final
/// states, each [N, H, K] f32 and K floats more (hypergrad_ogd's start windows, hypergradPrecondSummary)
/// (precondScratchBytes), aligned as the workspace's buffers.
std::size_t precondScratchBytes(const Package& package, const ForwardProblem& p) {
  const std::size_t align = std::size_t(std::max<std::int64_t>(package.manifest().launch.workspace_align, 1));
  return alignUp(std::size_t(p.num_seqs * p.heads_qk * p.key_dim + p.key_dim) * 4, align);
}
std::size_t precondScratchOffset(const Package& package, std::size_t workspaceBytes) {
  return alignUp(workspaceBytes, std::size_t(std::max<std::int64_t>(package.manifest().launch.workspace_align, 1)));
}

}  // namespace

namespace {

/// forwardPrecondSummary's device scratch for hypergrad_ogd (precondScratchBytes each): the scans' starts (the
/// zero start, then the unit windows: N·H·K + K − 1 floats), the end of the scan from zero, and the end of one
/// column pass; and the summary's hgvec buffer.
struct HypergradScratch {
  CUdeviceptr ones = 0, ends = 0, cols = 0, hgvec = 0;
  std::size_t hgvecBytes = 0;
};

/// cuMemsetD2D32Async: `rows` rows of `width` 32-bit words `value`, `pitch` bytes apart, from `dst`.
void memset2D(CUdeviceptr dst, std::size_t pitch, unsigned value, std::size_t width, std::size_t rows,
              CUstream stream, const char* what) {
  checkCuda(cudaDriver().cuMemsetD2D32Async(dst, pitch, value, width, rows, stream), what);
}

/// The unclamped hypergrad_ogd map of sequence `sequence`, d_end = M d_start + e per key head (docs/math.md §8.4),
/// after precond_summary has filled hgtri and hgvec; `scan` launches precond_scan with `a`'s current
/// initial/final_precond_state. e: the scan from d = 0 (an explicit zero start: a null one means the spec's
/// d_init). M: with the chunks' affine parts a_j zeroed in hgvec (each (slot, head) row holds a [C], y [C], L_n
/// and padding: tile/feedback_scan_layout.h feedbackVecFloats), the scan from the unit vector e_i in every sequence and head
/// ends at column i of M — the product of the chunks' linear maps in the scan's own order, not a difference of two
/// runs. K + 1 scans of the piece in all (one per start vector: the scan's grid is N × H, one start each), each a
/// short pass (about 4CK flops per chunk and key head); column i goes into the row-major M [H, K, K] by a pitched
/// copy (a transpose, which one copy cannot do for all columns). The K unit starts are windows of one buffer, so
/// they cost no driver call each: w.ones holds N·H·K + K − 1 floats, 1 at every K-th float from K − 1 and 0
/// elsewhere, and the window of N·H·K floats from float K − 1 − i has its 1 at channel i of every (sequence, head)
/// row (K − 1 − i + r·K + j = K − 1 + r'·K only for j = i, r' = r). In all 2K + 5 driver calls, enqueued on `stream`.
void hypergradPrecondSummary(const ForwardProblem& p, const TileConfig& config, std::int64_t sequence, void* mapOut,
                             void* affineOut, const HypergradScratch& w, ForwardArgs& a, CUstream stream,
                             const std::function<void()>& scan) {
  const CudaDriver& d = cudaDriver();
  const std::size_t K = std::size_t(p.key_dim), H = std::size_t(p.heads_qk), rows = std::size_t(p.num_seqs) * H;
  const std::size_t states = rows * K, rowBytes = H * K * 4, row = std::size_t(sequence) * rowBytes;
  auto floats = [](CUdeviceptr base, std::size_t offset) {
    return reinterpret_cast<const float*>(static_cast<std::uintptr_t>(base + offset * 4));
  };
  checkCuda(d.cuMemsetD32Async(w.ones, 0, states + K - 1, stream),
            "cuMemsetD32Async (forwardPrecondSummary: zero start)");
  a.initial_precond_state = floats(w.ones, 0);
  a.final_precond_state = reinterpret_cast<float*>(static_cast<std::uintptr_t>(w.ends));
  scan();
  checkCuda(d.cuMemcpyDtoDAsync(devptr(affineOut), w.ends + row, rowBytes, stream),
            "cuMemcpyDtoDAsync (forwardPrecondSummary: e)");
  const std::size_t vecBytes = std::size_t(tile::feedbackVecFloats(int(config.chunk))) * 4;
  memset2D(w.hgvec, vecBytes, 0u, std::size_t(config.chunk), w.hgvecBytes / vecBytes, stream,
           "cuMemsetD2D32Async (forwardPrecondSummary: the chunks' affine parts a)");
  memset2D(w.ones + (K - 1) * 4, K * 4, 0x3f800000u, 1, rows, stream,
           "cuMemsetD2D32Async (forwardPrecondSummary: the unit starts' ones)");
  a.final_precond_state = reinterpret_cast<float*>(static_cast<std::uintptr_t>(w.cols));
  for (std::size_t i = 0; i < K; ++i) {
    a.initial_precond_state = floats(w.ones, K - 1 - i);  // e_i in every (sequence, head) row
    scan();
    // column i of M [h]: M[h][r][i] = cols[sequence][h][r], rows h·K + r of the row-major M, K floats apart
    CUDA_MEMCPY2D c;
    std::memset(&c, 0, sizeof(c));
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = w.cols + row;
    c.srcPitch = 4;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = devptr(mapOut) + i * 4;
    c.dstPitch = K * 4;
    c.WidthInBytes = 4;
    c.Height = H * K;
    checkCuda(d.cuMemcpy2DAsync(&c, stream), "cuMemcpy2DAsync (forwardPrecondSummary: column of M)");
  }
}

}  // namespace

/// What forwardSummary asks of launchForward: where sequence `sequence`'s M and E go.
struct Runtime::SummaryTarget {
  /// Memory: M, E of the memory state (forwardSummary). Precond: Γ, Σ of the accumulator (forwardPrecondSummary).
  enum class Kind { Memory, Precond } kind = Kind::Memory;
  bool fullMap = false;  ///< Precond: hypergrad_ogd, trans is M [H, K, K] (ContextParallelSupport::precond_full_map)
  std::int64_t sequence = 0;
  TensorView trans, ext;
};

std::size_t Runtime::forwardSummaryWorkspaceBytes(const Package& package, const ForwardProblem& problem,
                                                  const TileConfig& config) const {
  return detail::forwardGeometrySegmented(package, problem, config, summarySegmentChunks(problem, config))
      .workspace_bytes;
}

void Runtime::forwardSummary(const Package& package, const ForwardTensors& t, std::int64_t sequence,
                             const TensorView& trans, const TensorView& ext, const LaunchOptions& options) {
  const LaunchRules& rules = package.manifest().launch;
  const ContextParallelSupport support = contextParallelSupport(package.manifest());
  if (!support.supported)
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "forwardSummary: package " + package.name() + " " + support.reason);
  // the summary launches the segmented kernels up to segment_summary: the preconditioner's roles, chunk_local, it
  if (segmentedRoleIndex(rules, "segment_summary") != segmentedRoleIndex(rules, "chunk_local") + 1)
    throw RuntimeError(RuntimeErrorCode::Package, "forwardSummary: package " + package.name() +
                                                      ": launch.forward_segmented's segment_summary does not follow "
                                                      "chunk_local");
  if (segmentedBufferIndex(rules, "seg_ext") < 0 || segmentedBufferIndex(rules, "seg_trans") < 0)
    throw RuntimeError(RuntimeErrorCode::Package, "forwardSummary: package " + package.name() +
                                                      ": launch.forward_segmented.buffers lacks seg_ext or seg_trans");
  if (options.segment_chunks)
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "forwardSummary: LaunchOptions::segment_chunks is set; the summary takes each sequence as one "
                       "segment, leave it empty");
  const ForwardProblem p = validateForward(package, t);
  if (sequence < 0 || sequence >= p.num_seqs)
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "forwardSummary: sequence " + std::to_string(sequence) + " is outside [0, N = " +
                           std::to_string(p.num_seqs) + ")");
  requireSummaryTensor("forwardSummary", "trans", trans, {p.heads_v, p.key_dim, p.key_dim}, p.device);
  requireSummaryTensor("forwardSummary", "ext", ext, {p.heads_v, p.key_dim, p.value_dim}, p.device);
  SummaryTarget target;
  target.sequence = sequence;
  target.trans = trans;
  target.ext = ext;
  launchForward(package, t, options, &target);
}

std::size_t Runtime::forwardPrecondSummaryWorkspaceBytes(const Package& package, const ForwardProblem& problem,
                                                        const TileConfig& config) const {
  const detail::ForwardGeometry g = detail::forwardGeometry(package, problem, config);
  return precondScratchOffset(package, g.workspace_bytes) + 3 * precondScratchBytes(package, problem);
}

void Runtime::forwardPrecondSummary(const Package& package, const ForwardTensors& t, std::int64_t sequence,
                                    const TensorView& gamma, const TensorView& sigma, const LaunchOptions& options) {
  const Manifest& man = package.manifest();
  const ContextParallelSupport support = contextParallelSupport(man);
  if (!support.supported)
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "forwardPrecondSummary: package " + package.name() + " " + support.reason);
  if (!support.precond_round)
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "forwardPrecondSummary: package " + package.name() + " has no preconditioner state "
                       "(no ema_sq_squash accumulator or unclamped hypergrad_ogd d to summarise)");
  if (man.forward_roles.size() < 2 || man.forward_roles[0] != "precond_summary" ||
      man.forward_roles[1] != "precond_scan")
    throw RuntimeError(RuntimeErrorCode::Package,
                       "forwardPrecondSummary: package " + package.name() +
                           ": launch.forward does not begin with precond_summary, precond_scan");
  // the buffer whose affine part the matrix passes zero: σ_c (ema_sq_squash) or the chunks' a (hypergrad_ogd)
  const char* affine = support.precond_full_map ? "hgvec" : "psum";
  if (workspaceBufferIndex(man.launch, affine) < 0)
    throw RuntimeError(RuntimeErrorCode::Package,
                       "forwardPrecondSummary: package " + package.name() + ": launch.workspace lacks " + affine);
  if (options.segment_chunks)
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "forwardPrecondSummary: LaunchOptions::segment_chunks is set; the preconditioner summary runs "
                       "the plain preconditioner scan, leave it empty");
  const ForwardProblem p = validateForward(package, t);
  if (sequence < 0 || sequence >= p.num_seqs)
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "forwardPrecondSummary: sequence " + std::to_string(sequence) + " is outside [0, N = " +
                           std::to_string(p.num_seqs) + ")");
  const std::vector<std::int64_t> mapShape = support.precond_full_map
                                                 ? std::vector<std::int64_t>{p.heads_qk, p.key_dim, p.key_dim}
                                                 : std::vector<std::int64_t>{p.heads_qk, p.key_dim};
  requireSummaryTensor("forwardPrecondSummary", "gamma", gamma, mapShape, p.device);
  requireSummaryTensor("forwardPrecondSummary", "sigma", sigma, {p.heads_qk, p.key_dim}, p.device);
  SummaryTarget target;
  target.kind = SummaryTarget::Kind::Precond;
  target.fullMap = support.precond_full_map;
  target.sequence = sequence;
  target.trans = gamma;
  target.ext = sigma;
  launchForward(package, t, options, &target);
}

void Runtime::forward(const Package& package, const ForwardTensors& t, const LaunchOptions& options) {
  launchForward(package, t, options, nullptr);
}

namespace {

/// Fills a memo entry with a validated forward call (left unused, runtime_id 0, when the tensors' metadata does
/// not fit a signature).
void rememberForwardCall(detail::ForwardMemoEntry<LoadedModule>& e, const std::array<const TensorView*, detail::kForwardViews>& views,
                         const Package& package, const LaunchOptions& options, const detail::ForwardCall& call,
                         std::shared_ptr<const LoadedModule> loaded, std::uint64_t runtimeId) {
  e.runtime_id = 0;
  if (!e.signature.capture(views)) return;
  e.package_id = package.instanceId();
  e.given_config = options.config;
  e.given_segment = options.segment_chunks;
  e.call = call;
  e.module = std::move(loaded);
  e.runtime_id = runtimeId;
}

}  // namespace

void Runtime::launchForward(const Package& package, const ForwardTensors& t, const LaunchOptions& options,
                            const SummaryTarget* summary) {
  if (!package.manifest().has_forward) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument, "forward: package " + package.name() + " has no forward kernels");
  }
  // A call shaped like an earlier one of this thread reuses what that one worked out (CallMemo.h); the entry is
  // copied, since a ForwardConfigResolver may itself call forward on this thread.
  const auto views = detail::forwardViews(t);
  auto& memo = forwardMemo();
  detail::ForwardCall call;
  const LoadedModule* module = nullptr;
  bool warm = false;
  // A summary launch (forwardSummary) takes its own segment length: it neither reads nor fills the memo.
  if (const auto* e = summary ? nullptr : memo.find(impl_->id, package.instanceId(), [&](const detail::ForwardMemoEntry<LoadedModule>& m) {
        return m.given_config == options.config && m.given_segment == options.segment_chunks &&
               m.signature.matches(views);
      })) {
    if (forwardPointerRulesHold(t)) {  // else validateForward below names what is wrong
      call = e->call;
      module = e->module.get();  // Impl::modules keeps it loaded for the Runtime's life
      warm = true;
    }
  }
  if (!warm) call.problem = validateForward(package, t);
  const ForwardProblem& p = call.problem;
  // Without a resolver the configuration depends only on the problem (shape-aware default): the memo's holds.
  TileConfig config = call.config;
  if (options.config) {
    config = *options.config;
  } else if (!warm || impl_->options.forward_config) {
    config = resolveForwardConfig(package, p, options);
  }
  if (warm && !(config == call.config)) warm = false;  // the resolver chose another configuration this time
  if (!warm) {
    package.checkConfig(config);
    call.config = config;
    // the segmented state pass launches launch.forward_segmented's kernels instead of launch.forward's
    // forwardPrecondSummary runs the plain preconditioner roles only
    const bool precondSummary = summary && summary->kind == SummaryTarget::Kind::Precond;
    call.segment = precondSummary ? 0
                   : summary      ? summarySegmentChunks(p, config)
                                  : segmentChunks(package, p, config, options);
    call.plan = call.segment > 0 ? detail::forwardGeometrySegmented(package, p, config, call.segment)
                                 : detail::forwardGeometry(package, p, config);
  }
  const std::int64_t segment = call.segment;
  const detail::ForwardGeometry& plan = call.plan;
  const bool precondSummary = summary && summary->kind == SummaryTarget::Kind::Precond;
  const std::size_t scratchOffset = precondSummary ? precondScratchOffset(package, plan.workspace_bytes) : 0;
  const std::size_t scratchBytes = precondSummary ? precondScratchBytes(package, p) : 0;
  const std::size_t workspaceBytes = precondSummary ? scratchOffset + 3 * scratchBytes : plan.workspace_bytes;
  if (t.workspace.given() && t.workspace.nbytes() < workspaceBytes) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "forward: tensor 'workspace': " + std::to_string(t.workspace.nbytes()) + " bytes given, " +
                           std::to_string(workspaceBytes) + " needed for " + toString(config));
  }

  DeviceContextGuard guard(p.device);
  CUstream stream = static_cast<CUstream>(options.stream);
  impl_->checkStream("forward", stream, guard.context(), p.device);
  const std::pair<const char*, const TensorView*> named[] = {
      {"q", &t.q}, {"k", &t.k}, {"v", &t.v}, {"g", &t.g}, {"beta", &t.beta}, {"precond_g", &t.precond_g},
      {"precond_beta", &t.precond_beta}, {"precond_center", &t.precond_center}, {"initial_state", &t.initial_state},
      {"initial_precond_state", &t.initial_precond_state}, {"cu_seqlens", &t.cu_seqlens}, {"o", &t.o},
      {"final_state", &t.final_state}, {"final_precond_state", &t.final_precond_state}, {"workspace", &t.workspace}};
  // Under CUDA graph capture only stream work is legal; pointer attributes were checked by the
  // warm-up call that every capture needs anyway (JIT and module loading cannot be captured either).
  if (impl_->options.check_pointers && !impl_->capturing(stream)) {
    for (const auto& n : named) impl_->checkPointer("forward", n.first, *n.second);
    if (summary) {
      const bool pre = summary->kind == SummaryTarget::Kind::Precond;
      impl_->checkPointer(pre ? "forwardPrecondSummary" : "forwardSummary", pre ? "gamma" : "trans", summary->trans);
      impl_->checkPointer(pre ? "forwardPrecondSummary" : "forwardSummary", pre ? "sigma" : "ext", summary->ext);
    }
  }
  if (options.check_cu_seqlens && p.varlen) impl_->checkCuSeqlens(t.cu_seqlens, p.seq_len, stream);

  if (!warm) {
    // configurations that differ only in the segment length share one compiled variant (kernelConfig)
    std::shared_ptr<const LoadedModule> loaded =
        impl_->resolve(package, p.key_dim, p.value_dim, p.input_dtype, kernelConfig(config), p.device, guard.context());
    module = loaded.get();  // Impl::modules keeps it loaded for the Runtime's life
    if (!summary) rememberForwardCall(memo.next(), views, package, options, call, std::move(loaded), impl_->id);
  }

  ForwardArgs a;
  std::memset(&a, 0, sizeof(a));
  a.q = t.q.data;
  a.k = t.k.data;
  a.v = t.v.data;
  a.g = static_cast<const float*>(t.g.data);
  a.beta = static_cast<const float*>(t.beta.data);
  a.precond_g = static_cast<const float*>(t.precond_g.data);
  a.precond_beta = static_cast<const float*>(t.precond_beta.data);
  a.precond_center = static_cast<const float*>(t.precond_center.data);
  a.initial_state = static_cast<const float*>(t.initial_state.data);
  a.initial_precond_state = static_cast<const float*>(t.initial_precond_state.data);
  a.cu_seqlens = static_cast<const std::int64_t*>(t.cu_seqlens.data);
  a.o = t.o.data;
  a.final_state = static_cast<float*>(t.final_state.data);
  a.final_precond_state = static_cast<float*>(t.final_precond_state.data);
  a.workspace = nullptr;
  if (workspaceBytes > 0) {
    a.workspace = t.workspace.given()
                      ? t.workspace.data
                      : reinterpret_cast<void*>(static_cast<std::uintptr_t>(
                            impl_->workspace(p.device, guard.context(), stream, workspaceBytes)));
  }
  if (summary) {  // a summary reads no start state and writes no end state (the preconditioner's start excepted)
    a.initial_state = nullptr;
    a.final_state = nullptr;
    a.final_precond_state = nullptr;
  }
  a.batch = p.batch;
  a.seq_len = p.rows();  // rows of the step axis (T·n_h; abi.h, config.cuh DGPS_ROW_STEPS)
  a.num_seqs = p.num_seqs;
  a.heads_qk = p.heads_qk;
  a.heads_v = p.heads_v;
  a.scale = p.scale;
  a.segment_chunks = segment;
  set_index_divisors(a, config.chunk);
  static_assert(kMaxWorkspaceBuffers == std::size_t(kMaxWorkspaceRegions), "the plan's buffers fill the args'");
  for (int i = 0; i < plan.buffers; ++i)  // the regions in layout order, segment regions included when segment > 0
    a.workspace_offsets[i] = std::int64_t(plan.buffer_offsets[std::size_t(i)]);
  {  // TensorMaps.h: the q/k tiles and the workspace operand tiles by tensor copies
    const Manifest& m = package.manifest();
    auto offsetOf = [&](std::initializer_list<const char*> names) -> long long {
      for (const char* n : names) {
        const int i = workspaceBufferIndex(m.launch, n);
        if (i >= 0 && i < plan.buffers) return (long long)plan.buffer_offsets[std::size_t(i)];
      }
      return -1;
    };
    detail::WorkspaceOperandRows ws;
    ws.query = offsetOf({"opq", "pwq"});
    ws.key = offsetOf({"opk"});
    ws.write_key = offsetOf({"opw", "pwk"});
    detail::encodeRowMaps(a, p, config.chunk, config.block_v, module->info.target.sm, ws,
                          package.spec().decay.kind == DecayKind::Diagonal);
  }
  const Manifest& man = package.manifest();
  if (precondSummary && summary->fullMap) {
    impl_->launch(*module, 0, man.forward_roles[0], man.forward_symbols[0], plan.kernels[0], stream, &a, p.device);
    const std::size_t hgvec = std::size_t(workspaceBufferIndex(man.launch, "hgvec"));
    HypergradScratch w;
    w.ones = devptr(a.workspace) + scratchOffset;
    w.ends = w.ones + scratchBytes;
    w.cols = w.ends + scratchBytes;
    w.hgvec = devptr(a.workspace) + plan.buffer_offsets[hgvec];
    w.hgvecBytes = (hgvec + 1 < std::size_t(plan.buffers) ? plan.buffer_offsets[hgvec + 1] : plan.workspace_bytes) -
                   plan.buffer_offsets[hgvec];
    hypergradPrecondSummary(p, config, summary->sequence, summary->trans.data, summary->ext.data, w, a, stream, [&] {
      impl_->launch(*module, 1, man.forward_roles[1], man.forward_symbols[1], plan.kernels[1], stream, &a, p.device);
    });
    return;
  }
  if (precondSummary) {
    // Σ: precond_summary (per chunk γ_c into pgam, σ_c into psum), then the scan A <- γ_c A + σ_c from A = 0.
    // Γ: the same scan over the same γ_c with every σ_c zeroed, from A = 1: A <- γ_c A, the product Π γ_c.
    const CudaDriver& d = cudaDriver();
    const CUdeviceptr base = devptr(a.workspace);
    const CUdeviceptr ones = base + scratchOffset, sigmaAll = ones + scratchBytes, gammaAll = sigmaAll + scratchBytes;
    const std::size_t states = std::size_t(p.num_seqs * p.heads_qk * p.key_dim);
    const std::size_t psum = std::size_t(workspaceBufferIndex(man.launch, "psum"));
    const std::size_t psumEnd =
        psum + 1 < std::size_t(plan.buffers) ? plan.buffer_offsets[psum + 1] : plan.workspace_bytes;
    impl_->launch(*module, 0, man.forward_roles[0], man.forward_symbols[0], plan.kernels[0], stream, &a, p.device);
    a.initial_precond_state = nullptr;
    a.final_precond_state = reinterpret_cast<float*>(static_cast<std::uintptr_t>(sigmaAll));
    impl_->launch(*module, 1, man.forward_roles[1], man.forward_symbols[1], plan.kernels[1], stream, &a, p.device);
    checkCuda(d.cuMemsetD8Async(base + plan.buffer_offsets[psum], 0, psumEnd - plan.buffer_offsets[psum], stream),
              "cuMemsetD8Async (forwardPrecondSummary: psum)");
    checkCuda(d.cuMemsetD32Async(ones, 0x3f800000u, states, stream), "cuMemsetD32Async (forwardPrecondSummary: ones)");
    a.initial_precond_state = reinterpret_cast<const float*>(static_cast<std::uintptr_t>(ones));
    a.final_precond_state = reinterpret_cast<float*>(static_cast<std::uintptr_t>(gammaAll));
    impl_->launch(*module, 1, man.forward_roles[1], man.forward_symbols[1], plan.kernels[1], stream, &a, p.device);
    const std::size_t rowBytes = std::size_t(p.heads_qk * p.key_dim) * 4;
    const std::size_t row = std::size_t(summary->sequence) * rowBytes;
    checkCuda(d.cuMemcpyDtoDAsync(devptr(summary->ext.data), sigmaAll + row, rowBytes, stream),
              "cuMemcpyDtoDAsync (forwardPrecondSummary: sigma)");
    checkCuda(d.cuMemcpyDtoDAsync(devptr(summary->trans.data), gammaAll + row, rowBytes, stream),
              "cuMemcpyDtoDAsync (forwardPrecondSummary: gamma)");
    return;
  }
  // forwardSummary runs the kernels up to segment_summary only (checked there), then copies one slot out
  const int count = summary ? segmentedRoleIndex(man.launch, "segment_summary") + 1 : plan.count;
  for (int i = 0; i < count; ++i) {
    const std::size_t k = std::size_t(i);
    if (segment > 0) {
      const KernelLaunchRule& r = man.launch.forward_segmented[k];
      impl_->launch(*module, kSegmentedSlot + k, r.role, r.symbol, plan.kernels[k], stream, &a, p.device);
    } else {
      impl_->launch(*module, k, man.forward_roles[k], man.forward_symbols[k], plan.kernels[k], stream, &a, p.device);
    }
  }
  if (summary) {
    // segment slot n holds sequence n (summarySegmentChunks): E [S, HV, K, V] and M [S, HV, K, K], f32
    const CudaDriver& d = cudaDriver();
    const std::size_t extBytes = std::size_t(p.heads_v * p.key_dim * p.value_dim) * 4;
    const std::size_t transBytes = std::size_t(p.heads_v * p.key_dim * p.key_dim) * 4;
    const CUdeviceptr base = devptr(a.workspace);
    const std::size_t slot = std::size_t(summary->sequence);
    const CUdeviceptr ext = base + plan.buffer_offsets[std::size_t(segmentedBufferIndex(man.launch, "seg_ext"))];
    const CUdeviceptr trans = base + plan.buffer_offsets[std::size_t(segmentedBufferIndex(man.launch, "seg_trans"))];
    checkCuda(d.cuMemcpyDtoDAsync(devptr(summary->ext.data), ext + slot * extBytes, extBytes, stream),
              "cuMemcpyDtoDAsync (forwardSummary: ext)");
    checkCuda(d.cuMemcpyDtoDAsync(devptr(summary->trans.data), trans + slot * transBytes, transBytes, stream),
              "cuMemcpyDtoDAsync (forwardSummary: trans)");
  }
}

void Runtime::decode(const Package& package, const DecodeTensors& t, const LaunchOptions& options) {
  if (!package.manifest().has_decode) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument, "decode: package " + package.name() + " has no decode kernel");
  }
  // A call shaped like an earlier one of this thread reuses what that one worked out (CallMemo.h).
  const auto views = detail::decodeViews(t);
  auto& memo = decodeMemo();
  detail::DecodeCall call;
  const LoadedModule* module = nullptr;
  bool warm = false;
  if (const auto* e = memo.find(impl_->id, package.instanceId(), [&](const detail::DecodeMemoEntry<LoadedModule>& m) {
        return m.given_config == options.config && m.signature.matches(views);
      })) {
    if (decodePointerRulesHold(t)) {  // else validateDecode below names what is wrong
      call = e->call;
      module = e->module.get();  // Impl::modules keeps it loaded for the Runtime's life
      warm = true;
    }
  }
  if (!warm) {
    call.problem = validateDecode(package, t);
    call.config = options.config ? *options.config : package.manifest().default_config;
    package.checkConfig(call.config);
    call.geometry = detail::decodeGeometry(package, call.problem, call.config);
  }
  const DecodeProblem& p = call.problem;
  const TileConfig& config = call.config;
  const detail::LaunchGeometry& launch = call.geometry;

  DeviceContextGuard guard(p.device);
  CUstream stream = static_cast<CUstream>(options.stream);
  impl_->checkStream("decode", stream, guard.context(), p.device);
  const std::pair<const char*, const TensorView*> named[] = {
      {"q", &t.q}, {"k", &t.k}, {"v", &t.v}, {"g", &t.g}, {"beta", &t.beta}, {"precond_g", &t.precond_g},
      {"precond_beta", &t.precond_beta}, {"precond_center", &t.precond_center}, {"state", &t.state},
      {"precond_state", &t.precond_state}, {"o", &t.o}};
  if (impl_->options.check_pointers && !impl_->capturing(stream)) {
    for (const auto& n : named) impl_->checkPointer("decode", n.first, *n.second);
  }

  if (!warm) {
    auto loaded = impl_->resolve(package, p.key_dim, p.value_dim, p.input_dtype, config, p.device, guard.context());
    module = loaded.get();
    auto& e = memo.next();
    e.runtime_id = 0;
    if (e.signature.capture(views)) {
      e.package_id = package.instanceId();
      e.given_config = options.config;
      e.call = call;
      e.module = std::move(loaded);
      e.runtime_id = impl_->id;
    }
  }
  DecodeArgs a;
  std::memset(&a, 0, sizeof(a));
  a.q = t.q.data;
  a.k = t.k.data;
  a.v = t.v.data;
  a.g = static_cast<const float*>(t.g.data);
  a.beta = static_cast<const float*>(t.beta.data);
  a.precond_g = static_cast<const float*>(t.precond_g.data);
  a.precond_beta = static_cast<const float*>(t.precond_beta.data);
  a.precond_center = static_cast<const float*>(t.precond_center.data);
  a.state = static_cast<float*>(t.state.data);
  a.precond_state = static_cast<float*>(t.precond_state.data);
  a.o = t.o.data;
  a.batch = p.batch;
  a.heads_qk = p.heads_qk;
  a.heads_v = p.heads_v;
  a.scale = p.scale;
  static const std::string kDecodeRole = "decode";
  impl_->launch(*module, kDecodeSlot, kDecodeRole, package.manifest().decode_symbol, launch, stream, &a, p.device);
}

}  // namespace dgps
