// The shared half of the state-walk lowerings (StateWalkLowering.h).
#include "StateWalkLowering.h"

#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Dialect/Tile/IR/LaunchFeatures.h"
#include "dgps/Transforms/Passes.h"
#include "dgps/Transforms/PlanCost.h"

using namespace mlir;
namespace ch = dgps::chunk;

namespace dgps::tile {

func::FuncOp createRoleFunction(ModuleOp module, func::FuncOp forward, Location loc, StringRef suffix, StringRef role,
                                Grid grid, OpBuilder& body, int writeKey) {
  StringRef base = forward.getSymName();
  base.consume_back("_forward");
  OpBuilder b(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  auto fn = b.create<func::FuncOp>(loc, (base + "_" + suffix).str(), b.getFunctionType({}, {}));
  fn->setAttr(kRoleAttr, b.getStringAttr(role));
  fn->setAttr(kGridAttr, b.getStringAttr(stringifyGrid(grid)));
  launch::FeatureSet f = featuresOf(forward);
  f.write_key = writeKey;
  fn->setAttr(kLaunchFeaturesAttr, launchFeaturesAttr(b, f));
  body.setInsertionPointToStart(fn.addEntryBlock());
  return fn;
}

FailureOr<int> resolveWriteKey(StringRef requested, const launch::FeatureSet& f, Operation* at) {
  int code = launch::kWriteKeyRebuilt;
  std::string error;
  if (!writeKeyCode(requested, f, &code, &error)) return at->emitError() << error;
  return code;
}

FailureOr<StateWalkOp> buildStateWalk(OpBuilder& b, Location loc, Operation* at, const launch::FeatureSet& f, Value w,
                                      Value gate, const WalkEnds& ends) {
  const bool delta = static_cast<bool>(w);
  const bool perChannel = gate && cast<ch::ChunkTensorType>(gate.getType()).hasDim(ch::Dim::K);
  if (gate && f.decay != (perChannel ? 2 : 1))
    return at->emitOpError("gate does not match the forward's decay (DeviceFeatures.h FeatureSet)");
  auto str = [&](const char* s) { return b.getStringAttr(s); };
  auto opt = [&](StringRef s) { return s.empty() ? StringAttr() : b.getStringAttr(s); };
  const StateCarry carry = !gate ? StateCarry::none : perChannel ? StateCarry::columns : StateCarry::uniform;
  return b.create<StateWalkOp>(loc, ends.start, str(perChannel ? "opq" : "q"), str(perChannel ? "opw" : "k"),
                               delta ? str(perChannel ? "opk" : "k") : StringAttr(), str("v"), str("tok"),
                               delta ? str("tb") : StringAttr(), str("aqk"),
                               delta ? ValueForm::residual_lower : ValueForm::scaled, carry,
                               perChannel ? str("pdec") : StringAttr(), ends.writeOutput, ends.writeFinal,
                               opt(ends.startRegion), opt(ends.endRegion), ends.zeroValues,
                               /*rescale (setRescale)*/ WalkOperandAttr(), StringAttr(), StringAttr(),
                               ScanReadoutAttr(), StringAttr(), FloatAttr(), FloatAttr(), FloatAttr(), FloatAttr(),
                               IntegerAttr(), DenseI32ArrayAttr(),
                               /*row map: none*/ IntegerAttr(), IntegerAttr(), IntegerAttr(),
                               /*write_key_form, query_form (setRescale)*/ WriteKeyFormAttr(), WriteKeyFormAttr());
}

namespace {

/// `v` is the l2norm of the kernel's chunk.load `name` (the raw input rows the walk stages).
bool isNormalizedLoad(Value v, StringRef name) {
  auto n = v.getDefiningOp<ch::L2NormOp>();
  auto l = n ? n->getOperand(0).getDefiningOp<ch::LoadOp>() : ch::LoadOp();
  return l && l.getName() == name;
}

/// `v` is a result of the forward's chunk.kernel "precond_scan" (the chunk-start states, workspace "pst").
bool isPrecondScanResult(Value v) {
  auto k = v.getDefiningOp<ch::KernelOp>();
  return k && k.getRole() == "precond_scan" && v == k->getResult(0);
}

}  // namespace

LogicalResult setRescale(StateWalkOp walk, Operation* apply, Value writeKey, Value query, const launch::FeatureSet& f,
                         bool segment) {
  Builder b(walk.getContext());
  Value result = apply->getResult(0), target, key, start;
  if (writeKey && result == writeKey && !launch::walkRebuildsKw(f, segment)) {
    // chunk_local stored P ⊙ k̂ from the same apply (tile.launch_features write_key): load it as it is
    if (!result.hasOneUse() || apply->getOperand(0) != apply->getOperand(1))
      return apply->emitOpError("must feed only the state pass's write key, scaling its own key (the stored form)");
    walk.setWriteKeyAttr(b.getStringAttr(launch::needOpW(f) ? "opw" : "pwk"));
    walk.setWriteKeyForm(WriteKeyForm::stored);
    return success();
  }
  if (query && result == query && launch::needPwq(f)) {
    // chunk_local stored P ⊙ q̂ from the same apply (tile.launch_features write_key): load it as it is
    if (!result.hasOneUse() || !isNormalizedLoad(apply->getOperand(0), "q"))
      return apply->emitOpError("must feed only the read-out's query, scaling the l2norm of the loaded \"q\" (the "
                                "stored form)");
    walk.setQueryAttr(b.getStringAttr("pwq"));
    walk.setQueryForm(WriteKeyForm::stored);
    return success();
  }
  if (auto a = dyn_cast<ch::AccumApplyOp>(apply)) {
    target = a.getTarget();
    key = a.getKey();
    start = a.getStart();
    walk.setScanReadout(ScanReadout::soft_power);
    walk.setScanBaseAttr(b.getF32FloatAttr((float)a.getX().convertToDouble()));
    walk.setScanEpsAttr(b.getF32FloatAttr((float)a.getEps().convertToDouble()));
    auto c = a.getCenter().getDefiningOp<ch::LoadOp>();
    if (!c || c.getName() != "precond_center")
      return apply->emitOpError("center must be the loaded \"precond_center\" (read per key head by the walk)");
    walk.setScanCenterAttr(b.getStringAttr("precond_center"));
  } else if (auto h = dyn_cast<ch::HypergradApplyOp>(apply)) {
    target = h.getTarget();
    key = h.getKey();
    start = h.getStart();
    walk.setScanReadout(h.getPost() ? ScanReadout::clamped_post : ScanReadout::clamped_pre);
    if (h.getClampMin()) walk.setScanMinAttr(b.getF32FloatAttr((float)h.getClampMin()->convertToDouble()));
    if (h.getClampMax()) walk.setScanMaxAttr(b.getF32FloatAttr((float)h.getClampMax()->convertToDouble()));
  } else {
    return apply->emitOpError("is not a preconditioner apply (chunk.accum_apply or chunk.hypergrad_apply)");
  }
  if (!isNormalizedLoad(key, "k"))
    return apply->emitOpError("key must be the l2norm of the loaded \"k\" (the walk scans the raw key rows)");
  if (!isPrecondScanResult(start))
    return apply->emitOpError("start must be the precond_scan kernel's chunk-start states (workspace \"pst\")");
  const bool writeSide = writeKey && result == writeKey, querySide = query && result == query;
  if (writeSide == querySide || !result.hasOneUse())
    return apply->emitOpError("must feed exactly one of the state pass's write key and the read-out's query");
  if (writeSide ? target != key : !isNormalizedLoad(target, "q"))
    return apply->emitOpError() << "scales " << (writeSide ? "a write key other than its own key" : "a query other "
                                                 "than the l2norm of the loaded \"q\"");
  walk.setRescale(writeSide ? WalkOperand::write_key : WalkOperand::query);
  if (writeSide) walk.setWriteKeyForm(WriteKeyForm::rebuilt);
  if (querySide) walk.setQueryForm(WriteKeyForm::rebuilt);
  walk.setScanRowsAttr(b.getStringAttr("k"));
  walk.setScanStartAttr(b.getStringAttr("pst"));
  // one warpgroup of producers; the budget moves registers to the consumers' state fragments: at BV = 128 the
  // 384-thread CTA starts with 168 per thread, and 256·224 + 128·56 fits the same 64K (ptxas: no spills at K = 128)
  walk.setProducerWarpsAttr(b.getI32IntegerAttr(4));
  walk.setRegistersAttr(b.getDenseI32ArrayAttr({224, 56}));
  return success();
}


/// The spread_steps that places the query on the step axis, looking through its l2norm; null if none.
static ch::SpreadStepsOp querySpread(Value query) {
  if (auto n = query.getDefiningOp<ch::L2NormOp>()) query = n.getInput();
  return query.getDefiningOp<ch::SpreadStepsOp>();
}

LogicalResult setRowMap(StateWalkOp walk, ch::OutputOp output, ch::GatherStepsOp gather, bool writesO) {
  ch::SpreadStepsOp q = output ? querySpread(output.getQuery()) : nullptr;
  if (!q && !gather) return success();
  if (!q || !gather || !writesO)
    return (q ? q.getOperation() : gather.getOperation())->emitOpError()
           << "has no tile lowering without its pair: a state walk over several steps per token reads the query "
              "spread onto the steps (chunk.spread_steps) and writes o gathered from them (chunk.gather_steps)";
  if (q.getSteps() != gather.getSteps())
    return gather.emitOpError() << "has steps = " << gather.getSteps() << " but the query's spread_steps has "
                                << q.getSteps();
  Builder b(walk.getContext());
  walk.setRowStepsAttr(b.getI64IntegerAttr(q.getSteps()));
  walk.setQueryPhaseAttr(b.getI64IntegerAttr(q.getStep()));
  walk.setOutputPhaseAttr(b.getI64IntegerAttr(gather.getStep()));
  return success();
}

}  // namespace dgps::tile

namespace dgps {

bool writeKeyCode(StringRef requested, const launch::FeatureSet& f, int* code, std::string* error) {
  if (requested == "rebuilt") {
    *code = launch::kWriteKeyRebuilt;
    return true;
  }
  if (requested == "auto") {
    // a query-side ema_sq_squash preconditioner with scalar or no decay (atq): its chunk_local forms P ⊙ q̂ for
    // Aqk anyway, and state_output then runs without a producer warpgroup
    if (launch::rebuildsQ(f)) {
      *code = f.source == 0 && !launch::needOpQ(f) ? launch::kWriteKeyStored : launch::kWriteKeyRebuilt;
      return true;
    }
    // a key-side preconditioner of either source: the walks load what chunk_local formed for its KKT
    *code = !launch::rebuildsKw(f) ? launch::kWriteKeyRebuilt
            : launch::needOpW(f)   ? launch::kWriteKeyStored
                                   : kAutoScalarWriteKey;
    return true;
  }
  if (requested != "stored" && requested != "segments") {
    *error = "write-key is \"" + requested.str() + "\"; expected rebuilt, stored, segments or auto";
    return false;
  }
  if (launch::rebuildsQ(f)) {
    // the option governs the walks' preconditioned operand, here the query (DeviceFeatures.h needPwq)
    if (requested == "segments") {
      *error = "write-key segments: the forward has a query-side preconditioner, whose query only the walks that "
               "write o read (state_output and segment_state_output alike); use stored, rebuilt or auto";
      return false;
    }
    if (launch::needOpQ(f)) {
      *error = "write-key stored: a query-side preconditioner with per-channel decay has no stored query (pwq is "
               "for scalar or no decay); use rebuilt or auto";
      return false;
    }
    *code = launch::kWriteKeyStored;
    return true;
  }
  if (!launch::rebuildsKw(f)) {
    *error = "write-key " + requested.str() +
             ": the forward has no preconditioner, so no walk rebuilds a write key or query (use rebuilt or auto)";
    return false;
  }
  if (requested == "segments" && launch::needOpW(f)) {
    *error = "write-key segments: with a per-channel decay the stored key is the gated write key \"opw\", which "
             "state_output reads as well (use stored, rebuilt or auto)";
    return false;
  }
  *code = requested == "stored" ? launch::kWriteKeyStored : launch::kWriteKeyStoredSegments;
  return true;
}

const char* writeKeyName(int code) {
  return code == launch::kWriteKeyStored           ? "stored"
         : code == launch::kWriteKeyStoredSegments ? "segments"
                                                   : "rebuilt";
}

}  // namespace dgps
