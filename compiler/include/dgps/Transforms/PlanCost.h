// Cost estimate of a kernel plan, per token and value head (math.md §4.4 FLOP counting, §4.5 byte
// counting), for the fused pipeline as partitioned: every kernel's device-memory reads (inputs it
// loads, buffers of earlier kernels) and writes (its buffers, outputs), and every op's FLOPs
// including recomputation in several kernels.
//
// Conventions: bf16/f16 = 2 bytes, f32 = 4; a [.., T, ..] tensor counts per token, a [.., NT, ..]
// tensor 1/C per token, per-sequence tensors (states, [N, ..]) and per-head parameters ([H]) are
// amortised to 0; key-head tensors ([.., H, ..]) count 1/gva_ratio per value head. FLOPs count
// multiply and add separately (2 m n k per GEMM) plus elementwise work (l2norm 3K, squash ~10K).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dgps {

/// Sizes the estimate is evaluated at.
struct CostPoint {
  int64_t K = 128, V = 128, C = 64, gvaRatio = 1;
};

struct KernelCost {
  std::string role;
  double bytes = 0;  ///< device-memory bytes per token-head
  double flops = 0;  ///< FLOPs per token-head
};

struct PlanCost {
  CostPoint at;
  std::vector<KernelCost> kernels;
  double bytes() const;
  double flops() const;
};

/// Device-memory bytes per token-head of one value of this type (0 for per-sequence tensors).
double bytesPerTokenHead(chunk::ChunkTensorType t, const CostPoint& at);

/// FLOPs per token-head of one op (0 for load, store, splat).
double flopsPerTokenHead(mlir::Operation* op, const CostPoint& at);

/// The evaluation point of a function: K = V = 128 where the spec supports it (else its largest
/// dims), its default chunk size and its GVA ratio (function attributes set by --dgps-lower-to-chunk).
CostPoint costPointOf(mlir::func::FuncOp fn);

/// The estimate of a partitioned function (one entry per chunk.kernel, in order).
PlanCost estimatePlan(mlir::func::FuncOp fn, const CostPoint& at);

}  // namespace dgps
