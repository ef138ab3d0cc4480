// The tuning resolver (RuntimeOptions::forward_config) over a real database file, with a stand-in device
// fingerprint so the database logic runs without a GPU: modes, exact / nearest-bucket / foreign records,
// one decision per key bucket, unusable records, and the no-GPU fallback. Also the codegen identity
// and candidate pruning against device limits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "RuntimeTestUtil.h"
#include "TuneTestUtil.h"
#include "dgps/runtime/DefaultConfig.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/tune/RuntimeTrialBackend.h"
#include "dgps/runtime/tune/TuningResolver.h"
#include "dgps/runtime/CudaDriver.h"

namespace dgps {
namespace {

using tune::ConfigSource;
using tune::TuneMode;

tuning::DeviceFingerprint fakeH200(const Package& pkg) {
  tuning::DeviceFingerprint f;
  f.name = "NVIDIA H200";
  f.compute_capability = "9.0a";
  f.sm_count = 132;
  f.driver_version = "13.0";
  f.nvrtc_version = "13.0";
  f.codegen_version = tune::codegenIdentity(pkg);
  f.smem_per_block_optin = 232448;
  f.smem_per_sm = 233472;
  f.regs_per_sm = 65536;
  f.max_threads_per_block = 1024;
  f.l2_bytes = 60 << 20;
  return f;
}

ForwardProblem problem(std::int64_t B, std::int64_t T, std::int64_t H = 16, std::int64_t KV = 128) {
  ForwardProblem p;
  p.batch = p.num_seqs = B;
  p.seq_len = T;
  p.heads_qk = p.heads_v = H;
  p.key_dim = p.value_dim = KV;
  p.input_dtype = ScalarType::BF16;
  p.scale = float(1.0 / std::sqrt(double(KV)));
  return p;
}

class Resolver : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = tunetest::shippedPackage("pgdn");
    if (dir.empty()) GTEST_SKIP() << "generated/pgdn is absent";
    pkg_ = Package::open(dir);
    db_ = tmp_ / "tuning.jsonl";
  }

  // A record as tunePackage would write it for `p` on `fp`.
  void record(const ForwardProblem& p, const tuning::DeviceFingerprint& fp, TileConfig config) {
    tuning::TuningRecord r;
    r.fingerprint = fp;
    r.key = tune::problemKey(pkg_, tune::tuningShape(p), fp.sm_count);
    r.config = config;
    r.median_ms = 0.5;
    r.p20_ms = 0.49;
    r.p80_ms = 0.51;
    r.candidates_tried = 8;
    r.date = tuning::utcNow();
    r.host = "test";
    tuning::TuningDb db(db_);
    ASSERT_TRUE(db.append(r).ok);
  }

  // What a call that fills the fake H200 (B=8, H=16: 128 CTAs) gets without a record: the manifest default
  // with chunk 32 (DefaultConfig.h), written out here rather than computed by the function under test.
  TileConfig fullGpuDefault() const {
    TileConfig c = pkg_.manifest().default_config;
    c.chunk = 32;
    return c;
  }

  std::shared_ptr<tune::TuningResolver> make(TuneMode mode) {
    tune::ResolverOptions o;
    o.mode = mode;
    o.db_path = db_;
    o.fingerprint = [this](const Package& p, int) {
      ++fingerprints_;
      return fakeH200(p);
    };
    o.on_decision = [this](const tune::ResolverDecision& d) { decisions_.push_back(d); };
    return std::make_shared<tune::TuningResolver>(o);
  }

  tunetest::TempDir tmp_;
  Package pkg_;
  std::string db_;
  int fingerprints_ = 0;
  std::vector<tune::ResolverDecision> decisions_;
};

TileConfig cfg(int block_v, int warps, int stages) {
  TileConfig c;
  c.chunk = 64;
  c.block_v = block_v;
  c.warps = warps;
  c.stages = stages;
  return c;
}

