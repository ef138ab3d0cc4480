// Helpers of the reference-gradient tests: random cotangents, inputs kept off the edges of their
// contracts (so a finite-difference step never leaves them), the scalar loss whose gradient
// runReferenceBackward returns, and the finite-difference check itself.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "TestUtil.h"
#include "dgps/dsl/ReferenceGrad.h"

namespace dgps::test {

/// N(0, 1) cotangents (f64) for every output the spec produces at `shape`: do, dfinal_state,
/// dfinal_precond_state.
inline TensorMap randomCotangents(const Spec& spec, const ReferenceProblem& shape, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  TensorMap out;
  for (const TensorSlot& s : referenceOutputSlots(spec, shape)) {
    Tensor t(ScalarType::F64, s.shape);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, normal(rng));
    out.emplace("d" + s.name, std::move(t));
  }
  return out;
}

/// Moves generated inputs a margin inside their contracts (gains 2% of the range inside it, log-decays
/// <= −1e-3, accumulator gains and A_0 >= 1e-3), so central differences with steps around 1e-5 stay
/// valid inputs.
inline void keepOffBounds(const Spec& spec, ReferenceInputs& in) {
  auto apply = [&](const char* name, auto f) {
    auto it = in.find(name);
    if (it == in.end()) return;
    for (std::int64_t i = 0; i < it->second.numel(); ++i) it->second.set(i, f(it->second.get(i)));
  };
  apply("g", [](double x) { return std::min(x, -1e-3); });
  apply("precond_g", [](double x) { return std::min(x, -1e-3); });
  apply("precond_beta", [](double x) { return std::max(x, 1e-3); });
  if (spec.precond.source == PrecondSource::EmaSqSquash) {
    apply("initial_precond_state", [](double x) { return std::max(x, 1e-3); });
  }
  const double lo = spec.gain.lo, hi = spec.gain.hi;
  const double margin = std::isfinite(hi) ? 0.02 * (hi - lo) : 1e-3;
  apply("beta", [&](double x) { return std::min(std::max(x, lo + margin), std::isfinite(hi) ? hi - margin : x); });
}

/// The scalar whose gradient runReferenceBackward computes: ⟨do, o⟩ + ⟨dfinal_state, final_state⟩ +
/// ⟨dfinal_precond_state, final_precond_state⟩, evaluated with the forward reference. `magnitude`
/// (optional) receives Σ|terms|, the scale of its rounding error.
inline double loss(const Spec& spec, const ReferenceInputs& in, const TensorMap& ct, double* magnitude = nullptr) {
  const TensorMap outs = runReference(spec, in).toMap();
  double sum = 0.0, mag = 0.0;
  for (const auto& kv : ct) {
    const Tensor& y = outs.at(kv.first.substr(1));
    for (std::int64_t i = 0; i < y.numel(); ++i) {
      sum += kv.second.get(i) * y.get(i);
      mag += std::fabs(kv.second.get(i) * y.get(i));
    }
  }
  if (magnitude) *magnitude = mag;
  return sum;
}

struct FiniteDifferenceOptions {
  /// per element: |analytic − fd| <= rtol · max(|analytic|, floor) + the rounding error of fd
  /// (64 ulp of the loss's magnitude over the step)
  double rtol = 1e-6;
  double floorFrac = 1e-2;  ///< floor = floorFrac · max|analytic| over the tensor (and >= 1e-6)
  int samplesPerTensor = 0; ///< 0: every element; else this many random elements per tensor
  double step = 1e-5;       ///< h = step · max(1, |x|)
  bool nonZero = true;      ///< expect every gradient tensor to have an element above 1e-9 in size
};

/// Compares every gradient of runReferenceBackward with (extrapolated) central differences of `loss` over
/// the elements of each floating input (all, or a random sample). Also checks the set of gradient names.
/// A kink of the forward (a hypergrad clamp) within the step of a point makes its difference wrong while
/// the gradient is right; so an element that misses at step h is retried at h/10 and h/100 (a wrong
/// gradient misses at every step).
inline void expectGradientsMatchFiniteDifferences(const Spec& spec, const ReferenceInputs& in, const TensorMap& ct,
                                                  std::uint64_t seed, FiniteDifferenceOptions opt = {}) {
  const TensorMap grads = runReferenceBackward(spec, in, ct);
  double magnitude = 0.0;
  loss(spec, in, ct, &magnitude);
  std::mt19937_64 rng(seed);
  std::size_t expectedCount = 0;
  for (const auto& kv : in) {
    if (kv.first == "cu_seqlens") continue;
    ++expectedCount;
    SCOPED_TRACE("gradient of " + kv.first);
    auto git = grads.find("d" + kv.first);
    ASSERT_NE(git, grads.end()) << "no gradient d" << kv.first;
    const Tensor& grad = git->second;
    ASSERT_EQ(grad.shape(), kv.second.shape());
    ASSERT_EQ(grad.dtype(), ScalarType::F64);
    if (opt.nonZero) EXPECT_GT(maxAbs(grad), 1e-9) << "an all-zero gradient proves nothing";
    const double floor = std::max(1e-6, opt.floorFrac * maxAbs(grad));
    std::vector<std::int64_t> elems;
    if (opt.samplesPerTensor == 0 || opt.samplesPerTensor >= kv.second.numel()) {
      for (std::int64_t i = 0; i < kv.second.numel(); ++i) elems.push_back(i);
    } else {
      for (int s = 0; s < opt.samplesPerTensor; ++s) {
        elems.push_back(static_cast<std::int64_t>(rng() % kv.second.numel()));
      }
    }
    ReferenceInputs x = in;
    Tensor& xt = x.at(kv.first);
    int failures = 0;
    for (std::int64_t i : elems) {
      const double x0 = kv.second.get(i);
      auto central = [&](double step) {
        xt.set(i, x0 + step);
        const double up = loss(spec, x, ct);
        xt.set(i, x0 - step);
        const double down = loss(spec, x, ct);
        xt.set(i, x0);
        return (up - down) / (2.0 * step);
      };
      // Richardson extrapolation of two central differences: the h² error terms cancel, which matters
      // where the loss is strongly curved on the scale of h (ln(A + eps) at a small accumulator).
      auto extrapolated = [&](double h) { return (4.0 * central(0.5 * h) - central(h)) / 3.0; };
      const double a = grad.get(i);
      const double h0 = opt.step * std::max(1.0, std::fabs(x0));
      double firstFd = 0.0, firstTol = 0.0;
      bool ok = false;
      for (double h : {h0, 0.1 * h0, 0.01 * h0}) {
        const double fd = extrapolated(h);
        const double tol = opt.rtol * std::max(std::fabs(a), floor) + 64.0 * 2.2e-16 * magnitude / h;
        if (h == h0) {
          firstFd = fd;
          firstTol = tol;
        }
        if (std::fabs(a - fd) <= tol) {
          ok = true;
          break;
        }
      }
      if (!ok && ++failures <= 5) {
        ADD_FAILURE() << "d" << kv.first << "[" << i << "]: analytic " << a << ", finite difference " << firstFd
                      << ", |diff| " << std::fabs(a - firstFd) << " > tolerance " << firstTol
                      << " (also at steps h/10, h/100)";
      }
    }
  }
  EXPECT_EQ(grads.size(), expectedCount) << "one gradient per floating input";
}

}  // namespace dgps::test
