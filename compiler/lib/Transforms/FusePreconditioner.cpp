// --chunk-fuse-preconditioner: token-by-token preconditioner scans -> chunk-start states + in-chunk
// apply, so that the preconditioned key (and the per-token accumulator) never reach device memory
// (docs/math.md §5.1 option (a); §5.2 per-token reduction form).
#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Transforms/Passes.h"
#include "mlir/IR/Builders.h"

namespace dgps {
#define GEN_PASS_DEF_FUSEPRECONDITIONER
#include "dgps/Transforms/Passes.h.inc"
}  // namespace dgps

using namespace mlir;
using namespace dgps::chunk;

namespace {

ChunkTensorType perChunk(Value v, ArrayRef<Dim> dims) {
  auto t = cast<ChunkTensorType>(v.getType());
  return tensorType(t.getContext(), dims, Float32Type::get(t.getContext()));
}

/// True when every use of `v` is an op of type OpTy consuming it as its accumulator/diagonal.
template <typename OpTy>
bool onlyAppliedBy(Value v) {
  return llvm::all_of(v.getUsers(), [](Operation* u) { return isa<OpTy>(u); });
}

LogicalResult fuseAccum(AccumScanOp scan) {
  if (!onlyAppliedBy<SquashApplyOp>(scan.getAccum())) {
    scan.emitWarning() << "accumulator has uses other than squash_apply; left unfused (it will be "
                          "written to device memory)";
    return failure();
  }
  OpBuilder b(scan);
  Location loc = scan.getLoc();
  auto summary = b.create<AccumSummaryOp>(
      loc, perChunk(scan.getKey(), {Dim::B, Dim::NT, Dim::H, Dim::K}),
      perChunk(scan.getKey(), {Dim::B, Dim::NT, Dim::H}), scan.getKey(), scan.getGate(), scan.getGain());
  auto pass = b.create<AccumPassOp>(loc, summary.getSum().getType(), scan.getFinal().getType(),
                                    summary.getSum(), summary.getLogDecay(), scan.getInit());
  for (Operation* user : llvm::make_early_inc_range(scan.getAccum().getUsers())) {
    auto apply = cast<SquashApplyOp>(user);
    b.setInsertionPoint(apply);
    Value fused = b.create<AccumApplyOp>(apply.getLoc(), apply.getType(), apply.getTarget(), scan.getKey(),
                                         scan.getGate(), scan.getGain(), pass.getStart(), apply.getCenter(),
                                         apply.getXAttr(), apply.getEpsAttr());
    apply.replaceAllUsesWith(fused);
    apply.erase();
  }
  scan.getFinal().replaceAllUsesWith(pass.getFinal());
  scan.erase();
  return success();
}

LogicalResult fuseHypergrad(HypergradScanOp scan) {
  if (!onlyAppliedBy<DiagApplyOp>(scan.getDiag())) {
    scan.emitWarning() << "preconditioner diagonal has uses other than diag_apply; left unfused";
    return failure();
  }
  OpBuilder b(scan);
  auto pass = b.create<HypergradPassOp>(
      scan.getLoc(), perChunk(scan.getKey(), {Dim::B, Dim::NT, Dim::H, Dim::K}),
      perChunk(scan.getKey(), {Dim::B, Dim::T, Dim::H}), scan.getFinal().getType(),
      scan.getKey(), scan.getGain(), scan.getRetention(), scan.getInit(), scan.getEtaAttr(),
      scan.getDInitAttr(), scan.getPostAttr(), scan.getClampMinAttr(), scan.getClampMaxAttr());
  for (Operation* user : llvm::make_early_inc_range(scan.getDiag().getUsers())) {
    auto apply = cast<DiagApplyOp>(user);
    b.setInsertionPoint(apply);
    Value fused = b.create<HypergradApplyOp>(
        apply.getLoc(), apply.getType(), apply.getTarget(), scan.getKey(), pass.getCoef(), scan.getRetention(),
        pass.getStart(), scan.getEtaAttr(), scan.getDInitAttr(), scan.getPostAttr(), scan.getClampMinAttr(),
        scan.getClampMaxAttr());
    apply.replaceAllUsesWith(fused);
    apply.erase();
  }
  scan.getFinal().replaceAllUsesWith(pass.getFinal());
  scan.erase();
  return success();
}

struct FusePreconditionerPass : dgps::impl::FusePreconditionerBase<FusePreconditionerPass> {
  void runOnOperation() override {
    // A derived backward keeps the token-by-token scan: its adjoint reads the per-token accumulator.
    if (getOperation()->hasAttr(kBackwardOfAttr)) return;
    SmallVector<Operation*> scans;
    getOperation().walk([&](Operation* op) {
      if (isa<AccumScanOp, HypergradScanOp>(op)) scans.push_back(op);
    });
    for (Operation* op : scans) {
      if (auto a = dyn_cast<AccumScanOp>(op))
        (void)fuseAccum(a);
      else
        (void)fuseHypergrad(cast<HypergradScanOp>(op));
    }
  }
};

}  // namespace
