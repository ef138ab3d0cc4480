// Cost estimate of a kernel plan, per token and value head (docs/math.md §4.4 FLOP counting, §4.5 byte
// counting). FLOPs: every op of the partitioned IR, including recomputation in several kernels.
// Bytes: what the shipped kernels move (deviceTraffic): its workspace buffers sized by the tile IR's
// workspace catalog (Dialect/Tile/IR/Workspace.h: tb, aqk, tok, pst, psum, pgam, pcoef, opq, opk, opw, pdec) at a
// representative shape (representativeShape), each written once and read by its consumer kernel as
// often as that kernel's grid loads it, plus the inputs each kernel loads and the outputs it stores.
// A global buffer of the IR that the workspace (tile.workspace's catalog) has no place for (e.g. the unfused per-token
// accumulator) is added from its IR type, written once and read once per reading kernel.
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
#include "dgps/dsl/LaunchContract.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dgps {

/// Sizes the estimate is evaluated at.
struct CostPoint {
  int64_t K = 128, V = 128, C = 64, gvaRatio = 1;
  /// Segment length in chunks of a segmented plan (ChunkSegmentOps.td): a [.., NS, ..] tensor counts
  /// 1/(C · segmentChunks) per token, the fold's 2K²V per segment likewise.
  int64_t segmentChunks = 1;
  /// Householder steps per token (chunk.householder_steps): a "token" of the estimate is then one step,
  /// a row of T, and a per-token tensor (dim TQ) counts 1/steps per step.
  int64_t steps = 1;
};

struct KernelCost {
  std::string role;
  double bytes = 0;  ///< device-memory bytes per token-head
  double flops = 0;  ///< FLOPs per token-head
};

/// One workspace region (Dialect/Tile/IR/Workspace.h), per token-head.
struct BufferTraffic {
  std::string name;    ///< the region's name: tb, aqk, tok, pst, ..., opw, pdec
  std::string writer;  ///< role that writes it
  std::string reader;  ///< roles that read it (comma-separated)
  double written = 0;  ///< bytes written per token-head
  double read = 0;     ///< bytes read per token-head (size times the reader grid's loads of it)
};

struct PlanCost {
  CostPoint at;
  std::vector<KernelCost> kernels;
  std::vector<BufferTraffic> buffers;  ///< the launch contract's workspace buffers
  std::vector<std::string> extraBuffers;  ///< IR global buffers outside the launch contract's workspace
  double bytes() const;
  double flops() const;
};

/// Per-role device-memory bytes (flops unset) and the workspace buffers behind them.
struct DeviceTraffic {
  std::vector<KernelCost> kernels;  ///< forwardRoles order
  std::vector<BufferTraffic> buffers;
  double bytes() const;
};

/// Which optional per-token preconditioner inputs the kernels load (precond_g, precond_beta).
struct PrecondInputs {
  bool gate = false, gain = false;
};

/// A preconditioner application (its result is P⊙k or P⊙q).
bool isPreconditionerApply(mlir::Operation* op);

/// The launch_rules feature set of a lowered (or partitioned) forward, read from its ops: decay from
/// gate_cumsum's gate, gain from a "beta" load, delta solve from solve_tril, the preconditioner and
/// its side/source from the apply ops.
launch::FeatureSet featuresOf(mlir::func::FuncOp fn);
PrecondInputs precondInputsOf(mlir::func::FuncOp fn);

/// The shape bytes are evaluated at: B = 8, T = 4096, HV = 16, H = HV / gva ratio, K and V of `at`.
launch::ProblemShape representativeShape(const CostPoint& at);

/// Device-memory traffic of the shipped kernels for features `f` (DeviceTraffic.cpp).
DeviceTraffic deviceTraffic(const launch::FeatureSet& f, const PrecondInputs& in, const launch::ProblemShape& s,
                            const launch::TileConfig& t);

/// Device-memory bytes per token-head of one value of this type (0 for per-sequence tensors).
double bytesPerTokenHead(chunk::ChunkTensorType t, const CostPoint& at);

/// FLOPs per token-head of one op (0 for load, store, splat).
double flopsPerTokenHead(mlir::Operation* op, const CostPoint& at);

/// The evaluation point of a function: K = V = 128 where the spec supports it (else its largest
/// dims), its default chunk size and its GVA ratio (function attributes set by --dgps-lower-to-chunk).
/// segmentChunks: chunk.segment_chunks when set, else the launch rule (SegmentScan.h) at the long-sequence
/// point B = 1, T = 32768, HV = 16, V / BV = 1 on 132 SMs (the shape segmenting is for).
CostPoint costPointOf(mlir::func::FuncOp fn);

/// The estimate of a partitioned function (one entry per chunk.kernel, in order). `writeKey` is the package's
/// write-key form (DeviceFeatures.h FeatureSet::write_key), a choice of the tile lowerings after partitioning:
/// --chunk-partition-kernels costs the plan with the key rebuilt (chunk.plan), the package's manifest with the
/// form its kernels take (a stored key adds the pwk region and drops state_output's second read of pst).
PlanCost estimatePlan(mlir::func::FuncOp fn, const CostPoint& at, int writeKey = launch::kWriteKeyRebuilt);

/// The estimate of a partitioned backward (--chunk-partition-backward; BackwardCost.cpp). No device
/// kernels exist for it yet, so bytes are counted from the IR: per kernel, each value read from device
/// memory (input, cotangent, kept forward value, earlier kernel's buffer) once, each buffer written and
/// each gradient stored once (no repeat reads per value tile). FLOPs as for the forward.
struct BackwardCost {
  PlanCost plan;          ///< kernels of the backward (buffers / extraBuffers unused)
  double savedBytes = 0;  ///< bytes per token-head the forward writes for the kept intermediates
};
BackwardCost estimateBackwardPlan(mlir::func::FuncOp fn, const CostPoint& at);

}  // namespace dgps
