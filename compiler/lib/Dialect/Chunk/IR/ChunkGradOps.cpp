// Verifiers of the adjoint ops (ChunkGradOps.td): every cotangent has the dims of the forward value it
// belongs to, and forward operands have the dims their forward op requires.
#include "ShapeChecks.h"
#include "dgps/Dialect/Chunk/IR/Chunk.h"

using namespace mlir;
using namespace dgps::chunk;
using namespace dgps::chunk::shape;

#define CHECK(x) \
  if (failed(x)) return failure()

namespace {

Dims dimsOf(Value v) { return Dims(cast<ChunkTensorType>(v.getType()).getDims()); }

/// The cotangent of a gate: the gate's dims, or [B,T,HV] when the forward op had no gate.
LogicalResult expectGateCotangent(Operation* op, Value gate, Value d) {
  return expect(op, d, "d_gate", {gate ? dimsOf(gate) : kBTHV});
}

}  // namespace

LogicalResult AddOp::verify() {
  if (getTerms().size() < 2) return emitOpError() << "sums " << getTerms().size() << " terms; expected two or more";
  for (Value t : getTerms())
    if (dimsOf(t) != dimsOf(getResult()))
      return emitOpError() << "term dims " << dimsString(dimsOf(t)) << " differ from the result's "
                           << dimsString(dimsOf(getResult()));
  return success();
}

LogicalResult L2NormGradOp::verify() {
  if (dimsOf(getInput()) != dimsOf(getDResult()) || dimsOf(getInput()) != dimsOf(getDInput()))
    return emitOpError() << "input, d_result and d_input must have the same dims";
  if (!(getEps().convertToDouble() > 0.0)) return emitOpError() << "eps must be > 0";
  return success();
}

LogicalResult GateCumsumGradOp::verify() {
  CHECK(expectGate(*this, getDCumsum()));
  return expect(*this, getDGate(), "d_gate", {dimsOf(getDCumsum())});
}

LogicalResult KKTGradOp::verify() {
  CHECK(expect(*this, getReadKey(), "read key", {kBTHK}));
  CHECK(expect(*this, getWriteKey(), "write key", {kBTHK}));
  CHECK(expect(*this, getGain(), "gain", {kBTHV}));
  CHECK(expectGate(*this, getGate()));
  CHECK(expect(*this, getDKkt(), "d_kkt", {kBTHVC}));
  CHECK(expect(*this, getDReadKey(), "d_read_key", {kBTHK}));
  CHECK(expect(*this, getDWriteKey(), "d_write_key", {kBTHK}));
  CHECK(expect(*this, getDGain(), "d_gain", {kBTHV}));
  return expectGateCotangent(*this, getGate(), getDGate());
}

LogicalResult SolveTrilGradOp::verify() {
  CHECK(expect(*this, getTril(), "tril", {kBTHVC}));
  CHECK(expect(*this, getDTril(), "d_tril", {kBTHVC}));
  return expect(*this, getDKkt(), "d_kkt", {kBTHVC});
}

LogicalResult WYRecomputeGradOp::verify() {
  CHECK(expect(*this, getTril(), "tril", {kBTHVC}));
  CHECK(expect(*this, getReadKey(), "read key", {kBTHK}));
  CHECK(expect(*this, getValue(), "value", {kBTHVV}));
  CHECK(expect(*this, getGain(), "gain", {kBTHV}));
  CHECK(expectGate(*this, getGate()));
  CHECK(expect(*this, getDW(), "d_w", {kBTHVK}));
  CHECK(expect(*this, getDU(), "d_u", {kBTHVV}));
  CHECK(expect(*this, getDTril(), "d_tril", {kBTHVC}));
  CHECK(expect(*this, getDReadKey(), "d_read_key", {kBTHK}));
  CHECK(expect(*this, getDValue(), "d_value", {kBTHVV}));
  CHECK(expect(*this, getDGain(), "d_gain", {kBTHV}));
  return expectGateCotangent(*this, getGate(), getDGate());
}

LogicalResult GainScaleGradOp::verify() {
  CHECK(expect(*this, getValue(), "value", {kBTHVV}));
  CHECK(expect(*this, getGain(), "gain", {kBTHV}));
  CHECK(expect(*this, getDResult(), "d_result", {kBTHVV}));
  CHECK(expect(*this, getDValue(), "d_value", {kBTHVV}));
  return expect(*this, getDGain(), "d_gain", {kBTHV});
}

LogicalResult StatePassGradOp::verify() {
  CHECK(expect(*this, getW(), "w", {kBTHVK}));
  CHECK(expect(*this, getWriteKey(), "write key", {kBTHK}));
  CHECK(expectGate(*this, getGate()));
  CHECK(expect(*this, getVNew(), "v_new", {kBTHVV}));
  CHECK(expect(*this, getStates(), "states", {kBNTHVKV}));
  CHECK(expect(*this, getDVNew(), "d_v_new", {kBTHVV}));
  CHECK(expect(*this, getDStates(), "d_states", {kBNTHVKV}));
  CHECK(expect(*this, getDFinal(), "d_final", {kNHVKV}));
  CHECK(expect(*this, getDW(), "d_w", {kBTHVK}));
  CHECK(expect(*this, getDU(), "d_u", {kBTHVV}));
  CHECK(expect(*this, getDWriteKey(), "d_write_key", {kBTHK}));
  CHECK(expectGateCotangent(*this, getGate(), getDGate()));
  return expect(*this, getDInit(), "d_init", {kNHVKV});
}

