#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>

#include "FakeBackend.h"
#include "TestUtil.h"
#include "dgps/runtime/tuning/Autotuner.h"

namespace dgps::tuning {
namespace {

using test::Behaviour;
using test::Bug;
using test::FakeBackend;

using Behaviours = std::map<TileConfig, Behaviour, test::ConfigLess>;

CandidateSet keptOf(const Behaviours& b) {
  CandidateSet s;
  for (const auto& [c, _] : b) s.kept.push_back(c);
  return s;
}

TunerOptions fastOptions() {
  TunerOptions o;
  o.compile_threads = 3;
  o.compile_timeout = std::chrono::milliseconds(2000);
  o.max_rel_err = 1e-3;
  o.warmup = 2;
  o.reps = 15;
  o.retime_rounds = 4;
  o.retime_reps = 8;
  return o;
}

const CandidateReport& row(const TuneResult& r, const TileConfig& c) {
  for (const CandidateReport& x : r.table)
    if (x.config == c) return x;
  throw std::logic_error("no table row for " + toString(c));
}

class AutotunerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rng_ = test::freshRng(&seed_);
    trace_ = std::make_unique<testing::ScopedTrace>(__FILE__, __LINE__, "seed " + std::to_string(seed_));
  }
  unsigned long long seed() { return rng_(); }

  std::mt19937_64 rng_;
  unsigned long long seed_ = 0;
  std::unique_ptr<testing::ScopedTrace> trace_;
};

TEST_F(AutotunerTest, WrongCandidateIsRejectedEvenIfFastest) {
  const TileConfig dropCarry{64, 64, 4, 1}, skipTail{32, 32, 4, 1}, slow{64, 32, 4, 1},
      good{32, 64, 8, 2};
  Behaviours b;
  b[dropCarry] = {0.30};
  b[dropCarry].bug = Bug::DropCarry;
  b[skipTail] = {0.35};
  b[skipTail].bug = Bug::SkipTail;
  b[slow] = {1.0};
  b[good] = {0.8};
  FakeBackend backend(b, seed());
  Autotuner tuner(backend, fastOptions());
  const TuneResult r = tuner.tune(test::h200(), test::sampleKey(), keptOf(b));

  ASSERT_TRUE(r.status) << r.status.message;
  ASSERT_TRUE(r.record);
  EXPECT_EQ(r.record->config, good);
  EXPECT_NEAR(r.record->median_ms, 0.8, 0.8 * 0.02);
  EXPECT_EQ(row(r, dropCarry).status, TrialStatus::WrongResult);
  EXPECT_GT(row(r, dropCarry).max_rel_err, 1e-2);
  EXPECT_EQ(row(r, skipTail).status, TrialStatus::WrongResult);  // poison left in the tail
  EXPECT_TRUE(std::isnan(row(r, skipTail).max_rel_err));
  EXPECT_EQ(backend.timesTimed(dropCarry), 0) << "a wrong candidate must never be timed";
  EXPECT_EQ(backend.timesTimed(skipTail), 0);
  EXPECT_LT(row(r, good).max_rel_err, 1e-4);
  EXPECT_EQ(r.record->candidates_tried, 4);
}

TEST_F(AutotunerTest, LenientBackendVerdictIsOverruledByTolerance) {
  const TileConfig tf32Like{64, 64, 4, 1}, ieee{64, 32, 4, 1};
  Behaviours b;
  b[tf32Like] = {0.2};
  b[tf32Like].claimed_err = 6e-3;  // backend says "ok" but the error exceeds the caller's bound (docs/math.md §7.5)
  b[ieee] = {0.5};
  FakeBackend backend(b, seed());
  TunerOptions o = fastOptions();
  o.max_rel_err = 1e-4;
  const TuneResult r = Autotuner(backend, o).tune(test::h200(), test::sampleKey(), keptOf(b));
  ASSERT_TRUE(r.status) << r.status.message;
  EXPECT_EQ(r.record->config, ieee);
  EXPECT_EQ(row(r, tf32Like).status, TrialStatus::WrongResult);
  EXPECT_NE(row(r, tf32Like).message.find("tolerance"), std::string::npos);
}

