// Verifiers of the ops over chunk summaries (TilePrecondOps.td): operand shapes, element types and memory
// spaces, and the workspace regions each op may read or write (tile.workspace, Workspace.h).
#include "dgps/Dialect/Tile/IR/Tile.h"

using namespace mlir;
using namespace dgps::tile;

namespace {

bool isShared(Value v, std::initializer_list<Extent> dims, bool f32) {
  auto t = dyn_cast<TileType>(v.getType());
  return t && t.getSpace() == Space::smem && llvm::equal(t.getDims(), dims) && t.getElementType().isF32() == f32;
}

/// `name` must be one of `allowed`; the error names the op's `what` and the list.
LogicalResult expectName(Operation* op, StringRef what, StringRef name, std::initializer_list<const char*> allowed) {
  for (const char* a : allowed)
    if (name == a) return success();
  std::string list;
  for (const char* a : allowed) list += (list.empty() ? "\"" : ", \"") + std::string(a) + "\"";
  return op->emitOpError() << what << " \"" << name << "\"; expected " << list;
}

}  // namespace

LogicalResult ChannelScanTotalOp::verify() {
  if (!isShared(getX(), {Extent::C, Extent::K}, false))
    return emitOpError("rows must be a [C, K] 16-bit shared tile");
  if (!isShared(getA(), {Extent::C}, true)) return emitOpError("a, b and r must be [C] f32 shared vectors");
  return expectName(*this, "writes workspace region", getInto(), {"psum"});
}

LogicalResult StoreSumExpOp::verify() {
  if (!isShared(getX(), {Extent::C}, true)) return emitOpError("operand must be a [C] f32 shared vector");
  return expectName(*this, "writes workspace region", getInto(), {"pgam"});
}

LogicalResult ChunkAffineScanOp::verify() {
  if (failed(expectName(*this, "starts from argument", getStart(), {"initial_precond_state"})) ||
      failed(expectName(*this, "reads the decay from workspace region", getDecay(), {"pgam"})) ||
      failed(expectName(*this, "reads the step from workspace region", getStep(), {"psum"})) ||
      failed(expectName(*this, "writes the chunk starts to workspace region", getStarts(), {"pst"})))
    return failure();
  if (getFinal()) return expectName(*this, "writes the final state to argument", *getFinal(), {"final_precond_state"});
  return success();
}

LogicalResult HypergradChunkSummaryOp::verify() {
  if (!isShared(getX(), {Extent::C, Extent::K}, false))
    return emitOpError("key rows must be a [C, K] 16-bit shared tile");
  if (!isShared(getBeta(), {Extent::C}, true) || !isShared(getRetention(), {Extent::C}, true))
    return emitOpError("beta and retention must be [C] f32 shared vectors");
  if (getL2Eps() && !(getL2Eps()->convertToDouble() > 0.0))
    return emitOpError() << "l2_eps must be positive (got " << getL2Eps()->convertToDouble() << ")";
  if (failed(expectName(*this, "writes the triangular block to workspace region", getTri(), {"hgtri"})))
    return failure();
  return expectName(*this, "writes the per-row vectors to workspace region", getVec(), {"hgvec"});
}

LogicalResult HypergradChunkPassOp::verify() {
  if (failed(expectName(*this, "reads key rows from argument", getKey(), {"k"})) ||
      failed(expectName(*this, "starts from argument", getStart(), {"initial_precond_state"})) ||
      failed(expectName(*this, "reads the triangular block from workspace region", getTri(), {"hgtri"})) ||
      failed(expectName(*this, "reads the per-row vectors from workspace region", getVec(), {"hgvec"})) ||
      failed(expectName(*this, "writes the chunk starts to workspace region", getStarts(), {"pst"})) ||
      failed(expectName(*this, "writes the step coefficients to workspace region", getCoef(), {"pcoef"})))
    return failure();
  if (getFinal()) return expectName(*this, "writes the final state to argument", *getFinal(), {"final_precond_state"});
  return success();
}

LogicalResult HypergradTokenScanOp::verify() {
  if (failed(expectName(*this, "reads key rows from argument", getKey(), {"k"})) ||
      (getGain() && failed(expectName(*this, "reads the gain from argument", *getGain(), {"beta"}))) ||
      (getRetention() &&
       failed(expectName(*this, "reads the retention from argument", *getRetention(), {"precond_g"}))) ||
      failed(expectName(*this, "starts from argument", getStart(), {"initial_precond_state"})) ||
      failed(expectName(*this, "writes the chunk starts to workspace region", getStarts(), {"pst"})) ||
      failed(expectName(*this, "writes the step coefficients to workspace region", getCoef(), {"pcoef"})))
    return failure();
  if (!getClampMin() && !getClampMax())
    return emitOpError("has no clamp bound; an unclamped d-scan takes the chunked form "
                       "(tile.hypergrad_chunk_summary / tile.hypergrad_chunk_pass)");
  if (getClampMin() && getClampMax() && getClampMin()->convertToDouble() > getClampMax()->convertToDouble())
    return emitOpError() << "clamp_min " << getClampMin()->convertToDouble() << " exceeds clamp_max "
                         << getClampMax()->convertToDouble();
  if (getL2Eps() && !(getL2Eps()->convertToDouble() > 0.0))
    return emitOpError() << "l2_eps must be positive (got " << getL2Eps()->convertToDouble() << ")";
  if (getFinal()) return expectName(*this, "writes the final state to argument", *getFinal(), {"final_precond_state"});
  return success();
}
