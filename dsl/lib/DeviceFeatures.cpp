#include "dgps/dsl/DeviceFeatures.h"

namespace dgps {

launch::FeatureSet axisFeatures(DecayKind decay, GainKind gain, PrecondKind precond, PrecondSide side,
                                PrecondSource source, SolveKind solve) {
  launch::FeatureSet f;
  f.decay = decay == DecayKind::None ? 0 : decay == DecayKind::Scalar ? 1 : 2;
  f.gain = gain == GainKind::Scalar ? 1 : 0;
  f.precond = precond == PrecondKind::Diagonal ? 1 : 0;
  f.side = side == PrecondSide::Query ? 1 : 0;
  f.source = source == PrecondSource::HypergradOgd ? 1 : 0;
  f.solve = solve == SolveKind::Delta ? 1 : 0;
  return f;
}

launch::FeatureSet deviceFeatures(const Spec& s) {
  launch::FeatureSet f =
      axisFeatures(s.decay.kind, s.gain.kind, s.precond.kind, s.precond.side, s.precond.source, s.solve.kind);
  f.clamp = f.source == 1 && (s.precond.hypergrad.clamp_min || s.precond.hypergrad.clamp_max) ? 1 : 0;
  return f;
}

namespace {

Diagnostic atSolveSteps(const Spec& s, std::string message, std::string expected) {
  Diagnostic d;
  d.severity = Severity::Error;
  d.file = s.solve.loc.file;
  d.line = s.solve.loc.line;
  d.column = s.solve.loc.column;
  d.path = "solve.steps";
  d.message = std::move(message);
  d.expected = std::move(expected);
  return d;
}

}  // namespace

std::string decodeStepLimitReason() {
  return "the decode CTA holds the keys of at most " + std::to_string(kMaxDecodeHouseholderSteps) +
         " steps and the query in shared memory";
}

std::optional<Diagnostic> kernelsRefusal(const Spec& s) {
  const std::string steps = "solve.steps " + std::to_string(householderSteps(s));
  if (householderSteps(s) > 1 && s.decay.kind == DecayKind::Diagonal)
    return atSolveSteps(s,
                        steps + " with decay.kind diagonal: the tile kernels run several Householder steps per token "
                                "with scalar or no decay only (the float64 reference and the chunk IR take it: "
                                "dgps-spec reference, dgpsc plan)",
                        "decay.kind: scalar or none, or solve.steps: 1");
  if (householderSteps(s) > kMaxDecodeHouseholderSteps && hasKernel(s, KernelKind::Decode))
    return atSolveSteps(s,
                        steps + " with the decode kernel: " + decodeStepLimitReason() +
                            " (kernels lists decode, or leaves it out: the default is [chunk_forward, decode])",
                        "solve.steps: 1.." + std::to_string(kMaxDecodeHouseholderSteps) +
                            ", or kernels: [chunk_forward]");
  return std::nullopt;
}

}  // namespace dgps
