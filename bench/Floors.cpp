#include "Floors.h"

#include <algorithm>

namespace dgps {
namespace bench {
namespace {

double numel(const std::vector<std::int64_t>& shape) {
  double n = 1;
  for (std::int64_t d : shape) n *= double(d);
  return n;
}

// Bytes of the required per-call inputs (q, k, v at bf16, gates/gains fp32), leaving out the optional
// states and cu_seqlens.
double requiredInputBytes(const Spec& spec, const ReferenceProblem& p) {
  double bytes = 0;
  for (const TensorSlot& slot : referenceInputSlots(spec, p)) {
    if (!slot.required) continue;
    bytes += numel(slot.shape) * (slot.type == SlotType::Activation ? 2.0 : 4.0);
  }
  return bytes;
}

}  // namespace

double forwardBytesFloor(const Spec& spec, const BenchShape& shape) {
  const ReferenceProblem p = toProblemShape(spec, shape);
  const double o = double(p.batch) * double(p.seq_len) * double(p.heads_v) * double(p.value_dim) * 2.0;
  return requiredInputBytes(spec, p) + o;
}

double decodeBytesFloor(const Spec& spec, const BenchShape& shape) {
  BenchShape one = shape;
  one.seq_len = 1;
  const ReferenceProblem p = toProblemShape(spec, one);
  const double B = double(p.batch), HV = double(p.heads_v), H = double(p.heads_qk);
  const double K = double(p.key_dim), V = double(p.value_dim);
  double bytes = requiredInputBytes(spec, p);
  bytes += 2.0 * B * HV * K * V * 4.0;              // state read + write, fp32
  if (hasPrecond(spec)) bytes += 2.0 * B * H * K * 4.0;  // preconditioner state read + write, fp32
  bytes += B * HV * V * 2.0;                        // o
  return bytes;
}

double mathForwardFlopsPerTokenHead(const Spec& spec, std::int64_t K_, std::int64_t V_, int chunk) {
  const double C = double(chunk > 0 ? chunk : 64), K = double(K_), V = double(V_);
  double per_chunk = 0;
  if (spec.solve.kind == SolveKind::Delta) {
    per_chunk = 6 * C * C * K + 4 * C * C * V + 6 * C * K * V + C * C * C / 2;
    if (hasAsymmetricKeys(spec)) per_chunk += 2 * C * C * K;  // ATK's intra-chunk product (docs/math.md §4.4)
  } else {
    per_chunk = 2 * C * C * K + 2 * C * C * V + 4 * C * K * V;
  }
  return per_chunk / C;
}

double decodeFlopsPerHead(const Spec& spec, std::int64_t K, std::int64_t V) {
  // the delta rule: Sᵀk and the rank-1 update per Householder step, and the read-out Sᵀq
  const double products = spec.solve.kind == SolveKind::Delta ? 2.0 * householderSteps(spec) + 1.0 : 2.0;
  return products * 2.0 * double(K) * double(V);
}

Floors computeFloors(const Package& package, const BenchShape& shape, const TileConfig& config) {
  const Spec& spec = package.spec();
  const double HV = double(valueHeads(spec, shape));
  Floors f;
  if (shape.kind == Kind::Decode) {
    f.bytes = decodeBytesFloor(spec, shape);
    f.flops = double(shape.batch) * HV * decodeFlopsPerHead(spec, shape.key_dim, shape.value_dim);
    f.flops_source = "decode: 2KV per matrix-vector product";
    return f;
  }
  f.bytes = forwardBytesFloor(spec, shape);
  // per step: the plan and the chunked maths count each of a token's n_h Householder steps (docs/math.md §3.7)
  const double token_heads = double(shape.batch) * double(shape.seq_len) * HV * double(householderSteps(spec));
  // The compiler costs its plan at the largest K and V the package supports (compiler PlanCost.cpp
  // costPointOf), so the manifest's number applies only when those are the shape's K and V.
  const Manifest& m = package.manifest();
  const bool plan_matches = !m.key_dims.empty() && !m.value_dims.empty() &&
                            *std::max_element(m.key_dims.begin(), m.key_dims.end()) == shape.key_dim &&
                            *std::max_element(m.value_dims.begin(), m.value_dims.end()) == shape.value_dim;
  const double plan = m.flops_per_token_head;
  if (plan > 0 && plan_matches) {
    f.flops = plan * token_heads;
    f.flops_source = "manifest plan";
  } else {
    f.flops = mathForwardFlopsPerTokenHead(spec, shape.key_dim, shape.value_dim, config.chunk) * token_heads;
    f.flops_source = "math.md 4.4 (C=" + std::to_string(config.chunk) + ")";
  }
  return f;
}

}  // namespace bench
}  // namespace dgps
