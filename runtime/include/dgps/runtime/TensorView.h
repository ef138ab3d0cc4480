// Non-owning views of device tensors, as the caller (a framework, a host app) holds them, and the named
// tensor sets of the forward and decode calls. Layouts and names follow flash-linear-attention and
// runtime/device/dgps/device/abi.h; which tensors a package takes is given by its spec (Reference.h
// lists the same set for the float64 reference).
//
// Requirements checked before any launch (validateForward / validateDecode): the shape each spec
// needs, the dtype (q/k/v/o: one of the package's input dtypes, all equal; gates, gains and states:
// f32; cu_seqlens: i64), contiguity (the kernels index row-major without strides, so a strided view is
// rejected, not copied), 16-byte alignment (8 for cu_seqlens), a non-null pointer, and one device for all.
// Validation reads only these fields, never the memory behind `data`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dgps/dsl/Tensor.h"

namespace dgps {

struct TensorView {
  void* data = nullptr;                ///< device pointer (CUdeviceptr cast to void*).
  ScalarType dtype = ScalarType::F32;
  std::vector<std::int64_t> shape;     ///< empty shape and null data: "not given".
  std::vector<std::int64_t> strides;   ///< in elements; empty means contiguous row-major.
  int device = 0;                      ///< CUDA device ordinal that owns `data`.

  TensorView() = default;
  TensorView(void* data_, ScalarType dtype_, std::vector<std::int64_t> shape_, int device_ = 0,
             std::vector<std::int64_t> strides_ = {})
      : data(data_), dtype(dtype_), shape(std::move(shape_)), strides(std::move(strides_)), device(device_) {}

  /// True unless the view is default-constructed (no data and no shape): optional tensors that are not
  /// passed stay default.
  bool given() const { return data != nullptr || !shape.empty(); }
  std::int64_t numel() const;
  std::size_t nbytes() const { return std::size_t(numel()) * elementSize(dtype); }
  /// True when strides are empty or equal the row-major strides of shape (size-1 dims are free).
  bool isContiguous() const;
};

/// Tensors of one chunked forward call (FLA layout; see abi.h for each shape).
struct ForwardTensors {
  TensorView q, k, v;                        ///< [B,T,H,K], [B,T,H,K], [B,T,HV,V]
  TensorView g;                              ///< [B,T,HV] (decay scalar) or [B,T,HV,K] (diagonal), f32
  TensorView beta;                           ///< [B,T,HV] f32 (gain scalar)
  TensorView precond_g, precond_beta;        ///< [B,T,H] f32
  TensorView precond_center;                 ///< [H] f32 (ema_sq_squash)
  TensorView initial_state;                  ///< [N,HV,K,V] f32, optional
  TensorView initial_precond_state;          ///< [N,H,K] f32, optional
  TensorView cu_seqlens;                     ///< [N+1] i64, optional (then B == 1); cu[N] <= T
  TensorView o;                              ///< [B,T,HV,V], output, input dtype; rows >= cu[N] zeroed
  TensorView final_state;                    ///< [N,HV,K,V] f32, optional output
  TensorView final_precond_state;            ///< [N,H,K] f32, optional output
  TensorView workspace;                      ///< optional caller scratch: 1-D, any dtype, 256-byte aligned
};

/// Tensors of one single-token decode step. q,k,v,o may be [B,1,H*,D] or [B,H*,D]; the per-token inputs
/// (g, beta, precond_g, precond_beta) then carry the same optional time dim of 1. With n_h > 1 Householder steps
/// per token (solve.steps) k, v and beta are [B,n_h,...] (the token's steps) whatever q's rank.
struct DecodeTensors {
  TensorView q, k, v;
  TensorView g, beta, precond_g, precond_beta, precond_center;
  TensorView state;          ///< [B,HV,K,V] f32, read and updated in place (required)
  TensorView precond_state;  ///< [B,H,K] f32, read and updated in place (required with a preconditioner)
  TensorView o;
};

}  // namespace dgps
