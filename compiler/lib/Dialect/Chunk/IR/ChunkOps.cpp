// chunk ops: shape verifiers (symbolic dims of every operand and result), canonicalisation
// patterns (drop constant-zero gates and constant-unit gains) and the kernel-op verifier.
#include "dgps/Dialect/Chunk/IR/Chunk.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace dgps::chunk;

#define GET_OP_CLASSES
#include "dgps/Dialect/Chunk/IR/ChunkOps.cpp.inc"

#include "ShapeChecks.h"

using namespace dgps::chunk::shape;

#define CHECK(x) \
  if (failed(x)) return failure()

static const llvm::StringSet<>& forwardInputs() {
  static const llvm::StringSet<> known = {"q", "k", "v", "g", "beta", "precond_g", "precond_beta",
                                           "precond_center", "initial_state", "initial_precond_state"};
  return known;
}

/// A forward intermediate the forward writes for the backward (--chunk-derive-backward's keep list).
static bool isSavedName(StringRef name) { return name.starts_with(kSavedPrefix) && name.size() > 6; }

LogicalResult LoadOp::verify() {
  static const llvm::StringSet<> cotangents = {"do", "dfinal_state", "dfinal_precond_state"};
  if (!forwardInputs().contains(getName()) && !cotangents.contains(getName()) && !isSavedName(getName()))
    return emitOpError() << "loads unknown input '" << getName()
                         << "'; expected a forward input (q, k, v, g, beta, precond_g, "
                            "precond_beta, precond_center, initial_state, initial_precond_state), a "
                            "cotangent (do, dfinal_state, dfinal_precond_state) or a saved forward "
                            "value (saved.<name>)";
  return success();
}

LogicalResult StoreOp::verify() {
  static const llvm::StringSet<> known = {"o", "final_state", "final_precond_state"};
  StringRef name = getName();
  bool gradient = name.starts_with("d") && forwardInputs().contains(name.drop_front());
  if (!known.contains(name) && !gradient && !isSavedName(name))
    return emitOpError() << "stores unknown output '" << name
                         << "'; expected o, final_state, final_precond_state, a gradient d<input> "
                            "or a saved forward value (saved.<name>)";
  return success();
}

LogicalResult SplatOp::verify() { return success(); }

LogicalResult L2NormOp::verify() {
  if (cast<ChunkTensorType>(getInput().getType()).getDims() != cast<ChunkTensorType>(getType()).getDims())
    return emitOpError() << "result dims differ from the input's";
  if (!(getEps().convertToDouble() > 0.0)) return emitOpError() << "eps must be > 0";
  return success();
}

LogicalResult GateCumsumOp::verify() {
  CHECK(expectGate(*this, getGate()));
  CHECK(expect(*this, getResult(), "result", {cast<ChunkTensorType>(getGate().getType()).getDims().size() == 3 ? kBTHV : kBTHVK}));
  return success();
}

LogicalResult KKTOp::verify() {
  CHECK(expect(*this, getReadKey(), "read key", {kBTHK}));
  CHECK(expect(*this, getWriteKey(), "write key", {kBTHK}));
  CHECK(expect(*this, getGain(), "gain", {kBTHV}));
  CHECK(expectGate(*this, getGate()));
  return expect(*this, getResult(), "result", {kBTHVC});
}

LogicalResult SolveTrilOp::verify() {
  CHECK(expect(*this, getKkt(), "operand", {kBTHVC}));
  return expect(*this, getResult(), "result", {kBTHVC});
}

LogicalResult WYRecomputeOp::verify() {
  CHECK(expect(*this, getTril(), "tril", {kBTHVC}));
  CHECK(expect(*this, getReadKey(), "read key", {kBTHK}));
  CHECK(expect(*this, getValue(), "value", {kBTHVV}));
  CHECK(expect(*this, getGain(), "gain", {kBTHV}));
  CHECK(expectGate(*this, getGate()));
  CHECK(expect(*this, getW(), "w", {kBTHVK}));
  return expect(*this, getU(), "u", {kBTHVV});
}

