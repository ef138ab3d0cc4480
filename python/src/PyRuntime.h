// The Python module's Runtime (dgps._dgps.Runtime): the C++ Runtime with forward configurations from the
// tuning database, and the calls Module.cpp and ContextParallelBinding.cpp bind on it.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "TensorArgs.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Runtime.h"
#include "dgps/runtime/tune/TuningResolver.h"

namespace dgps::python {

/// A Runtime whose forward configurations come from the tuning database (modes of TuningResolver.h).
class PyRuntime {
 public:
  PyRuntime(const std::string& cache_dir, bool check_pointers, const std::optional<std::string>& tune_mode) {
    tune::ResolverOptions ro;
    if (tune_mode) {
      auto mode = tune::parseTuneMode(*tune_mode);
      if (!mode) {
        throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                           "Runtime: tune_mode '" + *tune_mode + "' is not one of tune, recorded, default");
      }
      ro.mode = *mode;
    }
    resolver_ = std::make_shared<tune::TuningResolver>(ro);
    RuntimeOptions opts;
    opts.cache_dir = cache_dir;
    opts.check_pointers = check_pointers;
    opts.forward_config = tune::forwardConfigResolver(resolver_);
    runtime_ = std::make_unique<Runtime>(opts);
  }

  void forward(const Package& pkg, const pybind11::sequence& views, std::uintptr_t stream,
               const std::optional<std::string>& config) {
    ForwardTensors t = toForwardTensors(views);
    LaunchOptions lo = launchOptions(pkg, stream, config);
    pybind11::gil_scoped_release unlocked;  // the launch may JIT-compile for seconds on first use
    runtime_->forward(pkg, t, lo);
  }

  void decode(const Package& pkg, const pybind11::sequence& views, std::uintptr_t stream) {
    DecodeTensors t = toDecodeTensors(views);
    LaunchOptions lo;
    lo.stream = reinterpret_cast<void*>(stream);
    pybind11::gil_scoped_release unlocked;
    runtime_->decode(pkg, t, lo);
  }

  std::size_t forwardWorkspaceBytes(const Package& pkg, const pybind11::sequence& views,
                                    const std::optional<std::string>& config) {
    ForwardTensors t = toForwardTensors(views);
    const ForwardProblem problem = validateForward(pkg, t);
    const TileConfig c = config ? parseTileConfig(*config, pkg.manifest().default_config)
                                : runtime_->resolveForwardConfig(pkg, problem);
    return runtime_->forwardWorkspaceBytes(pkg, problem, c);
  }

  void validateForwardViews(const Package& pkg, const pybind11::sequence& views) {
    validateForward(pkg, toForwardTensors(views));
  }
  void validateDecodeViews(const Package& pkg, const pybind11::sequence& views) {
    validateDecode(pkg, toDecodeTensors(views));
  }

  /// The C++ runtime, for bindings that call it directly (ContextParallelBinding.cpp).
  Runtime& runtime() { return *runtime_; }

  /// LaunchOptions on the CUstream `stream` (an int) with the tile configuration `config` when given.
  static LaunchOptions launchOptions(const Package& pkg, std::uintptr_t stream,
                                     const std::optional<std::string>& config) {
    LaunchOptions lo;
    lo.stream = reinterpret_cast<void*>(stream);
    if (config) lo.config = parseTileConfig(*config, pkg.manifest().default_config);
    return lo;
  }

  std::string resolveConfig(const Package& pkg, const pybind11::sequence& views) {
    ForwardTensors t = toForwardTensors(views);
    return toString(runtime_->resolveForwardConfig(pkg, validateForward(pkg, t)));
  }

 private:
  std::shared_ptr<tune::TuningResolver> resolver_;
  std::unique_ptr<Runtime> runtime_;
};

}  // namespace dgps::python
