// CPU tests of dgps-bench's arithmetic and bookkeeping: bytes floors and FLOP counts against hand
// counts (docs/math.md §4.4/§4.5), same-run FLA times, the error measure of the correctness
// guard, input tiling, flag parsing, the benchmark filter and the summary table's ratios.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "Anchors.h"
#include "BenchCases.h"
#include "BenchInputs.h"
#include "BenchOptions.h"
#include "CorrectnessGuard.h"
#include "Floors.h"
#include "Results.h"
#include "Roofline.h"
#include "Shapes.h"
#include "dgps/dsl/SpecParser.h"

namespace dgps {
namespace bench {
namespace {

Spec shippedSpec(const std::string& name) {
  ParseResult r = parseSpecFile(std::string(DGPS_SOURCE_DIR) + "/specs/" + name + ".yaml");
  if (!r.ok()) throw std::runtime_error("specs/" + name + ".yaml does not parse");
  return *r.spec;
}

BenchShape shape(int i) { return standardShapes().at(i); }

TEST(BenchShapes, AnchorShapesAndLabels) {
  const auto s = standardShapes();
  ASSERT_EQ(s.size(), 7u);
  EXPECT_EQ(s[0].label(), "B8_T4096_H16_K128_V128");
  EXPECT_EQ(s[1].label(), "B1_T32768_H16_K128_V128");
  // The GVA shape (2 key / 8 value heads): fixed HV, so only a spec with GVA ratio 4 runs it.
  EXPECT_EQ(s[2].label(), "B1_T32768_H2_HV8_K128_V128");
  EXPECT_EQ(s[2].kind, Kind::Forward);
  EXPECT_EQ(valueHeads(shippedSpec("gdn_gva"), s[2]), 8);
  EXPECT_EQ(s[3].label(), "B256_H16_K128_V128");
  // Small-batch decode latency rows.
  EXPECT_EQ(s[4].label(), "B1_H16_K128_V128");
  EXPECT_EQ(s[5].label(), "B8_H16_K128_V128");
  EXPECT_EQ(s[6].label(), "B32_H16_K128_V128");
  for (int i = 3; i < 7; ++i) {
    EXPECT_EQ(s[std::size_t(i)].kind, Kind::Decode);
    EXPECT_EQ(s[std::size_t(i)].seq_len, 1);
  }
}

TEST(BenchFloors, GdnForwardBytesAreQkvoPlusGates) {
  const Spec gdn = shippedSpec("gdn");
  // bench/Anchors.cpp: q,k,v,o in bf16 at B=8, T=4096, H=16, K=V=128 are 537 MB; gates g, beta f32 [B,T,HV].
  const double qkvo = 4.0 * 8 * 4096 * 16 * 128 * 2;
  const double gates = 2.0 * 8 * 4096 * 16 * 4;
  EXPECT_DOUBLE_EQ(qkvo, 536870912.0);
  EXPECT_DOUBLE_EQ(forwardBytesFloor(gdn, shape(0)), qkvo + gates);
  EXPECT_DOUBLE_EQ(forwardBytesFloor(gdn, shape(1)), qkvo + gates);  // same token count
}

TEST(BenchFloors, KdaCountsTheDiagonalGate) {
  const Spec kda = shippedSpec("kda");
  const double tokens = 8.0 * 4096 * 16;
  const double expected = tokens * 128 * 2 * 4 + tokens * 128 * 4 + tokens * 4;  // q,k,v,o + g[...,K] + beta
  EXPECT_DOUBLE_EQ(forwardBytesFloor(kda, shape(0)), expected);
}

TEST(BenchFloors, PgdnCountsPreconditionerInputs) {
  const Spec pgdn = shippedSpec("pgdn");
  const Spec gdn = shippedSpec("gdn");
  const double tokens = 8.0 * 4096 * 16;
  // precond_g and precond_beta [B,T,H] f32, precond_center [H] f32.
  EXPECT_DOUBLE_EQ(forwardBytesFloor(pgdn, shape(0)) - forwardBytesFloor(gdn, shape(0)), 2 * tokens * 4 + 16 * 4);
}

TEST(BenchFloors, GdnDecodeIsStateReadAndWrite) {
  const Spec gdn = shippedSpec("gdn");
  const double state = 2.0 * 256 * 16 * 128 * 128 * 4;  // bench/Anchors.cpp: 0.191 ms = 2.82 TB/s of this
  const double qkv = 3.0 * 256 * 16 * 128 * 2, o = 256.0 * 16 * 128 * 2, gates = 2.0 * 256 * 16 * 4;
  EXPECT_DOUBLE_EQ(decodeBytesFloor(gdn, shape(3)), state + qkv + o + gates);
  EXPECT_NEAR(state / 0.191e-3 / 1e12, 2.81, 0.01);
}

// The standard GVA shape fixes HV = 8 at H = 2: gdn_gva (ratio 4) runs it, a spec of ratio 1 is told why not.
TEST(BenchShapes, TheGvaShapeRunsOnlyForRatioFour) {
  const Package gva = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/gdn_gva");
  const Package gdn = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/gdn");
  EXPECT_FALSE(unsupportedReason(gva, shape(2)));
  const std::optional<std::string> why = unsupportedReason(gdn, shape(2));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("GVA ratio is 1"), std::string::npos) << *why;
  EXPECT_NE(why->find("8/2"), std::string::npos) << *why;
}

TEST(BenchRoofline, PlanBytesForTheForwardFloorForDecodeAndTheLargerBound) {
  const Package gdn = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/gdn");
  std::string source;
  // Forward at K=V=128 (the plan's costing point): the manifest's bytes per token-head times B*T*HV.
  const double fwd = rooflineBytes(gdn, shape(0), &source);
  EXPECT_EQ(source, "manifest plan");
  EXPECT_DOUBLE_EQ(fwd, gdn.manifest().bytes_per_token_head * 8 * 4096 * 16);
  EXPECT_GT(gdn.manifest().bytes_per_token_head, 1000);  // states and intermediates above the ~1 KB floor
  // Decode (the plan costs the forward) and a K the plan was not costed at: the bytes floor.
  for (int i : {3, 4, 5, 6}) {
    EXPECT_DOUBLE_EQ(rooflineBytes(gdn, shape(i), &source), decodeBytesFloor(gdn.spec(), shape(i)));
    EXPECT_EQ(source, "bytes floor");
  }
  BenchShape k64 = shape(0);
  k64.key_dim = 64;
  EXPECT_DOUBLE_EQ(rooflineBytes(gdn, k64, &source), forwardBytesFloor(gdn.spec(), k64));
  // B=1 decode: the state 2*16*128*128*4 B = 2.1 MB at 4.8 TB/s is about 0.44 µs; FLOPs are far below.
  const Roofline d1 = roofline(decodeBytesFloor(gdn.spec(), shape(4)), 1.0 * 16 * 3 * 2 * 128 * 128, kH200Peaks);
  EXPECT_STREQ(d1.bound(), "mem");
  EXPECT_NEAR(d1.ms() * 1e3, 2.0 * 16 * 128 * 128 * 4 / 4.8e12 * 1e6, 0.01);
  // A FLOP-heavy row is compute-bound, and the roofline is the larger of the two times.
  const Roofline c = roofline(1e6, 1e12, kH200Peaks);
  EXPECT_STREQ(c.bound(), "compute");
  EXPECT_DOUBLE_EQ(c.ms(), std::max(c.memory_ms, c.compute_ms));
  EXPECT_NEAR(c.compute_ms, 1e12 / 989.5e12 * 1e3, 1e-12);
}

TEST(BenchFloors, MathFlopsMatchMathMd44) {
  // docs/math.md §4.4 at C=64, K=V=128: GDN ≈ 182 kFLOP, PGDN ≈ 199 kFLOP per token-head.
  EXPECT_DOUBLE_EQ(mathForwardFlopsPerTokenHead(shippedSpec("gdn"), 128, 128, 64), 11665408.0 / 64);
  EXPECT_DOUBLE_EQ(mathForwardFlopsPerTokenHead(shippedSpec("pgdn"), 128, 128, 64), 12713984.0 / 64);
  EXPECT_NEAR(mathForwardFlopsPerTokenHead(shippedSpec("pgdn"), 128, 128, 64) /
                  mathForwardFlopsPerTokenHead(shippedSpec("gdn"), 128, 128, 64),
              1.09, 0.005);  // "ATK costs +9% of the tensor-core FLOPs"
  EXPECT_DOUBLE_EQ(decodeFlopsPerHead(shippedSpec("gdn"), 128, 128), 6.0 * 128 * 128);
  // two Householder steps: Sᵀk and the rank-1 update twice, then the read-out
  EXPECT_DOUBLE_EQ(decodeFlopsPerHead(shippedSpec("gated_deltaproduct"), 128, 128), 10.0 * 128 * 128);
}

// A same-run FLA file as scripts/fla_bench.py writes it (values made up for the test, not measurements).
const char* kFlaJson = R"({"gpu": "Test GPU", "rows": [
  {"spec": "gdn", "op": "chunk_gated_delta_rule", "kind": "forward", "B": 8, "T": 4096, "H": 16, "HV": 16,
   "K": 128, "V": 128, "ms": 0.839},
  {"spec": "pgdn", "op": "chunk_precond_gated_delta_rule", "kind": "forward", "B": 8, "T": 4096, "H": 16,
   "HV": 16, "K": 128, "V": 128, "ms": 1.622},
  {"spec": "gdn", "op": "chunk_gated_delta_rule", "kind": "forward", "B": 1, "T": 32768, "H": 2, "HV": 8,
   "K": 128, "V": 128, "ms": 1.05},
  {"spec": "gdn", "op": "fused_recurrent_gated_delta_rule", "kind": "decode", "B": 256, "T": 1, "H": 16,
   "HV": 16, "K": 128, "V": 128, "ms": 0.191},
  {"spec": "kda", "op": "chunk_kda", "kind": "forward", "B": 8, "T": 4096, "H": 16, "HV": 16, "K": 128,
   "V": 128, "error": "triton autotune failed"}]})";

