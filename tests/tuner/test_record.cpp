#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "TestUtil.h"
#include "dgps/runtime/tuning/TuningRecord.h"

namespace dgps::tuning {
namespace {

using nlohmann::json;

TuningRecord roundTrip(const TuningRecord& r) {
  TuningRecord back;
  std::string error;
  EXPECT_TRUE(parseJsonLine(toJsonLine(r), &back, &error)) << error;
  return back;
}

// A line exactly as the tuner wrote it before the runtime and the tuner shared one TileConfig (whose default
// stages changed from 1 to 2): the on-disk config is an object of four explicit integers, so old records keep
// their values, stages = 1 included, and no default fills in.
TEST(TuningRecord, LoadsARecordWrittenBeforeTileConfigWasUnified) {
  const std::string line =
      "{\"version\":1,\"fingerprint\":{\"name\":\"NVIDIA H200\",\"compute_capability\":\"9.0\",\"sm_count\":132,"
      "\"driver_version\":\"580.159.04\",\"nvrtc_version\":\"13.0\",\"codegen_version\":\"1\","
      "\"smem_per_block_optin\":232448,\"smem_per_sm\":233472,\"regs_per_sm\":65536,\"max_threads_per_block\":1024,"
      "\"l2_bytes\":62914560},\"key\":{\"spec\":\"d946a7dd78dbf6d9\",\"K\":128,\"V\":128,\"H\":16,\"HV\":16,"
      "\"t_bucket\":\"<=4096\",\"waves\":\"<2\",\"dtype\":\"bf16\",\"varlen\":false,\"kind\":\"forward\","
      "\"precision\":\"ieee\"},\"config\":{\"chunk\":32,\"block_v\":64,\"warps\":8,\"stages\":1},"
      "\"median_ms\":0.625,\"p20_ms\":0.62,\"p80_ms\":0.63,\"candidates_tried\":16,"
      "\"date\":\"2026-11-29T12:00:00.000Z\",\"host\":\"gpu-node-1\"}";
  TuningRecord r;
  r.config = {7, 7, 7, 7};  // poisoned: every field must come from the line
  std::string error;
  ASSERT_TRUE(parseJsonLine(line, &r, &error)) << error;
  EXPECT_EQ(r.config, (TileConfig{32, 64, 8, 1}));
  EXPECT_EQ(r.key.spec_hash, "d946a7dd78dbf6d9");
  EXPECT_EQ(r.candidates_tried, 16);
  // Written back, it reads the same (the format itself did not change).
  TuningRecord again;
  ASSERT_TRUE(parseJsonLine(toJsonLine(r), &again, &error)) << error;
  EXPECT_EQ(again.config, r.config);
}

TEST(TuningRecord, RoundTripsEveryField) {
  TuningRecord r = test::sampleRecord({32, 64, 8, 3}, 0.4321, "2025-06-01T10:00:00.123Z");
  r.candidates_tried = 17;
  r.host = "gpu-node-3";
  const std::string line = toJsonLine(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.rfind("{\"version\":1,\"fingerprint\":", 0), 0u) << line;  // readable order
  EXPECT_NE(line.find("\"median_ms\":0.4321,"), std::string::npos) << line;  // not 0.43210000000000004
  const TuningRecord b = roundTrip(r);
  EXPECT_EQ(b.version, 1);
  EXPECT_TRUE(identityMatches(b.fingerprint, r.fingerprint));
  EXPECT_EQ(b.fingerprint.smem_per_block_optin, r.fingerprint.smem_per_block_optin);
  EXPECT_EQ(b.fingerprint.smem_per_sm, r.fingerprint.smem_per_sm);
  EXPECT_EQ(b.fingerprint.regs_per_sm, r.fingerprint.regs_per_sm);
  EXPECT_EQ(b.fingerprint.max_threads_per_block, r.fingerprint.max_threads_per_block);
  EXPECT_EQ(b.fingerprint.l2_bytes, r.fingerprint.l2_bytes);
  EXPECT_EQ(b.key, r.key);
  EXPECT_EQ(b.config, r.config);
  EXPECT_DOUBLE_EQ(b.median_ms, r.median_ms);
  EXPECT_DOUBLE_EQ(b.p20_ms, r.p20_ms);
  EXPECT_DOUBLE_EQ(b.p80_ms, r.p80_ms);
  EXPECT_EQ(b.candidates_tried, 17);
  EXPECT_EQ(b.date, r.date);
  EXPECT_EQ(b.host, "gpu-node-3");
}

// A tuned segment length (TileConfig::segment_chunks) is stored in the record's config and read back; a
// configuration without one writes no field (old readers and lines stay as they were) and reads back unset.
TEST(TuningRecord, RoundTripsTheSegmentLength) {
  for (int L : {0, 1, 31, 128, 1 << 30}) {
    SCOPED_TRACE("segment_chunks " + std::to_string(L));
    TileConfig c{64, 128, 4, 2};
    c.segment_chunks = L;
    const TuningRecord r = test::sampleRecord(c, 1.25, "2025-06-01T10:00:00.123Z");
    const std::string line = toJsonLine(r);
    EXPECT_NE(line.find("\"segment_chunks\":" + std::to_string(L)), std::string::npos) << line;
    EXPECT_EQ(roundTrip(r).config.segment_chunks, L);
    EXPECT_EQ(roundTrip(r).config, c);
  }
  const TuningRecord unset = test::sampleRecord({64, 128, 4, 2}, 1.25, "2025-06-01T10:00:00.123Z");
  EXPECT_EQ(toJsonLine(unset).find("segment_chunks"), std::string::npos) << toJsonLine(unset);
  EXPECT_EQ(roundTrip(unset).config.segment_chunks, -1);
}

TEST(TuningRecord, UnknownExtraFieldsAreIgnored) {
  json j = json::parse(toJsonLine(test::sampleRecord({64, 64, 4, 1}, 1.0, "2025-01-01T00:00:00.000Z")));
  j["note"] = "added by a later version";
  j["key"]["future_field"] = 3;
  TuningRecord r;
  std::string error;
  EXPECT_TRUE(parseJsonLine(j.dump(), &r, &error)) << error;
}

struct BadCase {
  const char* what;
  std::function<void(json&)> mutate;
  const char* expected;  // how the error starts: the field path, then what was expected
};

TEST(TuningRecord, InvalidRecordsNameTheField) {
  const std::vector<BadCase> cases = {
      {"warps as string", [](json& j) { j["config"]["warps"] = "four"; }, "config.warps: expected"},
      {"missing K", [](json& j) { j["key"].erase("K"); }, "key.K: expected"},
      {"bad bucket", [](json& j) { j["key"]["t_bucket"] = "<=100"; }, "key.t_bucket: expected"},
      {"bad dtype", [](json& j) { j["key"]["dtype"] = "fp8"; }, "key.dtype: expected"},
      {"empty nvrtc", [](json& j) { j["fingerprint"]["nvrtc_version"] = ""; },
       "fingerprint.nvrtc_version: expected"},
      {"negative time", [](json& j) { j["median_ms"] = -1.0; }, "median_ms: expected"},
      {"p20 above median", [](json& j) { j["p20_ms"] = 5.0; }, "median_ms: expected p20_ms <= median_ms"},
      {"bad date", [](json& j) { j["date"] = "yesterday"; }, "date: expected"},
      {"newer version", [](json& j) { j["version"] = 2; }, "version: expected at most 1"},
      {"fingerprint not object", [](json& j) { j["fingerprint"] = 3; }, "fingerprint: expected"},
      {"zero sm count", [](json& j) { j["fingerprint"]["sm_count"] = 0; }, "fingerprint.sm_count: expected"},
      {"negative segment length", [](json& j) { j["config"]["segment_chunks"] = -1; },
       "config.segment_chunks: expected"},
      {"segment length as string", [](json& j) { j["config"]["segment_chunks"] = "auto"; },
       "config.segment_chunks: expected"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    json j = json::parse(toJsonLine(test::sampleRecord({64, 64, 4, 1}, 1.0, "2025-01-01T00:00:00.000Z")));
    c.mutate(j);
    TuningRecord r;
    std::string error;
    EXPECT_FALSE(parseJsonLine(j.dump(), &r, &error));
    EXPECT_EQ(error.rfind(c.expected, 0), 0u) << error;
  }
  TuningRecord r;
  std::string error;
  EXPECT_FALSE(parseJsonLine("{\"version\":1,\"fingerp", &r, &error));
  EXPECT_NE(error.find("not a complete JSON object"), std::string::npos) << error;
  EXPECT_FALSE(parseJsonLine("[1,2,3]", &r, &error));
  EXPECT_NE(error.find("expected a JSON object"), std::string::npos) << error;
}

TEST(TuningRecord, DatesAreFixedWidthUtc) {
  const std::string now = utcNow();
  EXPECT_TRUE(isRecordDate(now)) << now;
  EXPECT_TRUE(isRecordDate("2025-12-31T23:59:59.999Z"));
  EXPECT_FALSE(isRecordDate("2025-12-31T23:59:59Z"));
  EXPECT_FALSE(isRecordDate("2025-12-31 23:59:59.999Z"));
  EXPECT_FALSE(hostName().empty());
}

TEST(Fingerprint, IdentityAndReasons) {
  const DeviceFingerprint a = test::h200();
  DeviceFingerprint b = a;
  b.smem_per_sm = 1;  // limits are not identity
  b.l2_bytes = 1;
  EXPECT_TRUE(identityMatches(a, b));
  EXPECT_EQ(identityMismatch(a, b), "");

  b = a;
  b.nvrtc_version = "12.8";
  EXPECT_FALSE(identityMatches(b, a));
  EXPECT_TRUE(sameHardware(b, a));
  EXPECT_EQ(identityMismatch(b, a), "nvrtc_version '12.8' != '13.0'");

  b = a;
  b.name = "NVIDIA H100 80GB HBM3";
  b.codegen_version = "dgps-0.0.9";
  EXPECT_FALSE(sameHardware(b, a));
  const std::string why = identityMismatch(b, a);
  EXPECT_NE(why.find("name"), std::string::npos);
  EXPECT_NE(why.find("codegen_version 'dgps-0.0.9' != 'dgps-0.1.0'"), std::string::npos);

  for (auto mutate : std::vector<std::function<void(DeviceFingerprint&)>>{
           [](DeviceFingerprint& f) { f.compute_capability = "9.0"; },
           [](DeviceFingerprint& f) { f.sm_count = 114; },
           [](DeviceFingerprint& f) { f.driver_version = "12.9"; }}) {
    b = a;
    mutate(b);
    EXPECT_FALSE(identityMatches(a, b));
    EXPECT_FALSE(identityMismatch(a, b).empty());
  }
}

}  // namespace
}  // namespace dgps::tuning