TEST_F(AutotunerTest, FailuresAreRecordedAndTuningContinues) {
  const TileConfig cErr{16, 32, 4, 1}, cThrow{16, 64, 4, 1}, cHang{32, 32, 8, 1}, cFault{32, 64, 4, 1},
      cTiming{64, 32, 8, 1}, good1{64, 64, 4, 2}, good2{64, 64, 8, 2};
  Behaviours b;
  b[cErr] = {0.1};
  b[cErr].compile_error = true;
  b[cThrow] = {0.1};
  b[cThrow].compile_throws = true;
  b[cHang] = {0.1};
  b[cHang].compile_hangs = true;
  b[cFault] = {0.1};
  b[cFault].faults = true;  // isolated fault: context survives
  b[cTiming] = {0.1};
  b[cTiming].timing_fails = true;
  b[good1] = {0.9};
  b[good2] = {0.7};
  FakeBackend backend(b, seed());
  TunerOptions o = fastOptions();
  o.compile_timeout = std::chrono::milliseconds(300);
  const TuneResult r = Autotuner(backend, o).tune(test::h200(), test::sampleKey(), keptOf(b));

  ASSERT_TRUE(r.status) << r.status.message;
  EXPECT_EQ(r.record->config, good2);
  EXPECT_EQ(row(r, cErr).status, TrialStatus::CompileError);
  EXPECT_EQ(row(r, cErr).message, "error: too many resources requested");  // log headline
  EXPECT_EQ(row(r, cThrow).status, TrialStatus::CompileError);
  EXPECT_NE(row(r, cThrow).message.find("simulated NVRTC crash"), std::string::npos);
  EXPECT_EQ(row(r, cHang).status, TrialStatus::Timeout);
  EXPECT_EQ(row(r, cFault).status, TrialStatus::Fault);
  EXPECT_EQ(row(r, cTiming).status, TrialStatus::TimingError);
  EXPECT_EQ(row(r, good1).status, TrialStatus::Ok);
  EXPECT_EQ(r.record->candidates_tried, 7);
  const std::string table = formatTable(r);
  for (const char* s : {"compile-error", "timeout", "fault", "timing-error", "ok"})
    EXPECT_NE(table.find(s), std::string::npos) << s << "\n" << table;
}

TEST_F(AutotunerTest, ContextKillingFaultAbortsWithoutRecording) {
  const TileConfig a{32, 32, 4, 1}, killer{32, 64, 4, 1}, c{64, 64, 4, 1};
  Behaviours b;
  b[a] = {0.5};
  b[killer] = {0.1};
  b[killer].faults = true;
  b[killer].kills_context = true;
  b[c] = {0.4};
  FakeBackend backend(b, seed());
  test::ScratchDir dir;
  TuningDb db(dir.file("t.jsonl"));
  const TuneResult r = Autotuner(backend, fastOptions()).tuneOrReuse(db, test::h200(), test::sampleKey(), keptOf(b));

  EXPECT_FALSE(r.status);
  EXPECT_NE(r.status.message.find("isolation"), std::string::npos) << r.status.message;
  EXPECT_FALSE(r.record);
  EXPECT_EQ(row(r, killer).status, TrialStatus::Fault);
  EXPECT_EQ(row(r, c).status, TrialStatus::Skipped);
  EXPECT_TRUE(backend.timeCalls.empty());
  TuningDb reread(db.path());
  ASSERT_TRUE(reread.load());
  EXPECT_TRUE(reread.records().empty());
}