class BenchAnchors : public ::testing::Test {
 protected:
  void SetUp() override {
    FlaTimes t;
    std::string error;
    ASSERT_TRUE(parseFlaTimes(kFlaJson, "fla.json", &t, &error)) << error;
    ASSERT_EQ(t.rows.size(), 4u);  // the failed KDA row is skipped
    setFlaTimes(std::move(t));
  }
  void TearDown() override { setFlaTimes({}); }
};

TEST_F(BenchAnchors, SameRunTimesMatchByShapeAndHeads) {
  EXPECT_DOUBLE_EQ(flaAnchor("gdn", shape(0), 16)->ms, 0.839);
  EXPECT_DOUBLE_EQ(flaAnchor("gdn", shape(3), 16)->ms, 0.191);
  EXPECT_FALSE(flaAnchor("gdn", shape(1), 16));   // not timed at B=1 T=32768 H=16
  EXPECT_FALSE(flaAnchor("kda", shape(0), 16));   // FLA failed there
  EXPECT_FALSE(flaAnchor("gdn", shape(0), 32));   // other value heads
  BenchShape gva = shape(1);
  gva.heads_qk = 2;
  gva.heads_v = 8;
  EXPECT_DOUBLE_EQ(flaAnchor("gdn", gva, 8)->ms, 1.05);
  EXPECT_NEAR(*flaRatio("pgdn", "gdn", shape(0)), 1.622 / 0.839, 1e-12);
  EXPECT_FALSE(flaRatio("pkda", "kda", shape(0)));
}

