// The reference semantics of a DGPS spec: ONE float64, token-by-token implementation of the recurrence
// any valid Spec describes. It is the oracle for the chunk-IR CPU executor and the GPU tests.
//
// Tensors (names and layouts of runtime/device/dgps/device/abi.h, FLA conventions):
//   q                     [B, T, H,  K]  any of spec.input_dtypes, or f32/f64; q, k, v share one dtype
//   k                     [B, T·n_h, H,  K]  n_h = spec.solve.steps (Householder steps per token, 1 for all
//   v                     [B, T·n_h, HV, V]  but Gated DeltaProduct); row t·n_h + j is step j of token t
//   g                     [B, T, HV]     decay: scalar   (natural-log decay, g <= 0)      f32 or f64
//                         [B, T, HV, K]  decay: diagonal (per key channel, g <= 0)
//   beta                  [B, T·n_h, HV] gain: scalar, spec.gain.lo <= beta <= spec.gain.hi
//   precond_g             [B, T, H]      ema_sq_squash with has_gate (accumulator log-decay), or
//                                        hypergrad_ogd with has_retention (log retention); <= 0
//   precond_beta          [B, T, H]      ema_sq_squash with has_gain (accumulator gain), >= 0
//   precond_center        [H]            ema_sq_squash: c_h, the log-space centre of the squash
//   initial_state         [N, HV, K, V]  optional (spec.initial_state); default 0
//   initial_precond_state [N, H, K]      optional (spec.initial_precond_state, diagonal precond only);
//                                        default A_0 = 0 (squash, must be >= 0) or d_0 = init (hypergrad)
//   cu_seqlens            [N + 1] i64    optional (spec.varlen): then B == 1, 0 = cu[0] <= ... <= cu[N] <= T;
//                                        cu[N] < T is a padded token buffer (rows t >= cu[N] are no sequence's);
//                                        it counts tokens, not Householder steps (token t owns step rows
//                                        t·n_h .. t·n_h + n_h − 1)
// Outputs, all f64:
//   o                     [B, T, HV, V]  rows t >= cu[N] (varlen padding) are 0
//   final_state           [N, HV, K, V]  when spec.final_state
//   final_precond_state   [N, H, K]      when spec.final_precond_state and the preconditioner is diagonal
// N = B without cu_seqlens, else len(cu_seqlens) − 1. Value head hv reads key head h = hv / (HV/H) (GVA);
// the preconditioner state and its inputs are per KEY head, shared by the HV/H value heads of a group.
//
// Per token t of a sequence, per key head h (docs/math.md §1, §3.3–3.5, §5.2):
//   q̂ = q · (Σq² + l2norm_eps)^{-1/2}, k̂ likewise, when qk_l2norm (FLA in-kernel form, docs/math.md §1);
//       otherwise q̂ = q, k̂ = k.  q̂ is then multiplied by scale (default K^{-1/2}).
//   preconditioner P_t ∈ R^K (1 when precond is none):
//     ema_sq_squash:  A_t = γ_t A_{t-1} + β^a_t k̂_t²   (γ = exp(precond_g) if has_gate else 1;
//                     β^a = precond_beta if has_gain else 1);  r = ln(A_t + eps) − c_h;
//                     s = r / (1 + |r|);  P_t = exp(−ln(x) s).   P_t uses A_t, inclusive of token t.
//     hypergrad_ogd:  u = k̂⊙k̂;  d ← ρ_t d + (eta β_t / ‖k̂‖²)(1 − β_t ⟨d, u⟩) u, then clamp if set
//                     (ρ = exp(precond_g) if has_retention else 1; β_t = beta of value head h, which
//                     requires HV == H; when ‖k̂‖² = 0 the step term is dropped: d ← ρ_t d).
//                     timing pre: P_t = d before this token's update; post: P_t = d after it.
//   side key (ATK):   write key k^w = P ⊙ k̂, read key k^r = k̂, query q̂.
//   side query (ATQ): k^w = k^r = k̂, read query P ⊙ q̂.
//   then for each value head hv of the group:
//     S ← D_t S                        (D = exp(g) I, Diag(exp(g)) or I)
//     delta:  e = β (v − Sᵀ k^r);  S ← S + k^w eᵀ         linear: S ← S + β k^w vᵀ   (β = 1 without gain)
//     o_t = Sᵀ (read query)
//   With n_h = solve.steps > 1 (Gated DeltaProduct, docs/math.md §3.7; delta solve, no preconditioner):
//     S ← D_t S once, then for j = 0..n_h−1 the delta step with k̂_{t,j}, v_{t,j}, β_{t,j} (row t·n_h + j),
//     and o_t = Sᵀ q̂_t after the last step.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "dgps/dsl/Spec.h"
#include "dgps/dsl/Tensor.h"

namespace dgps {

/// One problem as the host describes it: its sizes and, with varlen, the cu_seqlens values themselves
/// (empty means "no varlen", N = batch). The reference, the input generator, the tuner and the tests take it.
/// The device library's launch::ProblemShape (runtime/device/dgps/device/launch_rules.h) is a different
/// thing: the counts a kernel's geometry and workspace depend on (B, T, N, H, HV, K, V, varlen, f16), with no
/// sequence boundaries, in a header NVRTC compiles; the runtime derives it from a call's tensors.
struct ReferenceProblem {
  std::int64_t batch = 1;      ///< B
  std::int64_t seq_len = 0;    ///< T (total packed tokens with cu_seqlens)
  std::int64_t heads_qk = 0;   ///< H
  std::int64_t heads_v = 0;    ///< HV, a multiple of H
  std::int64_t key_dim = 0;    ///< K
  std::int64_t value_dim = 0;  ///< V
  std::vector<std::int64_t> cu_seqlens;