LogicalResult GainScaleOp::verify() {
  CHECK(expect(*this, getValue(), "value", {kBTHVV}));
  CHECK(expect(*this, getGain(), "gain", {kBTHV}));
  if (getValue().getType() != getType()) return emitOpError() << "result type must equal the value type";
  return success();
}

LogicalResult StatePassOp::verify() {
  CHECK(expect(*this, getW(), "w", {kBTHVK}));
  CHECK(expect(*this, getU(), "u", {kBTHVV}));
  CHECK(expect(*this, getWriteKey(), "write key", {kBTHK}));
  CHECK(expectGate(*this, getGate()));
  CHECK(expect(*this, getInit(), "init", {kNHVKV}));
  CHECK(expect(*this, getVNew(), "v_new", {kBTHVV}));
  CHECK(expect(*this, getStates(), "states", {kBNTHVKV}));
  return expect(*this, getFinal(), "final", {kNHVKV});
}

LogicalResult QKAttnOp::verify() {
  CHECK(expect(*this, getQuery(), "query", {kBTHK}));
  CHECK(expect(*this, getWriteKey(), "write key", {kBTHK}));
  CHECK(expectGate(*this, getGate()));
  if (auto s = getScale(); s && !(s->convertToDouble() > 0.0)) return emitOpError() << "scale must be > 0";
  return expect(*this, getResult(), "result", {kBTHVC});
}

LogicalResult OutputOp::verify() {
  CHECK(expect(*this, getQuery(), "query", {kBTHK}));
  CHECK(expect(*this, getVNew(), "v_new", {kBTHVV}));
  CHECK(expect(*this, getStates(), "states", {kBNTHVKV}));
  CHECK(expect(*this, getAttn(), "attn", {kBTHVC}));
  CHECK(expectGate(*this, getGate()));
  if (auto s = getScale(); s && !(s->convertToDouble() > 0.0)) return emitOpError() << "scale must be > 0";
  return expect(*this, getResult(), "result", {kBTHVV});
}

LogicalResult AccumScanOp::verify() {
  CHECK(expect(*this, getKey(), "key", {kBTHK}));
  CHECK(expect(*this, getGate(), "gate", {kBTH}));
  CHECK(expect(*this, getGain(), "gain", {kBTH}));
  CHECK(expect(*this, getInit(), "init", {kNHK}));
  CHECK(expect(*this, getAccum(), "accum", {kBTHK}));
  return expect(*this, getFinal(), "final", {kNHK});
}

static LogicalResult verifySquashParams(Operation* op, double x, double eps) {
  if (!(x >= 1.0)) return op->emitOpError() << "x = " << x << "; expected x >= 1";
  if (!(eps > 0.0)) return op->emitOpError() << "eps = " << eps << "; expected eps > 0";
  return success();
}

LogicalResult SquashApplyOp::verify() {
  CHECK(expect(*this, getTarget(), "target", {kBTHK}));
  CHECK(expect(*this, getAccum(), "accum", {kBTHK}));
  CHECK(expect(*this, getCenter(), "center", {kHead}));
  CHECK(expect(*this, getResult(), "result", {kBTHK}));
  return verifySquashParams(*this, getX().convertToDouble(), getEps().convertToDouble());
}

LogicalResult AccumSummaryOp::verify() {
  CHECK(expect(*this, getKey(), "key", {kBTHK}));
  CHECK(expect(*this, getGate(), "gate", {kBTH}));
  CHECK(expect(*this, getGain(), "gain", {kBTH}));
  CHECK(expect(*this, getSum(), "sum", {kBNTHK}));
  return expect(*this, getLogDecay(), "log_decay", {kBNTH});
}

LogicalResult AccumPassOp::verify() {
  CHECK(expect(*this, getSum(), "sum", {kBNTHK}));
  CHECK(expect(*this, getLogDecay(), "log_decay", {kBNTH}));
  CHECK(expect(*this, getInit(), "init", {kNHK}));
  CHECK(expect(*this, getStart(), "start", {kBNTHK}));
  return expect(*this, getFinal(), "final", {kNHK});
}

