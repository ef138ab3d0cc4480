// dgps._dgps.reference: the float64 reference recurrence (dsl/Reference.h) of a package's spec, on host
// bytes, so the Python tests compare GPU results against the same oracle the C++ tests use.
//
//   inputs:  {name: (dtype, shape, bytes)}   dtype "bf16" | "f16" | "f32" | "f64" | "i64"; row-major
//   returns: {name: (shape, bytes)}          "o", "final_state", "final_precond_state" as the spec makes
//                                            them, all float64, row-major
// Errors: dgps.InvalidArgument with the reference's message (DataError: a missing or misshapen tensor,
// a value that breaks the spec's contract such as g > 0).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dgps/runtime/Package.h"

namespace dgps::python {

pybind11::dict runReferenceOnBytes(const Package& package, const pybind11::dict& inputs);

/// Realistic random inputs for the package's spec (dsl/InputGen.h: gates inside their contracts, states
/// drawn), as {name: (dtype, shape, bytes)}; activations in `dtype`, the rest f32. `cu_seqlens` empty
/// means dense (N = batch).
pybind11::dict generateInputsBytes(const Package& package, std::int64_t batch, std::int64_t seq_len,
                                   std::int64_t heads_qk, std::int64_t heads_v, std::int64_t key_dim,
                                   std::int64_t value_dim, std::uint64_t seed, const std::string& dtype,
                                   const std::vector<std::int64_t>& cu_seqlens, bool initial_state);

}  // namespace dgps::python
