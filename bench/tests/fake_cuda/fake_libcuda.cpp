// A fake CUDA driver (libcuda.so.1) for testing dgps-bench's host side on machines without a GPU.
//
// It implements the entry points the runtime loads (runtime/include/dgps/runtime/CudaDriver.h) over
// host memory: allocations are malloc'd, copies and memsets are memcpy/memset, events record the host
// clock, streams are synchronous. Kernels do not run: NVRTC really compiles the package (so the JIT
// path is exercised), the fake only records launches. Its behaviour is picked by DGPS_FAKE_CUDA_MODE:
//   noop   (default) launches do nothing: outputs keep their NaN poison, so the guard reports "wrong";
//   zeros  forward/decode kernels write zeros to o (V = 128 assumed): finite, but wrong numbers;
//   fault  the first package kernel launch makes every later call fail with CUDA_ERROR_ILLEGAL_ADDRESS,
//          like a kernel that dereferenced a bad pointer;
//   hang   the first wait after a package kernel launch never returns.
// DGPS_FAKE_CUDA_CC="X.Y" makes the device report compute capability X.Y (default 9.0), to test the
// runtime's refusal of GPUs the kernels do not support (tests/robustness_runtime).
// Every entry point counts its calls; dgpsFakeCudaCalls("cuLaunchKernel") reads a count (nullptr: all of them),
// so tests can check which driver calls a warm Runtime call makes (tests/runtime/test_warm_path.cpp). An entry
// point that forwards to another (cuMemcpyHtoDAsync to cuMemcpyHtoD) counts both.
// Never install it: a test puts its folder first on LD_LIBRARY_PATH.
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dgps/device/abi.h"

namespace {

struct Function {
  std::string name;
};

struct Event {
  std::chrono::steady_clock::time_point t;
  bool recorded = false;
};

struct State {
  std::mutex mu;
  std::map<CUdeviceptr, std::size_t> allocations;  // base -> bytes
  std::string mode;
  bool faulted = false;
  bool package_launched = false;
};

State& state() {
  static State s;
  static bool init = [] {
    const char* m = std::getenv("DGPS_FAKE_CUDA_MODE");
    s.mode = m ? m : "noop";
    return true;
  }();
  (void)init;
  return s;
}

// Calls per entry point (by API name), read by dgpsFakeCudaCalls. Counters are created on an entry point's first
// call and never removed, so the reference each function keeps stays valid.
std::mutex counters_mu;
std::map<std::string, std::atomic<long long>>& counters() {
  static std::map<std::string, std::atomic<long long>> c;
  return c;
}
std::atomic<long long>& counter(const char* name) {
  std::lock_guard<std::mutex> lock(counters_mu);
  return counters()[name];
}
#define FAKE_COUNT(name)                                              \
  do {                                                                \
    static std::atomic<long long>& fake_calls = counter(#name);       \
    fake_calls.fetch_add(1, std::memory_order_relaxed);               \
  } while (0)

thread_local std::vector<CUcontext> ctx_stack;
CUcontext fakeContext() { return reinterpret_cast<CUcontext>(static_cast<std::uintptr_t>(0x1000)); }

CUresult sticky() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.faulted ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_SUCCESS;
}

// A wait: hangs in "hang" mode once a package kernel ran.
CUresult wait() {
  State& s = state();
  bool hang = false;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    hang = s.mode == "hang" && s.package_launched;
  }
  if (hang) std::this_thread::sleep_for(std::chrono::hours(1));
  return sticky();
}

// Bytes of the allocation from `p` to its end (0 when `p` is not inside one).
std::size_t bytesFrom(CUdeviceptr p) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.allocations.upper_bound(p);
  if (it == s.allocations.begin()) return 0;
  --it;
  if (p >= it->first + it->second) return 0;
  return it->first + it->second - p;
}

void zeroOutput(void* o, std::size_t bytes) {
  const CUdeviceptr p = reinterpret_cast<CUdeviceptr>(o);
  std::memset(o, 0, std::min(bytes, bytesFrom(p)));
}

}  // namespace

extern "C" long long dgpsFakeCudaCalls(const char* name) {
  std::lock_guard<std::mutex> lock(counters_mu);
  long long n = 0;
  for (const auto& kv : counters())
    if (!name || kv.first == name) n += kv.second.load(std::memory_order_relaxed);
  return n;
}