LogicalResult AccumApplyOp::verify() {
  CHECK(expect(*this, getTarget(), "target", {kBTHK}));
  CHECK(expect(*this, getKey(), "key", {kBTHK}));
  CHECK(expect(*this, getGate(), "gate", {kBTH}));
  CHECK(expect(*this, getGain(), "gain", {kBTH}));
  CHECK(expect(*this, getStart(), "start", {kBNTHK}));
  CHECK(expect(*this, getCenter(), "center", {kHead}));
  CHECK(expect(*this, getResult(), "result", {kBTHK}));
  return verifySquashParams(*this, getX().convertToDouble(), getEps().convertToDouble());
}

template <typename OpTy>
static LogicalResult verifyHypergradParams(OpTy op) {
  if (!(op.getEta().convertToDouble() >= 0.0)) return op.emitOpError() << "eta must be >= 0";
  auto mn = op.getClampMin(), mx = op.getClampMax();
  if (mn && mx && mn->convertToDouble() > mx->convertToDouble())
    return op.emitOpError() << "clamp_min exceeds clamp_max";
  return success();
}

LogicalResult HypergradScanOp::verify() {
  CHECK(expect(*this, getKey(), "key", {kBTHK}));
  CHECK(expect(*this, getGain(), "gain", {kBTHV}));
  CHECK(expect(*this, getRetention(), "retention", {kBTH}));
  CHECK(expect(*this, getInit(), "init", {kNHK}));
  CHECK(expect(*this, getDiag(), "diag", {kBTHK}));
  CHECK(expect(*this, getFinal(), "final", {kNHK}));
  return verifyHypergradParams(*this);
}

LogicalResult DiagApplyOp::verify() {
  CHECK(expect(*this, getTarget(), "target", {kBTHK}));
  CHECK(expect(*this, getDiag(), "diag", {kBTHK}));
  return expect(*this, getResult(), "result", {kBTHK});
}

LogicalResult HypergradPassOp::verify() {
  CHECK(expect(*this, getKey(), "key", {kBTHK}));
  CHECK(expect(*this, getGain(), "gain", {kBTHV}));
  CHECK(expect(*this, getRetention(), "retention", {kBTH}));
  CHECK(expect(*this, getInit(), "init", {kNHK}));
  CHECK(expect(*this, getStart(), "start", {kBNTHK}));
  CHECK(expect(*this, getCoef(), "coef", {kBTH}));
  CHECK(expect(*this, getFinal(), "final", {kNHK}));
  return verifyHypergradParams(*this);
}

LogicalResult HypergradApplyOp::verify() {
  CHECK(expect(*this, getTarget(), "target", {kBTHK}));
  CHECK(expect(*this, getKey(), "key", {kBTHK}));
  CHECK(expect(*this, getCoef(), "coef", {kBTH}));
  CHECK(expect(*this, getRetention(), "retention", {kBTH}));
  CHECK(expect(*this, getStart(), "start", {kBNTHK}));
  CHECK(expect(*this, getResult(), "result", {kBTHK}));
  return verifyHypergradParams(*this);
}

LogicalResult KernelOp::verify() {
  // segment_summary and segment_fold: a plan segmented by --chunk-segment-state-pass (ChunkSegmentOps.td).
  static const llvm::StringSet<> roles = {"precond_summary", "precond_scan", "chunk_local", "segment_summary",
                                          "segment_fold", "state_output"};
  if (!roles.contains(getRole()) && !llvm::is_contained(kBackwardRoles, getRole()))
    return emitOpError() << "unknown role '" << getRole()
                         << "'; expected precond_summary, precond_scan, chunk_local, segment_summary, segment_fold or "
                            "state_output (forward) "
                            "or a backward role (bwd_precond_scan, ..., bwd_prologue_grad)";
  auto yield = cast<YieldOp>(getBody().front().getTerminator());
  if (yield.getValues().size() != getNumResults())
    return emitOpError() << "yields " << yield.getValues().size() << " values for " << getNumResults()
                         << " buffers";
  for (auto [v, t] : llvm::zip(yield.getValues(), getResultTypes())) {
    if (!cast<ChunkTensorType>(t).getGlobal())
      return emitOpError() << "buffer type " << t << " must be marked global (device memory)";
    if (cast<ChunkTensorType>(v.getType()).withGlobal(true) != t)
      return emitOpError() << "yields " << v.getType() << " for buffer " << t;
  }
  return success();
}

