// Error measures between two tensors of the same shape (any dtypes: f64 against bf16 is the usual case), as
// `dgps-spec compare` prints them and the GPU tests use them. `ref` is the trusted side (e.g. the float64
// reference), `got` the one under test.
#pragma once

#include <cstdint>
#include <string>

#include "dgps/dsl/Tensor.h"

namespace dgps {

struct TensorErrors {
  double max_abs = 0;   ///< max_i |got_i − ref_i| over elements where both are finite
  double max_rel = 0;   ///< max_abs / max_i |ref_i| (0 when both are all zero, inf when only ref is)
  double rel_l2 = 0;    ///< ‖got − ref‖₂ / ‖ref‖₂ over finite pairs (same convention for a zero ref)
  std::int64_t nonfinite_got = 0;  ///< NaN / ±inf elements of got
  std::int64_t nonfinite_ref = 0;  ///< NaN / ±inf elements of ref
};

/// Element-wise comparison in double precision. Throws DataError when the shapes differ (naming both).
TensorErrors compareTensors(const Tensor& got, const Tensor& ref);

/// Pass/fail limits; a negative limit is not checked. Non-finite values always fail.
struct CompareTolerances {
  double rel_l2 = 1.5e-2;  ///< the GPU suite's tolerance for bf16/fp16 outputs against float64
  double max_abs = -1;
  double max_rel = -1;
};

/// "" when `e` is within `tol`, else why not (e.g. "rel_l2 3.1e-02 > 1.5e-02").
std::string toleranceFailure(const TensorErrors& e, const CompareTolerances& tol);

}  // namespace dgps
