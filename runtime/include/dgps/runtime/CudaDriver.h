// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1"). The runtime never links
// libcuda, so the same binaries start on machines without a GPU or driver: there every GPU entry point
// throws RuntimeError{NoDriver, "no CUDA driver found: libcuda.so.1 could not be loaded (...)"} and the
// GPU tests skip with that reason. <cuda.h> from the toolkit is used for types and prototypes only.
//
// Function pointers are named after the API functions; <cuda.h> maps some names to versioned symbols
// (cuMemAlloc -> cuMemAlloc_v2) and the same macro applies to the member names, so
// `cudaDriver().cuMemAlloc(&p, n)` calls the symbol the prototype describes.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace dgps {

// X(name): every entry point the runtime, tests, tools and tuner use. All are required.
#define DGPS_CUDA_DRIVER_FUNCTIONS(X) \
  X(cuInit)                           \
  X(cuDriverGetVersion)               \
  X(cuGetErrorString)                 \
  X(cuGetErrorName)                   \
  X(cuDeviceGetCount)                 \
  X(cuDeviceGet)                      \
  X(cuDeviceGetAttribute)             \
  X(cuDeviceGetName)                  \
  X(cuDeviceTotalMem)                 \
  X(cuDevicePrimaryCtxRetain)         \
  X(cuDevicePrimaryCtxRelease)        \
  X(cuCtxPushCurrent)                 \
  X(cuCtxPopCurrent)                  \
  X(cuCtxGetCurrent)                  \
  X(cuCtxGetDevice)                   \
  X(cuCtxSynchronize)                 \
  X(cuModuleLoadData)                 \
  X(cuModuleUnload)                   \
  X(cuModuleGetFunction)              \
  X(cuFuncGetAttribute)               \
  X(cuFuncSetAttribute)               \
  X(cuLaunchKernel)                   \
  X(cuMemAlloc)                       \
  X(cuMemFree)                        \
  X(cuMemGetInfo)                     \
  X(cuMemcpyHtoD)                     \
  X(cuMemcpyDtoH)                     \
  X(cuMemcpyHtoDAsync)                \
  X(cuMemcpyDtoHAsync)                \
  X(cuMemcpyDtoDAsync)                \
  X(cuMemsetD8)                       \
  X(cuMemsetD8Async)                  \
  X(cuMemsetD32Async)                 \
  X(cuMemsetD2D32Async)               \
  X(cuMemcpy2DAsync)                  \
  X(cuPointerGetAttribute)            \
  X(cuStreamCreate)                   \
  X(cuStreamDestroy)                  \
  X(cuStreamSynchronize)              \
  X(cuStreamIsCapturing)              \
  X(cuStreamGetCtx)                   \
  X(cuStreamWaitEvent)                \
  X(cuEventCreate)                    \
  X(cuEventDestroy)                   \
  X(cuEventRecord)                    \
  X(cuEventSynchronize)               \
  X(cuEventElapsedTime)               \
  X(cuStreamBeginCapture)             \
  X(cuStreamEndCapture)               \
  X(cuGraphInstantiate)               \
  X(cuGraphLaunch)                    \
  X(cuGraphExecDestroy)               \
  X(cuGraphDestroy)                   \
  X(cuTensorMapEncodeTiled)

struct CudaDriver {
#define DGPS_CUDA_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  DGPS_CUDA_DRIVER_FUNCTIONS(DGPS_CUDA_DRIVER_MEMBER)
#undef DGPS_CUDA_DRIVER_MEMBER
  int driver_version = 0;  ///< cuDriverGetVersion, e.g. 13000 for CUDA 13.0.
};

/// The loaded and initialised (cuInit(0)) driver. Loads on first use; thread-safe.
/// Throws RuntimeError{NoDriver} when libcuda.so.1 cannot be loaded or lacks an entry point, and
/// RuntimeError{NoDevice} when cuInit fails (e.g. no GPU or a driver/kernel-module mismatch).
const CudaDriver& cudaDriver();

/// True when cudaDriver() succeeds and at least one device exists; otherwise false with the reason
/// (the message cudaDriver() would throw, or "no CUDA device found"). Never throws.
bool cudaAvailable(std::string* reason = nullptr);

/// "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".
std::string cudaErrorText(CUresult result);

/// Throws RuntimeError{Cuda} "`what` failed: <cudaErrorText>" when result != CUDA_SUCCESS.
void checkCuda(CUresult result, const std::string& what);
/// The same for a literal: no string is built unless the call failed (checks on every launch use this).
inline void checkCuda(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS) checkCuda(result, std::string(what));
}

/// "13.0" from a cuDriverGetVersion / CUDA_VERSION number such as 13000.
std::string cudaVersionString(int version);

/// Number of CUDA devices (throws like cudaDriver()).
int cudaDeviceCount();

/// Compute capability of `device` as {major, minor}. Throws RuntimeError{NoDevice} for a bad ordinal.
struct ComputeCapability {
  int major = 0;
  int minor = 0;
};
ComputeCapability deviceComputeCapability(int device);

/// The device's name, e.g. "NVIDIA H200".
std::string deviceName(int device);

/// Makes the primary context of `device` current for the guard's lifetime (push; pop on destruction),
/// so modules, allocations and launches go to the device that owns the tensors even when the caller's
/// current device differs. The primary context is retained once per process and never
/// released here: releasing the last retain would destroy it with every buffer and module inside.
/// Cost on the warm path (every forward/decode makes one): after the first guard of an ordinal below 64, no
/// lock and one driver call (cuCtxGetCurrent) when that context is already current, else push and pop too.
class DeviceContextGuard {
 public:
  explicit DeviceContextGuard(int device);
  ~DeviceContextGuard();
  DeviceContextGuard(const DeviceContextGuard&) = delete;
  DeviceContextGuard& operator=(const DeviceContextGuard&) = delete;
  CUcontext context() const { return context_; }
  CUdevice device() const { return device_; }

 private:
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  bool pushed_ = false;  ///< false when the context was already current: nothing to pop
};

/// Device memory owned by the current context at allocation; freed (in that context) on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates `bytes` on `device` (0 bytes gives a null buffer). Throws RuntimeError{Cuda}.
  DeviceBuffer(int device, std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr_)); }
  CUdeviceptr ptr() const { return ptr_; }
  std::size_t size() const { return bytes_; }
  int device() const { return device_; }

  void upload(const void* host, std::size_t bytes, std::size_t offset = 0);
  void download(void* host, std::size_t bytes, std::size_t offset = 0) const;

 private:
  void release() noexcept;
  int device_ = -1;
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace dgps