TEST_F(AutotunerTest, ContextLostWhileCompilingAbortsBeforeAnyTrial) {
  const TileConfig a{32, 32, 4, 1}, bad{32, 64, 4, 1};
  Behaviours b;
  b[a] = {0.5};
  b[bad] = {0.1};
  b[bad].compile_kills_context = true;
  FakeBackend backend(b, seed());
  const TuneResult r = Autotuner(backend, fastOptions()).tune(test::h200(), test::sampleKey(), keptOf(b));
  EXPECT_FALSE(r.status);
  EXPECT_NE(r.status.message.find("compiling/loading"), std::string::npos) << r.status.message;
  EXPECT_EQ(row(r, a).status, TrialStatus::Skipped);
  EXPECT_EQ(backend.runs.load(), 0);
  EXPECT_TRUE(backend.timeCalls.empty());
}

// Equal-within-noise candidates resolve to the simpler one whatever the input order; a clearly
// faster candidate still wins over a simpler one.
TEST_F(AutotunerTest, TiesAreBrokenDeterministically) {
  const TileConfig complexFast{64, 64, 8, 2}, simpleTied{64, 64, 4, 1}, simplest{32, 32, 4, 1},
      slow{64, 128, 4, 1};
  Behaviours b;
  b[complexFast] = {0.5000};
  b[simpleTied] = {0.5015};  // 0.3% slower: a tie under the 1% tolerance
  b[simplest] = {0.5200};    // 4% slower: a finalist but not a tie
  b[slow] = {0.9};
  for (int trial = 0; trial < 6; ++trial) {
    CandidateSet s = keptOf(b);
    std::shuffle(s.kept.begin(), s.kept.end(), rng_);
    FakeBackend backend(b, seed(), /*noise=*/0.001);
    const TuneResult r = Autotuner(backend, fastOptions()).tune(test::h200(), test::sampleKey(), s);
    ASSERT_TRUE(r.status) << r.status.message;
    EXPECT_EQ(r.record->config, simpleTied) << "trial " << trial << "\n" << formatTable(r);
    EXPECT_TRUE(row(r, simplest).finalist);
    EXPECT_FALSE(row(r, slow).finalist);
  }
  // Exactly equal times, no noise at all: still the simpler config.
  Behaviours same;
  same[{64, 64, 8, 2}] = {0.4};
  same[{64, 64, 4, 2}] = {0.4};
  FakeBackend backend(same, seed(), /*noise=*/0.0);
  const TuneResult r = Autotuner(backend, fastOptions()).tune(test::h200(), test::sampleKey(), keptOf(same));
  ASSERT_TRUE(r.status);
  EXPECT_EQ(r.record->config, (TileConfig{64, 64, 4, 2}));
}

TEST_F(AutotunerTest, FinalistsAreRetimedInterleavedWithRotatingStart) {
  const TileConfig f1{64, 64, 4, 1}, f2{64, 32, 4, 1}, f3{32, 64, 4, 1}, out{32, 32, 4, 1};
  Behaviours b;
  b[f1] = {0.50};
  b[f2] = {0.51};
  b[f3] = {0.52};
  b[out] = {0.70};  // outside the 5% window
  FakeBackend backend(b, seed(), 0.001);
  TunerOptions o = fastOptions();
  o.retime_rounds = 3;
  const TuneResult r = Autotuner(backend, o).tune(test::h200(), test::sampleKey(), keptOf(b));
  ASSERT_TRUE(r.status) << r.status.message;
  EXPECT_EQ(r.record->config, f1);
  ASSERT_EQ(backend.timeCalls.size(), 4u + 3u * 3u);
  EXPECT_EQ(backend.timesTimed(out), 1);
  for (const TileConfig& f : {f1, f2, f3}) EXPECT_EQ(backend.timesTimed(f), 1 + 3);
  // Rounds are consecutive triples after the first pass; each round starts with a different finalist.
  std::set<std::string> starts;
  for (int round = 0; round < 3; ++round) {
    std::set<std::string> inRound;
    for (int j = 0; j < 3; ++j) inRound.insert(toString(backend.timeCalls[4 + 3 * round + j]));
    EXPECT_EQ(inRound.size(), 3u) << "each round times every finalist once";
    starts.insert(toString(backend.timeCalls[4 + 3 * round]));
  }
  EXPECT_EQ(starts.size(), 3u);
}

