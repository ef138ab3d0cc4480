#include "dgps/runtime/Runtime.h"

#include "dgps/runtime/DefaultConfig.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "LaunchPlan.h"
#include "VariantTable.h"
#include "dgps/device/abi.h"
#include "dgps/dsl/SegmentScan.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Error.h"

namespace dgps {

std::vector<std::string> variantDefines(std::int64_t key_dim, std::int64_t value_dim, ScalarType input_dtype,
                                        const TileConfig& c) {
  if (input_dtype != ScalarType::BF16 && input_dtype != ScalarType::F16) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       std::string("input dtype must be bf16 or f16 for a kernel variant, got ") + toString(input_dtype));
  }
  return {"DGPS_K=" + std::to_string(key_dim),
          "DGPS_V=" + std::to_string(value_dim),
          input_dtype == ScalarType::BF16 ? "DGPS_INPUT_BF16=1" : "DGPS_INPUT_F16=1",
          "DGPS_CHUNK=" + std::to_string(c.chunk),
          "DGPS_BLOCK_V=" + std::to_string(c.block_v),
          "DGPS_WARPS=" + std::to_string(c.warps),
          "DGPS_STAGES=" + std::to_string(c.stages)};
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
  JitCompiler jit;
  std::mutex mu;
  /// Loaded modules by binary-cache key: the slow path, shared by every Package instance of equal content.
  std::map<std::pair<CUcontext, std::string>, std::shared_ptr<LoadedModule>> modules;
  /// The warm path (VariantTable.h): one entry per (package instance, context, K, V, dtype, config).
  detail::VariantTable<LoadedModule> variants;
  std::map<std::pair<CUcontext, CUstream>, std::shared_ptr<Workspace>> workspaces;
  std::map<int, JitTarget> targets;
  std::map<int, int> sm_counts;

  /// Multiprocessors of `device`, or 0 when it cannot be queried (no driver or GPU): the shape-aware default
  /// then keeps the manifest's configuration.
  int smCount(int device) {
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
    return n;
  }

  /// DGPS_SEGMENT_CHUNKS, read once: -1 when unset; an unparsable value is kept as text for the error.
  std::int64_t env_segment_chunks = -1;
  std::string env_segment_error;

  explicit Impl(RuntimeOptions o) : options(std::move(o)), jit(BinaryCache(options.cache_dir)) {
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
  if (impl_->options.forward_config) {
    if (auto c = impl_->options.forward_config(package, problem, problem.device)) return *c;
  }
  return shapeDefaultConfig(package.manifest(), problem.num_seqs, problem.heads_v, problem.value_dim,
                            impl_->smCount(problem.device));
}

std::size_t Runtime::forwardWorkspaceBytes(const Package& package, const ForwardProblem& problem,
                                           const TileConfig& config) const {
  return forwardWorkspaceBytes(package, problem, config, LaunchOptions());
}

VariantInfo Runtime::prepare(const Package& package, std::int64_t key_dim, std::int64_t value_dim,
                             ScalarType input_dtype, const TileConfig& config, int device) {
  package.checkConfig(config);
  DeviceContextGuard guard(device);
  return impl_->resolve(package, key_dim, value_dim, input_dtype, config, device, guard.context())->info;
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
                             "writes it for specs without a preconditioner); use 0");
    return L;
  }
  if (!impl_->env_segment_error.empty())
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "forward: DGPS_SEGMENT_CHUNKS='" + impl_->env_segment_error +
                           "': expected 0 (the plain state pass) or a segment length in chunks, 1 to 2^30");
  if (!has) return 0;
  if (impl_->env_segment_chunks >= 0) return impl_->env_segment_chunks;
  segment::SegmentRuleInputs rule;
  const std::int64_t C = config.chunk > 0 ? config.chunk : 64;
  const std::int64_t BV = std::min<std::int64_t>(config.block_v, (p.value_dim + 15) / 16 * 16);
  rule.chunksPerSeq = (p.rows() + C - 1) / C;
  const auto tiles = [&](std::int64_t d) { return (d + BV - 1) / std::max<std::int64_t>(BV, 1); };
  rule.parallelWork = p.num_seqs * p.heads_v * tiles(p.value_dim);
  // segment_summary's grid: the E walk's value tiles and the M walk's K-column tiles (launch.forward_segmented)
  rule.summaryWork = p.num_seqs * p.heads_v * (tiles(p.value_dim) + tiles(p.key_dim));
  rule.smCount = impl_->smCount(p.device);
  rule.K = p.key_dim;
  rule.C = C;
  if (rule.smCount < 1) return 0;
  const std::int64_t L = segment::chooseSegmentChunks(rule);
  return L < rule.chunksPerSeq ? L : 0;
}

