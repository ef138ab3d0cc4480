// --chunk-segment-state-pass: the sequential passes over chunks of a fused forward rewritten into their
// sequence-parallel form (ChunkSegmentOps.td, docs/math.md §8). Exact for every spec: only ops are
// replaced, never approximated; a clamped hypergradient scan, which has no affine segment summary,
// is kept sequential, and segment-precond-scan = false keeps every preconditioner pass sequential (the GPU's form).
#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Transforms/Passes.h"
#include "mlir/IR/Builders.h"

namespace dgps {
#define GEN_PASS_DEF_SEGMENTSTATEPASS
#include "dgps/Transforms/Passes.h.inc"
}  // namespace dgps

using namespace mlir;
using namespace dgps::chunk;

namespace {

ChunkTensorType f32Tensor(MLIRContext* ctx, ArrayRef<Dim> dims) {
  return tensorType(ctx, dims, Float32Type::get(ctx));
}

/// state_pass → segment_summary, segment_fold, segment_state_pass.
void segmentStatePass(StatePassOp op) {
  OpBuilder b(op);
  MLIRContext* ctx = op.getContext();
  Location loc = op.getLoc();
  auto ext = f32Tensor(ctx, {Dim::B, Dim::NS, Dim::HV, Dim::K, Dim::V});
  auto trans = f32Tensor(ctx, {Dim::B, Dim::NS, Dim::HV, Dim::K, Dim::K});
  auto summary = b.create<SegmentSummaryOp>(loc, ext, trans, op.getW(), op.getU(), op.getWriteKey(), op.getGate());
  auto fold = b.create<SegmentFoldOp>(loc, ext, op.getFinal().getType(), summary.getExt(), summary.getTrans(),
                                      op.getInit());
  auto rerun = b.create<SegmentStatePassOp>(loc, op.getVNew().getType(), op.getStates().getType(), op.getW(),
                                            op.getU(), op.getWriteKey(), op.getGate(), fold.getStart());
  op.getVNew().replaceAllUsesWith(rerun.getVNew());
  op.getStates().replaceAllUsesWith(rerun.getStates());
  op.getFinal().replaceAllUsesWith(fold.getFinal());
  op.erase();
}

void segmentAccumPass(AccumPassOp op) {
  OpBuilder b(op);
  auto seg = b.create<AccumSegmentPassOp>(op.getLoc(), op.getStart().getType(), op.getFinal().getType(), op.getSum(),
                                          op.getLogDecay(), op.getInit());
  op.replaceAllUsesWith(seg);
  op.erase();
}

/// hypergrad_pass → hypergrad_segment_pass, or a remark when a clamp keeps it sequential.
void segmentHypergradPass(HypergradPassOp op) {
  if (op.getClampMin() || op.getClampMax()) {
    op.emitRemark() << "kept sequential: the clamped hypergradient step is not affine in d, so its scan has "
                       "no segment summary (docs/math.md §8); the state pass is still segmented";
    return;
  }
  OpBuilder b(op);
  auto seg = b.create<HypergradSegmentPassOp>(
      op.getLoc(), op.getStart().getType(), op.getCoef().getType(), op.getFinal().getType(), op.getKey(),
      op.getGain(), op.getRetention(), op.getInit(), op.getEtaAttr(), op.getDInitAttr(), op.getPostAttr(),
      op.getClampMinAttr(), op.getClampMaxAttr());
  op.replaceAllUsesWith(seg);
  op.erase();
}

struct SegmentStatePassPass : dgps::impl::SegmentStatePassBase<SegmentStatePassPass> {
  using SegmentStatePassBase::SegmentStatePassBase;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (!fn->hasAttr(kChunkSizeAttr) || fn->hasAttr(kBackwardOfAttr)) return;  // not a lowered forward
    if (segmentChunks < 0) {
      fn.emitError() << "segment-chunks = " << static_cast<int64_t>(segmentChunks)
                     << ": expected a segment length in chunks >= 1, or 0 to choose it at launch";
      return signalPassFailure();
    }
    Block& body = fn.getBody().front();
    if (!body.getOps<KernelOp>().empty()) {
      fn.emitError() << "is already partitioned into kernels; run --chunk-segment-state-pass before "
                        "--chunk-partition-kernels";
      return signalPassFailure();
    }
    for (Operation& op : body)
      if (isa<AccumScanOp, HypergradScanOp>(op)) {
        op.emitError() << "is a token-by-token preconditioner scan; run --chunk-fuse-preconditioner before "
                          "--chunk-segment-state-pass (the segmented scans work on chunk summaries)";
        return signalPassFailure();
      }
    for (Operation& op : llvm::make_early_inc_range(body)) {
      if (auto s = dyn_cast<StatePassOp>(op)) segmentStatePass(s);
      else if (!segmentPrecondScan) continue;  // chunk-start states for every chunk, before the state pass
      else if (auto a = dyn_cast<AccumPassOp>(op)) segmentAccumPass(a);
      else if (auto h = dyn_cast<HypergradPassOp>(op)) segmentHypergradPass(h);
    }
    if (segmentChunks > 0)
      fn->setAttr(kSegmentChunksAttr,
                  IntegerAttr::get(IntegerType::get(fn.getContext(), 64), static_cast<int64_t>(segmentChunks)));
  }
};

}  // namespace