TEST_F(AutotunerTest, SpillingCandidatesDroppedOnlyWhenSpillFreeOnesExist) {
  const TileConfig spills{64, 128, 4, 1}, clean{64, 64, 4, 1};
  Behaviours b;
  b[spills] = {0.2};
  b[spills].local_bytes = 256;
  b[clean] = {0.5};
  {
    FakeBackend backend(b, seed());
    const TuneResult r = Autotuner(backend, fastOptions()).tune(test::h200(), test::sampleKey(), keptOf(b));
    ASSERT_TRUE(r.status);
    EXPECT_EQ(r.record->config, clean);
    EXPECT_EQ(row(r, spills).status, TrialStatus::Spills);
    EXPECT_EQ(row(r, spills).local_bytes, 256);
  }
  b[clean].local_bytes = 64;  // now everything spills: keep them, the faster wins
  FakeBackend backend(b, seed());
  const TuneResult r = Autotuner(backend, fastOptions()).tune(test::h200(), test::sampleKey(), keptOf(b));
  ASSERT_TRUE(r.status);
  EXPECT_EQ(r.record->config, spills);
  EXPECT_NE(row(r, clean).message.find("no spill-free candidate"), std::string::npos);
}

TEST_F(AutotunerTest, WinnerIsRecordedAndReusedWithoutRetiming) {
  const TileConfig a{64, 64, 4, 1}, best{64, 32, 8, 2}, c{32, 32, 4, 1};
  Behaviours b;
  b[a] = {0.6};
  b[best] = {0.3};
  b[c] = {0.9};
  test::ScratchDir dir;
  const std::string path = dir.file("cache/dgps/tuning.jsonl");
  const DeviceFingerprint dev = test::h200();
  const ProblemKey key = test::sampleKey();

  TuningDb db(path);
  ASSERT_TRUE(db.load());
  FakeBackend first(b, seed());
  const TuneResult r1 = Autotuner(first, fastOptions()).tuneOrReuse(db, dev, key, keptOf(b));
  ASSERT_TRUE(r1.status) << r1.status.message;
  EXPECT_FALSE(r1.reused);
  EXPECT_TRUE(r1.db_error.empty()) << r1.db_error;
  EXPECT_EQ(r1.record->config, best);
  EXPECT_GT(first.totalCalls(), 0);

  // A later process: fresh database object on the same file, fresh backend.
  TuningDb later(path);
  ASSERT_TRUE(later.load());
  ASSERT_EQ(later.records().size(), 1u);
  FakeBackend second(b, seed());
  const TuneResult r2 = Autotuner(second, fastOptions()).tuneOrReuse(later, dev, key, keptOf(b));
  ASSERT_TRUE(r2.status);
  EXPECT_TRUE(r2.reused);
  EXPECT_EQ(r2.record->config, best);
  EXPECT_DOUBLE_EQ(r2.record->median_ms, r1.record->median_ms);
  EXPECT_EQ(second.totalCalls(), 0) << "reuse must not compile or time anything";

  // Even a database object loaded before the first run finds it (it re-reads on a miss).
  TuningDb stale(dir.file("cache/dgps/tuning.jsonl"));
  FakeBackend third(b, seed());
  EXPECT_TRUE(Autotuner(third, fastOptions()).tuneOrReuse(stale, dev, key, keptOf(b)).reused);
  EXPECT_EQ(third.totalCalls(), 0);

  // Another T bucket is another key: it tunes.
  ProblemKey longer = key;
  longer.t_bucket = TBucket::Gt16384;
  FakeBackend fourth(b, seed());
  const TuneResult r4 = Autotuner(fourth, fastOptions()).tuneOrReuse(later, dev, longer, keptOf(b));
  EXPECT_FALSE(r4.reused);
  EXPECT_GT(fourth.totalCalls(), 0);
  TuningDb check(path);
  ASSERT_TRUE(check.load());
  EXPECT_EQ(check.records().size(), 2u);
}

