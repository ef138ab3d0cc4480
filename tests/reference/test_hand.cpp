// Tiny cases (T = 1..3, K = V = 2) checked against values computed independently: either written out as
// explicit arithmetic here, or produced by a separate plain-Python implementation of math.md in the
// 2-form S_t = (I − β k^w k^rᵀ) D_t S_{t−1} + β k^w vᵀ (the literals below; inputs listed with them).
#include <gtest/gtest.h>

#include "TestUtil.h"

namespace dgps::test {
namespace {

Tensor t64(std::vector<std::int64_t> shape, std::vector<double> v) {
  return Tensor::fromDoubles(ScalarType::F64, std::move(shape), v);
}

void expectValues(const Tensor& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.numel(), static_cast<std::int64_t>(want.size())) << what;
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got.get(static_cast<std::int64_t>(i)), want[i], tol) << what << "[" << i << "]";
  }
}

TEST(ReferenceHand, LinearAttentionTwoTokens) {
  Spec s = linearAttention();
  s.qk_l2norm = false;
  s.scale = 1.0;
  ReferenceInputs in;
  in["q"] = t64({1, 2, 1, 2}, {0.5, -1.0, 2.0, 0.25});
  in["k"] = t64({1, 2, 1, 2}, {1.5, 0.5, -0.5, 1.0});
  in["v"] = t64({1, 2, 1, 2}, {3.0, -2.0, 0.5, 4.0});
  const ReferenceOutputs r = runReference(s, in);
  // o1 = (k1·q1) v1, o2 = (k1·q2) v1 + (k2·q2) v2
  const double k1q1 = 1.5 * 0.5 + 0.5 * -1.0, k1q2 = 1.5 * 2.0 + 0.5 * 0.25, k2q2 = -0.5 * 2.0 + 1.0 * 0.25;
  expectValues(r.o, {k1q1 * 3.0, k1q1 * -2.0, k1q2 * 3.0 + k2q2 * 0.5, k1q2 * -2.0 + k2q2 * 4.0}, 1e-15, "o");
  // S = k1 v1ᵀ + k2 v2ᵀ
  expectValues(r.final_state, {1.5 * 3.0 - 0.5 * 0.5, 1.5 * -2.0 - 0.5 * 4.0, 0.5 * 3.0 + 1.0 * 0.5,
                               0.5 * -2.0 + 1.0 * 4.0},
               1e-15, "final_state");
}

TEST(ReferenceHand, DeltaNetTwoTokens) {
  Spec s = deltanet();
  s.qk_l2norm = false;
  s.scale = 0.5;
  const double b1 = 0.8, b2 = 0.3;
  ReferenceInputs in;
  in["q"] = t64({1, 2, 1, 2}, {1.0, 2.0, -1.0, 0.5});
  in["k"] = t64({1, 2, 1, 2}, {0.6, 0.8, 1.0, 0.0});
  in["v"] = t64({1, 2, 1, 2}, {2.0, -1.0, 0.5, 3.0});
  in["beta"] = t64({1, 2, 1}, {b1, b2});
  const ReferenceOutputs r = runReference(s, in);
  // S1 = b1 k1 v1ᵀ; e2 = b2 (v2 − S1ᵀ k2) = b2 (v2 − b1 (k1·k2) v1); S2 = S1 + k2 e2ᵀ; o = 0.5 Sᵀ q.
  const double k1k2 = 0.6 * 1.0 + 0.8 * 0.0;
  const double e2[2] = {b2 * (0.5 - b1 * k1k2 * 2.0), b2 * (3.0 - b1 * k1k2 * -1.0)};
  const double k1q1 = 0.6 * 1.0 + 0.8 * 2.0, k1q2 = 0.6 * -1.0 + 0.8 * 0.5, k2q2 = 1.0 * -1.0;
  expectValues(r.o,
               {0.5 * b1 * k1q1 * 2.0, 0.5 * b1 * k1q1 * -1.0, 0.5 * (b1 * k1q2 * 2.0 + k2q2 * e2[0]),
                0.5 * (b1 * k1q2 * -1.0 + k2q2 * e2[1])},
               1e-15, "o");
  expectValues(r.final_state,
               {b1 * 0.6 * 2.0 + 1.0 * e2[0], b1 * 0.6 * -1.0 + 1.0 * e2[1], b1 * 0.8 * 2.0, b1 * 0.8 * -1.0}, 1e-15,
               "final_state");
}