void Runtime::forward(const Package& package, const ForwardTensors& t, const LaunchOptions& options) {
  if (!package.manifest().has_forward) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument, "forward: package " + package.name() + " has no forward kernels");
  }
  const ForwardProblem p = validateForward(package, t);
  const TileConfig config = options.config ? *options.config : resolveForwardConfig(package, p);
  package.checkConfig(config);
  // the segmented state pass launches launch.forward_segmented's kernels instead of launch.forward's
  const std::int64_t segment = segmentChunks(package, p, config, options);
  const detail::ForwardGeometry plan = segment > 0 ? detail::forwardGeometrySegmented(package, p, config, segment)
                                                   : detail::forwardGeometry(package, p, config);
  if (t.workspace.given() && t.workspace.nbytes() < plan.workspace_bytes) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "forward: tensor 'workspace': " + std::to_string(t.workspace.nbytes()) + " bytes given, " +
                           std::to_string(plan.workspace_bytes) + " needed for " + toString(config));
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
  if (!impl_->capturing(stream)) {
    for (const auto& n : named) impl_->checkPointer("forward", n.first, *n.second);
  }
  if (options.check_cu_seqlens && p.varlen) impl_->checkCuSeqlens(t.cu_seqlens, p.seq_len, stream);

  auto module = impl_->resolve(package, p.key_dim, p.value_dim, p.input_dtype, config, p.device, guard.context());

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
  if (plan.workspace_bytes > 0) {
    a.workspace = t.workspace.given()
                      ? t.workspace.data
                      : reinterpret_cast<void*>(static_cast<std::uintptr_t>(
                            impl_->workspace(p.device, guard.context(), stream, plan.workspace_bytes)));
  }
  a.batch = p.batch;
  a.seq_len = p.rows();  // rows of the step axis (T·n_h; abi.h, config.cuh DGPS_ROW_STEPS)
  a.num_seqs = p.num_seqs;
  a.heads_qk = p.heads_qk;
  a.heads_v = p.heads_v;
  a.scale = p.scale;
  a.segment_chunks = segment;
  const Manifest& man = package.manifest();
  for (int i = 0; i < plan.count; ++i) {
    const std::size_t k = std::size_t(i);
    if (segment > 0) {
      const KernelLaunchRule& r = man.launch.forward_segmented[k];
      impl_->launch(*module, kSegmentedSlot + k, r.role, r.symbol, plan.kernels[k], stream, &a, p.device);
    } else {
      impl_->launch(*module, k, man.forward_roles[k], man.forward_symbols[k], plan.kernels[k], stream, &a, p.device);
    }
  }
}

void Runtime::decode(const Package& package, const DecodeTensors& t, const LaunchOptions& options) {
  if (!package.manifest().has_decode) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument, "decode: package " + package.name() + " has no decode kernel");
  }
  const DecodeProblem p = validateDecode(package, t);
  const TileConfig config = options.config ? *options.config : package.manifest().default_config;
  package.checkConfig(config);
  const detail::LaunchGeometry launch = detail::decodeGeometry(package, p, config);

  DeviceContextGuard guard(p.device);
  CUstream stream = static_cast<CUstream>(options.stream);
  impl_->checkStream("decode", stream, guard.context(), p.device);
  const std::pair<const char*, const TensorView*> named[] = {
      {"q", &t.q}, {"k", &t.k}, {"v", &t.v}, {"g", &t.g}, {"beta", &t.beta}, {"precond_g", &t.precond_g},
      {"precond_beta", &t.precond_beta}, {"precond_center", &t.precond_center}, {"state", &t.state},
      {"precond_state", &t.precond_state}, {"o", &t.o}};
  if (!impl_->capturing(stream)) {
    for (const auto& n : named) impl_->checkPointer("decode", n.first, *n.second);
  }

  auto module = impl_->resolve(package, p.key_dim, p.value_dim, p.input_dtype, config, p.device, guard.context());
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
