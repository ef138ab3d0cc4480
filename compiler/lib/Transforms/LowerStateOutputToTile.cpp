// --dgps-lower-state-output-to-tile: the `chunk.kernel "state_output"` of each partitioned forward function
// becomes `func.func @<name>_state_output` holding one tile.state_walk (Passes.td has the before/after). The
// walk's attributes are read off the kernel's chunk.state_pass and chunk.output: which value form (w present:
// the delta rule's residual through the solve block), which carry (the gate's rank), which operand sources
// (a per-channel gate reads the gated operands chunk_local wrote), the start state and what is written. A
// preconditioner's in-chunk rebuild (chunk.accum_apply / chunk.hypergrad_apply of the write key or the query)
// becomes the walk's rescale, run by a producer warpgroup (StateWalkLowering.h setRescale); a query spread onto
// several steps per token and an o gathered from them give the walk its row map. A chunk op this lowering does not
// know is an error naming it, and no package is written.
#include "StateWalkLowering.h"
#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/Transforms/Passes.h"
#include "dgps/Transforms/PlanCost.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

namespace dgps {
#define GEN_PASS_DEF_LOWERSTATEOUTPUTTOTILE
#include "dgps/Transforms/Passes.h.inc"
}  // namespace dgps

using namespace mlir;
using namespace dgps::tile;
namespace ch = dgps::chunk;

namespace {

/// What the walk needs to know about one state_output kernel.
struct WalkPlan {
  ch::StatePassOp pass;
  ch::OutputOp output;
  Operation* apply = nullptr;  ///< the preconditioner's rebuild, if any
  ch::GatherStepsOp gather;  ///< o from each token's last step (several steps per token)
  bool writesO = false, writesFinal = false, initial = false;
};

/// Collects the kernel's state pass, read-out and stores; fails on an op without a tile lowering.
LogicalResult inspect(ch::KernelOp kernel, WalkPlan& p) {
  for (Operation& op : kernel.getBody().front()) {
    if (isa<ch::L2NormOp, ch::GateCumsumOp, ch::WYRecomputeOp, ch::GainScaleOp, ch::SpreadStepsOp, ch::YieldOp>(op))
      continue;
    if (auto l = dyn_cast<ch::LoadOp>(op)) {
      p.initial |= l.getName() == "initial_state";
      continue;
    }
    if (isa<ch::AccumApplyOp, ch::HypergradApplyOp>(op) && !p.apply) {
      p.apply = &op;
      continue;
    }
    if (auto s = dyn_cast<ch::StatePassOp>(op); s && !p.pass) {
      p.pass = s;
      continue;
    }
    if (auto o = dyn_cast<ch::OutputOp>(op); o && !p.output) {
      p.output = o;
      continue;
    }
    if (auto g = dyn_cast<ch::GatherStepsOp>(op); g && p.output && !p.gather && g.getInput() == p.output.getResult()) {
      p.gather = g;
      continue;
    }
    if (auto st = dyn_cast<ch::StoreOp>(op)) {
      const Value o = p.gather ? p.gather.getResult() : (p.output ? p.output.getResult() : Value());
      if (st.getName() == "o" && o && st.getValue() == o) {
        p.writesO = true;
        continue;
      }
      if (st.getName() == "final_state" && p.pass && st.getValue() == p.pass.getFinal()) {
        p.writesFinal = true;
        continue;
      }
    }
    return op.emitOpError() << "has no tile lowering in state_output (--dgps-lower-state-output-to-tile covers loads, "
                               "l2norm, gate_cumsum, wy_recompute, gain_scale, one preconditioner apply, one "
                               "state_pass, one output and the stores of \"o\" and \"final_state\")";
  }
  if (!p.pass) return kernel.emitOpError("state_output without chunk.state_pass has no tile lowering");
  if (p.output && p.output.getVNew() != p.pass.getVNew())
    return p.output.emitOpError("must read the v_new of the kernel's chunk.state_pass");
  if (p.output && p.output.getGate() != p.pass.getGate())
    return p.output.emitOpError("must share its gate with the kernel's chunk.state_pass (one carry per chunk)");
  if (!p.writesO && !p.writesFinal) return kernel.emitOpError("state_output stores neither \"o\" nor \"final_state\"");
  return success();
}

struct LowerStateOutputToTilePass : public dgps::impl::LowerStateOutputToTileBase<LowerStateOutputToTilePass> {
  using LowerStateOutputToTileBase::LowerStateOutputToTileBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<ch::KernelOp> kernels;
    module.walk([&](ch::KernelOp k) {
      if (k.getRole() == "state_output") kernels.push_back(k);
    });
    for (ch::KernelOp kernel : kernels) {
      auto parent = kernel->getParentOfType<func::FuncOp>();
      WalkPlan p;
      if (failed(inspect(kernel, p))) return signalPassFailure();
      // The launch contract shared with the other roles (DeviceFeatures.h FeatureSet), read over the whole
      // forward as chunk_local's lowering does: it fixes the workspace and shared-memory layout.
      dgps::launch::FeatureSet f = dgps::featuresOf(parent);
      FailureOr<int> writeKey = resolveWriteKey(writeKey_, f, kernel);
      if (failed(writeKey)) return signalPassFailure();
      f.write_key = *writeKey;
      OpBuilder body(module.getContext());
      func::FuncOp fn = createRoleFunction(module, parent, kernel.getLoc(), "state_output", "state_output",
                                           Grid::value_tile, body, f.write_key);
      WalkEnds ends;
      ends.start = p.initial ? StateStart::argument : StateStart::zero;
      ends.writeOutput = p.writesO;
      ends.writeFinal = p.writesFinal;
      FailureOr<StateWalkOp> walk =
          buildStateWalk(body, kernel.getLoc(), p.pass, f, p.pass.getW(), p.pass.getGate(), ends);
      const Value query = p.output ? p.output.getQuery() : Value();
      if (failed(walk) || (p.apply && failed(setRescale(*walk, p.apply, p.pass.getWriteKey(), query, f, false))) ||
          failed(setRowMap(*walk, p.output, p.gather, p.writesO))) {
        fn.erase();
        return signalPassFailure();
      }
      body.create<func::ReturnOp>(kernel.getLoc());
      if (failed(mlir::verify(fn))) {
        fn.erase();
        return signalPassFailure();
      }
    }
  }
};

}  // namespace