TEST(ReferenceHand, Mamba2ScalarDecayWithUnboundedGain) {
  Spec s = mamba2();  // linear solve, scalar decay, gain Δ in (0, inf), no l2norm
  s.scale = 1.0;
  ReferenceInputs in;
  in["q"] = t64({1, 2, 1, 2}, {1.0, -1.0, 0.5, 2.0});
  in["k"] = t64({1, 2, 1, 2}, {2.0, 1.0, -1.0, 3.0});
  in["v"] = t64({1, 2, 1, 1}, {4.0, -2.0});
  in["g"] = t64({1, 2, 1}, {-0.25, -1.5});
  in["beta"] = t64({1, 2, 1}, {3.5, 0.125});
  in["initial_state"] = t64({1, 1, 2, 1}, {0.75, -0.5});
  const ReferenceOutputs r = runReference(s, in);
  const double a1 = std::exp(-0.25), a2 = std::exp(-1.5);
  const double S1[2] = {a1 * 0.75 + 3.5 * 2.0 * 4.0, a1 * -0.5 + 3.5 * 1.0 * 4.0};
  const double S2[2] = {a2 * S1[0] + 0.125 * -1.0 * -2.0, a2 * S1[1] + 0.125 * 3.0 * -2.0};
  expectValues(r.o, {S1[0] * 1.0 + S1[1] * -1.0, S2[0] * 0.5 + S2[1] * 2.0}, 1e-13, "o");
  expectValues(r.final_state, {S2[0], S2[1]}, 1e-13, "final_state");
}

