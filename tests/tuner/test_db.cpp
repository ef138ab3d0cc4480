#include <gtest/gtest.h>

#include <map>

#include "TestUtil.h"
#include "dgps/runtime/tuning/TuningDb.h"

namespace dgps::tuning {
namespace {

using test::sampleKey;
using test::sampleRecord;

const TileConfig kA{64, 64, 4, 2};
const TileConfig kB{32, 32, 8, 1};
const TileConfig kC{64, 128, 8, 3};
const TileConfig kFallback{64, 32, 4, 1};

TEST(TuningDbPath, ResolutionOrder) {
  std::map<std::string, std::string> env;
  auto lookup = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  std::string error;
  EXPECT_FALSE(resolveDbPath(&error, lookup));
  EXPECT_NE(error.find("DGPS_TUNING_DB"), std::string::npos);

  env["HOME"] = "/home/u";
  EXPECT_EQ(resolveDbPath(&error, lookup), "/home/u/.cache/dgps/tuning.jsonl");
  env["XDG_CACHE_HOME"] = "relative/cache";  // ignored per the XDG spec
  EXPECT_EQ(resolveDbPath(&error, lookup), "/home/u/.cache/dgps/tuning.jsonl");
  env["XDG_CACHE_HOME"] = "/var/cache/u";
  EXPECT_EQ(resolveDbPath(&error, lookup), "/var/cache/u/dgps/tuning.jsonl");
  env["DGPS_TUNING_DB"] = "";
  EXPECT_EQ(resolveDbPath(&error, lookup), "/var/cache/u/dgps/tuning.jsonl");
  env["DGPS_TUNING_DB"] = "/data/t.jsonl";
  EXPECT_EQ(resolveDbPath(&error, lookup), "/data/t.jsonl");
}

TEST(TuningDb, MissingFileIsEmptyAndAppendCreatesDirectories) {
  test::ScratchDir dir;
  TuningDb db(dir.file("a/b/c/tuning.jsonl"));
  ASSERT_TRUE(db.load());
  EXPECT_TRUE(db.records().empty());
  ASSERT_TRUE(db.append(sampleRecord(kA, 0.5, utcNow())));
  TuningDb again(db.path());
  ASSERT_TRUE(again.load());
  ASSERT_EQ(again.records().size(), 1u);
  EXPECT_EQ(again.records()[0].config, kA);
  EXPECT_TRUE(again.warnings().empty());
}

TEST(TuningDb, UnreadablePathIsOneClearError) {
  test::ScratchDir dir;
  TuningDb db(dir.path());  // a directory, not a file
  const Status s = db.load();
  EXPECT_FALSE(s);
  EXPECT_NE(s.message.find(dir.path()), std::string::npos) << s.message;
  const Status a = db.append(sampleRecord(kA, 0.5, utcNow()));
  EXPECT_FALSE(a);
  EXPECT_NE(a.message.find(dir.path()), std::string::npos) << a.message;
}

TEST(TuningDb, AppendRejectsRecordWithoutDate) {
  test::ScratchDir dir;
  TuningDb db(dir.file("t.jsonl"));
  const Status s = db.append(sampleRecord(kA, 0.5, ""));
  EXPECT_FALSE(s);
  EXPECT_NE(s.message.find("date"), std::string::npos);
}

TEST(TuningDb, TornLastLineAndCorruptLinesAreSkippedWithWarnings) {
  test::ScratchDir dir;
  const std::string path = dir.file("t.jsonl");
  const std::string good1 = toJsonLine(sampleRecord(kA, 0.5, "2025-01-01T00:00:00.000Z"));
  const std::string good2 = toJsonLine(sampleRecord(kB, 0.4, "2025-01-02T00:00:00.000Z"));
  std::string wrongType = good1;
  wrongType.replace(wrongType.find("\"warps\":4"), 9, "\"warps\":\"4\"");
  std::string newer = good1;
  newer.replace(0, 12, "{\"version\":9");
  const std::string torn = good2.substr(0, good2.size() / 2);
  test::writeFile(path, good1 + "\n" + "{garbage\n" + wrongType + "\n\n" + newer + "\n" + good2 +
                            "\n" + torn);

  TuningDb db(path);
  testing::internal::CaptureStderr();
  ASSERT_TRUE(db.load());
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << "the library must not print by default";
  ASSERT_EQ(db.records().size(), 2u);
  ASSERT_EQ(db.warnings().size(), 4u);
  EXPECT_EQ(db.warnings()[0].line, 2);
  EXPECT_EQ(db.warnings()[1].line, 3);
  EXPECT_NE(db.warnings()[1].message.find("config.warps"), std::string::npos);
  EXPECT_EQ(db.warnings()[2].line, 5);
  EXPECT_NE(db.warnings()[2].message.find("newer"), std::string::npos);
  EXPECT_EQ(db.warnings()[3].line, 7);
  EXPECT_NE(db.warnings()[3].message.find("torn last line"), std::string::npos);
  EXPECT_EQ(db.warnings()[3].path, path);

  // Appending after a torn line must not glue the new record onto the fragment.
  ASSERT_TRUE(db.append(sampleRecord(kC, 0.3, "2025-01-03T00:00:00.000Z")));
  TuningDb reread(path);
  ASSERT_TRUE(reread.load());
  ASSERT_EQ(reread.records().size(), 3u);
  EXPECT_EQ(reread.records()[2].config, kC);
  ASSERT_EQ(reread.warnings().size(), 4u);
  EXPECT_NE(reread.warnings()[3].message.find("invalid record"), std::string::npos);
  EXPECT_EQ(reread.lookup(test::h200(), sampleKey(), kFallback).config, kC);

  // Asked to, it echoes warnings to stderr.
  TuningDb loud(path);
  loud.setEchoWarnings(true);
  testing::internal::CaptureStderr();
  ASSERT_TRUE(loud.load());
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(path + ":2:"), std::string::npos) << err;
}

TEST(TuningDb, LookupExactThenNearestBucketThenDefault) {
  test::ScratchDir dir;
  TuningDb db(dir.file("t.jsonl"));
  const DeviceFingerprint dev = test::h200();
  ProblemKey key = sampleKey();  // T bucket <=4096

  LookupResult r = db.lookup(dev, key, kFallback);
  EXPECT_EQ(r.source, LookupSource::Default);
  EXPECT_EQ(r.config, kFallback);
  EXPECT_FALSE(r.record);

  // Records at <=256 (distance 2) and >16384 (distance 2): equal distance prefers the longer bucket.
  TuningRecord shortT = sampleRecord(kA, 0.1, "2025-01-01T00:00:00.000Z");
  shortT.key.t_bucket = TBucket::Le256;
  TuningRecord longT = sampleRecord(kB, 2.0, "2024-01-01T00:00:00.000Z");
  longT.key.t_bucket = TBucket::Gt16384;
  // Same T bucket as the query but another dtype: must never be used.
  TuningRecord otherDtype = sampleRecord(kC, 0.2, "2025-02-01T00:00:00.000Z");
  otherDtype.key.dtype = InputDType::F16;
  ASSERT_TRUE(db.append(shortT));
  ASSERT_TRUE(db.append(longT));
  ASSERT_TRUE(db.append(otherDtype));
  r = db.lookup(dev, key, kFallback);
  EXPECT_EQ(r.source, LookupSource::NearestBucket);
  EXPECT_EQ(r.config, kB);

  // A record one bucket away beats both.
  TuningRecord nearT = sampleRecord(kC, 0.9, "2023-01-01T00:00:00.000Z");
  nearT.key.t_bucket = TBucket::Le1024;
  ASSERT_TRUE(db.append(nearT));
  r = db.lookup(dev, key, kFallback);
  EXPECT_EQ(r.source, LookupSource::NearestBucket);
  EXPECT_EQ(r.config, kC);
  ASSERT_TRUE(r.record);
  EXPECT_EQ(r.record->key.t_bucket, TBucket::Le1024);

  // The exact key wins over everything.
  ASSERT_TRUE(db.append(sampleRecord(kA, 0.7, "2020-01-01T00:00:00.000Z")));
  r = db.lookup(dev, key, kFallback);
  EXPECT_EQ(r.source, LookupSource::Exact);
  EXPECT_EQ(r.config, kA);
}

TEST(TuningDb, NewestRecordWinsRegardlessOfFileOrder) {
  test::ScratchDir dir;
  TuningDb db(dir.file("t.jsonl"));
  ASSERT_TRUE(db.append(sampleRecord(kA, 0.5, "2025-03-01T00:00:00.000Z")));
  ASSERT_TRUE(db.append(sampleRecord(kB, 0.4, "2025-01-01T00:00:00.000Z")));  // older, later line
  EXPECT_EQ(db.findExact(test::h200(), sampleKey())->config, kA);
  ASSERT_TRUE(db.append(sampleRecord(kC, 0.6, "2025-03-01T00:00:00.000Z")));  // same date, later line
  EXPECT_EQ(db.findExact(test::h200(), sampleKey())->config, kC);
}

TEST(TuningDb, ForeignRecordsAreNeverUsedButReportedWithReasons) {
  test::ScratchDir dir;
  TuningDb db(dir.file("t.jsonl"));
  TuningRecord h100 = sampleRecord(kB, 0.3, "2025-05-01T00:00:00.000Z");
  h100.fingerprint.name = "NVIDIA H100 80GB HBM3";
  h100.fingerprint.sm_count = 132;
  TuningRecord oldNvrtc = sampleRecord(kC, 0.2, "2025-05-02T00:00:00.000Z");
  oldNvrtc.fingerprint.nvrtc_version = "12.8";
  TuningRecord oldCodegen = sampleRecord(kC, 0.2, "2025-05-03T00:00:00.000Z");
  oldCodegen.fingerprint.codegen_version = "dgps-0.0.1";
  // Foreign record in a neighbouring bucket must not be used by the nearest-bucket fallback either.
  TuningRecord foreignNear = oldNvrtc;
  foreignNear.key.t_bucket = TBucket::Le1024;
  for (const auto& r : {h100, oldNvrtc, oldCodegen, foreignNear}) ASSERT_TRUE(db.append(r));

  LookupResult r = db.lookup(test::h200(), sampleKey(), kFallback, /*collectForeign=*/true);
  EXPECT_EQ(r.source, LookupSource::Default);
  EXPECT_EQ(r.config, kFallback);
  ASSERT_EQ(r.foreign.size(), 3u);
  EXPECT_NE(r.foreign[0].reason.find("name"), std::string::npos);
  EXPECT_NE(r.foreign[1].reason.find("nvrtc_version '12.8' != '13.0'"), std::string::npos);
  EXPECT_NE(r.foreign[2].reason.find("codegen_version"), std::string::npos);
  EXPECT_TRUE(db.lookup(test::h200(), sampleKey(), kFallback).foreign.empty());  // only when asked

  // The newest same-hardware record under another toolchain is the upgrade baseline.
  auto base = db.findToolchainBaseline(test::h200(), sampleKey());
  ASSERT_TRUE(base);
  EXPECT_EQ(base->fingerprint.codegen_version, "dgps-0.0.1");
}

TEST(TuningDb, FilesMergeByConcatenation) {
  test::ScratchDir dir;
  const DeviceFingerprint dev = test::h200();
  DeviceFingerprint other = dev;
  other.name = "NVIDIA A100-SXM4-80GB";
  other.compute_capability = "8.0";
  other.sm_count = 108;

  // Machine 1 tuned key X early and key Y; machine 2 re-tuned key X later and tuned the A100.
  ProblemKey keyY = sampleKey();
  keyY.K = 64;
  TuningDb m1(dir.file("m1.jsonl")), m2(dir.file("m2.jsonl"));
  ASSERT_TRUE(m1.append(sampleRecord(kA, 0.5, "2025-01-01T00:00:00.000Z")));
  TuningRecord y = sampleRecord(kB, 0.2, "2025-01-01T00:00:01.000Z");
  y.key = keyY;
  ASSERT_TRUE(m1.append(y));
  ASSERT_TRUE(m2.append(sampleRecord(kC, 0.45, "2025-02-01T00:00:00.000Z")));
  TuningRecord a100 = sampleRecord(kB, 0.9, "2025-02-02T00:00:00.000Z");
  a100.fingerprint = other;
  ASSERT_TRUE(m2.append(a100));

  const std::string t1 = test::readFile(m1.path()), t2 = test::readFile(m2.path());
  for (const std::string& merged : {t1 + t2, t2 + t1}) {
    const std::string path = dir.file("merged.jsonl");
    test::writeFile(path, merged);
    TuningDb db(path);
    ASSERT_TRUE(db.load());
    EXPECT_TRUE(db.warnings().empty());
    EXPECT_EQ(db.records().size(), 4u);
    EXPECT_EQ(db.lookup(dev, sampleKey(), kFallback).config, kC);  // the newer re-tune
    EXPECT_EQ(db.lookup(dev, keyY, kFallback).config, kB);
    const LookupResult onA100 = db.lookup(other, sampleKey(), kFallback);
    EXPECT_EQ(onA100.source, LookupSource::Exact);
    EXPECT_EQ(onA100.config, kB);
  }
}

}  // namespace
}  // namespace dgps::tuning
