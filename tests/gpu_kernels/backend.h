// Where the harness runs kernels: on a GPU through the CUDA driver API (libcuda loaded at run time, CUBINs
// from NVRTC or nvcc), or on the CPU emulator (kernel variants built as shared objects). Same calls for both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gk {

struct LaunchDims {
  unsigned long long grid = 1;
  unsigned block = 32;
  size_t smem = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual bool ok() const = 0;
  virtual std::string error() const = 0;
  /// Device memory.
  virtual uint64_t alloc(size_t bytes) = 0;
  virtual void free(uint64_t p) = 0;
  virtual void upload(uint64_t dst, const void* src, size_t bytes) = 0;
  virtual void download(void* dst, uint64_t src, size_t bytes) = 0;
  virtual void fill(uint64_t dst, unsigned char byte, size_t bytes) = 0;
  /// Loads a kernel variant; `path` is a .cubin (gpu) or a .so (emu). Returns a handle or -1.
  virtual int load(const std::string& path) = 0;
  /// Kernel entry of a loaded variant, or nullptr.
  virtual void* function(int module, const std::string& name) = 0;
  /// Launches with the argument block `args` (ForwardArgs / DecodeArgs); false on error (see error()).
  virtual bool launch(void* fn, const LaunchDims& d, void* args, size_t args_size, bool is_decode) = 0;
  virtual bool sync() = 0;
  /// Timing (gpu only): record an event into slot i; elapsed ms between slots.
  virtual void record(int slot) = 0;
  virtual float elapsed(int a, int b) = 0;
  virtual std::string device() const = 0;
};

std::unique_ptr<Backend> make_gpu_backend();
std::unique_ptr<Backend> make_emu_backend();

}  // namespace gk
