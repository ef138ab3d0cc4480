// The real TrialBackend (tuning/TrialBackend.h) over the DGPS runtime: what the autotuner driver
// (tuning/Autotuner.h) calls to compile, check and time one tile configuration of a package's chunked
// forward on a GPU.
//
//   compile  Runtime::prepare (NVRTC + module load), called from the driver's compile threads; NVRTC
//            and the runtime are thread-safe. Registers / local memory come from the loaded kernels
//            (CU_FUNC_ATTRIBUTE_NUM_REGS / LOCAL_SIZE_BYTES) and ptxas' spill counts, for the spill filter.
//            A compile cannot be interrupted; the driver marks one that ends after its deadline Timeout.
//   screen   isolated (default): one dgps-tune-trial process per candidate (TrialProcess.h) runs the
//            slice with poisoned outputs and then the full shape; the parent compares the slice outputs
//            with the float64 reference (runReference) it computed once. A fault kills only the child.
//            In-process (isolate = false, opt-in): runOnce + validate in this process; a fault then
//            leaves the context dead, contextHealthy() says so and the driver stops.
//   time     in-process on full-shape scratch tensors (the caller's tensors are never touched), on a
//            stream of its own: `warmup` untimed launches, then per repetition an L2 flush (a memset of
//            a buffer 2x the device's L2, read with CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE) followed by the
//            launch between two CUDA events; the driver summarises median / p20 / p80. Only candidates
//            that passed the isolated screen at the same full shape get here.
//
// Inputs: realistic random draws (dsl generateInputs) on the validation slice (ScratchForward.h), seeded
// per tuning run; the full shape's inputs are the slice's, tiled.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "dgps/dsl/Reference.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/Runtime.h"
#include "dgps/runtime/tuning/TrialBackend.h"

namespace dgps {
namespace tune {

struct TrialBackendOptions {
  int device = 0;
  ScalarType dtype = ScalarType::BF16;  ///< q/k/v/o dtype: bf16 or f16
  ReferenceProblem full;                    ///< the tuned problem (dense: cu_seqlens must be empty)
  std::uint64_t seed = 1;               ///< input draw
  /// The backend's own verdict: max over outputs of max|got - ref| / max|ref| on the slice must not
  /// exceed this (bf16: 2e-2, f16: 1e-2 by defaultTolerance()).
  double tolerance = 2e-2;
  bool isolate = true;                  ///< screen in a dgps-tune-trial child process
  std::string trial_helper;             ///< path of dgps-tune-trial; required when isolate
  std::chrono::milliseconds trial_timeout{180000};  ///< per child (includes its context creation)
  std::string cache_dir;                ///< binary cache the child should read ("" = default)
  std::string work_dir;                 ///< scratch files; "" = a fresh folder under $TMPDIR, removed at the end
  bool full_shape_screen = true;        ///< the child also runs the full shape once (non-finite check)
};

/// 2e-2 for bf16, 1e-2 for f16 (relative to max|ref|; float64 reference, fp32 state, 8-/11-bit mantissas).
double defaultTolerance(ScalarType dtype);

class RuntimeTrialBackend : public tuning::TrialBackend {
 public:
  /// `runtime` and `package` must outlive the backend. Throws RuntimeError{InvalidArgument} when the
  /// options are unusable (varlen shape, isolate without a helper, dtype not in the package).
  RuntimeTrialBackend(Runtime& runtime, const Package& package, TrialBackendOptions options);
  ~RuntimeTrialBackend() override;

  tuning::CompileResult compile(const tuning::TileConfig& config, const tuning::CompileControl& control) override;
  tuning::RunResult runOnce(const tuning::TileConfig& config) override;
  tuning::Validation validate(const tuning::TileConfig& config) override;
  tuning::TimingResult time(const tuning::TileConfig& config, int warmup, int reps) override;
  tuning::ScreenResult screen(const tuning::TileConfig& config) override;
  bool contextHealthy() override;

  /// The validation slice's shape and float64 outputs (computed on first use).
  const ReferenceProblem& sliceShape() const;
  const ReferenceOutputs& reference();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune
}  // namespace dgps
