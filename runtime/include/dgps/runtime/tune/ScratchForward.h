// Scratch tensors for autotuning trials: the tuner never touches a caller's tensors (issue 5), it runs
// every candidate on buffers of its own, filled with realistic random inputs (dsl InputGen.h), with
// outputs poisoned (NaN) before each run so an element a kernel fails to write is caught.
//
// Two sizes are used per tuning run:
//   * the *slice*: the tuned problem cut to at most kSliceBatch sequences of at most kSliceTokens tokens
//     (same H, HV, K, V, dtype). Candidates are checked on it against the float64 reference
//     (runReference), which is too slow for the full shape. kSliceTokens = 250 is deliberately not a
//     multiple of any chunk length (16..128), so the partial last chunk is always exercised (docs/math.md §4.2).
//   * the *full* shape: timing runs (and the isolated fault screen) use the real size. Its inputs are the
//     slice's inputs tiled along B and T (full[b, t] = slice[b % Bs, t % Ts]), which is cheap for large
//     problems and keeps every value inside the spec's contracts (gates <= 0, gains in range).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "dgps/dsl/Reference.h"
#include "dgps/runtime/DeviceTensor.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/TensorView.h"

namespace dgps {
namespace tune {

constexpr std::int64_t kSliceBatch = 2;
constexpr std::int64_t kSliceTokens = 250;

/// The validation slice of `full`: min(B, kSliceBatch) sequences of min(T, kSliceTokens) tokens, same
/// heads and dims. Dense only (cu_seqlens is dropped).
ReferenceProblem sliceShape(const ReferenceProblem& full);

/// Tiles slice inputs (Reference.h names, per-token tensors [Bs, Ts, ...]) to `batch` x `tokens`:
/// per-token tensors (q, k, v, g, beta, precond_g, precond_beta) as full[b, t] = in[b % Bs, t % Ts];
/// per-sequence states (initial_state, initial_precond_state) as full[n] = in[n % Bs]; anything else
/// (precond_center) is copied. A per-token tensor with n rows per token of q (k, v and beta with n Householder
/// steps per token) gets tokens·n rows, tiled a slice at a time. Throws DataError for cu_seqlens (varlen slices are
/// not tiled) and for a per-token tensor whose rows are not a multiple of q's.
ReferenceInputs tileInputs(const ReferenceInputs& slice, std::int64_t batch, std::int64_t tokens);

/// Device copies of one forward call's inputs and the outputs the package's spec produces (o always;
/// final_state / final_precond_state when the spec has them), on `device`.
class ScratchForward {
 public:
  /// Uploads `inputs` and allocates outputs. Throws RuntimeError (CUDA) or DataError (bad inputs).
  ScratchForward(const Package& package, const ReferenceInputs& inputs, int device);

  /// The call's tensor set (views of the buffers above; no workspace).
  ForwardTensors tensors() const;
  /// Fills every output with NaN (synchronous).
  void poisonOutputs();
  /// Downloads every output ("o", "final_state", "final_precond_state" as present). Synchronous.
  TensorMap downloadOutputs() const;
  /// Number of non-finite elements in the outputs (downloads them).
  std::int64_t nonFiniteOutputs(std::string* first_bad_output = nullptr) const;

 private:
  std::map<std::string, DeviceTensor> inputs_;
  std::map<std::string, DeviceTensor> outputs_;
};

/// max over outputs of max|got - ref| / max|ref| (ref an output of runReference). NaN when an output is
/// missing, misshapen or holds a non-finite value, so a poisoned element left unwritten is always an
/// error. `worst` names the output with the largest error (or the first bad one).
double maxRelativeError(const TensorMap& got, const ReferenceOutputs& ref, std::string* worst = nullptr);

}  // namespace tune
}  // namespace dgps
