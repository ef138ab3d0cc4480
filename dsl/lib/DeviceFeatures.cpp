#include "dgps/dsl/DeviceFeatures.h"

namespace dgps {

launch::FeatureSet deviceFeatures(const Spec& s) {
  launch::FeatureSet f;
  f.decay = s.decay.kind == DecayKind::None ? 0 : s.decay.kind == DecayKind::Scalar ? 1 : 2;
  f.gain = s.gain.kind == GainKind::Scalar ? 1 : 0;
  f.precond = s.precond.kind == PrecondKind::Diagonal ? 1 : 0;
  f.side = s.precond.side == PrecondSide::Query ? 1 : 0;
  f.source = s.precond.source == PrecondSource::HypergradOgd ? 1 : 0;
  f.solve = s.solve.kind == SolveKind::Delta ? 1 : 0;
  f.clamp = f.source == 1 && (s.precond.hypergrad.clamp_min || s.precond.hypergrad.clamp_max) ? 1 : 0;
  return f;
}

std::optional<Diagnostic> kernelsRefusal(const Spec& s) {
  if (householderSteps(s) > 1 && s.decay.kind == DecayKind::Diagonal) {
    Diagnostic d;
    d.severity = Severity::Error;
    d.file = s.solve.loc.file;
    d.line = s.solve.loc.line;
    d.column = s.solve.loc.column;
    d.path = "solve.steps";
    d.message = "solve.steps " + std::to_string(s.solve.steps) +
                " with decay.kind diagonal: the tile kernels run several Householder steps per token with scalar "
                "or no decay only (the float64 reference and the chunk IR take it: dgps-spec reference, dgpsc plan)";
    d.expected = "decay.kind: scalar or none, or solve.steps: 1";
    return d;
  }
  return std::nullopt;
}

}  // namespace dgps