TEST(BenchAnchorsFile, RejectsMalformedFilesNamingTheField) {
  FlaTimes t;
  std::string error;
  EXPECT_FALSE(parseFlaTimes("[1,2]", "f.json", &t, &error));
  EXPECT_NE(error.find("f.json: not a JSON object"), std::string::npos) << error;
  EXPECT_FALSE(parseFlaTimes(R"({"rows": [{"spec": "gdn", "op": "x", "kind": "forward", "B": 8, "T": 4096,
      "H": 16, "HV": 16, "K": 128, "V": 128, "ms": -1}]})", "f.json", &t, &error));
  EXPECT_NE(error.find("rows[0]: \"ms\" must be a positive number"), std::string::npos) << error;
  EXPECT_FALSE(parseFlaTimes(R"({"rows": [{"spec": "gdn", "op": "x", "kind": "sideways", "B": 8}]})", "f.json",
                             &t, &error));
  EXPECT_NE(error.find("\"kind\" must be"), std::string::npos) << error;
  EXPECT_FALSE(loadFlaTimes("/dev/zero", &t, &error));
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
}

TEST(BenchShapes, ParsesShapeLists) {
  std::vector<BenchShape> s;
  std::string error;
  ASSERT_TRUE(parseShapes("forward:B=1,T=32768,H=2,HV=8,K=128,V=128;decode:B=8,H=16,K=128,V=128", &s, &error))
      << error;
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].label(), "B1_T32768_H2_HV8_K128_V128");
  EXPECT_EQ(s[1].kind, Kind::Decode);
  EXPECT_EQ(s[1].seq_len, 1);
  EXPECT_FALSE(parseShapes("forward:B=1,H=2,K=128,V=128", &s, &error));  // no T
  EXPECT_NE(error.find("needs B, H, K, V and T"), std::string::npos) << error;
  EXPECT_FALSE(parseShapes("forward:B=1,T=8,H=3,HV=8,K=128,V=128", &s, &error));
  EXPECT_NE(error.find("HV must be a multiple of H"), std::string::npos) << error;
  EXPECT_FALSE(parseShapes("forward:B=99999999999999999999,T=8,H=2,K=128,V=128", &s, &error));
  EXPECT_FALSE(parseShapes("sideways:B=1", &s, &error));
  EXPECT_FALSE(parseShapes("", &s, &error));
}

