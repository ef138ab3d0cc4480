#include "backend.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>

#include "dgps/device/abi.h"
#include "emu/emu_hooks.h"

namespace gk {
namespace {

// ---- CUDA driver API, resolved with dlopen so the harness also starts on machines without a driver ----
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUevent_st* CUevent;
typedef struct CUstream_st* CUstream;
typedef unsigned long long CUdeviceptr;

struct Driver {
  void* lib = nullptr;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void**, void**) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;

  template <class F>
  bool get(F& f, const char* a, const char* b = nullptr) {
    void* p = dlsym(lib, a);
    if (!p && b) p = dlsym(lib, b);
    f = reinterpret_cast<F>(p);
    return p != nullptr;
  }
  bool open(std::string& err) {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      err = "cannot load libcuda.so.1 (no NVIDIA driver on this machine)";
      return false;
    }
    bool ok = get(cuInit, "cuInit") && get(cuDeviceGet, "cuDeviceGet") && get(cuDeviceGetName, "cuDeviceGetName") &&
              get(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") && get(cuCtxSetCurrent, "cuCtxSetCurrent") &&
              get(cuCtxSynchronize, "cuCtxSynchronize") && get(cuModuleLoadData, "cuModuleLoadData") &&
              get(cuModuleGetFunction, "cuModuleGetFunction") && get(cuFuncSetAttribute, "cuFuncSetAttribute") &&
              get(cuLaunchKernel, "cuLaunchKernel") && get(cuMemAlloc, "cuMemAlloc_v2") &&
              get(cuMemFree, "cuMemFree_v2") && get(cuMemcpyHtoD, "cuMemcpyHtoD_v2") &&
              get(cuMemcpyDtoH, "cuMemcpyDtoH_v2") && get(cuMemsetD8, "cuMemsetD8_v2") &&
              get(cuEventCreate, "cuEventCreate") && get(cuEventRecord, "cuEventRecord") &&
              get(cuEventSynchronize, "cuEventSynchronize") &&
              get(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime") &&
              get(cuGetErrorString, "cuGetErrorString");
    if (!ok) err = "libcuda lacks a needed entry point";
    return ok;
  }
};

class GpuBackend : public Backend {
 public:
  GpuBackend() {
    if (!d_.open(err_)) return;
    if (!check(d_.cuInit(0), "cuInit")) return;
    CUdevice dev;
    if (!check(d_.cuDeviceGet(&dev, 0), "cuDeviceGet")) return;
    char nm[256] = {0};
    d_.cuDeviceGetName(nm, 255, dev);
    name_ = nm;
    if (!check(d_.cuDevicePrimaryCtxRetain(&ctx_, dev), "cuDevicePrimaryCtxRetain")) return;
    if (!check(d_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent")) return;
    for (auto& e : ev_)
      if (!check(d_.cuEventCreate(&e, 0), "cuEventCreate")) return;
    ok_ = true;
  }
  std::string name() const override { return "gpu"; }
  bool ok() const override { return ok_; }
  std::string error() const override { return err_; }
  std::string device() const override { return name_; }
  uint64_t alloc(size_t bytes) override {
    CUdeviceptr p = 0;
    if (!check(d_.cuMemAlloc(&p, bytes ? bytes : 16), "cuMemAlloc")) return 0;
    return p;
  }
  void free(uint64_t p) override {
    if (p) d_.cuMemFree(p);
  }
  void upload(uint64_t dst, const void* src, size_t n) override {
    if (n) check(d_.cuMemcpyHtoD(dst, src, n), "cuMemcpyHtoD");
  }
  void download(void* dst, uint64_t src, size_t n) override {
    if (n) check(d_.cuMemcpyDtoH(dst, src, n), "cuMemcpyDtoH");
  }
  void fill(uint64_t dst, unsigned char b, size_t n) override {
    if (n) check(d_.cuMemsetD8(dst, b, n), "cuMemsetD8");
  }
  int load(const std::string& path) override {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      err_ = "cannot read " + path;
      return -1;
    }
    std::vector<char> img((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CUmodule m;
    if (!check(d_.cuModuleLoadData(&m, img.data()), ("cuModuleLoadData " + path).c_str())) return -1;
    mods_.push_back(m);
    return (int)mods_.size() - 1;
  }
  void* function(int module, const std::string& nm) override {
    CUfunction f = nullptr;
    if (module < 0 || d_.cuModuleGetFunction(&f, mods_[(size_t)module], nm.c_str()) != 0) return nullptr;
    return f;
  }
  bool launch(void* fn, const LaunchDims& dd, void* args, size_t, bool) override {
    CUfunction f = static_cast<CUfunction>(fn);
    if (dd.smem > 48 * 1024 && !check(d_.cuFuncSetAttribute(f, 8 /*MAX_DYNAMIC_SHARED_SIZE_BYTES*/, (int)dd.smem),
                                      "cuFuncSetAttribute"))
      return false;
    void* params[] = {args};
    if (dd.grid == 0) return true;
    return check(d_.cuLaunchKernel(f, (unsigned)dd.grid, 1, 1, dd.block, 1, 1, (unsigned)dd.smem, nullptr, params,
                                   nullptr),
                 "cuLaunchKernel");
  }
  bool sync() override { return check(d_.cuCtxSynchronize(), "kernel execution (cuCtxSynchronize)"); }
  void record(int slot) override { d_.cuEventRecord(ev_[slot], nullptr); }
  float elapsed(int a, int b) override {
    d_.cuEventSynchronize(ev_[b]);
    float ms = 0.f;
    d_.cuEventElapsedTime(&ms, ev_[a], ev_[b]);
    return ms;
  }

 private:
  bool check(CUresult r, const char* what) {
    if (r == 0) return true;
    const char* s = "?";
    if (d_.cuGetErrorString) d_.cuGetErrorString(r, &s);
    err_ = std::string(what) + ": " + s + " (" + std::to_string(r) + ")";
    ok_ = false;
    return false;
  }
  Driver d_;
  CUcontext ctx_ = nullptr;
  std::vector<CUmodule> mods_;
  CUevent ev_[8] = {};
  bool ok_ = false;
  std::string err_, name_;
};

// ---- CPU emulator ----
class EmuBackend : public Backend {
 public:
  std::string name() const override { return "emu"; }
  bool ok() const override { return err_.empty(); }
  std::string error() const override { return err_; }
  std::string device() const override { return "CPU emulator"; }
  uint64_t alloc(size_t n) override {
    void* p = std::aligned_alloc(256, (n + 255) / 256 * 256 + 256);
    return reinterpret_cast<uint64_t>(p);
  }
  void free(uint64_t p) override { std::free(reinterpret_cast<void*>(p)); }
  void upload(uint64_t d, const void* s, size_t n) override { std::memcpy(reinterpret_cast<void*>(d), s, n); }
  void download(void* d, uint64_t s, size_t n) override { std::memcpy(d, reinterpret_cast<const void*>(s), n); }
  void fill(uint64_t d, unsigned char b, size_t n) override { std::memset(reinterpret_cast<void*>(d), b, n); }
  int load(const std::string& path) override {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      err_ = std::string("dlopen: ") + dlerror();
      return -1;
    }
    libs_.push_back(h);
    return (int)libs_.size() - 1;
  }
  void* function(int m, const std::string& nm) override { return m < 0 ? nullptr : dlsym(libs_[(size_t)m], nm.c_str()); }
  bool launch(void* fn, const LaunchDims& d, void* args, size_t, bool is_decode) override {
    std::function<void()> k;
    if (is_decode) {
      auto f = reinterpret_cast<void (*)(dgps::DecodeArgs)>(fn);
      const dgps::DecodeArgs a = *static_cast<dgps::DecodeArgs*>(args);
      k = [f, a] { f(a); };
    } else {
      auto f = reinterpret_cast<void (*)(dgps::ForwardArgs)>(fn);
      const dgps::ForwardArgs a = *static_cast<dgps::ForwardArgs*>(args);
      k = [f, a] { f(a); };
    }
    char e[512] = {0};
    if (!dgps_emu::launch(k, d.grid, d.block, d.smem, e, sizeof(e))) {
      err_ = e;
      return false;
    }
    return true;
  }
  bool sync() override { return err_.empty(); }
  void record(int) override {}
  float elapsed(int, int) override { return 0.f; }

 private:
  std::vector<void*> libs_;
  std::string err_;
};

}  // namespace

std::unique_ptr<Backend> make_gpu_backend() { return std::unique_ptr<Backend>(new GpuBackend()); }
std::unique_ptr<Backend> make_emu_backend() { return std::unique_ptr<Backend>(new EmuBackend()); }

}  // namespace gk
