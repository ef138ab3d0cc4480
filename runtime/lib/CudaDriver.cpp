#include "dgps/runtime/CudaDriver.h"

#include <dlfcn.h>

#include <atomic>
#include <map>
#include <mutex>
#include <sstream>

#include "dgps/runtime/Error.h"

namespace dgps {
namespace {

#define DGPS_STR2(x) #x
#define DGPS_STR(x) DGPS_STR2(x)

struct LoadState {
  CudaDriver driver;
  bool ok = false;
  RuntimeErrorCode code = RuntimeErrorCode::NoDriver;
  std::string error;
};

// Fills every entry point; returns the first missing symbol's name or "".
std::string resolveAll(void* lib, CudaDriver& d) {
#define DGPS_RESOLVE(name)                                                \
  d.name = reinterpret_cast<decltype(d.name)>(dlsym(lib, DGPS_STR(name))); \
  if (!d.name) return DGPS_STR(name);
  DGPS_CUDA_DRIVER_FUNCTIONS(DGPS_RESOLVE)
#undef DGPS_RESOLVE
  return "";
}

LoadState load() {
  LoadState s;
  // RTLD_LOCAL: the runtime's copy must not interpose symbols for other libraries in the process.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    s.error = std::string("no CUDA driver found: libcuda.so.1 could not be loaded (") +
              (why ? why : "dlopen failed") + ")";
    return s;
  }
  std::string missing = resolveAll(lib, s.driver);
  if (!missing.empty()) {
    s.error = "no usable CUDA driver: libcuda.so.1 has no entry point " + missing +
              " (the runtime needs a driver for CUDA 12.8 or newer)";
    return s;
  }
  CUresult r = s.driver.cuInit(0);
  if (r != CUDA_SUCCESS) {
    s.code = RuntimeErrorCode::NoDevice;
    const char* name = nullptr;
    s.driver.cuGetErrorName(r, &name);
    s.error = std::string("CUDA driver found but cuInit failed: ") + (name ? name : "unknown error") +
              " (no usable GPU, or the driver does not match the kernel module)";
    return s;
  }
  s.driver.cuDriverGetVersion(&s.driver.driver_version);
  s.ok = true;
  return s;
}

const LoadState& state() {
  static const LoadState s = load();  // thread-safe initialisation (C++11 magic statics)
  return s;
}

}  // namespace

const CudaDriver& cudaDriver() {
  const LoadState& s = state();
  if (!s.ok) throw RuntimeError(s.code, s.error);
  return s.driver;
}

bool cudaAvailable(std::string* reason) {
  const LoadState& s = state();
  if (!s.ok) {
    if (reason) *reason = s.error;
    return false;
  }
  int n = 0;
  CUresult r = s.driver.cuDeviceGetCount(&n);
  if (r != CUDA_SUCCESS || n == 0) {
    if (reason) *reason = "no CUDA device found (the driver loaded, cuDeviceGetCount reports none)";
    return false;
  }
  return true;
}

std::string cudaErrorText(CUresult result) {
  const LoadState& s = state();
  std::ostringstream os;
  const char* name = nullptr;
  const char* text = nullptr;
  if (s.driver.cuGetErrorName) s.driver.cuGetErrorName(result, &name);
  if (s.driver.cuGetErrorString) s.driver.cuGetErrorString(result, &text);
  os << (name ? name : "CUresult") << " (" << (text ? text : "") << (text ? "" : "code ")
     << (text ? "" : std::to_string(static_cast<int>(result))) << ")";
  return os.str();
}

void checkCuda(CUresult result, const std::string& what) {
  if (result != CUDA_SUCCESS) throw RuntimeError(RuntimeErrorCode::Cuda, what + " failed: " + cudaErrorText(result));
}

