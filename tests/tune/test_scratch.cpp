// Scratch inputs of tuning trials: the validation slice, tiling the slice to the full shape (values land
// where full[b, t] = slice[b % Bs, t % Ts] says), and the error measure (poison left in an output, a
// missing output or a wrong value are all caught).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "TuneTestUtil.h"
#include "dgps/dsl/InputGen.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/tune/ScratchForward.h"

namespace dgps {
namespace {

ReferenceProblem shapeOf(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t KV) {
  ReferenceProblem s;
  s.batch = B;
  s.seq_len = T;
  s.heads_qk = H;
  s.heads_v = H;
  s.key_dim = s.value_dim = KV;
  return s;
}

TEST(Scratch, SliceIsSmallAndRagged) {
  ReferenceProblem s = tune::sliceShape(shapeOf(8, 4096, 16, 128));
  EXPECT_EQ(s.batch, 2);
  EXPECT_EQ(s.seq_len, 250);
  EXPECT_EQ(s.heads_qk, 16);
  EXPECT_EQ(s.key_dim, 128);
  for (int chunk : {16, 32, 64, 128}) EXPECT_NE(s.seq_len % chunk, 0) << "the last chunk must be partial";
  s = tune::sliceShape(shapeOf(1, 100, 4, 64));
  EXPECT_EQ(s.batch, 1);
  EXPECT_EQ(s.seq_len, 100);
}

class ScratchPgdn : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = tunetest::shippedPackage("pgdn");
    if (dir.empty()) GTEST_SKIP() << "generated/pgdn is absent";
    pkg_ = Package::open(dir);
    std::random_device rd;
    seed_ = rd();
    slice_ = generateInputs(pkg_.spec(), shapeOf(2, 250, 2, 64), seed_, ScalarType::BF16);
  }
  Package pkg_;
  std::uint64_t seed_ = 0;
  ReferenceInputs slice_;
};

TEST_F(ScratchPgdn, TilingRepeatsTheSliceAlongBAndT) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const ReferenceInputs full = tune::tileInputs(slice_, 5, 700);
  ASSERT_EQ(full.size(), slice_.size());
  const Tensor& q = full.at("q");
  ASSERT_EQ(q.shape(), (std::vector<std::int64_t>{5, 700, 2, 64}));
  const Tensor& qs = slice_.at("q");
  std::mt19937 rng(seed_);
  for (int i = 0; i < 500; ++i) {
    const std::int64_t b = rng() % 5, t = rng() % 700, h = rng() % 2, k = rng() % 64;
    const std::int64_t at = ((b * 700 + t) * 2 + h) * 64 + k;
    const std::int64_t from = (((b % 2) * 250 + t % 250) * 2 + h) * 64 + k;
    ASSERT_EQ(q.get(at), qs.get(from)) << "b " << b << " t " << t;
  }
  const Tensor& g = full.at("g");
  ASSERT_EQ(g.shape(), (std::vector<std::int64_t>{5, 700, 2}));
  EXPECT_EQ(g.get((4 * 700 + 699) * 2 + 1), slice_.at("g").get((0 * 250 + 199) * 2 + 1));
  if (slice_.count("initial_state")) {
    const Tensor& s = full.at("initial_state");
    ASSERT_EQ(s.dim(0), 5);
    const std::int64_t per = s.numel() / 5;
    for (std::int64_t i = 0; i < per; i += 97) EXPECT_EQ(s.get(3 * per + i), slice_.at("initial_state").get(per + i));
  }
  if (slice_.count("precond_center")) {
    EXPECT_EQ(full.at("precond_center").bytes(), slice_.at("precond_center").bytes());
  }
  // Every tiled value still honours the spec's contracts (the reference validates them).
  EXPECT_NO_THROW(validateReferenceInputs(pkg_.spec(), full));
}

TEST_F(ScratchPgdn, TilingRefusesVarlen) {
  ReferenceInputs in = slice_;
  in.emplace("cu_seqlens", Tensor(ScalarType::I64, {3}));
  EXPECT_THROW(tune::tileInputs(in, 4, 500), DataError);
}

TEST_F(ScratchPgdn, ErrorMeasureCatchesPoisonWrongValuesAndMissingOutputs) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const ReferenceOutputs ref = runReference(pkg_.spec(), slice_);
  TensorMap got;
  for (const auto& kv : ref.toMap()) got.emplace(kv.first, kv.second.to(kv.first == "o" ? ScalarType::BF16 : ScalarType::F32));
  std::string worst;
  const double rounding = tune::maxRelativeError(got, ref, &worst);
  EXPECT_GE(rounding, 0.0);
  EXPECT_LT(rounding, 1e-2) << worst;  // bf16 rounding of o alone stays far inside the bf16 tolerance

  TensorMap scaled = got;
  Tensor& o = scaled.at("o");
  for (std::int64_t i = 0; i < o.numel(); ++i) o.set(i, o.get(i) * 1.25);
  EXPECT_GT(tune::maxRelativeError(scaled, ref, &worst), 0.1);
  EXPECT_EQ(worst, "o");

  TensorMap poisoned = got;
  Tensor& p = poisoned.at("o");
  p.set(p.numel() / 2, std::nan(""));
  EXPECT_TRUE(std::isnan(tune::maxRelativeError(poisoned, ref, &worst)));
  EXPECT_NE(worst.find("non-finite"), std::string::npos) << worst;

  TensorMap missing = got;
  missing.erase("o");
  EXPECT_TRUE(std::isnan(tune::maxRelativeError(missing, ref, &worst)));
  EXPECT_NE(worst.find("missing"), std::string::npos) << worst;
}

}  // namespace
}  // namespace dgps
