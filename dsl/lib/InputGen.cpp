#include "dgps/dsl/InputGen.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace dgps {
namespace {

double softplus(double x) { return x > 30.0 ? x : std::log1p(std::exp(x)); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

class Sampler {
 public:
  explicit Sampler(std::uint64_t seed) : rng_(seed) {}
  double normal(double mean = 0.0, double sd = 1.0) { return mean + sd * dist_(rng_); }

 private:
  std::mt19937_64 rng_;
  std::normal_distribution<double> dist_{0.0, 1.0};
};

// One value of the input `name` (a float slot other than q, k, v).
double sampleValue(const Spec& spec, const std::string& name, Sampler& rnd) {
  if (name == "g" || name == "precond_g") return -softplus(rnd.normal(-2.0, 1.0));
  if (name == "beta") {
    const double lo = spec.gain.lo, hi = spec.gain.hi;
    return std::isfinite(hi) ? lo + (hi - lo) * sigmoid(rnd.normal()) : lo + softplus(rnd.normal());
  }
  if (name == "precond_beta") return sigmoid(rnd.normal());
  if (name == "precond_center") return spec.precond.squash.center_init + 0.1 * rnd.normal();
  if (name == "initial_state") return 0.1 * rnd.normal();
  if (name == "initial_precond_state") {
    if (spec.precond.source == PrecondSource::EmaSqSquash) return 0.5 * std::fabs(rnd.normal());
    const HypergradParams& hp = spec.precond.hypergrad;
    double d = hp.init * (1.0 + 0.1 * rnd.normal());
    if (hp.clamp_min) d = std::max(d, *hp.clamp_min);
    if (hp.clamp_max) d = std::min(d, *hp.clamp_max);
    return d;
  }
  return rnd.normal();
}

// Rounding can push a sampled gain onto the edge of its range (sigmoid → 1.0 in bf16); keep it inside.
double clampToContract(const Spec& spec, const std::string& name, double x) {
  if (name == "g" || name == "precond_g") return std::min(x, 0.0);
  if (name == "beta") return std::min(std::max(x, spec.gain.lo), spec.gain.hi);
  return x;
}

}  // namespace

ReferenceInputs generateInputs(const Spec& spec, const ProblemShape& shape, std::uint64_t seed,
                               ScalarType activation_dtype, const InputGenOptions& options) {
  if (!isFloating(activation_dtype)) {
    throw DataError(std::string("generateInputs: activation dtype must be floating, got ") + toString(activation_dtype));
  }
  if (!isFloating(options.float_dtype)) {
    throw DataError(std::string("generateInputs: float dtype must be floating, got ") + toString(options.float_dtype));
  }
  checkReferenceSpec(spec);
  checkProblemShape(spec, shape);
  Sampler rnd(seed);
  ReferenceInputs out;
  for (const TensorSlot& slot : referenceInputSlots(spec, shape)) {
    if (slot.name == "initial_state" && !options.initial_state) continue;
    if (slot.name == "initial_precond_state" && !options.initial_precond_state) continue;
    if (slot.name == "cu_seqlens") {
      if (shape.cu_seqlens.empty()) continue;
      Tensor t(ScalarType::I64, slot.shape);
      for (std::size_t i = 0; i < shape.cu_seqlens.size(); ++i) t.setInt(static_cast<std::int64_t>(i), shape.cu_seqlens[i]);
      out.emplace(slot.name, std::move(t));
      continue;
    }
    const ScalarType dt = slot.type == SlotType::Activation ? activation_dtype : options.float_dtype;
    Tensor t(dt, slot.shape);
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      t.set(i, sampleValue(spec, slot.name, rnd));
      t.set(i, clampToContract(spec, slot.name, t.get(i)));
    }
    out.emplace(slot.name, std::move(t));
  }
  return out;
}

}  // namespace dgps
