// Reference gradients: the adjoint (reverse mode) of the float64 token-by-token recurrence of
// Reference.h, for any spec the reference runs. It is the oracle for the derived chunkwise backward
// (compiler/, the executor) and, later, for the GPU backward kernels. The formulas are in docs/backward.md.
//
// The gradients are those of the scalar ℒ = ⟨do, o⟩ + ⟨dfinal_state, final_state⟩ +
// ⟨dfinal_precond_state, final_precond_state⟩.
//
// Cotangents (all f32 or f64, finite; shapes as the forward outputs of Reference.h):
//   do                    [B, T, HV, V]  required
//   dfinal_state          [N, HV, K, V]  optional, only when the spec has final_state (default 0)
//   dfinal_precond_state  [N, H, K]      optional, only when the spec has final_precond_state (default 0)
// Gradients, all f64, one per floating-point input that was given, named "d" + the input's name and shaped
// like it: dq, dk, dv, dg, dbeta, dprecond_g, dprecond_beta, dprecond_center, dinitial_state,
// dinitial_precond_state. cu_seqlens has none. Rows past cu_seqlens[N] (padding of a varlen token buffer)
// get zero gradients. Value heads sum into their key head's gradient (GVA). Where the forward is not
// differentiable (a clamp at its bound, ‖k̂‖² = 0 in the hypergradient step) the gradient is the one of
// the branch the forward took. Spec constants (squash x and eps, eta, clamp bounds, l2norm_eps, scale)
// get no gradient. With n_h = solve.steps > 1 (Gated DeltaProduct) dk, dv, dbeta have the T·n_h step rows
// of k, v, beta, and dq, dg the T token rows of q, g; they are the single-step adjoint over the step
// sequence (docs/backward.md, "Several Householder steps per token").
//
// Cost: about 3× runReference's time; memory O(T·K) per key head plus
// O(√L·K·V) per value head for a sequence of L tokens (memory states are rebuilt from checkpoints
// every ⌈√L⌉ tokens rather than all kept).
#pragma once

#include <iosfwd>
#include <string>

#include "dgps/dsl/Reference.h"

namespace dgps {

/// Runs the forward recurrence and its adjoint. Validates `inputs` as runReference does (a bad input is
/// the forward's DataError) and the cotangents by name, shape, dtype and finiteness: a missing `do`, an
/// unknown or misshapen cotangent, or one for a final state the spec does not produce is a DataError
/// naming it. Returns the gradients described above.
TensorMap runReferenceBackward(const Spec& spec, const ReferenceInputs& inputs, const TensorMap& cotangents);

/// dgps-spec subcommand: reads inputs and cotangents (one safetensors file each), writes the gradients
/// (f64) to `gradients_path`. Never throws; returns the exit code (0 success, 1 any error, reported on `err`).
int runGradientsCommand(const std::string& spec_path, const std::string& inputs_path,
                        const std::string& cotangents_path, const std::string& gradients_path, std::ostream& out,
                        std::ostream& err);

}  // namespace dgps
