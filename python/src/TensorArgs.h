// How tensors cross from Python into the runtime: as plain tuples (data_ptr, dtype, shape, device) built
// by dgps/_tensors.py from any framework's tensor (torch, CuPy, JAX via __cuda_array_interface__ or
// DLPack). The extension never includes a framework header, so one build serves every torch version.
//
//   view tuple: (data_ptr: int, dtype: "bf16" | "f16" | "f32" | "f64" | "i32" | "i64",
//                shape: sequence of int, device: int)     or None for "not given"
// Contiguity is the Python side's job (it calls .contiguous()); views built here are row-major.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "dgps/runtime/TensorView.h"

namespace dgps::python {

/// Converts one view tuple (or None) to a TensorView. Throws RuntimeError{InvalidArgument} naming
/// `call` and `name` when the tuple is malformed (wrong arity, unknown dtype, negative dim).
TensorView toView(const pybind11::handle& obj, const char* call, const char* name);

/// The forward tensors in the order of dgps/_tensors.py FORWARD_SLOTS (the ABI order of abi.h):
/// q k v g beta precond_g precond_beta precond_center initial_state initial_precond_state cu_seqlens
/// o final_state final_precond_state workspace.
ForwardTensors toForwardTensors(const pybind11::sequence& views);

/// The decode tensors in the order of DECODE_SLOTS: q k v g beta precond_g precond_beta precond_center
/// state precond_state o.
DecodeTensors toDecodeTensors(const pybind11::sequence& views);

/// Parses "bf16", "f16", "f32", "f64", "i32", "i64"; throws RuntimeError{InvalidArgument} otherwise.
ScalarType parseScalarType(const std::string& name, const char* call, const char* tensor);

}  // namespace dgps::python
