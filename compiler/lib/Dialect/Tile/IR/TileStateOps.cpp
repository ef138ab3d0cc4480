// Verifiers of the state-walk tile ops (TileStateOps.td): the operand sources each slot of the walk may name
// (input tensors or regions of tile.workspace, Workspace.h, the segment pass's seg_* included) and that the attributes agree with one another.
#include "dgps/Dialect/Tile/IR/Tile.h"

using namespace mlir;
using namespace dgps::tile;

namespace {

/// `value` is one of `allowed`, or an error naming the slot, the value and the allowed sources.
LogicalResult expectSource(Operation* op, const char* slot, StringRef value, std::initializer_list<const char*> allowed) {
  for (const char* a : allowed)
    if (value == a) return success();
  std::string list;
  for (const char* a : allowed) list += (list.empty() ? "\"" : ", \"") + std::string(a) + "\"";
  return op->emitOpError() << slot << " reads \"" << value << "\"; expected one of " << list;
}

/// The row map: all three attributes or none, n in 2..4, phases in [0, n), a query read from the input and an o
/// written (a segment's corrected walk may take one: its rows are absolute, so the map is the same from any chunk).
LogicalResult verifyRowMap(StateWalkOp w) {
  const bool any = w.getRowSteps() || w.getQueryPhase() || w.getOutputPhase();
  if (!any) return success();
  if (!w.getRowSteps() || !w.getQueryPhase() || !w.getOutputPhase())
    return w.emitOpError("row_steps, query_phase and output_phase go together (the row map of q and o)");
  const uint64_t n = *w.getRowSteps();
  if (n < 2 || n > 4) return w.emitOpError() << "row_steps is " << n << "; expected 2..4 rows per token";
  const std::pair<const char*, uint64_t> phases[] = {{"query_phase", *w.getQueryPhase()},
                                                      {"output_phase", *w.getOutputPhase()}};
  for (auto [what, p] : phases)
    if (p >= n) return w.emitOpError() << what << " is " << p << "; expected 0.." << n - 1;
  if (w.getQuery() != "q")
    return w.emitOpError() << "maps the rows of the query, which must then be the input \"q\" (got \"" << w.getQuery()
                         << "\")";
  if (!w.getWriteOutput())
    return w.emitOpError("maps the rows of q and o but writes no o: a walk without a read-out (a segment summary's) "
                         "reads no per-token tensor and takes no row map");
  return success();
}

}  // namespace

LogicalResult StateWalkOp::verify() {
  Operation* op = getOperation();
  if (failed(expectSource(op, "query", getQuery(), {"q", "opq", "pwq"})) ||
      failed(expectSource(op, "write_key", getWriteKey(), {"k", "opw", "pwk"})) ||
      failed(expectSource(op, "values", getValues(), {"v"})) || failed(expectSource(op, "record", getRecord(), {"tok"})) ||
      failed(expectSource(op, "readout", getReadout(), {"aqk"})))
    return failure();
  const bool residual = getValueForm() == ValueForm::residual_lower;
  if (residual != getReadKey().has_value() || residual != getSolve().has_value())
    return emitOpError() << "value_form " << stringifyValueForm(getValueForm()) << " "
                         << (residual ? "needs" : "takes no") << " read_key and solve";
  if (getReadKey() && failed(expectSource(op, "read_key", *getReadKey(), {"k", "opk"}))) return failure();
  if (getSolve() && failed(expectSource(op, "solve", *getSolve(), {"tb"}))) return failure();
  const bool columns = getCarry() == StateCarry::columns;
  if (columns != getColumns().has_value())
    return emitOpError() << "carry " << stringifyStateCarry(getCarry()) << " " << (columns ? "needs" : "takes no")
                         << " columns (the per-chunk [K] carry vector)";
  if (getColumns() && failed(expectSource(op, "columns", *getColumns(), {"pdec"}))) return failure();
  if (getStart() == StateStart::identity && getWriteOutput())
    return emitOpError("start identity (a transition product) has no read-out: write_output must be absent");
  if ((getStart() == StateStart::identity) != getZeroValues())
    return emitOpError("start identity and zero_values go together (the transition product of a segment is the "
                       "walk from the identity with the value term dropped)");
  if ((getStart() == StateStart::region) != getStartRegion().has_value())
    return emitOpError() << "start " << stringifyStateStart(getStart()) << " "
                         << (getStart() == StateStart::region ? "needs" : "takes no") << " start_region";
  if (getStartRegion() && failed(expectSource(op, "start_region", *getStartRegion(), {"seg_start"}))) return failure();
  if (getEndRegion() && failed(expectSource(op, "end_region", *getEndRegion(), {getZeroValues() ? "seg_trans" : "seg_ext"})))
    return failure();
  if (!getWriteOutput() && !getWriteFinal() && !getEndRegion())
    return emitOpError("writes nothing: set write_output, write_final or end_region");
  if (failed(verifyRowMap(*this))) return failure();
  if (failed(verifyWriteKeyForm()) || failed(verifyQueryForm())) return failure();
  return verifyRescale();
}

