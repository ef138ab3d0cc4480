// The input generator: every spec gets valid, non-trivial inputs of the documented shapes, dtypes and ranges.
#include <gtest/gtest.h>

#include "TestUtil.h"

namespace dgps::test {
namespace {

TEST(InputGen, EverySpecGetsValidNonTrivialInputs) {
  DGPS_SEEDED(seed);
  for (const Spec& spec : allSpecs()) {
    SCOPED_TRACE(spec.name);
    const std::int64_t H = 3, HV = H * spec.gva_ratio;
    const ReferenceProblem shape = shapeOf(1, 40, H, HV, 8, 6, {0, 17, 40});
    for (ScalarType dt : {ScalarType::BF16, ScalarType::F16, ScalarType::F32}) {
      const ReferenceInputs in = generateInputs(spec, shape, seed, dt);
      EXPECT_NO_THROW(validateReferenceInputs(spec, in));
      for (const TensorSlot& slot : referenceInputSlots(spec, shape)) {
        ASSERT_TRUE(in.count(slot.name)) << slot.name;  // every optional input included by default
        const Tensor& t = in.at(slot.name);
        EXPECT_EQ(t.shape(), slot.shape) << slot.name;
        if (slot.type == SlotType::Activation) EXPECT_EQ(t.dtype(), dt);
        if (slot.type == SlotType::Float) EXPECT_EQ(t.dtype(), ScalarType::F32);
        if (slot.name == "cu_seqlens") continue;
        EXPECT_GT(maxAbs(t), 1e-3) << slot.name << " is (nearly) all zeros";
      }
      const ReferenceOutputs r = runReference(spec, in);
      EXPECT_GT(maxAbs(r.o), 1e-3);
      for (std::int64_t i = 0; i < r.o.numel(); ++i) ASSERT_TRUE(std::isfinite(r.o.get(i)));
    }
  }
}

TEST(InputGen, RangesAreRealistic) {
  DGPS_SEEDED(seed);
  Spec spec = pgdn();
  const ReferenceInputs in = generateInputs(spec, shapeOf(2, 64, 2, 2, 16, 8), seed, ScalarType::BF16);
  double gMean = 0.0;
  const Tensor& g = in.at("g");
  for (std::int64_t i = 0; i < g.numel(); ++i) {
    ASSERT_LE(g.get(i), 0.0);
    gMean += g.get(i) / static_cast<double>(g.numel());
  }
  EXPECT_LT(gMean, -0.02);  // decays, not identities
  EXPECT_GT(gMean, -1.0);   // and not erasing the state every token
  const Tensor& beta = in.at("beta");
  for (std::int64_t i = 0; i < beta.numel(); ++i) {
    ASSERT_GE(beta.get(i), 0.0);
    ASSERT_LE(beta.get(i), 1.0);
  }
  const Tensor& c = in.at("precond_center");
  for (std::int64_t i = 0; i < c.numel(); ++i) EXPECT_NEAR(c.get(i), -0.2, 0.6);
  const Tensor& a0 = in.at("initial_precond_state");
  for (std::int64_t i = 0; i < a0.numel(); ++i) ASSERT_GE(a0.get(i), 0.0);

  Spec narrow = gdn();  // a gain range whose bounds f32 cannot represent exactly
  narrow.gain.lo = 0.1;
  narrow.gain.hi = 0.3;
  for (int rep = 0; rep < 20; ++rep) {
    EXPECT_NO_THROW(runReference(narrow, generateInputs(narrow, shapeOf(1, 64, 2, 2, 4, 4), seed + rep, ScalarType::F32)));
  }

  Spec m = mamba2();  // unbounded gain: positive values above lo
  const ReferenceInputs mi = generateInputs(m, shapeOf(1, 32, 2, 2, 4, 4), seed, ScalarType::F32);
  for (std::int64_t i = 0; i < mi.at("beta").numel(); ++i) ASSERT_GT(mi.at("beta").get(i), 0.0);
}

TEST(InputGen, DeterministicPerSeedAndOptionsRespected) {
  DGPS_SEEDED(seed);
  const Spec spec = osdn();
  const ReferenceProblem shape = shapeOf(2, 8, 2, 2, 4, 4);
  const ReferenceInputs a = generateInputs(spec, shape, seed, ScalarType::BF16);
  const ReferenceInputs b = generateInputs(spec, shape, seed, ScalarType::BF16);
  const ReferenceInputs c = generateInputs(spec, shape, seed + 1, ScalarType::BF16);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& kv : a) EXPECT_EQ(kv.second.bytes(), b.at(kv.first).bytes()) << kv.first;
  EXPECT_NE(a.at("q").bytes(), c.at("q").bytes());
  InputGenOptions opt;
  opt.initial_state = false;
  opt.initial_precond_state = false;
  opt.float_dtype = ScalarType::F64;
  const ReferenceInputs d = generateInputs(spec, shape, seed, ScalarType::F32, opt);
  EXPECT_EQ(d.count("initial_state"), 0u);
  EXPECT_EQ(d.count("initial_precond_state"), 0u);
  EXPECT_EQ(d.at("beta").dtype(), ScalarType::F64);
  EXPECT_THROW(generateInputs(spec, shape, seed, ScalarType::I32), DataError);
  InputGenOptions bf16Floats;
  bf16Floats.float_dtype = ScalarType::BF16;  // gates and gains must be f32 or f64
  EXPECT_THROW(generateInputs(spec, shape, seed, ScalarType::F32, bf16Floats), DataError);
  EXPECT_THROW(generateInputs(spec, shapeOf(2, 8, 2, 4, 4, 4), seed, ScalarType::F32), DataError);
}

}  // namespace
}  // namespace dgps::test
