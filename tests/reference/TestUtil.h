// Shared helpers of the reference tests: fresh seeds, the spec of each known model built in code, and
// tensor comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Reference.h"
#include "dgps/dsl/Spec.h"
#include "dgps/dsl/Tensor.h"

namespace dgps::test {

/// A fresh seed per call (std::random_device); tests print it via SCOPED_TRACE so a failure can be replayed.
inline std::uint64_t freshSeed() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

#define DGPS_SEEDED(seed_var)                             \
  const std::uint64_t seed_var = ::dgps::test::freshSeed(); \
  SCOPED_TRACE("seed=" + std::to_string(seed_var))

/// A spec with any head count and any K, V (empty dim lists), every optional tensor allowed.
inline Spec baseSpec(const std::string& name) {
  Spec s;
  s.name = name;
  s.key_dims.clear();
  s.value_dims.clear();
  s.input_dtypes = {DType::BF16, DType::F16};
  return s;
}

inline Spec linearAttention() {
  Spec s = baseSpec("la");
  s.solve.kind = SolveKind::Linear;
  return s;
}
inline Spec mamba2() {
  Spec s = baseSpec("mamba2");
  s.decay.kind = DecayKind::Scalar;
  s.gain.kind = GainKind::Scalar;
  s.gain.lo = 0.0;
  s.gain.hi = INFINITY;
  s.solve.kind = SolveKind::Linear;
  s.qk_l2norm = false;
  return s;
}
inline Spec deltanet() {
  Spec s = baseSpec("deltanet");
  s.gain.kind = GainKind::Scalar;
  return s;
}
inline Spec gdn() {
  Spec s = deltanet();
  s.name = "gdn";
  s.decay.kind = DecayKind::Scalar;
  return s;
}
inline Spec kda() {
  Spec s = deltanet();
  s.name = "kda";
  s.decay.kind = DecayKind::Diagonal;
  return s;
}
inline Spec withSquash(Spec s, PrecondSide side = PrecondSide::Key) {
  s.precond.kind = PrecondKind::Diagonal;
  s.precond.source = PrecondSource::EmaSqSquash;
  s.precond.side = side;
  return s;
}
inline Spec pdn() {
  Spec s = withSquash(deltanet());
  s.name = "pdn";
  return s;
}
inline Spec pgdn() {
  Spec s = withSquash(gdn());
  s.name = "pgdn";
  return s;
}
inline Spec pkda() {
  Spec s = withSquash(kda());
  s.name = "pkda";
  return s;
}
inline Spec osdn(WriteTiming timing = WriteTiming::Pre, bool retention = true) {
  Spec s = deltanet();
  s.name = "osdn";
  s.precond.kind = PrecondKind::Diagonal;
  s.precond.source = PrecondSource::HypergradOgd;
  s.precond.side = PrecondSide::Key;
  s.precond.hypergrad.eta = 0.7;
  s.precond.hypergrad.has_retention = retention;
  s.precond.hypergrad.timing = timing;
  return s;
}

/// Every known model plus the less common points (ATQ, linear solve with a preconditioner, clamps).
inline std::vector<Spec> allSpecs() {
  std::vector<Spec> v = {linearAttention(), mamba2(), deltanet(), gdn(), kda(), pdn(), pgdn(), pkda(),
                         osdn(WriteTiming::Pre), osdn(WriteTiming::Post, false)};
  Spec atq = withSquash(gdn(), PrecondSide::Query);
  atq.name = "pgdn_atq";
  v.push_back(atq);
  Spec laPre = withSquash(linearAttention());
  laPre.name = "la_atk";
  laPre.precond.squash.has_gate = false;
  v.push_back(laPre);
  Spec clamped = osdn(WriteTiming::Post, true);
  clamped.name = "osdn_clamped";
  clamped.precond.hypergrad.clamp_min = 0.5;
  clamped.precond.hypergrad.clamp_max = 1.6;
  v.push_back(clamped);
  return v;
}

inline ReferenceProblem shapeOf(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t HV, std::int64_t K,
                            std::int64_t V, std::vector<std::int64_t> cu = {}) {
  ReferenceProblem s;
  s.batch = B;
  s.seq_len = T;
  s.heads_qk = H;
  s.heads_v = HV;
  s.key_dim = K;
  s.value_dim = V;
  s.cu_seqlens = std::move(cu);
  return s;
}

/// Generated inputs with every float tensor (q, k, v included) in f64, so comparisons see only the
/// recurrence's own rounding.
inline ReferenceInputs inputs64(const Spec& spec, const ReferenceProblem& shape, std::uint64_t seed,
                                InputGenOptions opt = {}) {
  opt.float_dtype = ScalarType::F64;
  return generateInputs(spec, shape, seed, ScalarType::F64, opt);
}

inline double maxAbsDiff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  if (a.shape() != b.shape()) return INFINITY;
  double m = 0.0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::fabs(a.get(i) - b.get(i));
    if (!(d <= m)) m = d;  // NaN propagates as a failure
  }
  return m;
}

