#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "TestUtil.h"
#include "dgps/runtime/tuning/ProblemKey.h"
#include "dgps/runtime/tuning/TuningRecord.h"

namespace dgps::tuning {
namespace {

TEST(ProblemKey, TBucketBoundaries) {
  EXPECT_EQ(tBucketFor(1), TBucket::Le64);
  EXPECT_EQ(tBucketFor(64), TBucket::Le64);
  EXPECT_EQ(tBucketFor(65), TBucket::Le256);
  EXPECT_EQ(tBucketFor(256), TBucket::Le256);
  EXPECT_EQ(tBucketFor(257), TBucket::Le1024);
  EXPECT_EQ(tBucketFor(1024), TBucket::Le1024);
  EXPECT_EQ(tBucketFor(4096), TBucket::Le4096);
  EXPECT_EQ(tBucketFor(4097), TBucket::Le16384);
  EXPECT_EQ(tBucketFor(16384), TBucket::Le16384);
  EXPECT_EQ(tBucketFor(16385), TBucket::Gt16384);
  EXPECT_EQ(tBucketFor(1LL << 40), TBucket::Gt16384);
}

TEST(ProblemKey, WaveBucketBoundariesOnH200) {
  // 132 SMs: blocks = sequences * HV; boundaries at 66, 132, 264, 528 blocks.
  EXPECT_EQ(waveBucketFor(1, 65, 132), WaveBucket::LtHalf);
  EXPECT_EQ(waveBucketFor(1, 66, 132), WaveBucket::Lt1);
  EXPECT_EQ(waveBucketFor(1, 131, 132), WaveBucket::Lt1);
  EXPECT_EQ(waveBucketFor(4, 33, 132), WaveBucket::Lt2);  // exactly one wave
  EXPECT_EQ(waveBucketFor(263, 1, 132), WaveBucket::Lt2);
  EXPECT_EQ(waveBucketFor(264, 1, 132), WaveBucket::Lt4);
  EXPECT_EQ(waveBucketFor(527, 1, 132), WaveBucket::Lt4);
  EXPECT_EQ(waveBucketFor(16, 33, 132), WaveBucket::Ge4);
  EXPECT_EQ(waveBucketFor(1, 1, 0), WaveBucket::Lt2);  // broken fingerprint: 1 SM, so exactly one wave
}

// Each mutation of one field must give a different key (==, str(), and after a JSON round trip).
TEST(ProblemKey, EveryFieldChangesTheKey) {
  const ProblemKey base = test::sampleKey();
  const std::vector<std::pair<const char*, std::function<void(ProblemKey&)>>> mutations = {
      {"spec_hash", [](ProblemKey& k) { k.spec_hash = "0000000001"; }},
      {"K", [](ProblemKey& k) { k.K = 64; }},
      {"V", [](ProblemKey& k) { k.V = 256; }},
      {"H", [](ProblemKey& k) { k.H = 8; }},
      {"HV", [](ProblemKey& k) { k.HV = 16; }},
      {"t_bucket", [](ProblemKey& k) { k.t_bucket = TBucket::Le16384; }},
      {"waves", [](ProblemKey& k) { k.waves = WaveBucket::Ge4; }},
      {"dtype", [](ProblemKey& k) { k.dtype = InputDType::F16; }},
      {"varlen", [](ProblemKey& k) { k.varlen = true; }},
      {"kind", [](ProblemKey& k) { k.kind = KernelFamily::Decode; }},
      {"precision", [](ProblemKey& k) { k.precision = "tf32x3"; }},
  };
  std::set<std::string> seen = {base.str()};
  for (const auto& [field, mutate] : mutations) {
    SCOPED_TRACE(field);
    ProblemKey k = base;
    mutate(k);
    EXPECT_NE(k, base);
    EXPECT_TRUE(seen.insert(k.str()).second) << "str() collides: " << k.str();

    TuningRecord rec = test::sampleRecord({64, 64, 4, 2}, 0.5, "2025-01-01T00:00:00.000Z");
    rec.key = k;
    TuningRecord back;
    std::string error;
    ASSERT_TRUE(parseJsonLine(toJsonLine(rec), &back, &error)) << error;
    EXPECT_EQ(back.key, k);
    EXPECT_NE(back.key, base);
    // Only the T bucket is allowed to differ for the nearest-bucket fallback.
    EXPECT_EQ(sameExceptT(k, base), std::string(field) == "t_bucket");
  }
  EXPECT_EQ(seen.size(), mutations.size() + 1);
}

TEST(ProblemKey, MakeKeyMapsEveryShapeField) {
  launch::ProblemShape s;
  s.B = 1;
  s.N = 4;
  s.T = 3000;
  s.H = 8;
  s.HV = 16;
  s.K = 64;
  s.V = 128;
  s.varlen = 1;
  const ProblemKey k = makeKey("abc", tuneProblem(s, InputDType::F16, KernelFamily::Decode), 132, "tf32x3");
  EXPECT_EQ(k.spec_hash, "abc");
  EXPECT_EQ(k.K, 64);
  EXPECT_EQ(k.V, 128);
  EXPECT_EQ(k.H, 8);
  EXPECT_EQ(k.HV, 16);
  EXPECT_EQ(k.t_bucket, TBucket::Le4096);
  EXPECT_EQ(k.waves, WaveBucket::LtHalf);  // 64 blocks < 66
  EXPECT_EQ(k.dtype, InputDType::F16);
  EXPECT_TRUE(k.varlen);
  EXPECT_EQ(k.kind, KernelFamily::Decode);
  EXPECT_EQ(k.precision, "tf32x3");
}

// The launch shape's f16 flag follows the tuned dtype, whatever the caller's shape said, so the
// key's dtype and the shape the launch rules read cannot disagree.
TEST(ProblemKey, TuneProblemKeepsF16InStepWithDType) {
  launch::ProblemShape s;
  s.T = 512;
  for (int f16 : {0, 1}) {
    s.f16 = f16;
    EXPECT_EQ(tuneProblem(s, InputDType::F16, KernelFamily::Forward).shape.f16, 1);
    EXPECT_EQ(tuneProblem(s, InputDType::BF16, KernelFamily::Forward).shape.f16, 0);
    EXPECT_EQ(tuneProblem(s, InputDType::F32, KernelFamily::Decode).shape.f16, 0);
    const TuneProblem p = tuneProblem(s, InputDType::F32, KernelFamily::Decode);
    EXPECT_EQ(p.dtype, InputDType::F32);
    EXPECT_EQ(p.kind, KernelFamily::Decode);
    EXPECT_EQ(p.shape.T, 512);
  }
}

// Varlen packing whose total tokens (30k-34k) and document count vary every step must keep one
// key, so a 200-step training loop tunes once.
TEST(ProblemKey, VaryingPackedTokensDoNotFragmentTheKey) {
  unsigned long long seed = 0;
  auto rng = test::freshRng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::uniform_int_distribution<long long> total(30000, 34000);
  std::uniform_int_distribution<int> docs(17, 32);  // 17..32 docs x 16 HV = 272..512 blocks: 2-4 waves
  std::set<std::string> keys;
  for (int step = 0; step < 200; ++step) {
    launch::ProblemShape s;
    s.B = 1;
    s.N = docs(rng);
    s.T = total(rng);
    s.H = 16;
    s.HV = 16;
    s.K = 128;
    s.V = 128;
    s.varlen = 1;
    keys.insert(makeKey("gdn", tuneProblem(s, InputDType::BF16, KernelFamily::Forward), 132).str());
  }
  EXPECT_EQ(keys.size(), 1u);
}

TEST(ProblemKey, NamesRoundTrip) {
  for (int i = 0; i < kTBucketCount; ++i) {
    const auto b = static_cast<TBucket>(i);
    EXPECT_EQ(parseTBucket(toString(b)), b);
  }
  for (int i = 0; i < kWaveBucketCount; ++i) {
    const auto b = static_cast<WaveBucket>(i);
    EXPECT_EQ(parseWaveBucket(toString(b)), b);
  }
  for (auto d : {InputDType::F32, InputDType::F16, InputDType::BF16})
    EXPECT_EQ(parseInputDType(toString(d)), d);
  for (auto k : {KernelFamily::Forward, KernelFamily::Decode})
    EXPECT_EQ(parseKernelFamily(toString(k)), k);
  EXPECT_FALSE(parseTBucket("<=128"));
  EXPECT_FALSE(parseInputDType("fp8"));
}

}  // namespace
}  // namespace dgps::tuning