std::string cudaVersionString(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

int cudaDeviceCount() {
  int n = 0;
  checkCuda(cudaDriver().cuDeviceGetCount(&n), "cuDeviceGetCount");
  return n;
}

namespace {
CUdevice deviceHandle(int device) {
  const CudaDriver& d = cudaDriver();
  int n = 0;
  checkCuda(d.cuDeviceGetCount(&n), "cuDeviceGetCount");
  if (device < 0 || device >= n) {
    throw RuntimeError(RuntimeErrorCode::NoDevice, "CUDA device " + std::to_string(device) +
                                                       " does not exist (this machine has " + std::to_string(n) +
                                                       " device" + (n == 1 ? "" : "s") + ")");
  }
  CUdevice h = 0;
  const CUresult r = d.cuDeviceGet(&h, device);
  if (r != CUDA_SUCCESS) checkCuda(r, "cuDeviceGet(" + std::to_string(device) + ")");  // message built on failure only
  return h;
}
}  // namespace

ComputeCapability deviceComputeCapability(int device) {
  const CudaDriver& d = cudaDriver();
  CUdevice h = deviceHandle(device);
  ComputeCapability cc;
  checkCuda(d.cuDeviceGetAttribute(&cc.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, h), "cuDeviceGetAttribute");
  checkCuda(d.cuDeviceGetAttribute(&cc.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, h), "cuDeviceGetAttribute");
  return cc;
}

std::string deviceName(int device) {
  char name[256] = {0};
  checkCuda(cudaDriver().cuDeviceGetName(name, sizeof(name) - 1, deviceHandle(device)), "cuDeviceGetName");
  return name;
}

namespace {
// The primary context of `device`, retained once for the life of the process. Releasing it when a guard
// ends would destroy the context — and free every allocation and module in it — whenever no other guard
// happens to hold it, so device buffers and loaded kernels would die between two calls.
CUcontext retainedPrimaryContext(int device, CUdevice handle) {
  static std::mutex mutex;
  static std::map<int, CUcontext> contexts;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = contexts.find(device);
  if (it != contexts.end()) return it->second;
  CUcontext ctx = nullptr;
  checkCuda(cudaDriver().cuDevicePrimaryCtxRetain(&ctx, handle),
            "cuDevicePrimaryCtxRetain(device " + std::to_string(device) + ")");
  contexts.emplace(device, ctx);
  return ctx;
}

// The warm path of DeviceContextGuard: (device handle, retained primary context) of the first kMaxFastDevices
// ordinals, published once and read without a lock or a driver call. Both values are fixed for the life of the
// process (the device list is fixed at cuInit, the primary context is retained forever above), so an entry never
// goes stale. Higher ordinals take the checked path every time.
constexpr int kMaxFastDevices = 64;
struct PrimaryContextEntry {
  std::atomic<bool> ready{false};
  CUdevice handle = 0;         ///< written once, before `ready`
  CUcontext context = nullptr; ///< written once, before `ready`
};
PrimaryContextEntry g_primary[kMaxFastDevices];
std::mutex g_primary_publish;

void primaryContext(int device, CUdevice* handle, CUcontext* context) {
  const bool fast = device >= 0 && device < kMaxFastDevices;
  if (fast && g_primary[device].ready.load(std::memory_order_acquire)) {
    *handle = g_primary[device].handle;
    *context = g_primary[device].context;
    return;
  }
  *handle = deviceHandle(device);  // the ordinal check (RuntimeError{NoDevice} for a bad one)
  *context = retainedPrimaryContext(device, *handle);
  if (!fast) return;
  std::lock_guard<std::mutex> lock(g_primary_publish);
  PrimaryContextEntry& e = g_primary[device];
  if (e.ready.load(std::memory_order_relaxed)) return;
  e.handle = *handle;
  e.context = *context;
  e.ready.store(true, std::memory_order_release);
}
}  // namespace

DeviceContextGuard::DeviceContextGuard(int device) {
  const CudaDriver& d = cudaDriver();
  primaryContext(device, &device_, &context_);
  // Already current (the usual case: frameworks keep the primary context current): nothing to push or pop.
  CUcontext current = nullptr;
  if (d.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == context_) return;
  const CUresult r = d.cuCtxPushCurrent(context_);
  if (r != CUDA_SUCCESS) checkCuda(r, "cuCtxPushCurrent(device " + std::to_string(device) + ")");
  pushed_ = true;
}

DeviceContextGuard::~DeviceContextGuard() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  cudaDriver().cuCtxPopCurrent(&popped);
}

DeviceBuffer::DeviceBuffer(int device, std::size_t bytes) : device_(device), bytes_(bytes) {
  if (bytes == 0) return;
  DeviceContextGuard guard(device);
  checkCuda(cudaDriver().cuMemAlloc(&ptr_, bytes),
            "cuMemAlloc(" + std::to_string(bytes) + " bytes on device " + std::to_string(device) + ")");
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : device_(o.device_), ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = 0;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    device_ = o.device_;
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  if (!ptr_) return;
  try {
    DeviceContextGuard guard(device_);
    cudaDriver().cuMemFree(ptr_);
  } catch (...) {
    // Freeing during teardown after a sticky context error must not throw out of a destructor.
  }
  ptr_ = 0;
  bytes_ = 0;
}

namespace {
void checkRange(std::size_t offset, std::size_t bytes, std::size_t size, const char* op) {
  if (offset > size || bytes > size - offset) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       std::string("DeviceBuffer::") + op + ": range [" + std::to_string(offset) + ", " +
                           std::to_string(offset + bytes) + ") exceeds the buffer of " + std::to_string(size) + " bytes");
  }
}
}  // namespace

void DeviceBuffer::upload(const void* host, std::size_t bytes, std::size_t offset) {
  checkRange(offset, bytes, bytes_, "upload");
  if (bytes == 0) return;
  DeviceContextGuard guard(device_);
  checkCuda(cudaDriver().cuMemcpyHtoD(ptr_ + offset, host, bytes), "cuMemcpyHtoD");
}

void DeviceBuffer::download(void* host, std::size_t bytes, std::size_t offset) const {
  checkRange(offset, bytes, bytes_, "download");
  if (bytes == 0) return;
  DeviceContextGuard guard(device_);
  checkCuda(cudaDriver().cuMemcpyDtoH(host, ptr_ + offset, bytes), "cuMemcpyDtoH");
}

const char* toString(RuntimeErrorCode c) {
  switch (c) {
    case RuntimeErrorCode::NoDriver: return "no-driver";
    case RuntimeErrorCode::NoDevice: return "no-device";
    case RuntimeErrorCode::UnsupportedDevice: return "unsupported-device";
    case RuntimeErrorCode::InvalidArgument: return "invalid-argument";
    case RuntimeErrorCode::Package: return "package";
    case RuntimeErrorCode::Jit: return "jit";
    case RuntimeErrorCode::Cache: return "cache";
    case RuntimeErrorCode::Cuda: return "cuda";
    case RuntimeErrorCode::Io: return "io";
    case RuntimeErrorCode::Collective: return "collective";
  }
  return "?";
}

}  // namespace dgps
