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

// Several Householder steps per token (gated_deltaproduct, n_h = 2): k, v and beta get two rows per full token,
// tiled whole tokens at a time (step j of a full token is step j of its slice token), and the reference accepts
// the result as a T-token problem.
TEST(Scratch, TilingKeepsTheStepRowsOfEachToken) {
  const std::string dir = tunetest::shippedPackage("gated_deltaproduct");
  if (dir.empty()) GTEST_SKIP() << "generated/gated_deltaproduct is absent";
  const Package pkg = Package::open(dir);
  const ReferenceInputs slice = generateInputs(pkg.spec(), shapeOf(2, 250, 2, 64), 77, ScalarType::BF16);
  ASSERT_EQ(slice.at("k").dim(1), 500);
  const ReferenceInputs full = tune::tileInputs(slice, 3, 700);
  EXPECT_EQ(full.at("q").shape(), (std::vector<std::int64_t>{3, 700, 2, 64}));
  EXPECT_EQ(full.at("k").shape(), (std::vector<std::int64_t>{3, 1400, 2, 64}));
  EXPECT_EQ(full.at("v").shape(), (std::vector<std::int64_t>{3, 1400, 2, 64}));
  EXPECT_EQ(full.at("beta").shape(), (std::vector<std::int64_t>{3, 1400, 2}));
  EXPECT_EQ(full.at("g").shape(), (std::vector<std::int64_t>{3, 700, 2}));
  // full token 2·250 + 7 of batch 2 is slice token 7 of batch 0: its step 1 is slice row 15
  const std::int64_t t = 507, b = 2;
  EXPECT_EQ(full.at("beta").get((b * 1400 + 2 * t + 1) * 2 + 1), slice.at("beta").get((0 * 500 + 15) * 2 + 1));
  EXPECT_NO_THROW(validateReferenceInputs(pkg.spec(), full));
  ReferenceInputs odd = slice;
  odd.at("k") = Tensor(ScalarType::BF16, {2, 499, 2, 64});
  EXPECT_THROW(tune::tileInputs(odd, 3, 700), DataError);
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