// ForwardArgs::row_maps of the last forward kernel launched (-1 before any): which tensor maps the runtime passed
// (tests/runtime/test_warm_path.cpp).
std::atomic<long long> last_row_maps{-1};
extern "C" long long dgpsFakeLastRowMaps() { return last_row_maps.load(); }

// A copy of the last forward kernel's ForwardArgs (the index divisors and workspace offsets the runtime formed).
std::mutex last_args_mu;
dgps::ForwardArgs last_args{};
bool have_last_args = false;
extern "C" bool dgpsFakeLastForwardArgs(dgps::ForwardArgs* out) {
  std::lock_guard<std::mutex> lock(last_args_mu);
  if (have_last_args) *out = last_args;
  return have_last_args;
}

CUresult cuInit(unsigned int) {
  FAKE_COUNT(cuInit);
  return CUDA_SUCCESS;
}
// NVRTC 13 opens libcuda.so.1 itself and asks for the driver's private export tables; without this
// symbol it crashes. Refusing makes it carry on as on a machine without a driver.
extern "C" CUresult cuGetExportTable(const void** table, const CUuuid*) {
  if (table) *table = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuDriverGetVersion(int* v) {
  FAKE_COUNT(cuDriverGetVersion);
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult cuGetErrorString(CUresult e, const char** s) {
  FAKE_COUNT(cuGetErrorString);
  *s = e == CUDA_SUCCESS ? "no error" : e == CUDA_ERROR_ILLEGAL_ADDRESS ? "an illegal memory access was encountered"
                                                                        : "fake driver error";
  return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult e, const char** s) {
  FAKE_COUNT(cuGetErrorName);
  switch (e) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    default: *s = "CUDA_ERROR_UNKNOWN"; break;
  }
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int* n) {
  FAKE_COUNT(cuDeviceGetCount);
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  FAKE_COUNT(cuDeviceGet);
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}
// Compute capability digit `which` (0 major, 1 minor) from DGPS_FAKE_CUDA_CC="X.Y", else 9.0.
static int fakeCapability(int which) {
  const char* cc = std::getenv("DGPS_FAKE_CUDA_CC");
  if (cc && cc[0] >= '0' && cc[0] <= '9' && cc[1] == '.' && cc[2] >= '0' && cc[2] <= '9') {
    return which == 0 ? cc[0] - '0' : cc[2] - '0';
  }
  if (cc && cc[0] == '1' && cc[1] >= '0' && cc[1] <= '9' && cc[2] == '.' && cc[3] >= '0' && cc[3] <= '9') {
    return which == 0 ? 10 + (cc[1] - '0') : cc[3] - '0';
  }
  return which == 0 ? 9 : 0;
}
CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  FAKE_COUNT(cuDeviceGetAttribute);
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = fakeCapability(0); break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = fakeCapability(1); break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 4 << 20; break;  // small: the flush buffer is memset often
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 233472; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    default: *v = 0; break;
  }
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char* name, int len, CUdevice) {
  FAKE_COUNT(cuDeviceGetName);
  std::strncpy(name, "Fake H200 (dgps-bench test driver)", std::size_t(len));
  if (len > 0) name[len - 1] = '\0';
  return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem(size_t* bytes, CUdevice) {
  FAKE_COUNT(cuDeviceTotalMem);
  *bytes = size_t(141) << 30;
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice) {
  FAKE_COUNT(cuDevicePrimaryCtxRetain);
  *c = fakeContext();
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice) {
  FAKE_COUNT(cuDevicePrimaryCtxRelease);
  return CUDA_SUCCESS;
}
CUresult cuCtxPushCurrent(CUcontext c) {
  FAKE_COUNT(cuCtxPushCurrent);
  ctx_stack.push_back(c);
  return CUDA_SUCCESS;
}
CUresult cuCtxPopCurrent(CUcontext* c) {
  FAKE_COUNT(cuCtxPopCurrent);
  if (ctx_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (c) *c = ctx_stack.back();
  ctx_stack.pop_back();
  return CUDA_SUCCESS;
}
CUresult cuCtxGetCurrent(CUcontext* c) {
  FAKE_COUNT(cuCtxGetCurrent);
  *c = ctx_stack.empty() ? nullptr : ctx_stack.back();
  return CUDA_SUCCESS;
}
CUresult cuCtxGetDevice(CUdevice* d) {
  FAKE_COUNT(cuCtxGetDevice);
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult cuCtxSynchronize(void) {
  FAKE_COUNT(cuCtxSynchronize);
  return wait();
}
CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  FAKE_COUNT(cuModuleLoadData);
  if (!image) return CUDA_ERROR_INVALID_VALUE;
  *m = reinterpret_cast<CUmodule>(new int(0));
  return sticky();
}
CUresult cuModuleUnload(CUmodule m) {
  FAKE_COUNT(cuModuleUnload);
  delete reinterpret_cast<int*>(m);
  return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction* f, CUmodule, const char* name) {
  FAKE_COUNT(cuModuleGetFunction);
  *f = reinterpret_cast<CUfunction>(new Function{name});
  return CUDA_SUCCESS;
}
CUresult cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction) {
  FAKE_COUNT(cuFuncGetAttribute);
  *v = a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : a == CU_FUNC_ATTRIBUTE_NUM_REGS ? 128 : 0;
  return CUDA_SUCCESS;
}
CUresult cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) {
  FAKE_COUNT(cuFuncSetAttribute);
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernel(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                        void** params, void**) {
  FAKE_COUNT(cuLaunchKernel);
  if (CUresult r = sticky()) return r;
  const std::string& name = reinterpret_cast<Function*>(f)->name;
  if (name.rfind("dgps_bench_", 0) == 0) return CUDA_SUCCESS;  // the bench's own helper kernels
  if (name.find("_fwd_") != std::string::npos) {
    last_row_maps.store(static_cast<const dgps::ForwardArgs*>(params[0])->row_maps);
    std::lock_guard<std::mutex> lock(last_args_mu);
    last_args = *static_cast<const dgps::ForwardArgs*>(params[0]);
    have_last_args = true;
  }
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.package_launched = true;
    if (s.mode == "fault") {
      s.faulted = true;
      return CUDA_SUCCESS;  // like a real fault: reported by the next synchronising call
    }
  }
  if (s.mode == "zeros") {
    if (name.find("_fwd_") != std::string::npos) {
      const auto* a = static_cast<const dgps::ForwardArgs*>(params[0]);
      zeroOutput(a->o, std::size_t(a->batch * a->seq_len * a->heads_v) * 128 * 2);
    } else if (name.find("_decode") != std::string::npos) {
      const auto* a = static_cast<const dgps::DecodeArgs*>(params[0]);
      zeroOutput(a->o, std::size_t(a->batch * a->heads_v) * 128 * 2);
    }
  }
  return CUDA_SUCCESS;
}
CUresult cuMemAlloc(CUdeviceptr* p, size_t n) {
  FAKE_COUNT(cuMemAlloc);
  if (CUresult r = sticky()) return r;
  void* mem = std::aligned_alloc(256, (n + 255) / 256 * 256);
  if (!mem) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = reinterpret_cast<CUdeviceptr>(mem);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.allocations[*p] = n;
  return CUDA_SUCCESS;
}
CUresult cuMemFree(CUdeviceptr p) {
  FAKE_COUNT(cuMemFree);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.allocations.find(p);
  if (it == s.allocations.end()) return CUDA_ERROR_INVALID_VALUE;
  s.allocations.erase(it);
  std::free(reinterpret_cast<void*>(p));
  return CUDA_SUCCESS;
}
CUresult cuMemGetInfo(size_t* free_bytes, size_t* total) {
  FAKE_COUNT(cuMemGetInfo);
  *free_bytes = size_t(140) << 30;
  *total = size_t(141) << 30;
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t n) {
  FAKE_COUNT(cuMemcpyHtoD);
  if (CUresult r = sticky()) return r;
  if (bytesFrom(dst) < n) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(reinterpret_cast<void*>(dst), src, n);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t n) {
  FAKE_COUNT(cuMemcpyDtoH);
  if (CUresult r = sticky()) return r;
  if (bytesFrom(src) < n) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(dst, reinterpret_cast<const void*>(src), n);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream) {
  FAKE_COUNT(cuMemcpyHtoDAsync);
  return cuMemcpyHtoD(dst, src, n);
}
CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream) {
  FAKE_COUNT(cuMemcpyDtoDAsync);
  if (CUresult r = sticky()) return r;
  if (bytesFrom(dst) < n || bytesFrom(src) < n) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream) {
  FAKE_COUNT(cuMemcpyDtoHAsync);
  return cuMemcpyDtoH(dst, src, n);
}
CUresult cuMemsetD8(CUdeviceptr p, unsigned char v, size_t n) {
  FAKE_COUNT(cuMemsetD8);
  if (CUresult r = sticky()) return r;
  if (bytesFrom(p) < n) return CUDA_ERROR_INVALID_VALUE;
  std::memset(reinterpret_cast<void*>(p), v, n);
  return CUDA_SUCCESS;
}
CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream) {
  FAKE_COUNT(cuMemsetD8Async);
  return cuMemsetD8(p, v, n);
}
CUresult cuMemsetD32Async(CUdeviceptr p, unsigned int v, size_t n, CUstream) {
  FAKE_COUNT(cuMemsetD32Async);
  if (CUresult r = sticky()) return r;
  if (bytesFrom(p) < 4 * n) return CUDA_ERROR_INVALID_VALUE;
  auto* w = reinterpret_cast<unsigned int*>(p);
  std::fill(w, w + n, v);
  return CUDA_SUCCESS;
}
CUresult cuPointerGetAttribute(void* data, CUpointer_attribute a, CUdeviceptr p) {
  FAKE_COUNT(cuPointerGetAttribute);
  if (a != CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) return CUDA_ERROR_INVALID_VALUE;
  if (bytesFrom(p) == 0) return CUDA_ERROR_INVALID_VALUE;
  *static_cast<int*>(data) = 0;
  return CUDA_SUCCESS;
}
CUresult cuStreamCreate(CUstream* s, unsigned int) {
  FAKE_COUNT(cuStreamCreate);
  *s = reinterpret_cast<CUstream>(new int(0));
  return sticky();
}
CUresult cuStreamDestroy(CUstream s) {
  FAKE_COUNT(cuStreamDestroy);
  delete reinterpret_cast<int*>(s);
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream) {
  FAKE_COUNT(cuStreamSynchronize);
  return wait();
}
CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned int) {  // streams are synchronous
  FAKE_COUNT(cuStreamWaitEvent);
  return sticky();
}
CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus* c) {
  FAKE_COUNT(cuStreamIsCapturing);
  *c = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx(CUstream, CUcontext* c) {
  FAKE_COUNT(cuStreamGetCtx);
  *c = fakeContext();
  return CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent* e, unsigned int) {
  FAKE_COUNT(cuEventCreate);
  *e = reinterpret_cast<CUevent>(new Event());
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy(CUevent e) {
  FAKE_COUNT(cuEventDestroy);
  delete reinterpret_cast<Event*>(e);
  return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent e, CUstream) {
  FAKE_COUNT(cuEventRecord);
  if (CUresult r = sticky()) return r;
  auto* ev = reinterpret_cast<Event*>(e);
  ev->t = std::chrono::steady_clock::now();
  ev->recorded = true;
  return CUDA_SUCCESS;
}
CUresult cuEventSynchronize(CUevent) {
  FAKE_COUNT(cuEventSynchronize);
  return wait();
}
CUresult cuTensorMapEncodeTiled(CUtensorMap* m, CUtensorMapDataType, cuuint32_t rank, void* base, const cuuint64_t*,
                                const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
  FAKE_COUNT(cuTensorMapEncodeTiled);
  if (rank < 1 || rank > 5 || base == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::memset(m, 0, sizeof *m);  // kernels are not run: the bytes are never read
  return CUDA_SUCCESS;
}
CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  FAKE_COUNT(cuEventElapsedTime);
  if (CUresult r = sticky()) return r;
  auto* x = reinterpret_cast<Event*>(a);
  auto* y = reinterpret_cast<Event*>(b);
  if (!x->recorded || !y->recorded) return CUDA_ERROR_NOT_READY;
  *ms = std::chrono::duration<float, std::milli>(y->t - x->t).count();
  return CUDA_SUCCESS;
}
