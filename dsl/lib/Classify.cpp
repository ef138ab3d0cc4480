#include "dgps/dsl/Classify.h"

#include <cmath>

#include "dgps/dsl/Canonical.h"

namespace dgps {
namespace {

/// The gain as a model family name uses it: 1, beta in (0,1), beta in (0,2), Delta in (0,inf).
enum class GainClass { One, Beta01, Beta02, Delta, Other };

GainClass gainClass(const Spec& s) {
  if (s.gain.kind == GainKind::None) return GainClass::One;
  if (s.gain.lo != 0) return GainClass::Other;
  if (s.gain.hi == 1) return GainClass::Beta01;
  if (s.gain.hi == 2) return GainClass::Beta02;
  if (std::isinf(s.gain.hi)) return GainClass::Delta;
  return GainClass::Other;
}

const char* baseName(DecayKind d, SolveKind solve) {
  if (solve == SolveKind::Delta) {
    switch (d) {
      case DecayKind::None: return "DeltaNet";
      case DecayKind::Scalar: return "GDN";
      case DecayKind::Diagonal: return "KDA";
    }
  }
  switch (d) {
    case DecayKind::None: return "linear attention";
    case DecayKind::Scalar: return "scalar-decay linear attention";
    case DecayKind::Diagonal: return "GLA";
  }
  return "?";
}

std::optional<std::string> linearModel(const Spec& s, GainClass g) {
  if (s.precond.kind != PrecondKind::None) {
    if (s.precond.side == PrecondSide::Query && usesSquash(s))
      return std::string(baseName(s.decay.kind, s.solve.kind)) +
             " + diagonal ATQ (diagonal analogue of Mesa's exact read; no released kernel)";
    return std::nullopt;
  }
  if (s.decay.kind == DecayKind::None && g == GainClass::One) return std::string("linear attention");
  if (s.decay.kind == DecayKind::Scalar && g == GainClass::Delta) return std::string("Mamba-2 (SSD)");
  if (s.decay.kind == DecayKind::Scalar && g == GainClass::One)
    return std::string("scalar-decay linear attention (FLA simple_gla / RetNet-style)");
  if (s.decay.kind == DecayKind::Diagonal && g == GainClass::One) return std::string("GLA");
  return std::nullopt;
}

std::optional<std::string> deltaModel(const Spec& s, GainClass g) {
  if (g != GainClass::Beta01 && g != GainClass::Beta02) return std::nullopt;
  const std::string negEig = g == GainClass::Beta02 ? ", negative eigenvalues (beta in (0,2))" : "";
  if (householderSteps(s) > 1) {  // validation excludes a preconditioner with several steps
    if (s.decay.kind == DecayKind::None) return "DeltaProduct" + negEig;
    if (s.decay.kind == DecayKind::Scalar) return "Gated DeltaProduct" + negEig;
    return std::nullopt;
  }
  if (!hasPrecond(s)) return baseName(s.decay.kind, s.solve.kind) + negEig;
  if (s.precond.side == PrecondSide::Query) {
    if (!usesSquash(s)) return std::nullopt;
    return baseName(s.decay.kind, s.solve.kind) + negEig + " + diagonal ATQ (no released kernel)";
  }
  if (usesSquash(s)) {
    switch (s.decay.kind) {
      case DecayKind::None: return "PDN" + negEig;
      case DecayKind::Scalar: return "PGDN" + negEig;
      case DecayKind::Diagonal: return "PKDA" + negEig;
    }
  }
  if (usesHypergrad(s) && s.decay.kind == DecayKind::None)
    return std::string(s.precond.hypergrad.has_retention ? "OSDN (APF)" : "OSDN") + negEig;
  if (usesHypergrad(s))
    return std::string(s.precond.hypergrad.has_retention ? "OSDN (APF)" : "OSDN") +
           " preconditioner on a " + baseName(s.decay.kind, s.solve.kind) + " base" + negEig;
  return std::nullopt;
}

}  // namespace

std::string axisSummary(const Spec& s) {
  std::string out = std::string("D=") + toString(s.decay.kind) + " G=";
  if (s.gain.kind == GainKind::None)
    out += "1";
  else
    out += std::string(std::isinf(s.gain.hi) ? "Delta" : "beta") + "(" + formatNumber(s.gain.lo) +
           "," + formatNumber(s.gain.hi) + ")";
  out += " P=";
  if (!hasPrecond(s)) {
    out += "none";
  } else {
    out += std::string("diagonal-") + toString(s.precond.side) + "/" + toString(s.precond.source);
    if (usesHypergrad(s) && s.precond.hypergrad.has_retention) out += "+retention";
  }
  out += std::string(" S=") + toString(s.solve.kind);
  if (householderSteps(s) > 1) out += "x" + std::to_string(householderSteps(s));  // Householder steps per token
  return out;
}

std::optional<std::string> knownModel(const Spec& s) {
  const GainClass g = gainClass(s);
  return s.solve.kind == SolveKind::Linear ? linearModel(s, g) : deltaModel(s, g);
}

std::string classify(const Spec& s) {
  std::optional<std::string> m = knownModel(s);
  return axisSummary(s) + "  ~ " + (m ? *m : std::string("new point of the DGPS space"));
}

}  // namespace dgps