TEST(ReferenceHand, L2NormEpsilonGoesInsideTheSumAtSmallMagnitude) {
  // docs/math.md §1: x·(Σx² + 1e-6)^{-1/2}, not an RMS norm. With |q|, |k| ~ 1e-3 and 1e-4 at K = 128 the
  // eps matters, so a wrong placement shows up at O(1) relative error.
  DGPS_SEEDED(seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (double amp : {1e-3, 1e-4}) {
    const std::int64_t K = 128;
    Spec s = linearAttention();
    std::vector<double> q(K), k(K);
    double qq = 0.0, kk = 0.0, qk = 0.0;
    for (std::int64_t i = 0; i < K; ++i) {
      q[i] = amp * u(rng);
      k[i] = amp * u(rng);
      qq += q[i] * q[i];
      kk += k[i] * k[i];
      qk += q[i] * k[i];
    }
    ReferenceInputs in;
    in["q"] = t64({1, 1, 1, K}, q);
    in["k"] = t64({1, 1, 1, K}, k);
    in["v"] = t64({1, 1, 1, 1}, {1.0});
    const ReferenceOutputs r = runReference(s, in);
    // One token: o = (k̂·q̂)·K^{-1/2}·v.
    const double want = qk / std::sqrt(qq + 1e-6) / std::sqrt(kk + 1e-6) / std::sqrt(128.0);
    EXPECT_NEAR(r.o.get(0), want, 1e-15 + 1e-13 * std::fabs(want)) << "amplitude " << amp;
    EXPECT_GT(std::fabs(want), 0.0);
  }
}

// Inputs shared by the Python-computed cases: T = 3, H = HV = 1, K = V = 2.
ReferenceInputs tinyInputs() {
  ReferenceInputs in;
  in["q"] = t64({1, 3, 1, 2}, {0.3, -1.2, 0.8, 0.5, -0.4, 0.9});
  in["k"] = t64({1, 3, 1, 2}, {1.1, 0.2, -0.3, 0.7, 0.6, 0.6});
  in["v"] = t64({1, 3, 1, 2}, {0.5, -1.0, 2.0, 0.25, -0.75, 1.5});
  in["beta"] = t64({1, 3, 1}, {0.9, 0.4, 0.7});
  in["initial_state"] = t64({1, 1, 2, 2}, {0.1, -0.2, 0.3, 0.05});
  return in;
}

TEST(ReferenceHand, PgdnThreeTokens) {
  ReferenceInputs in = tinyInputs();
  in["g"] = t64({1, 3, 1}, {-0.1, -0.5, -0.05});
  in["precond_g"] = t64({1, 3, 1}, {-0.2, -0.3, -0.01});
  in["precond_beta"] = t64({1, 3, 1}, {0.6, 0.9, 0.3});
  in["precond_center"] = t64({1}, {-0.2});
  in["initial_precond_state"] = t64({1, 1, 2}, {0.4, 0.1});
  const ReferenceOutputs r = runReference(pgdn(), in);
  expectValues(r.o,
               {-0.17037956701474416, -0.06279630473199577, 0.30412205140267623, -0.34817061467670346,
                0.35264026440482726, 0.4440339192600321},
               1e-14, "o");
  expectValues(r.final_state, {-0.6741770209967463, 0.3620441649655807, 0.24611166362457954, 0.8480951870592004},
               1e-14, "final_state");
  // final_precond_state holds A_T (not M): A after three accumulations.
  const Tensor& A = r.final_precond_state;
  ASSERT_EQ(A.numel(), 2);
  auto k2 = [](double a, double b, int c) {  // k̂² channel c of (a, b)
    const double n = a * a + b * b + 1e-6;
    return (c ? b * b : a * a) / n;
  };
  for (int c = 0; c < 2; ++c) {
    double a = c ? 0.1 : 0.4;
    a = std::exp(-0.2) * a + 0.6 * k2(1.1, 0.2, c);
    a = std::exp(-0.3) * a + 0.9 * k2(-0.3, 0.7, c);
    a = std::exp(-0.01) * a + 0.3 * k2(0.6, 0.6, c);
    EXPECT_NEAR(A.get(c), a, 1e-15) << "A_T channel " << c;
  }
}

TEST(ReferenceHand, PkdaAtqThreeTokens) {
  ReferenceInputs in = tinyInputs();
  in["g"] = t64({1, 3, 1, 2}, {-0.1, -0.6, -0.3, -0.02, -1.0, -0.2});
  in["precond_g"] = t64({1, 3, 1}, {-0.2, -0.3, -0.01});
  in["precond_beta"] = t64({1, 3, 1}, {0.6, 0.9, 0.3});
  in["precond_center"] = t64({1}, {-0.2});
  in["initial_precond_state"] = t64({1, 1, 2}, {0.4, 0.1});
  const ReferenceOutputs r = runReference(withSquash(kda(), PrecondSide::Query), in);
  expectValues(r.o,
               {-0.13332440667231177, -0.05536246658886698, 0.3537898307630631, -0.44208332337067285,
                0.24583632770372849, 0.31817054195162364},
               1e-14, "o");
  expectValues(r.final_state, {-0.6336647349948963, 0.5991247640400454, 0.12074089602202331, 0.7914382074586039},
               1e-14, "final_state");
}

TEST(ReferenceHand, OsdnThreeTokensPreAndPostClamped) {
  ReferenceInputs in = tinyInputs();
  in["precond_g"] = t64({1, 3, 1}, {-0.1, -0.05, -0.3});
  in["initial_precond_state"] = t64({1, 1, 2}, {1.2, 0.8});
  Spec pre = osdn(WriteTiming::Pre, true);  // eta 0.7
  const ReferenceOutputs rp = runReference(pre, in);
  expectValues(rp.o,
               {-0.15598431295858917, -0.14484307938322175, 0.41257365345818425, -0.6579701668615753,
                0.31195372090620216, 0.5351791351824424},
               1e-14, "o (pre)");
  expectValues(rp.final_state, {-0.5767531283606984, 0.12066310235910094, 0.22644469728308136, 0.8818710049407049},
               1e-14, "final_state (pre)");
  expectValues(rp.final_precond_state, {0.8422837477682219, 0.7145456543078363}, 1e-14, "d_T (pre)");

  Spec post = osdn(WriteTiming::Post, true);
  post.precond.hypergrad.clamp_min = 0.9;
  post.precond.hypergrad.clamp_max = 1.3;
  const ReferenceOutputs rq = runReference(post, in);
  expectValues(rq.o,
               {-0.16806771580026608, -0.11663829723813737, 0.46181120446506474, -0.5981353389520032,
                0.38013354345793254, 0.5680813923588561},
               1e-14, "o (post, clamped)");
  expectValues(rq.final_state, {-0.5734746506856498, 0.0523374257960445, 0.33341685743560157, 0.9024235541763729},
               1e-14, "final_state (post, clamped)");
  expectValues(rq.final_precond_state, {0.9, 0.9}, 0.0, "d_T (post, clamped)");
}

}  // namespace
}  // namespace dgps::test