LogicalResult QKAttnGradOp::verify() {
  CHECK(expect(*this, getQuery(), "query", {kBTHK}));
  CHECK(expect(*this, getWriteKey(), "write key", {kBTHK}));
  CHECK(expectGate(*this, getGate()));
  CHECK(expect(*this, getDAttn(), "d_attn", {kBTHVC}));
  if (auto s = getScale(); s && !(s->convertToDouble() > 0.0)) return emitOpError() << "scale must be > 0";
  CHECK(expect(*this, getDQuery(), "d_query", {kBTHK}));
  CHECK(expect(*this, getDWriteKey(), "d_write_key", {kBTHK}));
  return expectGateCotangent(*this, getGate(), getDGate());
}

LogicalResult OutputGradOp::verify() {
  CHECK(expect(*this, getQuery(), "query", {kBTHK}));
  CHECK(expect(*this, getVNew(), "v_new", {kBTHVV}));
  CHECK(expect(*this, getStates(), "states", {kBNTHVKV}));
  CHECK(expect(*this, getAttn(), "attn", {kBTHVC}));
  CHECK(expectGate(*this, getGate()));
  CHECK(expect(*this, getDO(), "d_o", {kBTHVV}));
  if (auto s = getScale(); s && !(s->convertToDouble() > 0.0)) return emitOpError() << "scale must be > 0";
  CHECK(expect(*this, getDQuery(), "d_query", {kBTHK}));
  CHECK(expect(*this, getDVNew(), "d_v_new", {kBTHVV}));
  CHECK(expect(*this, getDStates(), "d_states", {kBNTHVKV}));
  CHECK(expect(*this, getDAttn(), "d_attn", {kBTHVC}));
  return expectGateCotangent(*this, getGate(), getDGate());
}

LogicalResult AccumScanGradOp::verify() {
  CHECK(expect(*this, getKey(), "key", {kBTHK}));
  CHECK(expect(*this, getGate(), "gate", {kBTH}));
  CHECK(expect(*this, getGain(), "gain", {kBTH}));
  CHECK(expect(*this, getInit(), "init", {kNHK}));
  CHECK(expect(*this, getAccum(), "accum", {kBTHK}));
  CHECK(expect(*this, getDAccum(), "d_accum", {kBTHK}));
  CHECK(expect(*this, getDFinal(), "d_final", {kNHK}));
  CHECK(expect(*this, getDKey(), "d_key", {kBTHK}));
  CHECK(expect(*this, getDGate(), "d_gate", {kBTH}));
  CHECK(expect(*this, getDGain(), "d_gain", {kBTH}));
  return expect(*this, getDInit(), "d_init", {kNHK});
}

LogicalResult SquashApplyGradOp::verify() {
  CHECK(expect(*this, getTarget(), "target", {kBTHK}));
  CHECK(expect(*this, getAccum(), "accum", {kBTHK}));
  CHECK(expect(*this, getCenter(), "center", {kHead}));
  CHECK(expect(*this, getDResult(), "d_result", {kBTHK}));
  CHECK(expect(*this, getDTarget(), "d_target", {kBTHK}));
  CHECK(expect(*this, getDAccum(), "d_accum", {kBTHK}));
  CHECK(expect(*this, getDCenter(), "d_center", {kHead}));
  if (!(getX().convertToDouble() >= 1.0)) return emitOpError() << "x = " << getX().convertToDouble() << "; expected x >= 1";
  if (!(getEps().convertToDouble() > 0.0)) return emitOpError() << "eps must be > 0";
  return success();
}

LogicalResult HypergradScanGradOp::verify() {
  CHECK(expect(*this, getKey(), "key", {kBTHK}));
  CHECK(expect(*this, getGain(), "gain", {kBTHV}));
  CHECK(expect(*this, getRetention(), "retention", {kBTH}));
  CHECK(expect(*this, getInit(), "init", {kNHK}));
  CHECK(expect(*this, getDiag(), "diag", {kBTHK}));
  CHECK(expect(*this, getDDiag(), "d_diag", {kBTHK}));
  CHECK(expect(*this, getDFinal(), "d_final", {kNHK}));
  CHECK(expect(*this, getDKey(), "d_key", {kBTHK}));
  CHECK(expect(*this, getDGain(), "d_gain", {kBTHV}));
  CHECK(expect(*this, getDRetention(), "d_retention", {kBTH}));
  CHECK(expect(*this, getDInitState(), "d_init_state", {kNHK}));
  // The forward scan's parameters (hypergrad_scan's verifier).
  if (!(getEta().convertToDouble() >= 0.0)) return emitOpError() << "eta must be >= 0";
  auto mn = getClampMin(), mx = getClampMax();
  if (mn && mx && mn->convertToDouble() > mx->convertToDouble())
    return emitOpError() << "clamp_min exceeds clamp_max";
  return success();
}
