#include "GpuSession.h"

#include <algorithm>

#include "Watchdog.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/tuning/Stats.h"

namespace dgps {
namespace bench {
namespace {

const char* kHelperSource = R"CU(
// dgps-bench helper kernels (bench/GpuSession.h).
struct alignas(16) DgpsBenchU4 { unsigned int x, y, z, w; };

extern "C" __global__ void dgps_bench_copy(const DgpsBenchU4* __restrict__ src, DgpsBenchU4* __restrict__ dst,
                                           unsigned long long n) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (; i < n; i += stride) dst[i] = src[i];
}

extern "C" __global__ void dgps_bench_spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
)CU";

int attribute(CUdevice dev, CUdevice_attribute a, const char* name) {
  int v = 0;
  checkCuda(cudaDriver().cuDeviceGetAttribute(&v, a, dev), std::string("cuDeviceGetAttribute(") + name + ")");
  return v;
}

GpuInfo queryInfo(int device, CUdevice dev) {
  const CudaDriver& d = cudaDriver();
  GpuInfo g;
  g.device = device;
  g.name = deviceName(device);
  g.cc = deviceComputeCapability(device);
  g.sm_count = attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "MULTIPROCESSOR_COUNT");
  g.l2_bytes = attribute(dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2_CACHE_SIZE");
  g.smem_per_block_optin =
      attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN");
  g.smem_per_sm =
      attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR");
  g.regs_per_sm = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, "MAX_REGISTERS_PER_MULTIPROCESSOR");
  g.max_threads_per_block = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "MAX_THREADS_PER_BLOCK");
  checkCuda(d.cuDeviceTotalMem(&g.total_memory, dev), "cuDeviceTotalMem");
  g.driver_version = cudaVersionString(d.driver_version);
  const NvrtcEnvironment& env = nvrtcEnvironment();
  g.nvrtc_version = std::to_string(env.major) + "." + std::to_string(env.minor);
  g.target = selectJitTarget(g.cc, env.supported_archs);
  return g;
}

// Owns events created in the current context.
class Events {
 public:
  explicit Events(std::size_t n) {
    events_.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      CUevent e = nullptr;
      checkCuda(cudaDriver().cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
      events_.push_back(e);
    }
  }
  ~Events() {
    for (CUevent e : events_) cudaDriver().cuEventDestroy(e);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  CUevent operator[](std::size_t i) const { return events_[i]; }

 private:
  std::vector<CUevent> events_;
};

}  // namespace

GpuSession::GpuSession(int device, const JitCompiler& jit) {
  context_ = std::make_unique<DeviceContextGuard>(device);
  const CudaDriver& d = cudaDriver();
  info_ = queryInfo(device, context_->device());
  // A blocking stream: ordered with the legacy default stream, which DeviceTensor's synchronous
  // poison/download calls use.
  checkCuda(d.cuStreamCreate(&stream_, CU_STREAM_DEFAULT), "cuStreamCreate");

  JitRequest req;
  req.source = kHelperSource;
  req.source_name = "dgps_bench_helpers.cu";
  req.target = info_.target;
  JitBinary bin = jit.compile(req);
  checkCuda(d.cuModuleLoadData(&module_, bin.image.c_str()), "cuModuleLoadData(dgps-bench helper kernels)");
  checkCuda(d.cuModuleGetFunction(&copy_, module_, "dgps_bench_copy"), "cuModuleGetFunction(dgps_bench_copy)");
  checkCuda(d.cuModuleGetFunction(&spin_, module_, "dgps_bench_spin"), "cuModuleGetFunction(dgps_bench_spin)");

  const std::size_t flush_bytes = std::max<std::size_t>(2 * std::size_t(info_.l2_bytes), std::size_t(64) << 20);
  flush_ = DeviceBuffer(device, flush_bytes);
}

GpuSession::~GpuSession() {
  // Best effort: after a sticky fault these calls fail, and the driver reclaims everything at exit.
  const CudaDriver& d = cudaDriver();
  flush_ = DeviceBuffer();
  if (module_) d.cuModuleUnload(module_);
  if (stream_) d.cuStreamDestroy(stream_);
}

