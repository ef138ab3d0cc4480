// Argument checking for forward and decode, done on the host before anything is launched:
// every tensor's presence, shape, dtype, contiguity, alignment and device is checked
// against the spec, and the first problem is thrown as ONE RuntimeError{InvalidArgument} naming the
// tensor, what was expected and what came, e.g.
//   forward: tensor 'g': expected shape [B,T,HV,K] = [4, 2048, 4, 128] (decay diagonal: one natural-log
//   decay per key channel), got [4, 2048, 4]
// Validation reads only the views, never device memory; cu_seqlens values are checked separately
// (Runtime's LaunchOptions::check_cu_seqlens) because that needs a device read.
#pragma once

#include <cstdint>

#include "dgps/dsl/Spec.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/TensorView.h"

namespace dgps {

/// The sizes of a validated forward call.
struct ForwardProblem {
  std::int64_t batch = 0;      ///< B (1 with cu_seqlens)
  std::int64_t seq_len = 0;    ///< T (total packed tokens with cu_seqlens)
  /// Rows of k, v and beta per token: the spec's solve.steps n_h (docs/math.md §3.7; 1 for every single-step
  /// spec). The kernels' row axis is then the steps: rows() = T·n_h; q, g, o keep T rows, cu_seqlens counts
  /// tokens.
  std::int64_t row_steps = 1;
  std::int64_t rows() const { return seq_len * row_steps; }
  std::int64_t num_seqs = 0;   ///< N = B, or len(cu_seqlens) - 1
  std::int64_t heads_qk = 0;   ///< H
  std::int64_t heads_v = 0;    ///< HV
  std::int64_t key_dim = 0;    ///< K
  std::int64_t value_dim = 0;  ///< V
  ScalarType input_dtype = ScalarType::BF16;
  bool varlen = false;
  bool has_initial_state = false;
  bool has_final_state = false;
  bool has_initial_precond_state = false;
  bool has_final_precond_state = false;
  int device = 0;
  float scale = 0;             ///< query scale: spec.scale, or K^{-1/2} (docs/math.md §1)
};

struct DecodeProblem {
  std::int64_t batch = 0;
  std::int64_t heads_qk = 0;
  std::int64_t heads_v = 0;
  std::int64_t key_dim = 0;
  std::int64_t value_dim = 0;
  ScalarType input_dtype = ScalarType::BF16;
  bool time_dim = true;  ///< q was [B,1,H,K] (true) or [B,H,K] (false)
  int device = 0;
  float scale = 0;
};

/// Checks a forward call against `spec` (the package's spec). Throws RuntimeError{InvalidArgument}.
ForwardProblem validateForward(const Spec& spec, const ForwardTensors& tensors);
ForwardProblem validateForward(const Package& package, const ForwardTensors& tensors);

/// Checks a decode call against `spec`. Throws RuntimeError{InvalidArgument}.
DecodeProblem validateDecode(const Spec& spec, const DecodeTensors& tensors);
DecodeProblem validateDecode(const Package& package, const DecodeTensors& tensors);

/// The checks of validateForward / validateDecode that read pointer values rather than the views' metadata:
/// every pointer's alignment (16 bytes; cu_seqlens 8, workspace 256) and, for the forward, o not aliasing q,
/// k or v. True when they hold. A call whose views have the metadata of an earlier call that validated, and
/// whose pointers pass these, would validate too (the runtime's warm-call memo relies on it; CallMemo.h).
bool forwardPointerRulesHold(const ForwardTensors& tensors);
bool decodePointerRulesHold(const DecodeTensors& tensors);

/// Which optional-by-spec inputs a spec reads (the same rules as referenceInputSlots in Reference.h).
bool specTakesPrecondGate(const Spec& spec);    ///< precond_g
bool specTakesPrecondGain(const Spec& spec);    ///< precond_beta
bool specTakesPrecondCenter(const Spec& spec);  ///< precond_center

}  // namespace dgps
