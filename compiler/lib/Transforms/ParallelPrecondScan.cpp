// --chunk-parallel-precond-scan: OSDN's hypergradient d-scan from token by token to its chunked affine form
// (ChunkPrecondScanOps.td, docs/math.md §5.2): a summary per chunk in parallel, then a short pass over
// chunks. Exact (an algebraic rewrite, not an approximation); a clamped scan, which is not affine in d,
// is kept sequential.
#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Transforms/Passes.h"
#include "mlir/IR/Builders.h"

namespace dgps {
#define GEN_PASS_DEF_PARALLELPRECONDSCAN
#include "dgps/Transforms/Passes.h.inc"
}  // namespace dgps

using namespace mlir;
using namespace dgps::chunk;

namespace {

/// hypergrad_pass → hypergrad_chunk_summary + hypergrad_chunk_pass, or a remark when a clamp keeps it.
void chunkHypergradPass(HypergradPassOp op) {
  if (op.getClampMin() || op.getClampMax()) {
    op.emitRemark() << "kept token by token: the clamped hypergradient step is not affine in d, so the scan "
                       "has no chunk summary (docs/math.md §5.2)";
    return;
  }
  OpBuilder b(op);
  MLIRContext* ctx = op.getContext();
  auto f32 = [&](ArrayRef<Dim> dims) { return tensorType(ctx, dims, Float32Type::get(ctx)); };
  auto rows = f32({Dim::B, Dim::T, Dim::H, Dim::K});
  auto summary = b.create<HypergradChunkSummaryOp>(op.getLoc(), rows, f32({Dim::B, Dim::T, Dim::H}), rows,
                                                   f32({Dim::B, Dim::NT, Dim::H}), op.getKey(), op.getGain(),
                                                   op.getRetention(), op.getEtaAttr());
  auto pass = b.create<HypergradChunkPassOp>(op.getLoc(), op.getStart().getType(), op.getCoef().getType(),
                                             op.getFinal().getType(), summary.getReadRows(), summary.getBase(),
                                             summary.getWriteRows(), summary.getLogDecay(), op.getInit(),
                                             op.getDInitAttr());
  op.replaceAllUsesWith(pass);
  op.erase();
}

struct ParallelPrecondScanPass : dgps::impl::ParallelPrecondScanBase<ParallelPrecondScanPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (!fn->hasAttr(kChunkSizeAttr) || fn->hasAttr(kBackwardOfAttr)) return;  // not a lowered forward
    Block& body = fn.getBody().front();
    if (!body.getOps<KernelOp>().empty()) {
      fn.emitError() << "is already partitioned into kernels; run --chunk-parallel-precond-scan before "
                        "--chunk-partition-kernels";
      return signalPassFailure();
    }
    for (Operation& op : body)
      if (isa<HypergradScanOp>(op)) {
        op.emitError() << "is the unfused token-by-token scan; run --chunk-fuse-preconditioner before "
                          "--chunk-parallel-precond-scan (the chunked scan replaces hypergrad_pass)";
        return signalPassFailure();
      }
    for (Operation& op : llvm::make_early_inc_range(body))
      if (auto h = dyn_cast<HypergradPassOp>(op)) chunkHypergradPass(h);
  }
};

}  // namespace
