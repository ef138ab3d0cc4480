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

}  // namespace dgps
