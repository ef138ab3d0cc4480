// Verifiers of the chunked hypergradient scan (ChunkPrecondScanOps.td): the symbolic dims of every operand
// and result, and the parameters' ranges.
#include <cmath>

#include "ShapeChecks.h"
#include "dgps/Dialect/Chunk/IR/Chunk.h"

using namespace mlir;
using namespace dgps::chunk;
using namespace dgps::chunk::shape;

#define CHECK(x) \
  if (failed(x)) return failure()

LogicalResult HypergradChunkSummaryOp::verify() {
  CHECK(expect(*this, getKey(), "key", {kBTHK}));
  CHECK(expect(*this, getGain(), "gain", {kBTHV}));
  CHECK(expect(*this, getRetention(), "retention", {kBTH}));
  CHECK(expect(*this, getReadRows(), "read_rows", {kBTHK}));
  CHECK(expect(*this, getBase(), "base", {kBTH}));
  CHECK(expect(*this, getWriteRows(), "write_rows", {kBTHK}));
  CHECK(expect(*this, getLogDecay(), "log_decay", {kBNTH}));
  const double eta = getEta().convertToDouble();
  if (!(eta >= 0.0) || !std::isfinite(eta)) return emitOpError() << "eta must be finite and >= 0, got " << eta;
  return success();
}

LogicalResult HypergradChunkPassOp::verify() {
  CHECK(expect(*this, getReadRows(), "read_rows", {kBTHK}));
  CHECK(expect(*this, getBase(), "base", {kBTH}));
  CHECK(expect(*this, getWriteRows(), "write_rows", {kBTHK}));
  CHECK(expect(*this, getLogDecay(), "log_decay", {kBNTH}));
  CHECK(expect(*this, getInit(), "init", {kNHK}));
  CHECK(expect(*this, getStart(), "start", {kBNTHK}));
  CHECK(expect(*this, getCoef(), "coef", {kBTH}));
  CHECK(expect(*this, getFinal(), "final", {kNHK}));
  const double d0 = getDInit().convertToDouble();
  if (!std::isfinite(d0)) return emitOpError() << "d_init must be finite, got " << d0;
  return success();
}

#undef CHECK
