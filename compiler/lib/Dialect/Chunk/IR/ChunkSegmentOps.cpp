// Verifiers of the sequence-parallel state-pass ops (ChunkSegmentOps.td): the symbolic dims of every
// operand and result, and no clamp on the segmented hypergradient scan (a clamp is not affine).
#include "ShapeChecks.h"
#include "dgps/Dialect/Chunk/IR/Chunk.h"

using namespace mlir;
using namespace dgps::chunk;
using namespace dgps::chunk::shape;

#define CHECK(x) \
  if (failed(x)) return failure()

namespace {
const Dims kBNSHVKV{Dim::B, Dim::NS, Dim::HV, Dim::K, Dim::V};
const Dims kBNSHVKK{Dim::B, Dim::NS, Dim::HV, Dim::K, Dim::K};
}  // namespace

LogicalResult SegmentSummaryOp::verify() {
  CHECK(expect(*this, getW(), "w", {kBTHVK}));
  CHECK(expect(*this, getU(), "u", {kBTHVV}));
  CHECK(expect(*this, getWriteKey(), "write key", {kBTHK}));
  CHECK(expectGate(*this, getGate()));
  CHECK(expect(*this, getExt(), "ext", {kBNSHVKV}));
  return expect(*this, getTrans(), "trans", {kBNSHVKK});
}

LogicalResult SegmentFoldOp::verify() {
  CHECK(expect(*this, getExt(), "ext", {kBNSHVKV}));
  CHECK(expect(*this, getTrans(), "trans", {kBNSHVKK}));
  CHECK(expect(*this, getInit(), "init", {kNHVKV}));
  CHECK(expect(*this, getStart(), "start", {kBNSHVKV}));
  return expect(*this, getFinal(), "final", {kNHVKV});
}

LogicalResult SegmentStatePassOp::verify() {
  CHECK(expect(*this, getW(), "w", {kBTHVK}));
  CHECK(expect(*this, getU(), "u", {kBTHVV}));
  CHECK(expect(*this, getWriteKey(), "write key", {kBTHK}));
  CHECK(expectGate(*this, getGate()));
  CHECK(expect(*this, getStart(), "start", {kBNSHVKV}));
  CHECK(expect(*this, getVNew(), "v_new", {kBTHVV}));
  return expect(*this, getStates(), "states", {kBNTHVKV});
}

LogicalResult AccumSegmentPassOp::verify() {
  CHECK(expect(*this, getSum(), "sum", {kBNTHK}));
  CHECK(expect(*this, getLogDecay(), "log_decay", {kBNTH}));
  CHECK(expect(*this, getInit(), "init", {kNHK}));
  CHECK(expect(*this, getStart(), "start", {kBNTHK}));
  return expect(*this, getFinal(), "final", {kNHK});
}

LogicalResult HypergradSegmentPassOp::verify() {
  CHECK(expect(*this, getKey(), "key", {kBTHK}));
  CHECK(expect(*this, getGain(), "gain", {kBTHV}));
  CHECK(expect(*this, getRetention(), "retention", {kBTH}));
  CHECK(expect(*this, getInit(), "init", {kNHK}));
  CHECK(expect(*this, getStart(), "start", {kBNTHK}));
  CHECK(expect(*this, getCoef(), "coef", {kBTH}));
  CHECK(expect(*this, getFinal(), "final", {kNHK}));
  if (!(getEta().convertToDouble() >= 0.0)) return emitOpError() << "eta must be >= 0";
  if (getClampMin() || getClampMax())
    return emitOpError() << "has a clamp: a clamped hypergradient step is not affine in d, so its scan "
                            "cannot be split into segments (docs/math.md §8); keep chunk.hypergrad_pass";
  return success();
}
