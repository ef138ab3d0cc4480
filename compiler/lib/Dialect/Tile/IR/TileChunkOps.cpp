// Verifiers of the chunk-role tile ops (TileChunkOps.td): shapes, element types and memory spaces of
// operands and results, workspace region names, and that in-place ops consume their operand.
#include <set>

#include "dgps/Dialect/Tile/IR/Tile.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace dgps::tile;

namespace {

std::string str(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// A shared tile of exactly `dims` (f32 unless `anyElem`), or an error naming `what`.
LogicalResult expectShared(Operation* op, Value v, std::initializer_list<Extent> dims, const char* what,
                           bool anyElem = false) {
  auto t = dyn_cast<TileType>(v.getType());
  if (t && t.getSpace() == Space::smem && llvm::equal(t.getDims(), dims) && (anyElem || t.getElementType().isF32()))
    return success();
  std::string shape;
  for (Extent e : dims) shape += (shape.empty() ? "" : ", ") + stringifyExtent(e).str();
  return op->emitOpError() << what << " must be a [" << shape << "] " << (anyElem ? "" : "f32 ")
                           << "shared tile, got " << str(v.getType());
}

/// A [C, K] 16-bit shared tile (the input dtype or bf16).
LogicalResult expectRows16(Operation* op, Value v, const char* what) {
  if (failed(expectShared(op, v, {Extent::C, Extent::K}, what, true))) return failure();
  if (cast<TileType>(v.getType()).getElementType().isF32())
    return op->emitOpError() << what << " must hold 16-bit elements (bf16 or f16), got f32";
  return success();
}

/// The workspace regions a chunk role may write (tile.workspace, Workspace.h) and what each holds.
LogicalResult expectRegion(Operation* op, StringRef into, std::initializer_list<const char*> allowed) {
  for (const char* a : allowed)
    if (into == a) return success();
  std::string list;
  for (const char* a : allowed) list += (list.empty() ? "\"" : ", \"") + std::string(a) + "\"";
  return op->emitOpError() << "writes workspace region \"" << into << "\"; expected one of " << list;
}

/// An in-place op: the result has the operand's type and nothing reads the operand after the op.
LogicalResult expectInPlace(Operation* op, Value operand) {
  if (op->getResult(0).getType() != operand.getType())
    return op->emitOpError() << "result type must equal the operand's (in place), got "
                             << str(op->getResult(0).getType());
  for (Operation* user : operand.getUsers())
    if (user != op && (user->getBlock() != op->getBlock() || op->isBeforeInBlock(user)))
      return op->emitOpError("works in place: its operand must not be used after it (use the result)");
  return success();
}

/// An op that overwrites `operand` without a result for it: nothing reads the operand after the op.
LogicalResult expectConsumed(Operation* op, Value operand, const char* what) {
  for (Operation* user : operand.getUsers())
    if (user != op && (user->getBlock() != op->getBlock() || op->isBeforeInBlock(user)))
      return op->emitOpError() << "overwrites its " << what << " (a [C, K] gate scales it in place): it must not "
                               << "be used after this op";
  return success();
}

}  // namespace

LogicalResult ChunkRowsOp::verify() {
  auto t = cast<TileType>(getType());
  if (t.getSpace() != Space::smem) return emitOpError("result must be a shared tile");
  if (!llvm::equal(t.getDims(), std::initializer_list<Extent>{Extent::C, Extent::K}) &&
      !(llvm::equal(t.getDims(), std::initializer_list<Extent>{Extent::C}) && t.getElementType().isF32()))
    return emitOpError() << "loads [C, K] rows or a [C] f32 vector, got " << str(t);
  if (getRowSteps().has_value() != getRowPhase().has_value())
    return emitOpError("row_steps and row_phase go together (the row map of a per-token tensor)");
  if (getRowSteps() && (*getRowSteps() < 2 || *getRowSteps() > 4))
    return emitOpError() << "row_steps is " << *getRowSteps() << "; expected 2..4 rows per token";
  if (getRowPhase() && *getRowPhase() >= *getRowSteps())
    return emitOpError() << "row_phase is " << *getRowPhase() << "; expected 0.." << *getRowSteps() - 1;
  return success();
}

LogicalResult ChunkFillOp::verify() { return expectShared(*this, getResult(), {Extent::C}, "result"); }

LogicalResult WorkspaceRowsOp::verify() {
  if (getRegion() == "pcoef") return expectShared(*this, getResult(), {Extent::C}, "\"pcoef\"");
  if (getRegion() == "pst") return expectShared(*this, getResult(), {Extent::K}, "\"pst\"");
  return emitOpError() << "reads workspace region \"" << getRegion() << "\"; expected \"pcoef\" or \"pst\"";
}

LogicalResult RowExpOp::verify() {
  if (failed(expectShared(*this, getX(), {Extent::C}, "operand"))) return failure();
  return expectShared(*this, getResult(), {Extent::C}, "result");
}

LogicalResult RowMulOp::verify() {
  for (Value v : {getLhs(), getRhs(), getResult()})
    if (failed(expectShared(*this, v, {Extent::C}, "operand and result"))) return failure();
  return success();
}

LogicalResult ChannelScanOp::verify() {
  if (failed(expectRows16(*this, getX(), "rows"))) return failure();
  if (failed(expectShared(*this, getStart(), {Extent::K}, "start"))) return failure();
  if (failed(expectShared(*this, getA(), {Extent::C}, "coefficient a"))) return failure();
  if (failed(expectRows16(*this, getResult(), "result"))) return failure();
  const bool soft = getReadout() == ScanReadout::soft_power;
  if (soft != (getBase().has_value() && getEps().has_value()))
    return emitOpError("readout soft_power needs `base` and `eps`, and only it takes them");
  if (soft != (getCenter() != nullptr)) return emitOpError("readout soft_power needs the `center` operand, and only it");
  if (soft && (getMin() || getMax())) return emitOpError("readout soft_power takes no `min` / `max`");
  if (getTarget() != getX()) return expectInPlace(*this, getTarget());
  return success();
}

LogicalResult RowRsqrtNormOp::verify() {
  if (getRows().empty() || getRows().size() > 2) return emitOpError("takes one or two row tiles");
  if (getResults().size() != getRows().size()) return emitOpError("needs one result per row tile");
  for (Value v : getRows())
    if (failed(expectRows16(*this, v, "operand"))) return failure();
  for (Value v : getResults())
    if (failed(expectShared(*this, v, {Extent::C}, "result"))) return failure();
  return success();
}

LogicalResult CumsumOp::verify() {
  auto t = dyn_cast<TileType>(getX().getType());
  if (!t || t.getSpace() != Space::smem || !t.getElementType().isF32() ||
      !(llvm::equal(t.getDims(), std::initializer_list<Extent>{Extent::C}) ||
        llvm::equal(t.getDims(), std::initializer_list<Extent>{Extent::C, Extent::K})))
    return emitOpError() << "operand must be a [C] or [C, K] f32 shared tile, got " << str(getX().getType());
  return expectInPlace(*this, getX());
}

LogicalResult StoreTokenRecordOp::verify() {
  for (Value v : {getA(), getB(), getC()})
    if (failed(expectShared(*this, v, {Extent::C}, "row vector"))) return failure();
  if (getGate() && failed(expectShared(*this, getGate(), {Extent::C}, "gate"))) return failure();
  if (!getFields().empty() && getFields().size() != 2) return emitOpError("takes no `fields` or two (e, f)");
  for (Value v : getFields())
    if (failed(expectShared(*this, v, {Extent::C}, "field"))) return failure();
  return expectRegion(*this, getInto(), {"tok"});
}

LogicalResult StoreGatedRowsOp::verify() {
  if (failed(expectRows16(*this, getX(), "operand"))) return failure();
  if (failed(expectShared(*this, getGate(), {Extent::C, Extent::K}, "gate"))) return failure();
  return expectRegion(*this, getInto(), {"opq", "opk", "opw"});
}

LogicalResult StoreRowsOp::verify() {
  if (failed(expectRows16(*this, getX(), "operand"))) return failure();
  return expectRegion(*this, getInto(), {"pwk", "pwq"});
}

LogicalResult StoreLastExp2Op::verify() {
  if (failed(expectShared(*this, getGate(), {Extent::C, Extent::K}, "gate"))) return failure();
  return expectRegion(*this, getInto(), {"pdec"});
}

LogicalResult EncodeBf16Op::verify() {
  if (failed(expectRows16(*this, getX(), "operand"))) return failure();
  return expectInPlace(*this, getX());
}

LogicalResult LowerProductsOp::verify() {
  const size_t n = getRows().size();
  if (n < 1 || n > 2) return emitOpError("takes one or two row operands");
  if (getRowA().size() != n || getRowB().size() != n)
    return emitOpError() << "needs one row factor pair per row operand (" << n << "), got " << getRowA().size()
                         << " and " << getRowB().size();
  if (getResults().size() != n - 1)
    return emitOpError() << "has one result per part but the last (" << n - 1 << "), got " << getResults().size();
  for (Value v : getRows())
    if (failed(expectRows16(*this, v, "row operand"))) return failure();
  if (failed(expectRows16(*this, getCols(), "column operand"))) return failure();
  for (Value v : getRowA())
    if (!v.getType().isF32() && failed(expectShared(*this, v, {Extent::C}, "row factor"))) return failure();
  for (Value v : getRowB())
    if (failed(expectShared(*this, v, {Extent::C}, "row factor"))) return failure();
  if (failed(expectShared(*this, getCol(), {Extent::C}, "column factor"))) return failure();
  if (Value g = getGate()) {
    auto t = dyn_cast<TileType>(g.getType());
    if (!t || t.getSpace() != Space::smem || !t.getElementType().isF32() ||
        !(llvm::equal(t.getDims(), std::initializer_list<Extent>{Extent::C}) ||
          llvm::equal(t.getDims(), std::initializer_list<Extent>{Extent::C, Extent::K})))
      return emitOpError() << "gate must be a [C] or [C, K] f32 shared tile, got " << str(g.getType());
    if (t.getRank() == 2) {
      for (Value v : getRows())
        if (failed(expectConsumed(*this, v, "row operand"))) return failure();
      if (failed(expectConsumed(*this, getCols(), "column operand"))) return failure();
    }
  }
  for (Value r : getResults())
    if (failed(expectShared(*this, r, {Extent::C, Extent::C}, "result"))) return failure();
  return expectRegion(*this, getInto(), {"aqk"});
}

LogicalResult TriInverseOp::verify() {
  if (failed(expectShared(*this, getA(), {Extent::C, Extent::C}, "operand"))) return failure();
  return expectInPlace(*this, getA());
}

LogicalResult StoreLowerColScaledOp::verify() {
  if (failed(expectShared(*this, getT(), {Extent::C, Extent::C}, "matrix"))) return failure();
  if (failed(expectShared(*this, getS(), {Extent::C}, "column scale"))) return failure();
  return expectRegion(*this, getInto(), {"tb"});
}