TEST_F(AutotunerTest, ToolchainUpgradeRetunesAndFlagsRegression) {
  const TileConfig a{64, 64, 4, 1}, c{64, 32, 4, 1};
  Behaviours b;
  b[a] = {0.8};
  b[c] = {1.0};
  test::ScratchDir dir;
  TuningDb db(dir.file("t.jsonl"));
  // Tuned under the previous NVRTC: 0.5 ms. Not reusable now, but it is the baseline.
  TuningRecord old = test::sampleRecord(a, 0.5, "2025-01-01T00:00:00.000Z");
  old.fingerprint.nvrtc_version = "12.9";
  ASSERT_TRUE(db.append(old));
  FakeBackend backend(b, seed());
  const TuneResult r = Autotuner(backend, fastOptions()).tuneOrReuse(db, test::h200(), test::sampleKey(), keptOf(b));
  ASSERT_TRUE(r.status) << r.status.message;
  EXPECT_FALSE(r.reused);
  ASSERT_TRUE(r.baseline);
  EXPECT_NEAR(r.regression, 0.6, 0.03);
  EXPECT_TRUE(r.regressed);
  EXPECT_NE(formatTable(r).find("REGRESSION"), std::string::npos);
}

TEST_F(AutotunerTest, ProgressIsReportedFromTheCallingThreadInPhaseOrder) {
  Behaviours b;
  for (int chunk : {16, 32, 64})
    for (int bv : {32, 64}) b[{chunk, bv, 4, 1}] = {0.3 + 0.01 * chunk + 0.001 * bv};
  FakeBackend backend(b, seed());
  Autotuner tuner(backend, fastOptions());
  const auto caller = std::this_thread::get_id();
  std::vector<TuneProgress> events;
  bool offThread = false;
  tuner.setProgress([&](const TuneProgress& p) {
    offThread |= std::this_thread::get_id() != caller;
    events.push_back(p);
  });
  const TuneResult r = tuner.tune(test::h200(), test::sampleKey(), keptOf(b));
  ASSERT_TRUE(r.status);
  EXPECT_FALSE(offThread);
  ASSERT_FALSE(events.empty());
  for (std::size_t i = 1; i < events.size(); ++i)
    EXPECT_LE(static_cast<int>(events[i - 1].phase), static_cast<int>(events[i].phase));
  int compiles = 0;
  for (const auto& e : events)
    if (e.phase == TunePhase::Compile) {
      ++compiles;
      EXPECT_EQ(e.done, compiles);
      EXPECT_EQ(e.total, 6);
    }
  EXPECT_EQ(compiles, 6);
  EXPECT_EQ(events.back().phase, TunePhase::Done);
}

TEST_F(AutotunerTest, NothingToTryIsOneClearError) {
  Behaviours none;
  FakeBackend backend(none, seed());
  CandidateSet s;
  s.pruned.push_back({{64, 256, 4, 1}, "block_v 256 > V 128"});
  const TuneResult r = Autotuner(backend, fastOptions()).tune(test::h200(), test::sampleKey(), s);
  EXPECT_FALSE(r.status);
  EXPECT_NE(r.status.message.find("block_v 256 > V 128"), std::string::npos);
  ASSERT_EQ(r.table.size(), 1u);
  EXPECT_EQ(r.table[0].status, TrialStatus::Pruned);

  Behaviours allBad;
  allBad[{64, 64, 4, 1}] = {0.3};
  allBad[{64, 64, 4, 1}].bug = Bug::DropCarry;
  FakeBackend bad(allBad, seed());
  const TuneResult r2 = Autotuner(bad, fastOptions()).tune(test::h200(), test::sampleKey(), keptOf(allBad));
  EXPECT_FALSE(r2.status);
  EXPECT_NE(r2.status.message.find("every candidate failed"), std::string::npos);
}

}  // namespace
}  // namespace dgps::tuning
