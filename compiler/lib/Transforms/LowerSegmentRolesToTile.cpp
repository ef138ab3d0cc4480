// --dgps-lower-segment-roles-to-tile: the kernels of a segmented plan (--chunk-segment-state-pass, then
// --chunk-partition-kernels) become tile functions (Passes.td has the before/after):
//   segment_summary -> @<name>_segment_summary: two tile.state_walk over one segment's chunks, E from a zero
//                      start into "seg_ext" and M from the identity with the value term dropped into "seg_trans"
//   segment_fold    -> @<name>_segment_fold: one tile.state_fold (start states and final state)
//   state_output    -> @<name>_segment_state_output: the walk from the folded start "seg_start", writing o
//                      (with several steps per token through the row map of q and o, as in state_output; the
//                      summaries' walks read neither, so they are the one-step walks over the step rows)
// A preconditioner's in-kernel rebuild (chunk.accum_apply / chunk.hypergrad_apply of the write key, or of the
// query in the corrected walk) becomes the walks' rescale, as in state_output (StateWalkLowering.h setRescale):
// the rebuild reads the precond_scan role's chunk-start states "pst", which exist for every chunk before the state
// pass, so a segment walk rebuilds its operand from any chunk on (docs/math.md §8.3; the plan comes from
// --chunk-segment-state-pass=segment-precond-scan=false). A kernel op this lowering does not know is an error
// naming it.
#include "StateWalkLowering.h"
#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/Transforms/Passes.h"
#include "dgps/Transforms/PlanCost.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

namespace dgps {
#define GEN_PASS_DEF_LOWERSEGMENTROLESTOTILE
#include "dgps/Transforms/Passes.h.inc"
}  // namespace dgps

using namespace mlir;
using namespace dgps::tile;
namespace ch = dgps::chunk;

