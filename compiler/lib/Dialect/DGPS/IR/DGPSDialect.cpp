// The dgps dialect: registration, the spec verifier (the same rules as dsl's spec validation) and
// the canonicalisation of dgps.recurrence.
#include "dgps/Dialect/DGPS/IR/DGPS.h"
#include "dgps/Dialect/DGPS/IR/SpecConversion.h"
#include "dgps/dsl/SpecParser.h"

#include <cmath>
#include <climits>

#include "../../SpecFieldCheck.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace dgps::ir;

#include "dgps/Dialect/DGPS/IR/DGPSDialect.cpp.inc"
#include "dgps/Dialect/DGPS/IR/DGPSEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dgps/Dialect/DGPS/IR/DGPSAttrs.cpp.inc"

#define GET_OP_CLASSES
#include "dgps/Dialect/DGPS/IR/DGPSOps.cpp.inc"

void DGPSDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dgps/Dialect/DGPS/IR/DGPSAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dgps/Dialect/DGPS/IR/DGPSOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Verifier
//===----------------------------------------------------------------------===//

LogicalResult RecurrenceOp::verify() {
  // Structure the Spec conversion relies on; the value rules are dsl's.
  if (getPrecond() == PrecondKind::Diagonal) {
    if (!getPrecondSide()) return emitOpError() << "diagonal preconditioner needs precond_side";
    if (!getPrecondSource()) return emitOpError() << "diagonal preconditioner needs precond_source";
    bool squash = *getPrecondSource() == PrecondSource::EmaSqSquash;
    if (squash && !getSquashAttr())
      return emitOpError() << "precond_source ema_sq_squash needs the `squash` parameters";
    if (!squash && !getHypergradAttr())
      return emitOpError() << "precond_source hypergrad_ogd needs the `hypergrad` parameters";
    if (squash && getHypergradAttr())
      return emitOpError() << "`hypergrad` parameters given with precond_source ema_sq_squash";
    if (!squash && getSquashAttr())
      return emitOpError() << "`squash` parameters given with precond_source hypergrad_ogd";
  }
  for (Attribute a : getInputDtypes()) {
    Type t = cast<TypeAttr>(a).getValue();
    if (!t.isBF16() && !t.isF16() && !t.isF32())
      return emitOpError() << "input dtype " << t << " is not supported; expected bf16 or f16";
  }
  if (!getStateDtype().isBF16() && !getStateDtype().isF16() && !getStateDtype().isF32())
    return emitOpError() << "state dtype " << getStateDtype() << " is not supported; expected f32";

  if (failed(verifyIntegerRanges())) return failure();

  // The same rules as the YAML language (dsl/lib/SpecValidate.cpp), one error at a time.
  for (const Diagnostic& d : validateSpec(exportSpec(*this))) {
    if (d.severity != Severity::Error) continue;
    InFlightDiagnostic diag = emitOpError();
    if (!d.path.empty()) diag << d.path << ": ";
    diag << d.message;
    if (!d.expected.empty()) diag << " [expected: " << d.expected << "]";
    return diag;
  }
  return success();
}

