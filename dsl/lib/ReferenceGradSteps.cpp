// Reference gradients of several Householder steps per token (solve.steps = n_h > 1, Gated DeltaProduct,
// docs/math.md §3.7) through the single-step backward run on the step sequence (docs/backward.md):
// n_h steps of token t are the single-step recurrence over rows t·n_h + j, with the log-decay g_t on row
// t·n_h (0, a decay by exactly 1, on the others) and the query q_t on row t·n_h + n_h − 1 (0, which reads
// nothing, on the others). k, v, beta already carry those rows; q, g and o are spread to them, and the
// gradients of q and g are gathered back from the rows that use them.
#include <cstddef>

#include "ReferenceGradDetail.h"
#include "dgps/dsl/ReferenceGrad.h"

namespace dgps::refgrad {
namespace {

/// Elements per row of a [B, rows, ...] tensor.
std::int64_t rowSize(const std::vector<std::int64_t>& shape) {
  std::int64_t inner = 1;
  for (std::size_t d = 2; d < shape.size(); ++d) inner *= shape[d];
  return inner;
}

/// [B, T, ...] -> [B, T·n, ...] in x's dtype (q, k, v must share one; copies and zeros are exact in it):
/// row t placed at row t·n + j, zeros elsewhere.
Tensor spreadRows(const Tensor& x, std::int64_t n, std::int64_t j) {
  std::vector<std::int64_t> shape = x.shape();
  const std::int64_t B = shape[0], T = shape[1], inner = rowSize(shape);
  shape[1] = T * n;
  const std::vector<double> in = x.toDoubles();
  std::vector<double> out(static_cast<std::size_t>(B * T * n * inner), 0.0);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t i = 0; i < inner; ++i) {
        out[static_cast<std::size_t>((b * T * n + t * n + j) * inner + i)] =
            in[static_cast<std::size_t>((b * T + t) * inner + i)];
      }
  return Tensor::fromDoubles(x.dtype(), shape, out);
}

/// [B, T·n, ...] -> [B, T, ...] (f64): rows t·n + j.
Tensor gatherRows(const Tensor& x, std::int64_t n, std::int64_t j) {
  std::vector<std::int64_t> shape = x.shape();
  const std::int64_t B = shape[0], T = shape[1] / n, inner = rowSize(shape);
  shape[1] = T;
  const std::vector<double> in = x.toDoubles();
  std::vector<double> out(static_cast<std::size_t>(B * T * inner));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t i = 0; i < inner; ++i) {
        out[static_cast<std::size_t>((b * T + t) * inner + i)] =
            in[static_cast<std::size_t>((b * T * n + t * n + j) * inner + i)];
      }
  return Tensor::fromDoubles(ScalarType::F64, shape, out);
}

/// cu_seqlens in step rows: each boundary times n.
Tensor scaledBoundaries(const Tensor& cu, std::int64_t n) {
  Tensor out(cu.dtype(), cu.shape());
  for (std::int64_t i = 0; i < cu.numel(); ++i) out.setInt(i, cu.getInt(i) * n);
  return out;
}

}  // namespace

TensorMap stepSequenceBackward(const Spec& spec, const ReferenceInputs& inputs, const TensorMap& cotangents) {
  const std::int64_t n = householderSteps(spec);
  Spec single = spec;
  single.solve.steps = 1;

  ReferenceInputs in = inputs;
  in["q"] = spreadRows(inputs.at("q"), n, n - 1);
  if (inputs.count("g")) in["g"] = spreadRows(inputs.at("g"), n, 0);
  if (inputs.count("cu_seqlens")) in["cu_seqlens"] = scaledBoundaries(inputs.at("cu_seqlens"), n);
  TensorMap ct = cotangents;
  ct["do"] = spreadRows(cotangents.at("do"), n, n - 1);

  TensorMap grads = runReferenceBackward(single, in, ct);
  grads["dq"] = gatherRows(grads.at("dq"), n, n - 1);
  if (grads.count("dg")) grads["dg"] = gatherRows(grads.at("dg"), n, 0);
  return grads;
}

}  // namespace dgps::refgrad
