// Realistic random inputs for any spec (names, shapes and dtypes of Reference.h / abi.h), for the demo,
// the tests of every stage and the autotuner's correctness check.
//
// Distributions (chosen to look like trained layers, not like zeros; docs/math.md §3.6):
//   q, k, v               N(0, 1), stored in `activation_dtype`
//   g, precond_g          −softplus(N(−2, 1)): log-decays in about (−1.5, 0), typical decay ≈ 0.88
//   beta                  lo + (hi − lo)·sigmoid(N(0, 1)) for a finite gain range, softplus(N(0, 1)) + lo
//                         when hi is infinite (Mamba-2's Δ); kept 1e-6·(hi − lo) inside the range
//   precond_beta          sigmoid(N(0, 1))
//   precond_center        center_init + 0.1·N(0, 1)
//   initial_state         0.1·N(0, 1)
//   initial_precond_state |N(0, 1)|·0.5 for the squash accumulator (A >= 0);
//                         init·(1 + 0.1·N(0, 1)) for hypergrad d, clamped like the update
//   cu_seqlens            as given in the shape
// Float tensors other than q, k, v are stored in `float_dtype` (f32, the ABI's, unless asked otherwise).
#pragma once

#include <cstdint>

#include "dgps/dsl/Reference.h"
#include "dgps/dsl/Tensor.h"

namespace dgps {

struct InputGenOptions {
  bool initial_state = true;          ///< include initial_state when the spec accepts it.
  bool initial_precond_state = true;  ///< include initial_precond_state when the spec accepts it.
  ScalarType float_dtype = ScalarType::F32;  ///< f32 (the ABI's) or f64; anything else is a DataError.
};

/// Generates every input `spec` accepts at `shape` (optional states per `options`). Deterministic for a
/// given seed on a given standard library. Throws DataError if the shape contradicts the spec
/// (checkProblemShape) or a dtype is unusable (activation_dtype must be floating, float_dtype f32/f64).
ReferenceInputs generateInputs(const Spec& spec, const ReferenceProblem& shape, std::uint64_t seed,
                               ScalarType activation_dtype, const InputGenOptions& options = {});

}  // namespace dgps
