// Helpers of the GPU suite: run a package's forward / decode on host tensors (upload, NaN-poison the
// outputs, launch, download) and compare with the float64 reference (dsl's runReference).
#pragma once

#include <string>

#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Reference.h"
#include "dgps/runtime/Runtime.h"

namespace dgps {
namespace gputest {

/// Skips the current test (GTEST_SKIP with the driver's reason) when there is no usable GPU.
#define DGPS_REQUIRE_GPU()                                                    \
  do {                                                                        \
    std::string why_;                                                         \
    if (!::dgps::cudaAvailable(&why_)) GTEST_SKIP() << "no GPU: " << why_;    \
  } while (0)

/// The package folder this test process checks ($DGPS_GPU_PACKAGE), or "".
std::string packageUnderTest();

/// Relative Frobenius error ‖got − ref‖ / ‖ref‖ and the max-abs error relative to max |ref|.
struct ErrorStats {
  double rel = 0;
  double maxrel = 0;
  bool finite = true;  ///< false if got holds any NaN/inf (e.g. a poisoned element never written)
  std::string str() const;
};
ErrorStats compare(const Tensor& got, const Tensor& ref);

/// Outputs of one GPU run, downloaded to the host.
struct GpuOutputs {
  Tensor o;
  bool has_final_state = false;
  Tensor final_state;
  bool has_final_precond_state = false;
  Tensor final_precond_state;
};

/// Forward on the GPU with `inputs` (names of Reference.h); outputs the spec produces are allocated,
/// poisoned with NaN, and downloaded after a stream sync.
GpuOutputs gpuForward(Runtime& rt, const Package& pkg, const ReferenceInputs& inputs, void* stream = nullptr,
                      const LaunchOptions* options = nullptr, bool pass_workspace = false);

/// One decode step. `inputs` holds q,k,v,... as [B,1,H*,D] (reference names) plus optional
/// initial_state [B,HV,K,V] / initial_precond_state [B,H,K] that seed the in-place states (zeros, or
/// the hypergrad init value, when absent). final_state / final_precond_state are the states after the step.
GpuOutputs gpuDecode(Runtime& rt, const Package& pkg, const ReferenceInputs& inputs, void* stream = nullptr);

/// Tokens [t0, t1) of every per-token input (batch-major, B must be 1 for varlen-free slicing of T).
/// With `steps` Householder steps per token (solve.steps) k, v and beta carry `steps` rows per token: their rows
/// [t0·steps, t1·steps) are taken.
ReferenceInputs sliceTokens(const ReferenceInputs& in, std::int64_t t0, std::int64_t t1, std::int64_t steps = 1);

/// A copy of the package in `dir` whose spec has gva_ratio `ratio` (spec hash and manifest updated): the
/// kernels read HV/H at run time, so GVA needs no new source.
std::string writeGvaVariant(const Package& pkg, int ratio, const std::string& dir);

/// Fresh, unused temporary folder (not removed; under $TMPDIR).
std::string tempDir();

}  // namespace gputest
}  // namespace dgps
