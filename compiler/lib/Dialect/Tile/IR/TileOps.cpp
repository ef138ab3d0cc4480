// Verifiers of the tile ops: memory spaces, layouts and shapes of operands and results (TileOps.td).
#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/dsl/Spec.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace dgps::tile;

#define GET_OP_CLASSES
#include "dgps/Dialect/Tile/IR/TileOps.cpp.inc"

namespace {

TileType tileOf(Value v) { return dyn_cast<TileType>(v.getType()); }

std::string str(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// A register tile of `dims` and `layout`, or an error naming `what`.
LogicalResult expectReg(Operation* op, Value v, std::initializer_list<Extent> dims, Layout layout,
                        const char* what) {
  TileType t = tileOf(v);
  if (t && t.isReg() && t.getLayout() == layout && llvm::equal(t.getDims(), dims)) return success();
  return op->emitOpError() << what << " must be a register tile with layout " << stringifyLayout(layout)
                           << ", got " << str(v.getType());
}

LogicalResult expectSmemK(Operation* op, Value v, const char* what) {
  TileType t = tileOf(v);
  if (t && t.getSpace() == Space::smem) return success();
  return op->emitOpError() << what << " must be a [K] shared tile, got " << str(v.getType());
}

}  // namespace

/// A Householder step index (tile.view / tile.load_scalar `step`): only on a per-token row (bh, bhv, bh_first), in
/// [0, kMaxHouseholderSteps).
static LogicalResult verifyStep(Operation* op, Index at, std::optional<uint64_t> step) {
  if (!step) return success();
  if (at != Index::bh && at != Index::bhv && at != Index::bh_first)
    return op->emitOpError() << "step " << *step << " at " << stringifyIndex(at)
                             << ": a step selects a row of a per-token tensor (bh, bhv or bh_first)";
  if (*step >= uint64_t(dgps::kMaxHouseholderSteps))
    return op->emitOpError() << "step is " << *step << "; expected 0.." << dgps::kMaxHouseholderSteps - 1
                             << " (a Householder step of the token)";
  return success();
}

LogicalResult ViewOp::verify() {
  if (getType().getSpace() != Space::global) return emitOpError("result must be a global tile");
  if (getIndex() == Index::none) return emitOpError("a view needs coordinates (h, bh, bhv or bh_first)");
  if (getIndex() == Index::bhv && !(*this)->getParentOfType<ForValueTilesOp>())
    return emitOpError("a view at bhv must be inside tile.for_value_tiles");
  return verifyStep(*this, getIndex(), getStep());
}

LogicalResult LoadScalarOp::verify() {
  if (getIndex() == Index::bhv && !(*this)->getParentOfType<ForValueTilesOp>())
    return emitOpError("a load at bhv must be inside tile.for_value_tiles");
  return verifyStep(*this, getIndex(), getStep());
}

/// The register tile a global view of `view` loads into: V becomes the CTA's BV window.
static std::optional<TileType> regOfView(TileType view) {
  SmallVector<Extent> dims;
  for (Extent e : view.getDims()) dims.push_back(e == Extent::V ? Extent::BV : e);
  Layout layout = dims.size() == 2 ? Layout::frag : dims[0] == Extent::K ? Layout::split : Layout::quad;
  return TileType::get(view.getContext(), dims, Float32Type::get(view.getContext()), Space::reg, layout);
}

LogicalResult LoadOp::verify() {
  TileType v = tileOf(getView());
  if (v.getSpace() != Space::global) return emitOpError("operand must be a global view");
  if (getType() != *regOfView(v))
    return emitOpError() << "loading " << str(v) << " gives " << str(*regOfView(v)) << ", not " << str(getType());
  return success();
}

LogicalResult StoreOp::verify() {
  TileType view = tileOf(getView()), val = tileOf(getValue());
  if (view.getSpace() != Space::global) return emitOpError("destination must be a global view");
  if (val != *regOfView(view))
    return emitOpError() << "storing into " << str(view) << " needs " << str(*regOfView(view)) << ", got "
                         << str(val);
  return success();
}

LogicalResult CopyOp::verify() {
  if (failed(expectReg(*this, getValue(), {Extent::K}, Layout::split, "operand"))) return failure();
  if (getType() != tileOf(getValue()).with(Space::smem, Layout::row))
    return emitOpError("result must be the [K] f32 shared tile");
  return success();
}

LogicalResult BarrierOp::verify() { return success(); }
LogicalResult ConstantOp::verify() { return success(); }

/// Elementwise rule: tiles are register tiles of the result type; scalars broadcast.
static LogicalResult verifyElementwise(Operation* op, ValueRange operands, Type result) {
  bool anyTile = false;
  for (Value v : operands) {
    if (v.getType().isF32()) continue;
    anyTile = true;
    TileType t = tileOf(v);
    if (!t.isReg()) return op->emitOpError() << "tile operands must be in registers, got " << str(t);
    if (t != result)
      return op->emitOpError() << "operand type " << str(t) << " differs from the result type " << str(result);
  }
  if (!anyTile && !result.isF32()) return op->emitOpError("scalar operands give a scalar (f32) result");
  return success();
}

#define DGPS_TILE_ELEMENTWISE(Op)                                                           \
  LogicalResult Op::verify() { return verifyElementwise(*this, getOperation()->getOperands(), getType()); }
DGPS_TILE_ELEMENTWISE(AddOp)
DGPS_TILE_ELEMENTWISE(SubOp)
DGPS_TILE_ELEMENTWISE(MulOp)
DGPS_TILE_ELEMENTWISE(DivOp)
DGPS_TILE_ELEMENTWISE(MaxOp)
DGPS_TILE_ELEMENTWISE(MinOp)
DGPS_TILE_ELEMENTWISE(ExpOp)
DGPS_TILE_ELEMENTWISE(Exp2Op)
DGPS_TILE_ELEMENTWISE(LogOp)
DGPS_TILE_ELEMENTWISE(AbsOp)
DGPS_TILE_ELEMENTWISE(RsqrtOp)
#undef DGPS_TILE_ELEMENTWISE

LogicalResult SelectPositiveOp::verify() { return success(); }

LogicalResult ReduceSumOp::verify() {
  // tile/reduce.cuh reduces one or two vectors per exchange (its scratch: the decode's 32 scalars, NT/32 per sum)
  if (getXs().empty() || getXs().size() > 2) return emitOpError("takes one or two operands, not ") << getXs().size();
  if (getSums().size() != getXs().size())
    return emitOpError() << "has " << getSums().size() << " results for " << getXs().size()
                         << " operands (one sum per operand)";
  for (Value x : getXs())
    if (failed(expectReg(*this, x, {Extent::K}, Layout::split, "operand"))) return failure();
  return success();
}

LogicalResult RowScaleOp::verify() {
  if (failed(expectReg(*this, getTile(), {Extent::K, Extent::BV}, Layout::frag, "tile"))) return failure();
  if (failed(expectSmemK(*this, getScale(), "scale"))) return failure();
  if (getType() != tileOf(getTile())) return emitOpError("result type must equal the tile's");
  return success();
}

LogicalResult ContractOp::verify() {
  if (failed(expectReg(*this, getTile(), {Extent::K, Extent::BV}, Layout::frag, "tile"))) return failure();
  if (getVectors().empty() || getVectors().size() > 2) return emitOpError("takes one or two vectors");
  if (getResults().size() != getVectors().size()) return emitOpError("needs one result per vector");
  for (Value v : getVectors())
    if (failed(expectSmemK(*this, v, "vector"))) return failure();
  for (Value r : getResults())
    if (failed(expectReg(*this, r, {Extent::BV}, Layout::quad, "result"))) return failure();
  return success();
}

LogicalResult OuterAddOp::verify() {
  if (failed(expectReg(*this, getTile(), {Extent::K, Extent::BV}, Layout::frag, "tile"))) return failure();
  if (failed(expectSmemK(*this, getRow(), "row vector"))) return failure();
  if (failed(expectReg(*this, getCol(), {Extent::BV}, Layout::quad, "column vector"))) return failure();
  if (getType() != tileOf(getTile())) return emitOpError("result type must equal the tile's");
  return success();
}

/// The tensor a global read names (tile.load of a view, or tile.load_scalar), or "" for any other op.
static StringRef readTensor(Operation* op) {
  if (auto l = dyn_cast<LoadOp>(op))
    if (auto v = l.getView().getDefiningOp<ViewOp>()) return v.getName();
  if (auto l = dyn_cast<LoadScalarOp>(op)) return l.getName();
  return "";
}

LogicalResult ForValueTilesOp::verify() {
  if ((*this)->getParentOfType<ForValueTilesOp>()) return emitOpError("must not be nested");
  // The emitter issues the body's reads ahead (the first tile's before the function's first op, the next
  // tile's during the current one), so what they read must not be written anywhere that could precede them.
  llvm::StringMap<Operation*> reads;
  getBody().walk([&](Operation* op) {
    StringRef t = readTensor(op);
    if (!t.empty()) reads.try_emplace(t, op);
  });
  if (reads.empty()) return success();
  Operation* scope = (*this)->getParentOfType<func::FuncOp>();
  if (!scope) scope = (*this)->getParentOp();
  LogicalResult ok = success();
  scope->walk([&](StoreOp st) {
    auto v = st.getView().getDefiningOp<ViewOp>();
    if (!v || failed(ok)) return;
    auto it = reads.find(v.getName());
    if (it == reads.end()) return;
    const bool ownWindow = getOperation()->isProperAncestor(st) && v.getIndex() == Index::bhv;
    if (!ownWindow) {
      ok = emitOpError() << "reads '" << v.getName()
                         << "' ahead of its body (tile.for_value_tiles prefetch), so it may write it only through a "
                            "view at bhv inside the body, not at "
                         << stringifyIndex(v.getIndex())
                         << (getOperation()->isProperAncestor(st) ? "" : " outside the body");
      return;
    }
    for (auto& [name, rd] : reads)
      if (name == v.getName() && rd->getBlock() == st->getBlock() && st->isBeforeInBlock(rd)) {
        ok = emitOpError() << "writes '" << v.getName() << "' before reading it in the same tile; the read is "
                           << "issued ahead of the body, so it must come first";
        return;
      }
  });
  return ok;
}
