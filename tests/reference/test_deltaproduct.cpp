// Gated DeltaProduct (solve.steps = n_h > 1, docs/math.md §3.7) in the float64 reference, checked
// against the single-step reference run on the Householder-step sequence: a GDN over T·n_h rows whose
// log-decay is g_t on each token's first step and 0 on the others, whose query is q_t on the last step
// and 0 elsewhere, and whose output rows at the last steps are o. With n_h = 1 the spec is GDN exactly.
// Its reference gradients are checked against central finite differences of the n_h-step forward.
#include <gtest/gtest.h>

#include "GradTestUtil.h"
#include "TestUtil.h"
#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/ReferenceGrad.h"

namespace dgps::test {
namespace {

Spec deltaProduct(int steps, DecayKind decay = DecayKind::Scalar) {
  Spec s = gdn();
  s.name = "gdp";
  s.decay.kind = decay;
  s.solve.steps = steps;
  return s;
}

/// Row t of a per-token tensor [B,T,...] placed at row t·n + j of a [B,T·n,...] tensor, 0 elsewhere.
Tensor spreadRows(const Tensor& x, std::int64_t n, std::int64_t j) {
  std::vector<std::int64_t> shape = x.shape();
  const std::int64_t T = shape[1];
  std::int64_t inner = 1;
  for (std::size_t d = 2; d < shape.size(); ++d) inner *= shape[d];
  shape[1] = T * n;
  Tensor out = Tensor::fromDoubles(x.dtype(), shape, std::vector<double>(static_cast<std::size_t>(shape[0] * T * n * inner), 0.0));
  for (std::int64_t b = 0; b < shape[0]; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t i = 0; i < inner; ++i) out.set(((b * T * n) + t * n + j) * inner + i, x.get((b * T + t) * inner + i));
  return out;
}

/// Rows t·n + j of a [B,T·n,...] tensor: [B,T,...].
Tensor gatherRows(const Tensor& x, std::int64_t n, std::int64_t j) {
  std::vector<std::int64_t> shape = x.shape();
  const std::int64_t T = shape[1] / n;
  std::int64_t inner = 1;
  for (std::size_t d = 2; d < shape.size(); ++d) inner *= shape[d];
  shape[1] = T;
  Tensor out(x.dtype(), shape);
  for (std::int64_t b = 0; b < shape[0]; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t i = 0; i < inner; ++i) out.set((b * T + t) * inner + i, x.get((b * T * n + t * n + j) * inner + i));
  return out;
}

/// The single-step problem on the step sequence that computes what `gdp` computes on `in`.
ReferenceInputs onStepSequence(const Spec& gdp, const ReferenceInputs& in) {
  const std::int64_t n = gdp.solve.steps;
  ReferenceInputs out = in;
  out["q"] = spreadRows(in.at("q"), n, n - 1);
  if (in.count("g")) out["g"] = spreadRows(in.at("g"), n, 0);
  if (in.count("cu_seqlens")) {
    const Tensor& cu = in.at("cu_seqlens");
    Tensor scaled(ScalarType::I64, cu.shape());
    for (std::int64_t i = 0; i < cu.numel(); ++i) scaled.setInt(i, cu.getInt(i) * n);
    out["cu_seqlens"] = scaled;
  }
  return out;
}

void expectMatchesStepSequence(const Spec& gdp, const ReferenceProblem& shape, std::uint64_t seed) {
  const ReferenceInputs in = inputs64(gdp, shape, seed);
  ASSERT_EQ(in.at("k").dim(1), shape.seq_len * gdp.solve.steps) << "k must carry T·n_h rows";
  ReferenceOutputs got = runReference(gdp, in);
  Spec single = gdp;
  single.solve.steps = 1;
  ReferenceOutputs want = runReference(single, onStepSequence(gdp, in));
  // The zero query rows read nothing, so the single-step q normalisation (0 · rsqrt(eps)) gives o = 0
  // there; only the last-step rows carry the output.
  expectClose(got.o, gatherRows(want.o, gdp.solve.steps, gdp.solve.steps - 1), 1e-12, "o");
  ASSERT_TRUE(got.has_final_state);
  expectClose(got.final_state, want.final_state, 1e-12, "final_state");
  EXPECT_GT(maxAbs(got.o), 1e-3) << "a test on an all-zero output cannot fail";
}

TEST(DeltaProduct, MatchesTheSingleStepRecurrenceOnTheStepSequence) {
  DGPS_SEEDED(seed);
  for (int steps : {2, 3, 4}) {
    for (DecayKind decay : {DecayKind::Scalar, DecayKind::None, DecayKind::Diagonal}) {
      SCOPED_TRACE("steps=" + std::to_string(steps) + " decay=" + toString(decay));
      const Spec s = deltaProduct(steps, decay);
      expectMatchesStepSequence(s, shapeOf(2, 9, 2, 2, 5, 4), seed + steps);
      expectMatchesStepSequence(s, shapeOf(1, 12, 1, 1, 3, 6, {0, 1, 1, 7, 10}), seed + 7 * steps);  // padded varlen
      Spec gva = s;
      gva.gva_ratio = 3;
      expectMatchesStepSequence(gva, shapeOf(1, 6, 2, 6, 4, 3), seed + 13 * steps);
    }
  }
}

TEST(DeltaProduct, OneStepIsTheDeltaRuleExactly) {
  DGPS_SEEDED(seed);
  Spec one = deltaProduct(1);
  const ReferenceProblem shape = shapeOf(2, 11, 2, 4, 6, 5);
  Spec g = gdn();
  g.gva_ratio = one.gva_ratio = 2;
  const ReferenceInputs in = inputs64(g, shape, seed);
  const ReferenceOutputs a = runReference(one, in), b = runReference(g, in);
  EXPECT_EQ(maxAbsDiff(a.o, b.o), 0.0);
  EXPECT_EQ(maxAbsDiff(a.final_state, b.final_state), 0.0);
}

/// One token, K = V = 1, no normalisation: S = a·s0; S += β1 k1 (v1 − k1 S); S += β2 k2 (v2 − k2 S);
/// o = scale · q S — by hand.
TEST(DeltaProduct, OneTokenByHand) {
  Spec s = deltaProduct(2);
  s.qk_l2norm = false;
  s.scale = 0.5;
  const double q = 1.5, k1 = 0.8, k2 = -0.6, v1 = 2.0, v2 = -1.0, b1 = 0.3, b2 = 0.9, g = -0.4, s0 = 0.7;
  ReferenceInputs in;
  in["q"] = Tensor::fromDoubles(ScalarType::F64, {1, 1, 1, 1}, {q});
  in["k"] = Tensor::fromDoubles(ScalarType::F64, {1, 2, 1, 1}, {k1, k2});
  in["v"] = Tensor::fromDoubles(ScalarType::F64, {1, 2, 1, 1}, {v1, v2});
  in["beta"] = Tensor::fromDoubles(ScalarType::F64, {1, 2, 1}, {b1, b2});
  in["g"] = Tensor::fromDoubles(ScalarType::F64, {1, 1, 1}, {g});
  in["initial_state"] = Tensor::fromDoubles(ScalarType::F64, {1, 1, 1, 1}, {s0});
  double S = std::exp(g) * s0;
  S += b1 * k1 * (v1 - k1 * S);
  S += b2 * k2 * (v2 - k2 * S);
  const ReferenceOutputs out = runReference(s, in);
  EXPECT_NEAR(out.o.get(0), 0.5 * q * S, 1e-15);
  EXPECT_NEAR(out.final_state.get(0), S, 1e-15);
}

TEST(DeltaProduct, InputShapesNameTheStepRows) {
  const Spec s = deltaProduct(3);
  const std::vector<TensorSlot> slots = referenceInputSlots(s, shapeOf(2, 5, 1, 1, 4, 4));
  for (const TensorSlot& slot : slots) {
    if (slot.name == "k" || slot.name == "v" || slot.name == "beta") {
      EXPECT_EQ(slot.shape[1], 15) << slot.name;
      EXPECT_NE(slot.layout.find("T*3"), std::string::npos) << slot.layout;
    }
    if (slot.name == "q" || slot.name == "g") EXPECT_EQ(slot.shape[1], 5) << slot.name;
  }
  // v with T rows instead of T·n_h: one error naming v and the expected rows.
  ReferenceInputs in = inputs64(s, shapeOf(1, 4, 1, 1, 4, 4), 1);
  in["v"] = Tensor::fromDoubles(ScalarType::F64, {1, 4, 1, 4}, std::vector<double>(16, 0.5));
  try {
    runReference(s, in);
    ADD_FAILURE() << "v with T rows was accepted";
  } catch (const DataError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'v'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("T*3=12"), std::string::npos) << msg;
  }
  // k with T rows: the slot check names k.
  in = inputs64(s, shapeOf(1, 4, 1, 1, 4, 4), 2);
  in["k"] = Tensor::fromDoubles(ScalarType::F64, {1, 4, 1, 4}, std::vector<double>(16, 0.5));
  try {
    runReference(s, in);
    ADD_FAILURE() << "k with T rows was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("'k'"), std::string::npos) << e.what();
  }
}

/// Central finite differences of the n_h-step forward reference (independent of the backward, which runs
/// the single-step adjoint on the step sequence) against runReferenceBackward, every element.
void expectStepGradientsMatchFiniteDifferences(const Spec& gdp, const ReferenceProblem& shape, std::uint64_t seed,
                                               bool initialState) {
  InputGenOptions opt;
  opt.initial_state = initialState;
  ReferenceInputs in = inputs64(gdp, shape, seed, opt);
  ASSERT_EQ(in.count("initial_state"), initialState ? 1u : 0u);
  keepOffBounds(gdp, in);
  const TensorMap ct = randomCotangents(gdp, shape, seed + 1);
  expectGradientsMatchFiniteDifferences(gdp, in, ct, seed + 2);
}

TEST(DeltaProduct, ReferenceGradientsMatchFiniteDifferences) {
  DGPS_SEEDED(seed);
  for (int steps : {2, 3}) {
    for (DecayKind decay : {DecayKind::Scalar, DecayKind::None, DecayKind::Diagonal}) {
      SCOPED_TRACE("steps=" + std::to_string(steps) + " decay=" + toString(decay));
      const Spec s = deltaProduct(steps, decay);
      {
        SCOPED_TRACE("batched B=2 T=3, initial state");
        expectStepGradientsMatchFiniteDifferences(s, shapeOf(2, 3, 1, 1, 3, 2), seed + steps, true);
      }
      {
        SCOPED_TRACE("batched B=1 T=3 H=2, no initial state");
        expectStepGradientsMatchFiniteDifferences(s, shapeOf(1, 3, 2, 2, 2, 3), seed + 5 * steps, false);
      }
      {
        SCOPED_TRACE("varlen cu_seqlens = [0, 2, 2, 4] of T=5 (one padding token), initial state");
        expectStepGradientsMatchFiniteDifferences(s, shapeOf(1, 5, 1, 1, 3, 2, {0, 2, 2, 4}), seed + 7 * steps,
                                                  true);
      }
      {
        SCOPED_TRACE("GVA ratio 2");
        Spec gva = s;
        gva.gva_ratio = 2;
        expectStepGradientsMatchFiniteDifferences(gva, shapeOf(1, 3, 1, 2, 2, 2), seed + 11 * steps, true);
      }
    }
  }
}

TEST(DeltaProduct, ReferenceGradientsOfPaddingTokensAreZero) {
  DGPS_SEEDED(seed);
  const Spec s = deltaProduct(2);
  const ReferenceProblem shape = shapeOf(1, 5, 1, 1, 3, 2, {0, 2, 4});
  const ReferenceInputs in = inputs64(s, shape, seed);
  const TensorMap g = runReferenceBackward(s, in, randomCotangents(s, shape, seed + 1));
  // Token 4 (step rows 8, 9) belongs to no sequence.
  for (std::int64_t i = 0; i < 3; ++i) EXPECT_EQ(g.at("dq").get(4 * 3 + i), 0.0);
  EXPECT_EQ(g.at("dg").get(4), 0.0);
  for (std::int64_t r : {8, 9}) {
    for (std::int64_t i = 0; i < 3; ++i) EXPECT_EQ(g.at("dk").get(r * 3 + i), 0.0);
    for (std::int64_t i = 0; i < 2; ++i) EXPECT_EQ(g.at("dv").get(r * 2 + i), 0.0);
    EXPECT_EQ(g.at("dbeta").get(r), 0.0);
  }
  EXPECT_GT(maxAbs(g.at("dq")), 1e-6) << "the sequences' tokens must have gradients";
}

TEST(DeltaProduct, OneStepGradientsAreGatedDeltaNetsExactly) {
  DGPS_SEEDED(seed);
  for (std::int64_t ratio : {1, 2}) {
    Spec one = deltaProduct(1), g = gdn();
    one.gva_ratio = g.gva_ratio = ratio;
    const ReferenceProblem shape = shapeOf(2, 6, 2, 2 * ratio, 4, 3);
    const ReferenceInputs in = inputs64(g, shape, seed + ratio);
    const TensorMap ct = randomCotangents(g, shape, seed + 10 + ratio);
    const TensorMap a = runReferenceBackward(one, in, ct), b = runReferenceBackward(g, in, ct);
    ASSERT_EQ(a.size(), b.size());
    for (const auto& kv : b) {
      ASSERT_TRUE(a.count(kv.first)) << kv.first;
      EXPECT_EQ(maxAbsDiff(a.at(kv.first), kv.second), 0.0) << kv.first;
      EXPECT_GT(maxAbs(kv.second), 1e-9) << kv.first << ": an all-zero gradient proves nothing";
    }
  }
}

/// f32 inputs (q, k, v share one dtype): the step-sequence spread keeps it, and the gradients equal those
/// of the same values in f64.
TEST(DeltaProduct, ReferenceGradientsOfF32InputsEqualF64) {
  DGPS_SEEDED(seed);
  const Spec s = deltaProduct(2);
  const ReferenceProblem shape = shapeOf(1, 4, 1, 1, 3, 2);
  ReferenceInputs in32 = generateInputs(s, shape, seed, ScalarType::F32);
  ReferenceInputs in64;
  for (const auto& kv : in32) {
    in64.emplace(kv.first, kv.first == "cu_seqlens" ? kv.second
                                                     : Tensor::fromDoubles(ScalarType::F64, kv.second.shape(),
                                                                           kv.second.toDoubles()));
  }
  const TensorMap ct = randomCotangents(s, shape, seed + 1);
  const TensorMap a = runReferenceBackward(s, in32, ct), b = runReferenceBackward(s, in64, ct);
  for (const auto& kv : b) EXPECT_EQ(maxAbsDiff(a.at(kv.first), kv.second), 0.0) << kv.first;
}

TEST(DeltaProduct, ReferenceRefusesStepsItCannotRun) {
  Spec s = deltaProduct(5);
  EXPECT_THROW(checkReferenceSpec(s), DataError);
  s = withSquash(deltaProduct(2));
  EXPECT_THROW(checkReferenceSpec(s), DataError);
}

}  // namespace
}  // namespace dgps::test
