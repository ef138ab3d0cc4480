// Spec <-> dgps.recurrence (SpecConversion.h). Field by field, so that a new Spec field shows up
// here as a compile-time gap rather than a silently dropped value.
#include "dgps/Dialect/DGPS/IR/SpecConversion.h"

#include <algorithm>
#include <limits>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace dgps::ir {

namespace {

DecayKind toIr(dgps::DecayKind k) {
  switch (k) {
    case dgps::DecayKind::None: return DecayKind::None;
    case dgps::DecayKind::Scalar: return DecayKind::Scalar;
    case dgps::DecayKind::Diagonal: return DecayKind::Diagonal;
  }
  return DecayKind::None;
}
dgps::DecayKind fromIr(DecayKind k) {
  switch (k) {
    case DecayKind::None: return dgps::DecayKind::None;
    case DecayKind::Scalar: return dgps::DecayKind::Scalar;
    case DecayKind::Diagonal: return dgps::DecayKind::Diagonal;
  }
  return dgps::DecayKind::None;
}
GainKind toIr(dgps::GainKind k) { return k == dgps::GainKind::Scalar ? GainKind::Scalar : GainKind::None; }
dgps::GainKind fromIr(GainKind k) { return k == GainKind::Scalar ? dgps::GainKind::Scalar : dgps::GainKind::None; }
PrecondKind toIr(dgps::PrecondKind k) {
  return k == dgps::PrecondKind::Diagonal ? PrecondKind::Diagonal : PrecondKind::None;
}
dgps::PrecondKind fromIr(PrecondKind k) {
  return k == PrecondKind::Diagonal ? dgps::PrecondKind::Diagonal : dgps::PrecondKind::None;
}
PrecondSide toIr(dgps::PrecondSide s) { return s == dgps::PrecondSide::Query ? PrecondSide::Query : PrecondSide::Key; }
dgps::PrecondSide fromIr(PrecondSide s) {
  return s == PrecondSide::Query ? dgps::PrecondSide::Query : dgps::PrecondSide::Key;
}
PrecondSource toIr(dgps::PrecondSource s) {
  return s == dgps::PrecondSource::HypergradOgd ? PrecondSource::HypergradOgd : PrecondSource::EmaSqSquash;
}
dgps::PrecondSource fromIr(PrecondSource s) {
  return s == PrecondSource::HypergradOgd ? dgps::PrecondSource::HypergradOgd : dgps::PrecondSource::EmaSqSquash;
}
SolveKind toIr(dgps::SolveKind k) { return k == dgps::SolveKind::Linear ? SolveKind::Linear : SolveKind::Delta; }
dgps::SolveKind fromIr(SolveKind k) { return k == SolveKind::Linear ? dgps::SolveKind::Linear : dgps::SolveKind::Delta; }
WriteTiming toIr(dgps::WriteTiming t) { return t == dgps::WriteTiming::Post ? WriteTiming::Post : WriteTiming::Pre; }
dgps::WriteTiming fromIr(WriteTiming t) {
  return t == WriteTiming::Post ? dgps::WriteTiming::Post : dgps::WriteTiming::Pre;
}
KernelKind toIr(dgps::KernelKind k) {
  return k == dgps::KernelKind::Decode ? KernelKind::Decode : KernelKind::ChunkForward;
}
dgps::KernelKind fromIr(KernelKind k) {
  return k == KernelKind::Decode ? dgps::KernelKind::Decode : dgps::KernelKind::ChunkForward;
}

Type toIrType(MLIRContext* ctx, DType d) {
  switch (d) {
    case DType::F32: return Float32Type::get(ctx);
    case DType::F16: return Float16Type::get(ctx);
    case DType::BF16: return BFloat16Type::get(ctx);
  }
  return Float32Type::get(ctx);
}
DType fromIrType(Type t) {
  if (t.isBF16()) return DType::BF16;
  if (t.isF16()) return DType::F16;
  return DType::F32;
}

DenseI64ArrayAttr ints(Builder& b, const std::vector<int>& v) {
  return b.getDenseI64ArrayAttr(SmallVector<int64_t>(v.begin(), v.end()));
}
/// i64 attribute -> int Spec field. RecurrenceOp::verify rejects values beyond int first; for an
/// unverified op the value saturates (INT_MAX / INT_MIN lie outside every range of the language, so
/// validateSpec still rejects it) instead of wrapping to a valid-looking value (2^32 + 128 -> 128).
int toInt(int64_t x) {
  return static_cast<int>(std::clamp<int64_t>(x, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
}
std::vector<int> ints(DenseI64ArrayAttr a) {
  std::vector<int> out;
  for (int64_t x : a.asArrayRef()) out.push_back(toInt(x));
  return out;
}

Location specLocation(MLIRContext* ctx, const SourceLoc& loc, const std::string& name) {
  if (loc.file.empty()) return NameLoc::get(StringAttr::get(ctx, name));
  return FileLineColLoc::get(ctx, loc.file, static_cast<unsigned>(std::max(loc.line, 0)),
                             static_cast<unsigned>(std::max(loc.column, 0)));
}

}  // namespace

OwningOpRef<ModuleOp> importSpec(MLIRContext& ctx, const Spec& s, const std::string& target) {
  ctx.getOrLoadDialect<DGPSDialect>();
  Location loc = specLocation(&ctx, s.loc, s.name);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  (*module)->setAttr(kTargetAttrName, StringAttr::get(&ctx, target));
  OpBuilder b(&ctx);
  b.setInsertionPointToEnd(module->getBody());

  OperationState state(loc, RecurrenceOp::getOperationName());
  RecurrenceOp::Properties& p = state.getOrAddProperties<RecurrenceOp::Properties>();
  p.sym_name = b.getStringAttr(s.name);
  if (!s.description.empty()) p.description = b.getStringAttr(s.description);
  p.decay = DecayKindAttr::get(&ctx, toIr(s.decay.kind));
  p.gain = GainKindAttr::get(&ctx, toIr(s.gain.kind));
  p.gain_lo = b.getF64FloatAttr(s.gain.lo);
  p.gain_hi = b.getF64FloatAttr(s.gain.hi);
  p.precond = PrecondKindAttr::get(&ctx, toIr(s.precond.kind));
  if (s.precond.kind == dgps::PrecondKind::Diagonal) {
    p.precond_side = PrecondSideAttr::get(&ctx, toIr(s.precond.side));
    p.precond_source = PrecondSourceAttr::get(&ctx, toIr(s.precond.source));
    if (s.precond.source == dgps::PrecondSource::EmaSqSquash) {
      const SquashParams& q = s.precond.squash;
      p.squash = SquashAttr::get(&ctx, b.getF64FloatAttr(q.x), b.getF64FloatAttr(q.eps),
                                 b.getF64FloatAttr(q.center_init), b.getBoolAttr(q.has_gate),
                                 b.getBoolAttr(q.has_gain));
    } else {
      const HypergradParams& h = s.precond.hypergrad;
      p.hypergrad = HypergradAttr::get(
          &ctx, b.getF64FloatAttr(h.eta), b.getBoolAttr(h.has_retention),
          WriteTimingAttr::get(&ctx, toIr(h.timing)), b.getF64FloatAttr(h.init),
          h.clamp_min ? b.getF64FloatAttr(*h.clamp_min) : FloatAttr(),
          h.clamp_max ? b.getF64FloatAttr(*h.clamp_max) : FloatAttr());
    }
  }
  p.solve = SolveKindAttr::get(&ctx, toIr(s.solve.kind));
  // Absent means one step, so single-step specs import to the IR they always had.
  if (s.solve.steps != 1) p.householder_steps = b.getI64IntegerAttr(s.solve.steps);
  p.qk_l2norm = b.getBoolAttr(s.qk_l2norm);
  p.l2norm_eps = b.getF64FloatAttr(s.l2norm_eps);
  if (s.scale) p.scale = b.getF64FloatAttr(*s.scale);
  p.heads_qk = b.getI64IntegerAttr(s.heads_qk);
  p.gva_ratio = b.getI64IntegerAttr(s.gva_ratio);
  p.key_dims = ints(b, s.key_dims);
  p.value_dims = ints(b, s.value_dims);
  SmallVector<Type> dtypes;
  for (DType d : s.input_dtypes) dtypes.push_back(toIrType(&ctx, d));
  p.input_dtypes = b.getTypeArrayAttr(dtypes);
  p.state_dtype = TypeAttr::get(toIrType(&ctx, s.state_dtype));
  p.io = IOAttr::get(&ctx, b.getBoolAttr(s.initial_state), b.getBoolAttr(s.final_state),
                     b.getBoolAttr(s.initial_precond_state), b.getBoolAttr(s.final_precond_state),
                     b.getBoolAttr(s.varlen));
  SmallVector<Attribute> kernels;
  for (dgps::KernelKind k : s.kernels) kernels.push_back(KernelKindAttr::get(&ctx, toIr(k)));
  p.kernels = b.getArrayAttr(kernels);
  p.tuning = TuningAttr::get(&ctx, ints(b, s.tuning.chunk), ints(b, s.tuning.block_v),
                             ints(b, s.tuning.warps), ints(b, s.tuning.stages));
  if (s.allow_unstable) p.allow_unstable = b.getUnitAttr();
  b.create(state);
  return module;
}

Spec exportSpec(RecurrenceOp op) {
  Spec s;
  s.name = op.getSymName().str();
  if (auto d = op.getDescription()) s.description = d->str();
  if (auto fl = dyn_cast<FileLineColLoc>(op.getLoc())) {
    s.loc.file = fl.getFilename().str();
    s.loc.line = toInt(fl.getLine());
    s.loc.column = toInt(fl.getColumn());
  }
  s.decay.kind = fromIr(op.getDecay());
  s.gain.kind = fromIr(op.getGain());
  s.gain.lo = op.getGainLo().convertToDouble();
  s.gain.hi = op.getGainHi().convertToDouble();
  s.precond.kind = fromIr(op.getPrecond());
  bool precond = s.precond.kind == dgps::PrecondKind::Diagonal;
  if (precond) {
    if (auto side = op.getPrecondSide()) s.precond.side = fromIr(*side);
    if (auto src = op.getPrecondSource()) s.precond.source = fromIr(*src);
    if (SquashAttr q = op.getSquashAttr()) {
      s.precond.squash.x = q.getX().getValueAsDouble();
      s.precond.squash.eps = q.getEps().getValueAsDouble();
      s.precond.squash.center_init = q.getCenterInit().getValueAsDouble();
      s.precond.squash.has_gate = q.getGate().getValue();
      s.precond.squash.has_gain = q.getGain().getValue();
    }
    if (HypergradAttr h = op.getHypergradAttr()) {
      s.precond.hypergrad.eta = h.getEta().getValueAsDouble();
      s.precond.hypergrad.has_retention = h.getRetention().getValue();
      s.precond.hypergrad.timing = fromIr(h.getTiming().getValue());
      s.precond.hypergrad.init = h.getInit().getValueAsDouble();
      if (h.getClampMin()) s.precond.hypergrad.clamp_min = h.getClampMin().getValueAsDouble();
      if (h.getClampMax()) s.precond.hypergrad.clamp_max = h.getClampMax().getValueAsDouble();
    }
  }
  s.solve.kind = fromIr(op.getSolve());
  if (op.getHouseholderStepsAttr()) s.solve.steps = toInt(op.householderStepsOr1());
  s.qk_l2norm = op.getQkL2norm();
  s.l2norm_eps = op.getL2normEps().convertToDouble();
  if (auto sc = op.getScale()) s.scale = sc->convertToDouble();
  s.heads_qk = toInt(op.getHeadsQk());
  s.gva_ratio = toInt(op.getGvaRatio());
  s.key_dims = ints(op.getKeyDimsAttr());
  s.value_dims = ints(op.getValueDimsAttr());
  s.input_dtypes.clear();
  for (Attribute a : op.getInputDtypes()) s.input_dtypes.push_back(fromIrType(cast<TypeAttr>(a).getValue()));
  s.state_dtype = fromIrType(op.getStateDtype());
  IOAttr io = op.getIo();
  s.initial_state = io.getInitialState().getValue();
  s.final_state = io.getFinalState().getValue();
  s.initial_precond_state = precond && io.getInitialPrecondState().getValue();
  s.final_precond_state = precond && io.getFinalPrecondState().getValue();
  s.varlen = io.getVarlen().getValue();
  s.kernels.clear();
  for (Attribute a : op.getKernels()) s.kernels.push_back(fromIr(cast<KernelKindAttr>(a).getValue()));
  TuningAttr t = op.getTuning();
  s.tuning.chunk = ints(t.getChunk());
  s.tuning.block_v = ints(t.getBlockV());
  s.tuning.warps = ints(t.getWarps());
  s.tuning.stages = ints(t.getStages());
  s.allow_unstable = op.getAllowUnstable();
  return s;
}

}  // namespace dgps::ir
