// The one exception type the DGPS runtime throws. Every message names what was wrong, where, and what
// was expected; `code()` lets callers (tests, tools, the autotuner) react to a class of failure without
// parsing text, e.g. skip a GPU test when the driver is missing.
#pragma once

#include <stdexcept>
#include <string>

namespace dgps {

enum class RuntimeErrorCode {
  NoDriver,         ///< libcuda.so.1 could not be loaded or lacks a required entry point.
  NoDevice,         ///< the driver loaded but cuInit failed or there is no device with that ordinal.
  UnsupportedDevice,  ///< the GPU is not one the kernels support (compute capability 9.0 only; Runtime.h).
  InvalidArgument,  ///< a tensor, configuration or option failed validation (nothing was launched).
  Package,          ///< a generated package (manifest.yaml, spec.yaml, kernels.cu) is missing or corrupt.
  Jit,              ///< NVRTC rejected the source or an option; the message names the saved log.
  Cache,            ///< the binary cache directory cannot be created or written.
  Cuda,             ///< a CUDA driver call failed (module load, launch, memory); carries the CUresult name.
  Io,               ///< a file could not be read or written.
  Collective,       ///< the collective library (NCCL) is missing, lacks an entry point or is too old, or a
                    ///< collective call failed (Collective.h).
};

const char* toString(RuntimeErrorCode);

class RuntimeError : public std::runtime_error {
 public:
  RuntimeError(RuntimeErrorCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  RuntimeErrorCode code() const { return code_; }

 private:
  RuntimeErrorCode code_;
};

}  // namespace dgps
