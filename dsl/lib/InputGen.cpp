#include "dgps/dsl/InputGen.h"

#include <algorithm>
#include <cmath>
#include <functional>
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

// The sampler of input `name` (a float slot; q, k, v included), chosen once per tensor.
std::function<double(Sampler&)> samplerFor(const Spec& spec, const std::string& name) {
  if (name == "g" || name == "precond_g") return [](Sampler& r) { return -softplus(r.normal(-2.0, 1.0)); };
  if (name == "beta") {
    const double lo = spec.gain.lo, hi = spec.gain.hi;
    if (std::isfinite(hi)) return [lo, hi](Sampler& r) { return lo + (hi - lo) * sigmoid(r.normal()); };
    return [lo](Sampler& r) { return lo + softplus(r.normal()); };
  }
  if (name == "precond_beta") return [](Sampler& r) { return sigmoid(r.normal()); };
  if (name == "precond_center") {
    const double c = spec.precond.squash.center_init;
    return [c](Sampler& r) { return c + 0.1 * r.normal(); };
  }
  if (name == "initial_state") return [](Sampler& r) { return 0.1 * r.normal(); };
  if (name == "initial_precond_state") {
    if (spec.precond.source == PrecondSource::EmaSqSquash) return [](Sampler& r) { return 0.5 * std::fabs(r.normal()); };
    const HypergradParams hp = spec.precond.hypergrad;
    return [hp](Sampler& r) {
      double d = hp.init * (1.0 + 0.1 * r.normal());
      if (hp.clamp_min) d = std::max(d, *hp.clamp_min);
      if (hp.clamp_max) d = std::min(d, *hp.clamp_max);
      return d;
    };
  }
  return [](Sampler& r) { return r.normal(); };
}

// Rounding to f32 can push a sampled value past the edge of its contract (a gain bound that f32 cannot
// represent); gains are kept a relative 1e-6 of the range inside it, which f32 rounding cannot cross.
std::function<double(double)> contractFor(const Spec& spec, const std::string& name) {
  if (name == "g" || name == "precond_g") return [](double x) { return std::min(x, 0.0); };
  if (name == "beta") {
    const double lo = spec.gain.lo, hi = spec.gain.hi;
    const double margin = std::isfinite(hi) ? 1e-6 * (hi - lo) : 1e-6 * std::max(1.0, std::fabs(lo));
    return [lo, hi, margin](double x) { return std::min(std::max(x, lo + margin), hi - margin); };
  }
  return [](double x) { return x; };
}

}  // namespace

ReferenceInputs generateInputs(const Spec& spec, const ReferenceProblem& shape, std::uint64_t seed,
                               ScalarType activation_dtype, const InputGenOptions& options) {
  if (!isFloating(activation_dtype)) {
    throw DataError(std::string("generateInputs: activation dtype must be floating, got ") + toString(activation_dtype));
  }
  if (options.float_dtype != ScalarType::F32 && options.float_dtype != ScalarType::F64) {
    throw DataError(std::string("generateInputs: float_dtype must be f32 or f64 (the dtypes gates, gains and "
                                "states accept), got ") + toString(options.float_dtype));
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
    const auto sample = samplerFor(spec, slot.name);
    const auto contract = contractFor(spec, slot.name);
    Tensor t(dt, slot.shape);
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      t.set(i, contract(sample(rnd)));
    }
    out.emplace(slot.name, std::move(t));
  }
  return out;
}

}  // namespace dgps
