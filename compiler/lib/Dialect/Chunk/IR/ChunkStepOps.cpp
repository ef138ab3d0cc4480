// Verifiers of the Householder-step ops (ChunkStepOps.td): spread_steps and gather_steps move a tensor
// between the token axis TQ and the step axis T of a multi-step recurrence, keeping every other dim.
#include "dgps/Dialect/Chunk/IR/Chunk.h"

#include "ShapeChecks.h"

using namespace mlir;
using namespace dgps::chunk;

namespace {

/// `from` has axis 1 = `fromAxis`, `to` the same dims with axis 1 = `toAxis`; 0 <= step < steps, steps >= 2.
LogicalResult verifyStepMove(Operation* op, Value from, Value to, Dim fromAxis, Dim toAxis, int64_t steps,
                             int64_t step) {
  if (steps < 2)
    return op->emitOpError() << "steps must be >= 2 (Householder steps per token), got " << steps;
  if (step < 0 || step >= steps)
    return op->emitOpError() << "step must be in [0, " << steps << "), got " << step;
  ArrayRef<Dim> in = cast<ChunkTensorType>(from.getType()).getDims();
  ArrayRef<Dim> out = cast<ChunkTensorType>(to.getType()).getDims();
  if (in.size() < 2 || in[0] != Dim::B || in[1] != fromAxis)
    return op->emitOpError() << "input has dims " << shape::dimsString(in) << "; expected [B, "
                             << stringifyDim(fromAxis) << ", ...]";
  shape::Dims expected(in.begin(), in.end());
  expected[1] = toAxis;
  if (out != ArrayRef<Dim>(expected))
    return op->emitOpError() << "result has dims " << shape::dimsString(out) << "; expected "
                             << shape::dimsString(expected);
  return success();
}

}  // namespace

LogicalResult SpreadStepsOp::verify() {
  return verifyStepMove(*this, getInput(), getResult(), Dim::TQ, Dim::T, getSteps(), getStep());
}

LogicalResult GatherStepsOp::verify() {
  return verifyStepMove(*this, getInput(), getResult(), Dim::T, Dim::TQ, getSteps(), getStep());
}