TEST(TuneMode, EnvironmentIsParsedStrictly) {
  {
    tunetest::ScopedEnv env("DGPS_TUNE_MODE", nullptr);
    EXPECT_EQ(tune::tuneModeFromEnv(), TuneMode::Recorded);
  }
  {
    tunetest::ScopedEnv env("DGPS_TUNE_MODE", "tune");
    EXPECT_EQ(tune::tuneModeFromEnv(), TuneMode::Tune);
  }
  {
    tunetest::ScopedEnv env("DGPS_TUNE_MODE", "fast");
    try {
      tune::tuneModeFromEnv();
      FAIL() << "no error for DGPS_TUNE_MODE=fast";
    } catch (const RuntimeError& e) {
      EXPECT_EQ(e.code(), RuntimeErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("'fast'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("tune, recorded or default"), std::string::npos) << e.what();
    }
    EXPECT_THROW(tune::TuningResolver(), RuntimeError);
  }
}

TEST_F(Resolver, DefaultModeNeverTouchesTheDeviceOrDatabase) {
  record(problem(8, 4096), fakeH200(pkg_), cfg(32, 8, 2));
  auto r = make(TuneMode::Default);
  EXPECT_EQ(r->resolve(pkg_, problem(8, 4096), 0), pkg_.manifest().default_config);
  EXPECT_EQ(fingerprints_, 0);
  ASSERT_EQ(decisions_.size(), 1u);
  EXPECT_EQ(decisions_[0].source, ConfigSource::DefaultForced);
}

TEST_F(Resolver, ExactRecordIsUsedAndTheBucketIsDecidedOnce) {
  record(problem(8, 4096), fakeH200(pkg_), cfg(32, 8, 2));
  auto r = make(TuneMode::Recorded);
  // T varies call to call within one bucket (<= 4096): one decision, no re-reads.
  for (std::int64_t T : {4096, 3000, 2049, 4000}) EXPECT_EQ(r->resolve(pkg_, problem(8, T), 0), cfg(32, 8, 2)) << T;
  ASSERT_EQ(decisions_.size(), 1u);
  EXPECT_EQ(decisions_[0].source, ConfigSource::RecordExact);
  EXPECT_EQ(decisions_[0].db_path, db_);
  EXPECT_NE(decisions_[0].str().find("database (exact key)"), std::string::npos) << decisions_[0].str();
  EXPECT_EQ(fingerprints_, 1);
  EXPECT_EQ(r->tuningRuns(), 0);
}

TEST_F(Resolver, RuntimeHookUsesTheResolver) {
  record(problem(8, 4096), fakeH200(pkg_), cfg(32, 4, 1));
  RuntimeOptions ro;
  ro.forward_config = tune::forwardConfigResolver(make(TuneMode::Recorded));
  Runtime rt(ro);
  EXPECT_EQ(rt.resolveForwardConfig(pkg_, problem(8, 4096)), cfg(32, 4, 1));
}

// A record with a tuned segment length (TileConfig::segment_chunks; dgps-tune searches it for long shapes)
// reaches the runtime through the resolver hook, and Runtime::segmentChunks applies it; a record with a
// segment length for a package without segmented kernels cannot launch and falls back to the default.
TEST_F(Resolver, ATunedSegmentLengthReachesTheRuntime) {
  tunetest::ScopedEnv env("DGPS_SEGMENT_CHUNKS", nullptr);
  // generated/gdn without launch.forward_segmented (every shipped chunk forward has one)
  const std::string gdn = tunetest::shippedPackage("gdn");
  if (gdn.empty()) GTEST_SKIP() << "generated/gdn is absent";
  pkg_ = Package::open(test::writePackageWithoutSegmentKernels(gdn, tmp_ / "no_segments"));
  ASSERT_TRUE(pkg_.manifest().launch.forward_segmented.empty());
  TileConfig bad = cfg(64, 4, 1);
  bad.segment_chunks = 32;
  record(problem(1, 32768), fakeH200(pkg_), bad);
  {
    auto r = make(TuneMode::Recorded);
    const std::optional<TileConfig> got = r->resolve(pkg_, problem(1, 32768), 0);
    ASSERT_TRUE(got);
    EXPECT_EQ(got->segment_chunks, -1) << "fell back to a default, which has no segment length";
    ASSERT_EQ(decisions_.size(), 1u);
    EXPECT_NE(decisions_[0].note.find("segment_chunks=32"), std::string::npos) << decisions_[0].str();
  }
  const std::string dir = tunetest::shippedPackage("gdn");
  if (dir.empty()) GTEST_SKIP() << "generated/gdn is absent";
  pkg_ = Package::open(dir);
  TileConfig tuned = cfg(128, 4, 2);
  tuned.segment_chunks = 24;
  record(problem(1, 32768), fakeH200(pkg_), tuned);
  RuntimeOptions ro;
  ro.cache_dir = tmp_ / "cache";
  ro.forward_config = tune::forwardConfigResolver(make(TuneMode::Recorded));
  Runtime rt(ro);
  const TileConfig got = rt.resolveForwardConfig(pkg_, problem(1, 32768));
  EXPECT_EQ(got, tuned);
  EXPECT_EQ(rt.segmentChunks(pkg_, problem(1, 32768), got, LaunchOptions()), 24);
  EXPECT_EQ(rt.segmentChunks(pkg_, problem(1, 20000), got, LaunchOptions()), 24) << "same T bucket";
}

// Without a record the hook leaves the configuration to the runtime's shape-aware default (resolveRecorded
// answers nullopt; resolve() keeps answering the default), and that default sees the call's LaunchOptions: a
// forced state pass picks the configuration it would pick without a resolver.
TEST_F(Resolver, WithoutARecordTheRuntimeDefaultSeesAForcedStatePass) {
  tunetest::ScopedEnv env("DGPS_SEGMENT_CHUNKS", nullptr);
  const std::string dir = tunetest::shippedPackage("gdn");
  if (dir.empty()) GTEST_SKIP() << "generated/gdn is absent";
  pkg_ = Package::open(dir);
  auto r = make(TuneMode::Recorded);
  EXPECT_FALSE(r->resolveRecorded(pkg_, problem(1, 32768), 0)) << "no record: the runtime decides";
  EXPECT_TRUE(r->resolve(pkg_, problem(1, 32768), 0)) << "resolve() still names the default it would use";
  ASSERT_EQ(decisions_.size(), 1u);
  EXPECT_EQ(decisions_[0].source, ConfigSource::DefaultNoRecord);
  RuntimeOptions plain;
  plain.cache_dir = tmp_ / "cache";
  RuntimeOptions hooked = plain;
  hooked.forward_config = tune::forwardConfigResolver(r);
  Runtime without(plain), with(hooked);
  for (std::int64_t L : {-1, 0, 8}) {
    LaunchOptions o;
    if (L >= 0) o.segment_chunks = L;
    EXPECT_EQ(with.resolveForwardConfig(pkg_, problem(1, 32768), o),
              without.resolveForwardConfig(pkg_, problem(1, 32768), o))
        << "segment_chunks " << L;
  }
  EXPECT_EQ(decisions_.size(), 1u) << "the key was decided once";
}

TEST_F(Resolver, NearestBucketWhenTheExactOneIsMissing) {
  record(problem(8, 4096), fakeH200(pkg_), cfg(32, 8, 1));
  auto r = make(TuneMode::Recorded);
  EXPECT_EQ(r->resolve(pkg_, problem(8, 8000), 0), cfg(32, 8, 1));
  ASSERT_EQ(decisions_.size(), 1u);
  EXPECT_EQ(decisions_[0].source, ConfigSource::RecordNearestBucket);
}

TEST_F(Resolver, ForeignRecordsAreNeverUsedSilently) {
  tuning::DeviceFingerprint other = fakeH200(pkg_);
  other.nvrtc_version = "12.8";
  record(problem(8, 4096), other, cfg(32, 8, 2));
  tuning::DeviceFingerprint oldCodegen = fakeH200(pkg_);
  oldCodegen.codegen_version = "cg1-0000000000000000";
  record(problem(8, 4096), oldCodegen, cfg(32, 4, 2));
  tunetest::WarningCapture warnings;
  auto r = make(TuneMode::Recorded);
  EXPECT_EQ(r->resolve(pkg_, problem(8, 4096), 0), fullGpuDefault());
  ASSERT_EQ(decisions_.size(), 1u);
  EXPECT_EQ(decisions_[0].source, ConfigSource::DefaultNoRecord);
  EXPECT_NE(decisions_[0].note.find("2 record(s)"), std::string::npos) << decisions_[0].note;
  EXPECT_TRUE(warnings.contains("measured elsewhere")) << "warnings: " << warnings.messages().size();
  EXPECT_TRUE(warnings.contains("nvrtc_version") || warnings.contains("codegen_version"));
}

TEST_F(Resolver, UnlaunchableRecordFallsBackToTheDefault) {
  record(problem(8, 4096), fakeH200(pkg_), cfg(16, 4, 1));  // block_v 16 is not in the manifest's tunables
  tunetest::WarningCapture warnings;
  auto r = make(TuneMode::Recorded);
  EXPECT_EQ(r->resolve(pkg_, problem(8, 4096), 0), pkg_.manifest().default_config);
  ASSERT_EQ(decisions_.size(), 1u);
  EXPECT_EQ(decisions_[0].source, ConfigSource::DefaultAfterFailure);
  EXPECT_TRUE(warnings.contains("cannot launch here")) << decisions_[0].note;
}

TEST_F(Resolver, RecordWrittenByAnotherProcessLaterIsPickedUp) {
  auto r = make(TuneMode::Recorded);
  EXPECT_EQ(r->resolve(pkg_, problem(8, 200), 0), fullGpuDefault());
  record(problem(8, 4096), fakeH200(pkg_), cfg(32, 8, 2));
  EXPECT_EQ(r->resolve(pkg_, problem(8, 4096), 0), cfg(32, 8, 2));  // a new key re-reads the file
}

TEST_F(Resolver, WithoutARecordTheDefaultFollowsTheShape) {
  auto r = make(TuneMode::Recorded);
  // B=8, H=16: 128 state_output CTAs on the fake H200's 132 SMs -> the manifest default with chunk 32
  // (DefaultConfig.h: the GPU is full and pgdn allows chunk 32)
  const TileConfig full = fullGpuDefault();
  EXPECT_EQ(full.chunk, 32);
  EXPECT_EQ(full.block_v, pkg_.manifest().default_config.block_v);
  EXPECT_EQ(r->resolve(pkg_, problem(8, 4096), 0), full);
  // B=1, H=16, T=2048: 16 CTAs at block_v 128 and too few chunks to split into segments (SegmentScan.h
  // kMinSegmentedChunks) -> block_v halved (pgdn allows 64), everything else the manifest's
  TileConfig halved = pkg_.manifest().default_config;
  ASSERT_EQ(halved.block_v, 128) << "the expectation assumes pgdn's default block_v";
  halved.block_v = 64;
  EXPECT_EQ(r->resolve(pkg_, problem(1, 2048), 0), halved);
  // B=1, T=32768: the segmented state pass splits the sequence at full width, so the width stays and the
  // chunk is 32 as on a full GPU (DefaultConfig.h forwardDefaultConfig)
  ASSERT_FALSE(pkg_.manifest().launch.forward_segmented.empty()) << "the expectation assumes pgdn's segmented pass";
  EXPECT_EQ(r->resolve(pkg_, problem(1, 32768), 0), full);
  ASSERT_EQ(decisions_.size(), 3u);
  EXPECT_EQ(decisions_[1].source, ConfigSource::DefaultNoRecord);
  EXPECT_EQ(decisions_[2].source, ConfigSource::DefaultNoRecord);
  // a record for that key still wins
  record(problem(1, 32768), fakeH200(pkg_), cfg(32, 4, 1));
  auto r2 = make(TuneMode::Recorded);
  EXPECT_EQ(r2->resolve(pkg_, problem(1, 32768), 0), cfg(32, 4, 1));
}

TEST_F(Resolver, WithoutAGpuTheDefaultIsUsedAndWarnedOnce) {
  std::string why;
  if (cudaAvailable(&why)) GTEST_SKIP() << "this machine has a GPU";
  tune::ResolverOptions o;
  o.mode = TuneMode::Tune;
  o.db_path = db_;
  auto r = std::make_shared<tune::TuningResolver>(o);
  tunetest::WarningCapture warnings;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r->resolve(pkg_, problem(8, 4096), 0), pkg_.manifest().default_config);
  EXPECT_EQ(warnings.messages().size(), 1u);
  ASSERT_EQ(r->decisions().size(), 1u);
  EXPECT_EQ(r->decisions()[0].source, ConfigSource::DefaultAfterFailure);
  EXPECT_FALSE(std::ifstream(db_).good()) << "nothing recorded without a GPU";
}

TEST_F(Resolver, CodegenIdentityFollowsTheKernelSource) {
  const std::string a = tune::codegenIdentity(pkg_);
  EXPECT_EQ(a.rfind("cg" + std::to_string(pkg_.manifest().codegen_version) + "-", 0), 0u) << a;
  EXPECT_EQ(a, tune::codegenIdentity(Package::open(pkg_.directory())));
  tunetest::copyPackage(pkg_.directory(), tmp_ / "edited");
  std::ofstream(tmp_ / "edited/kernels.cu", std::ios::app) << "// an edit\n";
  EXPECT_NE(a, tune::codegenIdentity(Package::open(tmp_ / "edited")));
}

TEST_F(Resolver, CandidatesArePrunedByDeviceLimitsWithReasons) {
  const tuning::TuneProblem shape = tune::tuningShape(problem(8, 4096));
  tuning::DeviceFingerprint fp = fakeH200(pkg_);
  const tuning::CandidateSet all = tune::forwardCandidates(pkg_, shape, fp);
  const TuningSpace& t = pkg_.manifest().tunables;
  // pgdn has the segmented state pass, so a long enough shape also searches segment lengths: every kept
  // configuration appears once with the plain pass (segment_chunks 0, or -1 where no length is searched)
  std::size_t plain = 0;
  for (const TileConfig& c : all.kept) plain += c.segment_chunks <= 0 ? 1 : 0;
  EXPECT_EQ(plain + all.pruned.size(), t.chunk.size() * t.block_v.size() * t.warps.size() * t.stages.size());
  EXPECT_FALSE(all.kept.empty());
  fp.smem_per_block_optin = 1024;  // a device with almost no shared memory
  const tuning::CandidateSet none = tune::forwardCandidates(pkg_, shape, fp);
  EXPECT_TRUE(none.kept.empty());
  ASSERT_FALSE(none.pruned.empty());
  EXPECT_NE(none.pruned[0].reason.find("shared memory"), std::string::npos) << none.pruned[0].reason;
  fp = fakeH200(pkg_);
  fp.max_threads_per_block = 128;  // 8 warps cannot launch
  for (const auto& p : tune::forwardCandidates(pkg_, shape, fp).pruned)
    EXPECT_NE(p.reason.find("threads"), std::string::npos) << p.reason;
}

// Several Householder steps per token: the segment lengths the tuner searches count chunks of the kernels' rows
// (T·n_h), as Runtime::segmentChunks does, not chunks of tokens; and they hold the length the runtime itself takes
// for each configuration (DefaultConfig.h autoSegmentChunks, paired summaries counted), so a tuned record is never
// chosen among lengths that leave out the untuned call's.
TEST_F(Resolver, SegmentLengthsOfSeveralStepsPerTokenCountStepRows) {
  const std::string gdp = tunetest::shippedPackage("gated_deltaproduct");
  if (gdp.empty()) GTEST_SKIP() << "generated/gated_deltaproduct is absent";
  const Package pkg = Package::open(gdp);
  ASSERT_EQ(pkg.spec().solve.steps, 2);
  const tuning::TuneProblem shape = tune::tuningShape(problem(1, 32768));
  tuning::TuneProblem rows = shape;
  rows.shape.T *= 2;
  const TileConfig c = pkg.manifest().default_config;
  ASSERT_NE(tuning::segmentLengthCandidates(c, rows, 132), tuning::segmentLengthCandidates(c, shape, 132))
      << "the shape must tell rows from tokens";
  ForwardProblem p = problem(1, 32768);
  p.row_steps = 2;
  const ForwardDefaultInputs in = forwardDefaultInputs(pkg, p, 132);
  const auto runtimes = [&](const TileConfig& k) { return autoSegmentChunks(in, k); };
  std::map<std::vector<int>, std::vector<int>> lengthsOf;  // {chunk, block_v, warps, stages} -> segment lengths
  for (const TileConfig& k : tune::forwardCandidates(pkg, shape, fakeH200(pkg)).kept)
    lengthsOf[{k.chunk, k.block_v, k.warps, k.stages}].push_back(k.segment_chunks);
  ASSERT_FALSE(lengthsOf.empty());
  int split = 0;
  for (auto& [key, got] : lengthsOf) {
    const TileConfig k{key[0], key[1], key[2], key[3]};
    std::vector<int> want = tuning::segmentLengthCandidates(k, rows, 132, runtimes);
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want) << "chunk " << k.chunk << " block_v " << k.block_v;
    const std::int64_t L = runtimes(k);
    if (L > 0) {
      ++split;
      EXPECT_NE(std::find(got.begin(), got.end(), int(L)), got.end())
          << "the runtime's own length " << L << " is not searched at chunk " << k.chunk << " block_v " << k.block_v;
    }
  }
  EXPECT_GT(split, 0) << "the runtime splits this shape for some configuration";
}

TEST_F(Resolver, BackendRefusesUnusableOptions) {
  Runtime rt;
  tune::TrialBackendOptions o;
  o.full.batch = 1;
  o.full.seq_len = 64;
  o.full.heads_qk = o.full.heads_v = 2;
  o.full.key_dim = o.full.value_dim = 64;
  o.isolate = true;  // but no helper path
  EXPECT_THROW(tune::RuntimeTrialBackend(rt, pkg_, o), RuntimeError);
  o.trial_helper = "/bin/true";
  o.full.cu_seqlens = {0, 64};
  EXPECT_THROW(tune::RuntimeTrialBackend(rt, pkg_, o), RuntimeError);
  o.full.cu_seqlens.clear();
  o.dtype = ScalarType::F32;
  EXPECT_THROW(tune::RuntimeTrialBackend(rt, pkg_, o), RuntimeError);
}

}  // namespace
}  // namespace dgps
