// The shared half of the state-walk lowerings (StateWalkLowering.h).
#include "StateWalkLowering.h"

#include "dgps/Dialect/Chunk/IR/Chunk.h"

using namespace mlir;
namespace ch = dgps::chunk;

namespace dgps::tile {

ForwardFeatures forwardFeaturesOf(func::FuncOp forward) {
  ForwardFeatures f;
  forward.walk([&](Operation* op) {
    if (auto l = dyn_cast<ch::LoadOp>(op)) {
      f.gain |= l.getName() == "beta";
      if (l.getName() == "g") f.decay = cast<ch::ChunkTensorType>(l.getType()).hasDim(ch::Dim::K) ? 2 : 1;
    }
    if (isa<ch::AccumApplyOp, ch::HypergradApplyOp>(op)) {
      f.precond = true;
      f.hypergrad = isa<ch::HypergradApplyOp>(op);
      for (Operation* user : op->getResult(0).getUsers())
        if (auto q = dyn_cast<ch::QKAttnOp>(user)) f.querySide |= q.getQuery() == op->getResult(0);
    }
  });
  return f;
}

func::FuncOp createRoleFunction(ModuleOp module, func::FuncOp forward, Location loc, StringRef suffix, StringRef role,
                                Grid grid, const ForwardFeatures& f, bool delta, OpBuilder& body) {
  StringRef base = forward.getSymName();
  base.consume_back("_forward");
  OpBuilder b(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  auto fn = b.create<func::FuncOp>(loc, (base + "_" + suffix).str(), b.getFunctionType({}, {}));
  fn->setAttr(kRoleAttr, b.getStringAttr(role));
  fn->setAttr(kGridAttr, b.getStringAttr(stringifyGrid(grid)));
  fn->setAttr(kLaunchFeaturesAttr,
              b.getDenseI32ArrayAttr({f.decay, f.gain ? 1 : 0, f.precond ? 1 : 0, f.querySide ? 1 : 0,
                                      f.hypergrad ? 1 : 0, delta ? 1 : 0}));
  body.setInsertionPointToStart(fn.addEntryBlock());
  return fn;
}

FailureOr<StateWalkOp> buildStateWalk(OpBuilder& b, Location loc, Operation* at, const ForwardFeatures& f, Value w,
                                      Value gate, const WalkEnds& ends) {
  const bool delta = static_cast<bool>(w);
  const bool perChannel = gate && cast<ch::ChunkTensorType>(gate.getType()).hasDim(ch::Dim::K);
  if (gate && f.decay != (perChannel ? 2 : 1))
    return at->emitOpError("gate does not match the forward's loaded \"g\"");
  auto str = [&](const char* s) { return b.getStringAttr(s); };
  auto opt = [&](StringRef s) { return s.empty() ? StringAttr() : b.getStringAttr(s); };
  const StateCarry carry = !gate ? StateCarry::none : perChannel ? StateCarry::columns : StateCarry::uniform;
  return b.create<StateWalkOp>(loc, ends.start, str(perChannel ? "opq" : "q"), str(perChannel ? "opw" : "k"),
                               delta ? str(perChannel ? "opk" : "k") : StringAttr(), str("v"), str("tok"),
                               delta ? str("tb") : StringAttr(), str("aqk"),
                               delta ? ValueForm::residual_lower : ValueForm::scaled, carry,
                               perChannel ? str("pdec") : StringAttr(), ends.writeOutput, ends.writeFinal,
                               opt(ends.startRegion), opt(ends.endRegion), ends.zeroValues,
                               /*row map: none*/ IntegerAttr(), IntegerAttr(), IntegerAttr());
}

}  // namespace dgps::tile