inline double maxAbs(const Tensor& a) {
  double m = 0.0;
  for (std::int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(a.get(i)));
  return m;
}

/// Expects |a − b| <= tol · max(1, max|b|) everywhere.
inline void expectClose(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  const double scale = std::max(1.0, maxAbs(b));
  const double d = maxAbsDiff(a, b);
  EXPECT_LE(d, tol * scale) << what << ": max |diff| = " << d << " (scale " << scale << ")";
}

/// Copies a sub-range [t0, t1) along dim 1 of a [B, T, ...] tensor.
inline Tensor sliceT(const Tensor& x, std::int64_t t0, std::int64_t t1) {
  std::vector<std::int64_t> shape = x.shape();
  const std::int64_t T = shape[1];
  std::int64_t inner = 1;
  for (std::size_t d = 2; d < shape.size(); ++d) inner *= shape[d];
  shape[1] = t1 - t0;
  Tensor out(x.dtype(), shape);
  for (std::int64_t b = 0; b < shape[0]; ++b) {
    for (std::int64_t t = t0; t < t1; ++t) {
      for (std::int64_t i = 0; i < inner; ++i) out.set((b * (t1 - t0) + (t - t0)) * inner + i, x.get((b * T + t) * inner + i));
    }
  }
  return out;
}

/// Copies the slice [n] of dim 0, keeping a leading dim of 1.
inline Tensor sliceN(const Tensor& x, std::int64_t n) {
  std::vector<std::int64_t> shape = x.shape();
  std::int64_t inner = 1;
  for (std::size_t d = 1; d < shape.size(); ++d) inner *= shape[d];
  shape[0] = 1;
  Tensor out(x.dtype(), shape);
  for (std::int64_t i = 0; i < inner; ++i) out.set(i, x.get(n * inner + i));
  return out;
}

/// The position of the key-head dimension H in a per-key-head input (q, k [B,T,H,K]; precond_g,
/// precond_beta [B,T,H]; precond_center [H]; initial_precond_state [N,H,K]), or -1 for other inputs.
inline int keyHeadDim(const std::string& name) {
  if (name == "q" || name == "k" || name == "precond_g" || name == "precond_beta") return 2;
  if (name == "precond_center") return 0;
  if (name == "initial_precond_state") return 1;
  return -1;
}

/// Each head of dimension `headDim` repeated `ratio` times, interleaved: output head j is input head j / ratio.
inline Tensor repeatHeads(const Tensor& x, std::size_t headDim, std::int64_t ratio) {
  std::vector<std::int64_t> shape = x.shape();
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < headDim; ++d) outer *= shape[d];
  for (std::size_t d = headDim + 1; d < shape.size(); ++d) inner *= shape[d];
  const std::int64_t H = shape[headDim];
  shape[headDim] = H * ratio;
  Tensor y(x.dtype(), shape);
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t hv = 0; hv < H * ratio; ++hv) {
      for (std::int64_t i = 0; i < inner; ++i) {
        y.set((o * H * ratio + hv) * inner + i, x.get((o * H + hv / ratio) * inner + i));
      }
    }
  }
  return y;
}

/// The adjoint of repeatHeads: groups of `ratio` consecutive heads of dimension `headDim` summed (f64).
inline Tensor sumHeadGroups(const Tensor& x, std::size_t headDim, std::int64_t ratio) {
  std::vector<std::int64_t> shape = x.shape();
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < headDim; ++d) outer *= shape[d];
  for (std::size_t d = headDim + 1; d < shape.size(); ++d) inner *= shape[d];
  const std::int64_t HV = shape[headDim];
  shape[headDim] = HV / ratio;
  Tensor y(ScalarType::F64, shape);
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t hv = 0; hv < HV; ++hv) {
      for (std::int64_t i = 0; i < inner; ++i) {
        const std::int64_t to = (o * (HV / ratio) + hv / ratio) * inner + i;
        y.set(to, y.get(to) + x.get((o * HV + hv) * inner + i));
      }
    }
  }
  return y;
}

/// The per-key-head inputs (q, k and the preconditioner's) repeated to HV heads, so that a spec with
/// gva_ratio 1 on the result computes what the GVA spec computes on `in`.
inline ReferenceInputs repeatToValueHeads(const ReferenceInputs& in, std::int64_t ratio) {
  ReferenceInputs out = in;
  for (const auto& kv : in) {
    const int d = keyHeadDim(kv.first);
    if (d >= 0) out[kv.first] = repeatHeads(kv.second, static_cast<std::size_t>(d), ratio);
  }
  return out;
}

}  // namespace dgps::test