TEST(BenchGuard, RelativeErrorAndNonFinite) {
  Tensor want = Tensor::fromDoubles(ScalarType::F64, {4}, {1, 2, 3, 4});
  Tensor same = Tensor::fromDoubles(ScalarType::BF16, {2, 2}, {1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(relativeError(same, want), 0.0);
  Tensor off = Tensor::fromDoubles(ScalarType::F32, {4}, {1, 2, 3, 5});
  EXPECT_NEAR(relativeError(off, want), 1.0 / std::sqrt(30.0), 1e-12);
  Tensor nan = Tensor::fromDoubles(ScalarType::BF16, {4}, {1, std::nan(""), 3, 4});
  EXPECT_TRUE(std::isnan(relativeError(nan, want)));
  EXPECT_EQ(countNonFinite(nan), 1);
  Tensor inf = Tensor::fromDoubles(ScalarType::F32, {3}, {INFINITY, -INFINITY, 0});
  EXPECT_EQ(countNonFinite(inf), 2);
  EXPECT_THROW(relativeError(Tensor(ScalarType::F32, {3}), want), DataError);
}

TEST(BenchInputs, ForwardTilesRepeatToTheFullShape) {
  const Spec gdn = shippedSpec("gdn");
  ReferenceProblem full;
  full.batch = 2;
  full.seq_len = 96;
  full.heads_qk = 2;
  full.heads_v = 2;
  full.key_dim = 64;
  full.value_dim = 64;
  HostInputs h = forwardHostInputs(gdn, full, 40, 7);  // largest divisor of 96 <= 40 is 32
  ASSERT_TRUE(h.tiles.count("q"));
  EXPECT_EQ(h.tiles.at("q").shape(), (std::vector<std::int64_t>{1, 32, 2, 64}));
  EXPECT_EQ(h.full_shapes.at("q"), (std::vector<std::int64_t>{2, 96, 2, 64}));
  EXPECT_EQ(h.full_shapes.at("g"), (std::vector<std::int64_t>{2, 96, 2}));
  EXPECT_FALSE(h.tiles.count("initial_state"));
  // Never zeros: the generator's activations are N(0, 1).
  double sum_sq = 0;
  for (double x : h.tiles.at("k").toDoubles()) sum_sq += x * x;
  EXPECT_GT(sum_sq, 0.5 * double(h.tiles.at("k").numel()));
  // Without tiling, the tile is the full tensor.
  HostInputs all = forwardHostInputs(gdn, full, 0, 7);
  EXPECT_EQ(all.tiles.at("v").shape(), all.full_shapes.at("v"));
}

TEST(BenchInputs, DecodeHasStatesEvenWhenTheSpecHasNoInitialState) {
  Spec pgdn = shippedSpec("pgdn");
  pgdn.initial_state = false;
  ReferenceProblem full;
  full.batch = 64;
  full.seq_len = 1;
  full.heads_qk = 2;
  full.heads_v = 2;
  full.key_dim = 64;
  full.value_dim = 64;
  HostInputs h = decodeHostInputs(pgdn, full, 32, 3);
  EXPECT_EQ(h.tiles.at("state").shape(), (std::vector<std::int64_t>{32, 2, 64, 64}));
  EXPECT_EQ(h.full_shapes.at("state"), (std::vector<std::int64_t>{64, 2, 64, 64}));
  EXPECT_EQ(h.full_shapes.at("precond_state"), (std::vector<std::int64_t>{64, 2, 64}));
  EXPECT_EQ(h.full_shapes.at("q"), (std::vector<std::int64_t>{64, 1, 2, 64}));
  for (double a : h.tiles.at("precond_state").toDoubles()) EXPECT_GE(a, 0.0);  // squash accumulator
}

TEST(BenchOptions, ParsesAndRemovesOwnFlags) {
  BenchOptions o = defaultBenchOptions("gen");
  std::vector<std::string> args = {"dgps-bench", "--dgps_reps=50", "--benchmark_filter=gdn", "--dgps_sweep=pgdn,gdn",
                                   "--dgps_no_check", "--dgps_tol=2e-2"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  int argc = int(args.size());
  std::string err;
  ASSERT_TRUE(parseBenchOptions(&argc, argv.data(), &o, &err)) << err;
  EXPECT_EQ(argc, 2);
  EXPECT_STREQ(argv[1], "--benchmark_filter=gdn");
  EXPECT_EQ(o.reps, 50);
  EXPECT_EQ(o.sweep, (std::vector<std::string>{"pgdn", "gdn"}));
  EXPECT_FALSE(o.sweep_all);
  EXPECT_FALSE(o.check);
  EXPECT_DOUBLE_EQ(o.tolerance, 2e-2);
}

TEST(BenchOptions, RejectsBadValuesAndUnknownFlags) {
  for (const std::string bad : {"--dgps_reps=0", "--dgps_reps=ten", "--dgps_no_check=1", "--dgps_nope", "--dgps_tol="}) {
    BenchOptions o = defaultBenchOptions("gen");
    std::string arg = bad;
    char* argv[] = {const_cast<char*>("dgps-bench"), &arg[0], nullptr};
    int argc = 2;
    std::string err;
    EXPECT_FALSE(parseBenchOptions(&argc, argv, &o, &err)) << bad;
    EXPECT_NE(err.find(bad.substr(0, bad.find('='))), std::string::npos) << err;
  }
}

TEST(BenchCasesFilter, RegexAndNegation) {
  PackageEntry e;
  e.name = "x";
  std::vector<BenchCase> cases(3);
  cases[0].name = "BM_forward/gdn/B8_T4096_H16_K128_V128/default";
  cases[1].name = "BM_forward/pgdn/B8_T4096_H16_K128_V128/default";
  cases[2].name = "BM_decode/gdn/B256_H16_K128_V128/default";
  for (auto& c : cases) c.entry = &e;
  EXPECT_EQ(filterCases(cases, "").size(), 3u);
  EXPECT_EQ(filterCases(cases, "all").size(), 3u);
  EXPECT_EQ(filterCases(cases, "/gdn/").size(), 2u);
  EXPECT_EQ(filterCases(cases, "-decode").size(), 2u);
  EXPECT_EQ(filterCases(cases, "([").size(), 3u);  // unparsable: prepare everything
}

ResultRow row(const std::string& spec, int shape_index, const std::string& variant, double ms) {
  ResultRow r;
  r.spec = spec;
  r.shape = shape(shape_index);
  r.heads_v = 16;
  r.variant = variant;
  r.benchmark = spec + "/" + r.shape.label() + "/" + variant;
  r.config = "C64 BV64 W4 S1";
  r.status = "ok";
  r.ms = ms;
  r.p20_ms = ms * 0.99;
  r.p80_ms = ms * 1.01;
  r.bytes = 1e9;
  r.flops = 1e9;
  r.roofline_bytes = 2e9;
  r.host_us = 4.25;
  r.check_err = 3e-3;
  if (auto a = flaAnchor(spec, r.shape, 16)) r.fla_ms = a->ms;
  return r;
}

TEST_F(BenchAnchors, SummaryRatiosPreferTunedAndTableHasEveryColumn) {
  std::vector<ResultRow> rows = {row("gdn", 0, "default", 0.5), row("pgdn", 0, "default", 0.8),
                                 row("pgdn", 0, "tuned", 0.6), row("gdn", 3, "default", 0.2)};
  EXPECT_NEAR(specRatio(rows, "pgdn", "gdn", shape(0).label()), 1.2, 1e-12);
  EXPECT_TRUE(std::isnan(specRatio(rows, "osdn", "deltanet", shape(0).label())));
  ResultRow wrong = row("kda", 0, "default", NAN);
  wrong.status = "wrong";
  wrong.message = "wrong result at kda forward: o: ||out - ref|| / ||ref|| = 0.5 > tolerance 0.01";
  rows.push_back(wrong);
  SummaryInfo info;
  info.gpu = "Test GPU";
  info.commit = "abc1234";
  info.date = "2026-11-29";
  info.copy_bytes_per_s = 4e12;
  info.timing = "median";
  const std::string gva = "the spec's GVA ratio is 1, the shape has HV/H = 8/2";
  const std::string t = formatSummary(rows,
                                      {NotTimed{"mamba2", "decode B256_H16_K128_V128", "no decode"},
                                       NotTimed{"gdn", "forward B1_T32768_H2_HV8_K128_V128", gva},
                                       NotTimed{"kda", "forward B1_T32768_H2_HV8_K128_V128", gva},
                                       NotTimed{"gdp", "decode B256_H16_K128_V128", "no decode"}},
                                      info);
  // one line per (shape, reason), naming its specs in order
  EXPECT_NE(t.find("- gdn, kda forward B1_T32768_H2_HV8_K128_V128: " + gva + "\n"), std::string::npos) << t;
  EXPECT_NE(t.find("- mamba2, gdp decode B256_H16_K128_V128: no decode\n"), std::string::npos) << t;
  // GDN at B8: 1e9 bytes in 0.5 ms = 2000 GB/s, 2 TFLOP/s, floor 0.25 ms = 50%; roofline: 2e9 plan bytes at
  // 4.8 TB/s = 0.4167 ms against 1e9 FLOP at 989.5 TFLOP/s = 0.001 ms, so memory-bound, 0.4167 / 0.5 = 83.3%;
  // host 4.25 µs; FLA 0.839 / 0.5 = 1.68x.
  EXPECT_NE(t.find("| gdn | forward | B8_T4096_H16_K128_V128 | default C64 BV64 W4 S1 | 0.500 [0.495, 0.505] | 2000 | "
                   "2.0 | 50.0 | 0.4167 mem | 83.3 | 4.2 | 1.68x (FLA 0.839) | 3.0e-03 |"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("pgdn/gdn: B8_T4096_H16_K128_V128 1.20 (FLA 1.93)"), std::string::npos) << t;
  EXPECT_NE(t.find("WRONG"), std::string::npos);
  EXPECT_NE(t.find("tolerance 0.01"), std::string::npos);
  EXPECT_NE(t.find("gdn B256_H16_K128_V128 default: 0.2000 ms = 200.0 µs per step"), std::string::npos) << t;
  // The untimed (wrong) row keeps every column: 13 cells.
  const std::size_t at = t.find("| kda | forward");
  ASSERT_NE(at, std::string::npos);
  const std::string line = t.substr(at, t.find('\n', at) - at);
  EXPECT_EQ(std::count(line.begin(), line.end(), '|'), 14) << line;
}

}  // namespace
}  // namespace bench
}  // namespace dgps