LogicalResult StateWalkOp::verifyQueryForm() {
  const bool rescalesQuery = getRescale() && *getRescale() == WalkOperand::query;
  if (!getQueryForm()) {
    if (getQuery() == "pwq") return emitOpError("reads the stored query \"pwq\" without query_form stored");
    return success();
  }
  if (!getWriteOutput())
    return emitOpError("has a query_form but writes no o, which is the query's only reader");
  if (*getQueryForm() == WriteKeyForm::rebuilt) {
    if (!rescalesQuery) return emitOpError("query_form rebuilt needs rescale query (the producer warps rebuild P ⊙ q)");
    if (getQuery() == "pwq") return emitOpError("query_form rebuilt reads the stored query \"pwq\"; expected \"q\"");
    return success();
  }
  if (getRescale())
    return emitOpError() << "query_form stored has rescale " << stringifyWalkOperand(*getRescale())
                         << ": a stored query is loaded as it is (nothing is rebuilt)";
  if (getQuery() != "pwq")
    return emitOpError() << "query_form stored reads query \"" << getQuery()
                         << "\"; expected \"pwq\" (what chunk_local stored)";
  if (getRowSteps()) return emitOpError("query_form stored with a row map: the stored query exists only for one step per token (the row map reads the input query \"q\")");
  return success();
}

LogicalResult StateWalkOp::verifyWriteKeyForm() {
  const bool rescalesKey = getRescale() && *getRescale() == WalkOperand::write_key;
  if (!getWriteKeyForm()) {
    if (getWriteKey() == "pwk")
      return emitOpError("reads the stored write key \"pwk\" without write_key_form stored");
    return success();
  }
  if (*getWriteKeyForm() == WriteKeyForm::rebuilt) {
    if (!rescalesKey)
      return emitOpError("write_key_form rebuilt needs rescale write_key (the producer warps rebuild P ⊙ k)");
    if (getWriteKey() == "pwk")
      return emitOpError("write_key_form rebuilt reads the stored write key \"pwk\"; expected \"k\" or \"opw\"");
    return success();
  }
  if (getRescale())
    return emitOpError() << "write_key_form stored has rescale " << stringifyWalkOperand(*getRescale())
                         << ": a stored write key is loaded as it is (nothing is rebuilt)";
  if (getWriteKey() != "pwk" && getWriteKey() != "opw")
    return emitOpError() << "write_key_form stored reads write key \"" << getWriteKey()
                         << "\"; expected \"pwk\" or \"opw\" (what chunk_local stored)";
  return success();
}

LogicalResult StateWalkOp::verifyRescale() {
  Operation* op = getOperation();
  const bool scan = getScanRows() || getScanStart() || getScanReadout() || getScanCenter() || getScanBase() ||
                    getScanEps() || getScanMin() || getScanMax();
  if (!getRescale()) {
    if (scan || getProducerWarps() || getRegisters())
      return emitOpError("has scan or producer attributes without rescale (the operand they rebuild)");
    return success();
  }
  if (!getScanRows() || !getScanStart() || !getScanReadout())
    return emitOpError("rescale needs scan_rows, scan_start and scan_readout (the per-channel scan giving P)");
  if (failed(expectSource(op, "scan_rows", *getScanRows(), {"k"})) ||
      failed(expectSource(op, "scan_start", *getScanStart(), {"pst"})))
    return failure();
  if (*getRescale() == WalkOperand::query && !getWriteOutput())
    return emitOpError("rescales the query of a walk without write_output (the query serves only o)");
  if (*getScanReadout() == ScanReadout::soft_power) {
    if (!getScanBase() || !getScanEps())
      return emitOpError("scan_readout soft_power needs scan_base and scan_eps");
    if (getScanMin() || getScanMax()) return emitOpError("scan_readout soft_power takes no scan_min / scan_max");
    if (getScanCenter() && failed(expectSource(op, "center", *getScanCenter(), {"precond_center"}))) return failure();
  } else if (getScanBase() || getScanEps() || getScanCenter()) {
    return emitOpError() << "scan_readout " << stringifyScanReadout(*getScanReadout())
                         << " takes no scan_base, scan_eps or center (a clamped state is read out as is)";
  }
  if (!getProducerWarps() || !getRegisters())
    return emitOpError("rescale needs producer_warps and registers (the rebuild runs in producer warps)");
  const uint32_t pw = *getProducerWarps();
  if (pw == 0 || pw % 4 != 0 || pw > 16)
    return emitOpError() << "producer_warps " << pw << ": expected 4, 8, 12 or 16 (whole warpgroups)";
  ArrayRef<int32_t> regs = *getRegisters();
  if (regs.size() != 2 || regs[0] < 24 || regs[1] < 24 || regs[0] > 256 || regs[1] > 256 || regs[0] % 8 != 0 ||
      regs[1] % 8 != 0)
    return emitOpError("registers: expected [consumer, producer] per-thread budgets, multiples of 8 in [24, 256] "
                       "(setmaxnreg)");
  return success();
}

LogicalResult StateFoldOp::verify() {
  Operation* op = getOperation();
  if (failed(expectSource(op, "trans", getTrans(), {"seg_trans"})) ||
      failed(expectSource(op, "ext", getExt(), {"seg_ext"})) || failed(expectSource(op, "start", getStart(), {"seg_start"})))
    return failure();
  return success();
}