namespace {

/// The ops that chunk_local already folded into the workspace (token record, blocks, gated operands): a
/// walk reads their results from there, so they need no lowering of their own.
bool preparedByChunkLocal(Operation& op) {
  return isa<ch::LoadOp, ch::L2NormOp, ch::GateCumsumOp, ch::WYRecomputeOp, ch::GainScaleOp, ch::SpreadStepsOp,
             ch::YieldOp>(op);
}

InFlightDiagnostic unknownOp(Operation& op, StringRef role, StringRef covers) {
  return op.emitOpError() << "has no tile lowering in " << role << " (--dgps-lower-segment-roles-to-tile covers "
                          << covers << ")";
}

/// The segmented forward's three kernels.
struct SegmentKernels {
  ch::KernelOp summaryKernel, foldKernel, outputKernel;
  ch::SegmentSummaryOp summary;
  ch::SegmentFoldOp fold;
  ch::SegmentStatePassOp rerun;
  ch::OutputOp output;
  ch::GatherStepsOp gather;  ///< o from each token's last step (several steps per token)
  Operation* summaryApply = nullptr;  ///< the preconditioner's rebuild in segment_summary, if any
  Operation* outputApply = nullptr;   ///< the same in the corrected walk's kernel
  bool writesFinal = false, writesO = false;
};

/// Whether `op` is a preconditioner's in-chunk rebuild (the walk's rescale).
bool isPrecondApply(Operation& op) { return isa<ch::AccumApplyOp, ch::HypergradApplyOp>(op); }

LogicalResult inspectSummary(ch::KernelOp k, SegmentKernels& s) {
  for (Operation& op : k.getBody().front()) {
    if (preparedByChunkLocal(op)) continue;
    if (isPrecondApply(op) && !s.summaryApply) {
      s.summaryApply = &op;
      continue;
    }
    if (auto sum = dyn_cast<ch::SegmentSummaryOp>(op); sum && !s.summary) {
      s.summary = sum;
      continue;
    }
    return unknownOp(op, "segment_summary",
                     "the prepared operands, one preconditioner apply and one segment_summary");
  }
  if (!s.summary) return k.emitOpError("segment_summary kernel without chunk.segment_summary");
  return success();
}

LogicalResult inspectFold(ch::KernelOp k, SegmentKernels& s) {
  for (Operation& op : k.getBody().front()) {
    if (isa<ch::LoadOp, ch::YieldOp>(op)) continue;
    if (auto f = dyn_cast<ch::SegmentFoldOp>(op); f && !s.fold) {
      s.fold = f;
      continue;
    }
    if (auto st = dyn_cast<ch::StoreOp>(op); st && s.fold && st.getName() == "final_state" &&
                                             st.getValue() == s.fold.getFinal()) {
      s.writesFinal = true;
      continue;
    }
    return unknownOp(op, "segment_fold", "one segment_fold and the store of \"final_state\"");
  }
  if (!s.fold) return k.emitOpError("segment_fold kernel without chunk.segment_fold");
  return success();
}

LogicalResult inspectOutput(ch::KernelOp k, SegmentKernels& s) {
  for (Operation& op : k.getBody().front()) {
    if (preparedByChunkLocal(op)) continue;
    if (isPrecondApply(op) && !s.outputApply) {
      s.outputApply = &op;
      continue;
    }
    if (auto r = dyn_cast<ch::SegmentStatePassOp>(op); r && !s.rerun) {
      s.rerun = r;
      continue;
    }
    if (auto o = dyn_cast<ch::OutputOp>(op); o && !s.output) {
      s.output = o;
      continue;
    }
    if (auto g = dyn_cast<ch::GatherStepsOp>(op); g && s.output && !s.gather && g.getInput() == s.output.getResult()) {
      s.gather = g;
      continue;
    }
    if (auto st = dyn_cast<ch::StoreOp>(op); st && s.output && st.getName() == "o" &&
                                             st.getValue() == (s.gather ? s.gather.getResult() : s.output.getResult())) {
      s.writesO = true;
      continue;
    }
    return unknownOp(op, "state_output",
                     "the prepared operands, one preconditioner apply, one segment_state_pass, one output, its "
                     "gather_steps and the store of \"o\"");
  }
  if (!s.rerun || !s.output || !s.writesO)
    return k.emitOpError("segmented state_output needs chunk.segment_state_pass, chunk.output and a store of \"o\"");
  if (s.output.getVNew() != s.rerun.getVNew() || s.output.getGate() != s.rerun.getGate())
    return s.output.emitOpError("must read the v_new and gate of the kernel's chunk.segment_state_pass");
  return success();
}

struct LowerSegmentRolesToTilePass : public dgps::impl::LowerSegmentRolesToTileBase<LowerSegmentRolesToTilePass> {
  using LowerSegmentRolesToTileBase::LowerSegmentRolesToTileBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> forwards;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.getBody().getOps<ch::KernelOp>().empty()) forwards.push_back(fn);
    for (func::FuncOp fwd : forwards)
      if (failed(lower(module, fwd))) return signalPassFailure();
  }

  LogicalResult lower(ModuleOp module, func::FuncOp fwd) {
    SegmentKernels s;
    for (ch::KernelOp k : fwd.getBody().getOps<ch::KernelOp>()) {
      if (k.getRole() == "segment_summary") s.summaryKernel = k;
      if (k.getRole() == "segment_fold") s.foldKernel = k;
      if (k.getRole() == "state_output") s.outputKernel = k;
    }
    if (!s.summaryKernel) return success();  // not a segmented plan (e.g. a backward): nothing to lower
    if (!s.foldKernel || !s.outputKernel)
      return fwd.emitOpError("segmented plan without its segment_fold and state_output kernels");
    if (failed(inspectSummary(s.summaryKernel, s)) || failed(inspectFold(s.foldKernel, s)) ||
        failed(inspectOutput(s.outputKernel, s)))
      return failure();
    dgps::launch::FeatureSet f = dgps::featuresOf(fwd);
    FailureOr<int> writeKey = resolveWriteKey(writeKey_, f, s.summaryKernel);
    if (failed(writeKey)) return failure();
    f.write_key = *writeKey;
    SmallVector<func::FuncOp> made;
    auto fail = [&] {
      for (func::FuncOp fn : made) fn.erase();
      return failure();
    };

    // segment_summary: E (value tiles) then M (tiles of M's columns) in one grid
    OpBuilder body(module.getContext());
    made.push_back(createRoleFunction(module, fwd, s.summaryKernel.getLoc(), "segment_summary", "segment_summary",
                                      Grid::segment, body, f.write_key));
    WalkEnds ext;
    ext.start = StateStart::zero;
    ext.endRegion = "seg_ext";
    WalkEnds trans;
    trans.start = StateStart::identity;
    trans.zeroValues = true;
    trans.endRegion = "seg_trans";
    // both walks read the write key, never the query: only a write-key rebuild is theirs
    for (const WalkEnds& ends : {ext, trans}) {
      FailureOr<StateWalkOp> w =
          buildStateWalk(body, s.summary.getLoc(), s.summary, f, s.summary.getW(), s.summary.getGate(), ends);
      if (failed(w) ||
          (s.summaryApply && failed(setRescale(*w, s.summaryApply, s.summary.getWriteKey(), Value(), f, true))))
        return fail();
    }
    body.create<func::ReturnOp>(s.summaryKernel.getLoc());

    // segment_fold
    made.push_back(createRoleFunction(module, fwd, s.foldKernel.getLoc(), "segment_fold", "segment_fold",
                                      Grid::value_tile, body, f.write_key));
    body.create<StateFoldOp>(s.fold.getLoc(), body.getStringAttr("seg_trans"), body.getStringAttr("seg_ext"),
                             body.getStringAttr("seg_start"), s.writesFinal);
    body.create<func::ReturnOp>(s.foldKernel.getLoc());

    // the corrected walk
    made.push_back(createRoleFunction(module, fwd, s.outputKernel.getLoc(), "segment_state_output",
                                      "segment_state_output", Grid::segment, body, f.write_key));
    WalkEnds rerun;
    rerun.start = StateStart::region;
    rerun.startRegion = "seg_start";
    rerun.writeOutput = true;
    FailureOr<StateWalkOp> walk =
        buildStateWalk(body, s.rerun.getLoc(), s.rerun, f, s.rerun.getW(), s.rerun.getGate(), rerun);
    if (failed(walk) ||
        (s.outputApply &&
         failed(setRescale(*walk, s.outputApply, s.rerun.getWriteKey(), s.output.getQuery(), f, true))) ||
        failed(setRowMap(*walk, s.output, s.gather, s.writesO)))
      return fail();
    body.create<func::ReturnOp>(s.outputKernel.getLoc());

    for (func::FuncOp fn : made)
      if (failed(mlir::verify(fn))) return fail();
    return success();
  }
};

}  // namespace