void GpuSession::flushL2() {
  flush_value_ = static_cast<unsigned char>(flush_value_ + 1);
  checkCuda(cudaDriver().cuMemsetD8Async(flush_.ptr(), flush_value_, flush_.size(), stream_),
            "cuMemsetD8Async(L2 flush)");
}

void GpuSession::spin(double microseconds) {
  if (microseconds <= 0) return;
  unsigned long long ns = static_cast<unsigned long long>(microseconds * 1000.0);
  void* params[] = {&ns};
  checkCuda(cudaDriver().cuLaunchKernel(spin_, 1, 1, 1, 1, 1, 1, 0, stream_, params, nullptr),
            "cuLaunchKernel(dgps_bench_spin)");
}

void GpuSession::synchronize(const std::string& what) {
  Watchdog::Scope scope(what);
  checkCuda(cudaDriver().cuStreamSynchronize(stream_), "cuStreamSynchronize after " + what);
}

double GpuSession::measureCopyBandwidth(std::size_t bytes, int reps) {
  const CudaDriver& d = cudaDriver();
  bytes &= ~std::size_t(15);
  DeviceBuffer src(info_.device, bytes), dst(info_.device, bytes);
  checkCuda(d.cuMemsetD8Async(src.ptr(), 0x5a, bytes, stream_), "cuMemsetD8Async(copy source)");
  CUdeviceptr s = src.ptr(), t = dst.ptr();
  unsigned long long n = bytes / 16;
  void* params[] = {&s, &t, &n};
  const unsigned threads = 256;
  const unsigned blocks = unsigned(std::max(1, info_.sm_count) * 8);  // 2048 resident threads per SM
  auto copy = [&] {
    checkCuda(d.cuLaunchKernel(copy_, blocks, 1, 1, threads, 1, 1, 0, stream_, params, nullptr),
              "cuLaunchKernel(dgps_bench_copy)");
  };
  for (int i = 0; i < 3; ++i) copy();
  synchronize("the copy-bandwidth warm-up");
  // The copy is far larger than L2, so no flush is needed; a short spin still hides the host.
  std::vector<double> ms = timeLaunches(*this, copy, reps, 20.0, "the copy-bandwidth measurement");
  const double median_ms = tuning::quantile(ms, 0.5);
  return 2.0 * double(bytes) / (median_ms * 1e-3);
}

std::vector<double> timeLaunches(GpuSession& session, const std::function<void()>& launch, int reps, double spin_us,
                                 const std::string& what) {
  const CudaDriver& d = cudaDriver();
  CUstream stream = session.stream();
  Events events(2 * std::size_t(reps));
  for (int i = 0; i < reps; ++i) {
    session.flushL2();
    session.spin(spin_us);
    checkCuda(d.cuEventRecord(events[2 * i], stream), "cuEventRecord(start)");
    launch();
    checkCuda(d.cuEventRecord(events[2 * i + 1], stream), "cuEventRecord(end)");
  }
  {
    Watchdog::Scope scope(what);
    checkCuda(d.cuEventSynchronize(events[2 * std::size_t(reps) - 1]), "cuEventSynchronize after " + what);
  }
  checkCuda(d.cuStreamSynchronize(stream), "cuStreamSynchronize after " + what);
  std::vector<double> ms(reps);
  for (int i = 0; i < reps; ++i) {
    float t = 0;
    checkCuda(d.cuEventElapsedTime(&t, events[2 * i], events[2 * i + 1]), "cuEventElapsedTime");
    ms[i] = double(t);
  }
  return ms;
}

bool isStickyCudaError(const std::string& m) {
  static const char* kSticky[] = {"CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED",
                                  "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
                                  "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_INVALID_PC",
                                  "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_ASSERT",
                                  "CUDA_ERROR_LAUNCH_TIMEOUT", "CUDA_ERROR_ECC_UNCORRECTABLE",
                                  "CUDA_ERROR_CONTEXT_IS_DESTROYED", "CUDA_ERROR_UNKNOWN"};
  for (const char* s : kSticky) {
    if (m.find(s) != std::string::npos) return true;
  }
  return false;
}

}  // namespace bench
}  // namespace dgps