LogicalResult YieldOp::verify() { return success(); }

#undef CHECK

//===----------------------------------------------------------------------===//
// Canonicalisation: constant-zero gates and constant-unit gains fold away
//===----------------------------------------------------------------------===//

namespace {

bool isSplatOf(Value v, double c) {
  auto s = v ? v.getDefiningOp<SplatOp>() : SplatOp();
  return s && s.getValue().convertToDouble() == c;
}

/// Removes the first optional operand that holds the given constant. One operand per rewrite:
/// removing an operand shifts the positions of the others, so the driver simply re-applies.
LogicalResult dropConstantOperand(Operation* op, PatternRewriter& rewriter,
                                  std::initializer_list<std::pair<MutableOperandRange, double>> ranges) {
  for (auto [range, constant] : ranges) {
    if (range.size() != 1 || !isSplatOf(range[0].get(), constant)) continue;
    MutableOperandRange r = range;
    rewriter.modifyOpInPlace(op, [&] { r.clear(); });
    return success();
  }
  return failure();
}

}  // namespace

OpFoldResult GateCumsumOp::fold(FoldAdaptor) {
  // The cumsum of a zero gate is zero.
  if (isSplatOf(getGate(), 0.0) && getGate().getType() == getType()) return getGate();
  return {};
}

void KKTOp::getCanonicalizationPatterns(RewritePatternSet& patterns, MLIRContext*) {
  patterns.add(+[](KKTOp op, PatternRewriter& rw) {
    return dropConstantOperand(op, rw, {{op.getGainMutable(), 1.0}, {op.getGateMutable(), 0.0}});
  });
}

void WYRecomputeOp::getCanonicalizationPatterns(RewritePatternSet& patterns, MLIRContext*) {
  patterns.add(+[](WYRecomputeOp op, PatternRewriter& rw) {
    return dropConstantOperand(op, rw, {{op.getGainMutable(), 1.0}, {op.getGateMutable(), 0.0}});
  });
}

void GainScaleOp::getCanonicalizationPatterns(RewritePatternSet& patterns, MLIRContext*) {
  patterns.add(+[](GainScaleOp op, PatternRewriter& rw) -> LogicalResult {
    if (!op.getGain()) {  // U = V when the gain is 1
      rw.replaceOp(op, op.getValue());
      return success();
    }
    return dropConstantOperand(op, rw, {{op.getGainMutable(), 1.0}});
  });
}

void StatePassOp::getCanonicalizationPatterns(RewritePatternSet& patterns, MLIRContext*) {
  patterns.add(+[](StatePassOp op, PatternRewriter& rw) {
    return dropConstantOperand(op, rw, {{op.getGateMutable(), 0.0}, {op.getInitMutable(), 0.0}});
  });
}

void QKAttnOp::getCanonicalizationPatterns(RewritePatternSet& patterns, MLIRContext*) {
  patterns.add(+[](QKAttnOp op, PatternRewriter& rw) {
    return dropConstantOperand(op, rw, {{op.getGateMutable(), 0.0}});
  });
}

void OutputOp::getCanonicalizationPatterns(RewritePatternSet& patterns, MLIRContext*) {
  patterns.add(+[](OutputOp op, PatternRewriter& rw) {
    return dropConstantOperand(op, rw, {{op.getGateMutable(), 0.0}});
  });
}

void AccumScanOp::getCanonicalizationPatterns(RewritePatternSet& patterns, MLIRContext*) {
  patterns.add(+[](AccumScanOp op, PatternRewriter& rw) {
    return dropConstantOperand(op, rw, {{op.getGateMutable(), 0.0}, {op.getGainMutable(), 1.0},
                                        {op.getInitMutable(), 0.0}});
  });
}

void HypergradScanOp::getCanonicalizationPatterns(RewritePatternSet& patterns, MLIRContext*) {
  patterns.add(+[](HypergradScanOp op, PatternRewriter& rw) {
    return dropConstantOperand(op, rw, {{op.getGainMutable(), 1.0}, {op.getRetentionMutable(), 0.0}});
  });
}