  std::int64_t numSeqs() const {
    return cu_seqlens.empty() ? batch : static_cast<std::int64_t>(cu_seqlens.size()) - 1;
  }
};

/// What element types a tensor slot accepts.
enum class SlotType {
  Activation,  ///< q, k, v: one of spec.input_dtypes, or f32/f64.
  Float,       ///< gates, gains, states: f32 (the ABI) or f64.
  Index,       ///< cu_seqlens: i64.
};

/// One named tensor a spec takes or produces at a given problem shape.
struct TensorSlot {
  std::string name;
  std::vector<std::int64_t> shape;
  std::string layout;   ///< symbolic shape, e.g. "[B,T,HV]".
  bool required = true;
  SlotType type = SlotType::Float;
  std::string meaning;  ///< why the spec takes it, for error messages.
};

/// The inputs `spec` accepts at `shape`, in ABI order. Throws DataError if the spec cannot be run by
/// the reference (see checkReferenceSpec) or the shape contradicts the spec.
std::vector<TensorSlot> referenceInputSlots(const Spec& spec, const ReferenceProblem& shape);
/// The outputs runReference produces (all f64).
std::vector<TensorSlot> referenceOutputSlots(const Spec& spec, const ReferenceProblem& shape);

/// Checks the spec fields the reference relies on and throws DataError naming the field: solve.steps in
/// 1..kMaxHouseholderSteps (more than 1 only with the delta solve and no preconditioner), gva_ratio >= 1,
/// heads_qk >= 0, squash x > 0 and eps > 0, l2norm_eps >= 0, scale finite, clamp_min <= clamp_max,
/// hypergrad_ogd with gva_ratio == 1 (d is per key head and needs one gain per key head).
void checkReferenceSpec(const Spec& spec);

/// Checks `shape` against the spec: H == heads_qk when fixed, HV == H * gva_ratio, K in key_dims,
/// V in value_dims, cu_seqlens only with spec.varlen and B == 1, starting at 0, non-decreasing, ending
/// at T. Throws DataError.
void checkProblemShape(const Spec& spec, const ReferenceProblem& shape);

using ReferenceInputs = TensorMap;

struct ReferenceOutputs {
  Tensor o;                    ///< [B, T, HV, V] f64
  bool has_final_state = false;
  Tensor final_state;          ///< [N, HV, K, V] f64 when has_final_state
  bool has_final_precond_state = false;
  Tensor final_precond_state;  ///< [N, H, K] f64 when has_final_precond_state
  /// {"o", "final_state", "final_precond_state"} as present.
  TensorMap toMap() const;
};

/// Reads the problem shape off q, v and cu_seqlens. Throws DataError if they are missing or misshapen.
ReferenceProblem inferProblemShape(const Spec& spec, const ReferenceInputs& inputs);

/// Most float64 values the reference writes (o plus the final states): 2^27, 1 GiB.
inline constexpr std::int64_t kMaxReferenceOutputElements = std::int64_t{1} << 27;

/// Bounds what the reference allocates for `shape`: at most kMaxReferenceOutputElements output values,
/// final states of every sequence included (cu_seqlens may describe empty sequences, each with a state).
/// Throws DataError naming the limit.
void checkReferenceSize(const Spec& spec, const ReferenceProblem& shape);

/// Full validation: the spec (checkReferenceSpec), the shape (checkProblemShape, checkReferenceSize), every tensor's presence,
/// shape and dtype against referenceInputSlots, no extra tensors, and the value contracts (finite values,
/// g <= 0 and precond_g <= 0 (docs/math.md §7.1), gain.lo <= beta <= gain.hi, precond_beta >= 0,
/// initial squash accumulator >= 0). Throws one DataError; a bad spec or shape stops at that error, otherwise
/// every tensor is checked and the DataError lists each mistake (one line per tensor: its name, what was
/// expected and what came). Returns the inferred shape.
ReferenceProblem validateReferenceInputs(const Spec& spec, const ReferenceInputs& inputs);

/// Runs the recurrence described above in float64. Throws DataError on invalid inputs.
ReferenceOutputs runReference(const Spec& spec, const ReferenceInputs& inputs);

// Command-line entry points (dgps-spec subcommands). They never throw: errors go to `err` and the
// return value is the process exit code (0 success, 1 bad spec / bad input / I/O failure).

/// Loads the spec, reads inputs from a safetensors file, runs the reference and writes the outputs
/// (f64) to `outputs_path`.
int runReferenceCommand(const std::string& spec_path, const std::string& inputs_path,
                        const std::string& outputs_path, std::ostream& out, std::ostream& err);
/// Generates inputs for a small default shape, runs the reference and prints a summary (shape, norms
/// of o and the final states, run time).
int runDemoCommand(const std::string& spec_path, std::ostream& out, std::ostream& err);

}  // namespace dgps