/// Spec holds int and the attributes are i64: a value beyond int is reported here, with the language's
/// rule for its field, before exportSpec would narrow it (4294967424 would otherwise verify as 128).
LogicalResult RecurrenceOp::verifyIntegerRanges() {
  struct Field {
    const char* attr;
    const char* path;
    SmallVector<int64_t> values;
    StoreField store;
  };
  TuningAttr t = getTuning();
  const Field fields[] = {
      {"heads_qk", "heads.qk", {getHeadsQk()}, [](Spec& s, const std::vector<int>& v) { s.heads_qk = v[0]; }},
      {"gva_ratio", "heads.gva_ratio", {getGvaRatio()},
       [](Spec& s, const std::vector<int>& v) { s.gva_ratio = v[0]; }},
      {"householder_steps", "solve.steps", {householderStepsOr1()},
       [](Spec& s, const std::vector<int>& v) { s.solve.steps = v[0]; }},
      {"key_dims", "dims.key", SmallVector<int64_t>(getKeyDims()),
       [](Spec& s, const std::vector<int>& v) { s.key_dims = v; }},
      {"value_dims", "dims.value", SmallVector<int64_t>(getValueDims()),
       [](Spec& s, const std::vector<int>& v) { s.value_dims = v; }},
      {"tuning.chunk", "tuning.chunk", SmallVector<int64_t>(t.getChunk().asArrayRef()),
       [](Spec& s, const std::vector<int>& v) { s.tuning.chunk = v; }},
      {"tuning.block_v", "tuning.block_v", SmallVector<int64_t>(t.getBlockV().asArrayRef()),
       [](Spec& s, const std::vector<int>& v) { s.tuning.block_v = v; }},
      {"tuning.warps", "tuning.warps", SmallVector<int64_t>(t.getWarps().asArrayRef()),
       [](Spec& s, const std::vector<int>& v) { s.tuning.warps = v; }},
      {"tuning.stages", "tuning.stages", SmallVector<int64_t>(t.getStages().asArrayRef()),
       [](Spec& s, const std::vector<int>& v) { s.tuning.stages = v; }},
  };
  for (const Field& f : fields) {
    bool narrows = llvm::any_of(f.values, [](int64_t v) { return v > INT_MAX || v < INT_MIN; });
    if (!narrows) continue;  // in range: validateSpec below reports it with the YAML path
    std::optional<FieldProblem> p = checkSpecInts(f.values, f.path, f.store);
    if (!p) continue;
    return emitOpError() << "attribute '" << f.attr << "'" << p->element << ": " << p->message
                         << " [expected: " << p->expected << "]";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Canonicalisation
//===----------------------------------------------------------------------===//

namespace {

/// True when the preconditioner multiplies by exactly 1 for every token: a hypergradient step of
/// size 0 without retention keeps d at its initial value 1 (no initial state, no clamp). (The
/// squash cannot be the identity: the language requires x > 1.)
bool isIdentityPreconditioner(RecurrenceOp op) {
  if (op.getPrecond() != PrecondKind::Diagonal || !op.getPrecondSource()) return false;
  if (*op.getPrecondSource() != PrecondSource::HypergradOgd) return false;
  HypergradAttr hg = op.getHypergradAttr();
  return hg && hg.getEta().getValueAsDouble() == 0.0 && !hg.getRetention().getValue() &&
         hg.getInit().getValueAsDouble() == 1.0 && !hg.getClampMin() && !hg.getClampMax() &&
         !op.getIo().getInitialPrecondState().getValue();
}

}  // namespace

LogicalResult RecurrenceOp::canonicalize(RecurrenceOp op, PatternRewriter& rewriter) {
  MLIRContext* ctx = op.getContext();
  bool identity = isIdentityPreconditioner(op);
  bool noPrecond = identity || op.getPrecond() == PrecondKind::None;
  IOAttr io = op.getIo();
  bool dropParams = noPrecond && (op.getPrecondSideAttr() || op.getPrecondSourceAttr() ||
                                  op.getSquashAttr() || op.getHypergradAttr());
  bool dropStates = noPrecond && (io.getInitialPrecondState().getValue() ||
                                  io.getFinalPrecondState().getValue());
  // Unit gain has no range: normalise it so that equal models print equal IR.
  bool resetGain = op.getGain() == GainKind::None &&
                   (op.getGainLo().convertToDouble() != 0.0 || op.getGainHi().convertToDouble() != 1.0);
  // One Householder step is the plain delta rule: the attribute is left out (its default).
  bool dropSteps = op.getHouseholderStepsAttr() && op.householderStepsOr1() == 1;
  if (!identity && !dropParams && !dropStates && !resetGain && !dropSteps) return failure();

  rewriter.modifyOpInPlace(op, [&] {
    if (identity) op.setPrecond(PrecondKind::None);
    if (dropParams) {
      // An absent preconditioner has no side, source or parameters.
      op.removePrecondSideAttr();
      op.removePrecondSourceAttr();
      op.removeSquashAttr();
      op.removeHypergradAttr();
    }
    if (dropStates) {
      BoolAttr no = BoolAttr::get(ctx, false);
      op.setIoAttr(IOAttr::get(ctx, io.getInitialState(), io.getFinalState(), no, no, io.getVarlen()));
    }
    if (resetGain) {
      op.setGainLo(llvm::APFloat(0.0));
      op.setGainHi(llvm::APFloat(1.0));
    }
    if (dropSteps) op.removeHouseholderStepsAttr();
  });
  return success();
}
