#include <gtest/gtest.h>

#include <algorithm>

#include "TestUtil.h"
#include "dgps/dsl/SegmentScan.h"
#include "dgps/runtime/tuning/Candidates.h"

namespace dgps::tuning {
namespace {

TuneProblem shape(int K, int V) {
  TuneProblem p;
  p.shape.B = p.shape.N = 2;
  p.shape.T = 4096;
  p.shape.H = 16;
  p.shape.HV = 32;
  p.shape.K = K;
  p.shape.V = V;
  return p;
}

/// A toy launch rule with the structure of the real ones: K x block_v state tile in fp32, a
/// chunk x K key tile and chunk x block_v value tile per stage in bf16, a chunk x chunk fp32 KKT block.
std::int64_t toySmem(const TileConfig& c, const TuneProblem& p) {
  const launch::ProblemShape& s = p.shape;
  return 4LL * s.K * c.block_v + 2LL * c.stages * c.chunk * (s.K + c.block_v) + 4LL * c.chunk * c.chunk;
}

const PrunedCandidate* findPruned(const CandidateSet& set, const TileConfig& c) {
  for (const auto& p : set.pruned)
    if (p.config == c) return &p;
  return nullptr;
}

bool kept(const CandidateSet& set, const TileConfig& c) {
  return std::find(set.kept.begin(), set.kept.end(), c) != set.kept.end();
}

TEST(Candidates, StaticRulesWithReasons) {
  Tunables t{{32, 48, 64}, {16, 32, 64, 128}, {4, 8, 64}, {1, 2, 4}};
  DeviceFingerprint dev = test::h200();
  dev.smem_per_block_optin = 100 * 1024;  // a ~99 KB-smem GPU
  PruneOptions opt;
  opt.smem_bytes = toySmem;
  const CandidateSet set = generateCandidates(t, shape(128, 64), dev, opt);

  EXPECT_EQ(set.kept.size() + set.pruned.size(), 3u * 4u * 3u * 3u);
  auto reason = [&](const TileConfig& c) {
    const PrunedCandidate* p = findPruned(set, c);
    return p ? p->reason : std::string("<kept>");
  };
  EXPECT_NE(reason({48, 32, 4, 1}).find("not a power of two"), std::string::npos);
  // block_v 128 > V = 64 is clipped to 64 by the kernels: the same kernel as block_v 64, timed once.
  EXPECT_NE(reason({32, 128, 4, 1}).find("block_v 128 runs as block_v 64 for V 64"), std::string::npos);
  EXPECT_NE(reason({64, 32, 64, 1}).find("2048 threads > max threads per block 1024"), std::string::npos);
  // 4*128*64 + 2*4*64*(128+64) + 4*64*64 = 32768 + 98304 + 16384 = 147456 bytes > 100 KiB.
  EXPECT_NE(reason({64, 64, 4, 4}).find("shared memory 144.0 KiB > opt-in limit per block 100.0 KiB"),
            std::string::npos);
  EXPECT_TRUE(kept(set, {64, 64, 4, 1}));
  EXPECT_TRUE(kept(set, {32, 16, 8, 2}));

  // Every kept config satisfies every rule, checked independently here.
  for (const TileConfig& c : set.kept) {
    EXPECT_LE(c.block_v, 64);
    EXPECT_LE(c.warps * 32, 1024);
    EXPECT_LE(toySmem(c, shape(128, 64)), 100 * 1024);
    EXPECT_NE(c.chunk, 48);
  }
  EXPECT_TRUE(std::is_sorted(set.kept.begin(), set.kept.end(), simplerThan));
}

// The kernels mask the last value tile (launch_rules.h valueTile), so block_v need not divide V; V = 120
// is KDA-1B / PKDA-1B's head dim.
TEST(Candidates, BlockVNeedNotDivideVTheLastTileIsMasked) {
  Tunables t{{64}, {32, 64, 128}, {4}, {1}};
  const DeviceFingerprint dev = test::h200();
  CandidateSet s120 = generateCandidates(t, shape(120, 120), dev, {});
  ASSERT_EQ(s120.kept.size(), 3u);  // 128 > 120 runs as one masked tile of pad16(120) = 128
  EXPECT_TRUE(s120.pruned.empty());
  CandidateSet s40 = generateCandidates(t, shape(64, 40), dev, {});
  ASSERT_EQ(s40.kept.size(), 2u);  // 32 (a masked second tile) and 64 (one tile of 48); 128 runs as 48 too
  EXPECT_EQ(s40.kept[0].block_v, 32);
  EXPECT_EQ(s40.kept[1].block_v, 64);
  ASSERT_EQ(s40.pruned.size(), 1u);
  EXPECT_NE(s40.pruned[0].reason.find("block_v 128 runs as block_v 48 for V 40"), std::string::npos)
      << s40.pruned[0].reason;
  EXPECT_NE(s40.pruned[0].reason.find("same kernel as"), std::string::npos) << s40.pruned[0].reason;
}

TEST(Candidates, BlockVAndVMustBeWhatTheKernelsCompile) {
  const DeviceFingerprint dev = test::h200();
  Tunables t{{64}, {8, 20, 48, 144}, {4}, {1}};
  CandidateSet s = generateCandidates(t, shape(128, 128), dev, {});
  ASSERT_EQ(s.kept.size(), 1u);
  EXPECT_EQ(s.kept[0].block_v, 48);
  ASSERT_EQ(s.pruned.size(), 3u);
  for (const auto& p : s.pruned)
    EXPECT_NE(p.reason.find("is not a multiple of 16 in [16, 128]"), std::string::npos) << p.reason;
  CandidateSet odd = generateCandidates(Tunables{{64}, {32}, {4}, {1}}, shape(128, 36), dev, {});
  EXPECT_TRUE(odd.kept.empty());
  ASSERT_EQ(odd.pruned.size(), 1u);
  EXPECT_NE(odd.pruned[0].reason.find("V 36 is not a positive multiple of 8"), std::string::npos);
}

TEST(Candidates, PinnedChunkCapabilityAndDuplicates) {
  Tunables t{{16, 32, 64, 64}, {64}, {4, 4}, {1}};
  PruneOptions opt;
  opt.pinned_chunk = 32;  // backward reuses the forward's A [.., BT]
  opt.capability = [](const TileConfig& c, const TuneProblem& p) -> std::optional<std::string> {
    if (c.chunk == 32 && p.shape.K != 128) return std::string("wgmma variant needs K == 128");
    return std::nullopt;
  };
  CandidateSet ok = generateCandidates(t, shape(128, 128), test::h200(), opt);
  ASSERT_EQ(ok.kept.size(), 1u);
  EXPECT_EQ(ok.kept[0], (TileConfig{32, 64, 4, 1}));
  EXPECT_EQ(ok.pruned.size(), 2u);  // 16 and 64 (the duplicates collapse)
  EXPECT_NE(ok.pruned[0].reason.find("pinned chunk 32"), std::string::npos);

  CandidateSet refused = generateCandidates(t, shape(120, 128), test::h200(), opt);
  EXPECT_TRUE(refused.kept.empty());
  EXPECT_NE(findPruned(refused, {32, 64, 4, 1})->reason.find("wgmma variant needs K == 128"),
            std::string::npos);
}

TEST(Candidates, NegativeSmemEstimateMeansRefused) {
  Tunables t{{64}, {64}, {4}, {1, 2}};
  PruneOptions opt;
  opt.smem_bytes = [](const TileConfig& c, const TuneProblem&) -> std::int64_t {
    return c.stages == 2 ? -1 : 1024;
  };
  CandidateSet s = generateCandidates(t, shape(64, 64), test::h200(), opt);
  ASSERT_EQ(s.kept.size(), 1u);
  EXPECT_EQ(s.kept[0].stages, 1);
  EXPECT_NE(s.pruned[0].reason.find("launch rules refuse"), std::string::npos);
}

TEST(Candidates, CostModelKeepsTopN) {
  Tunables t{{32, 64}, {32, 64}, {4, 8}, {1, 2}};
  PruneOptions opt;
  // An independent toy model: cost = block_v * chunk / warps, ties by simplicity.
  opt.cost_model = [](const TileConfig& c, const TuneProblem&, const DeviceFingerprint&) {
    return static_cast<double>(c.block_v * c.chunk) / c.warps;
  };
  opt.keep_top = 3;
  CandidateSet s = generateCandidates(t, shape(128, 128), test::h200(), opt);
  ASSERT_EQ(s.kept.size(), 3u);
  EXPECT_EQ(s.pruned.size(), 13u);
  // Cheapest is 32*32/8 = 128 (stages 1 and 2); six configs tie at 256, and the tie goes to the
  // simplest (stages 1, then 4 warps): {chunk 32, block_v 32, warps 4, stages 1}.
  const std::vector<TileConfig> want = {{32, 32, 8, 1}, {32, 32, 8, 2}, {32, 32, 4, 1}};
  for (const TileConfig& w : want) EXPECT_TRUE(kept(s, w)) << toString(w);
  bool sawRankReason = false;
  for (const auto& p : s.pruned) sawRankReason |= p.reason.find("outside the top 3") != std::string::npos;
  EXPECT_TRUE(sawRankReason);
}

TEST(Candidates, SimpleCostModelPrefersFullerGpuAndIsFinite) {
  const DeviceFingerprint dev = test::h200();
  TuneProblem small = shape(128, 128);
  small.shape.B = small.shape.N = 1;
  small.shape.HV = 8;  // 8 heads: far below one wave
  // With few blocks, a narrower value tile (more blocks, same waves) costs no more.
  EXPECT_LE(simpleCostModel({64, 32, 4, 1}, small, dev), simpleCostModel({64, 128, 4, 1}, small, dev));
  TuneProblem decode = small;
  decode.kind = KernelFamily::Decode;
  decode.shape.T = 1;
  const double c = simpleCostModel({64, 64, 4, 1}, decode, dev, toySmem);
  EXPECT_TRUE(std::isfinite(c));
  EXPECT_GT(c, 0);
}

// T means tokens per sequence for a dense shape and the packed total for varlen (launch_rules.h): N
// sequences of T tokens cost the same either way, and more tokens per sequence cost more serial steps.
TEST(Candidates, SimpleCostModelReadsTPerSequenceDenseAndTotalVarlen) {
  const DeviceFingerprint dev = test::h200();
  unsigned long long seed = 0;
  auto rng = test::freshRng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::uniform_int_distribution<int> seqs(2, 64), chunks(2, 64);
  for (int trial = 0; trial < 20; ++trial) {
    TuneProblem dense = shape(128, 128);
    dense.shape.B = dense.shape.N = seqs(rng);
    dense.shape.T = 64LL * chunks(rng);  // whole chunks, so per-sequence steps agree exactly
    TuneProblem packed = dense;
    packed.shape.B = 1;
    packed.shape.varlen = 1;
    packed.shape.T = dense.shape.N * dense.shape.T;
    const TileConfig c{64, 64, 4, 1};
    EXPECT_DOUBLE_EQ(simpleCostModel(c, dense, dev), simpleCostModel(c, packed, dev));
    TuneProblem longer = dense;
    longer.shape.T *= 2;
    EXPECT_GT(simpleCostModel(c, longer, dev), simpleCostModel(c, dense, dev));
  }
}

// The segment lengths searched beside a forward configuration (segmentLengthCandidates): none for a short
// sequence or decode; for one long sequence on few heads the plain pass (0) and the rule's length with its
// half and double, all below NT; for a long but well-filled shape still a neighbourhood (the tuner measures
// where the rule does not split).
TEST(Candidates, SegmentLengthsAroundTheRuleForLongShapes) {
  const TileConfig c{64, 128, 4, 2};
  TuneProblem p;
  p.shape.B = p.shape.N = 1;
  p.shape.H = p.shape.HV = 16;
  p.shape.K = p.shape.V = 128;
  p.shape.T = 4096;  // NT = 64 < kMinSegmentedChunks
  EXPECT_TRUE(segmentLengthCandidates(c, p, 132).empty());
  p.shape.T = 32768;  // NT = 512, 16 CTAs on 132 SMs: the rule splits
  const std::int64_t NT = 512;
  segment::SegmentRuleInputs rule;
  rule.chunksPerSeq = NT;
  rule.parallelWork = 16;
  rule.smCount = 132;
  const std::int64_t L = segment::chooseSegmentChunks(rule);
  ASSERT_LT(L, NT) << "the rule should split this shape";
  const std::vector<int> got = segmentLengthCandidates(c, p, 132);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.front(), 0) << "the plain pass is always a candidate";
  for (std::int64_t want : {L / 2, L, 2 * L})
    EXPECT_NE(std::find(got.begin(), got.end(), int(want)), got.end()) << "missing L = " << want;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_LT(got[i], NT);
    for (std::size_t j = 0; j < i; ++j) EXPECT_NE(got[i], got[j]) << "repeated length";
  }
  // B = 16: 256 CTAs fill the GPU, the rule keeps the plain pass, the tuner still tries a few lengths
  p.shape.B = p.shape.N = 16;
  const std::vector<int> full = segmentLengthCandidates(c, p, 132);
  ASSERT_GE(full.size(), 2u);
  EXPECT_EQ(full.front(), 0);
  for (int x : full) EXPECT_TRUE(x == 0 || (x >= 1 && x < NT)) << x;
  p.kind = KernelFamily::Decode;
  EXPECT_TRUE(segmentLengthCandidates(c, p, 132).empty()) << "decode has no state pass";
}

// With the runtime's own length for the configuration (TuneJob passes DefaultConfig.h autoSegmentChunks), the
// neighbourhood is centred on it; a length the runtime would not take (0, or NT and beyond) falls back to the rule.
TEST(Candidates, SegmentLengthsCentreOnTheRuntimesLength) {
  const TileConfig c{32, 128, 4, 2};
  TuneProblem p;
  p.shape.B = p.shape.N = 1;
  p.shape.H = p.shape.HV = 16;
  p.shape.K = p.shape.V = 128;
  p.shape.T = 32768;  // NT = 1024
  const std::vector<int> plain = segmentLengthCandidates(c, p, 132);
  int asked = 0;
  const std::vector<int> got = segmentLengthCandidates(c, p, 132, [&](const TileConfig& k) {
    ++asked;
    EXPECT_EQ(k, c) << "asked about another configuration";
    return std::int64_t(37);
  });
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(got, (std::vector<int>{0, 18, 37, 74}));
  for (std::int64_t none : {0, 1024, 5000})
    EXPECT_EQ(segmentLengthCandidates(c, p, 132, [none](const TileConfig&) { return none; }), plain) << none;
}

// withSegmentLengths repeats every kept configuration once per length (short shapes unchanged), keeps the
// pruned list, and orders the result by simplicity: the plain pass before any split, long segments first.
TEST(Candidates, WithSegmentLengthsExpandsKeptConfigurations) {
  CandidateSet set;
  set.kept = {{64, 64, 4, 1}, {64, 128, 4, 2}};
  set.pruned = {{{48, 64, 4, 1}, "chunk 48 is not a power of two"}};
  TuneProblem p;
  p.shape.B = p.shape.N = 1;
  p.shape.H = p.shape.HV = 16;
  p.shape.K = p.shape.V = 128;
  p.shape.T = 1024;
  const CandidateSet same = withSegmentLengths(set, p, 132);
  EXPECT_EQ(same.kept, set.kept) << "a short shape gets no segment lengths";
  p.shape.T = 32768;
  const CandidateSet out = withSegmentLengths(set, p, 132);
  ASSERT_EQ(out.pruned.size(), 1u);
  std::size_t expected = 0;
  for (const TileConfig& c : set.kept) {
    const std::vector<int> lengths = segmentLengthCandidates(c, p, 132);
    expected += lengths.size();
    for (int L : lengths) {
      TileConfig withL = c;
      withL.segment_chunks = L;
      EXPECT_NE(std::find(out.kept.begin(), out.kept.end(), withL), out.kept.end()) << toString(withL);
    }
  }
  EXPECT_EQ(out.kept.size(), expected);
  for (std::size_t i = 1; i < out.kept.size(); ++i)
    EXPECT_FALSE(simplerThan(out.kept[i], out.kept[i - 1])) << "not in simplicity order at " << i;
  TileConfig plain{64, 64, 4, 1}, shortL = plain, longL = plain;
  plain.segment_chunks = 0;
  shortL.segment_chunks = 16;
  longL.segment_chunks = 64;
  EXPECT_TRUE(simplerThan(plain, longL));
  EXPECT_TRUE(simplerThan(longL, shortL));
}

// The text form carries a chosen segment length and reads it back; without one it is the old four keys.
TEST(Candidates, TileConfigTextCarriesTheSegmentLength) {
  TileConfig c{32, 64, 8, 1};
  EXPECT_EQ(toString(c), "chunk=32,block_v=64,warps=8,stages=1");
  c.segment_chunks = 48;
  EXPECT_EQ(toString(c), "chunk=32,block_v=64,warps=8,stages=1,segment_chunks=48");
  EXPECT_EQ(parseTileConfig(toString(c), TileConfig()), c);
  EXPECT_EQ(parseTileConfig("segment_chunks=0", TileConfig()).segment_chunks, 0);
  for (const char* bad : {"segment_chunks=-1", "segment_chunks=x", "segment_chunks=2000000000"}) {
    try {
      parseTileConfig(bad, TileConfig());
      ADD_FAILURE() << bad << " accepted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("segment_chunks"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace dgps::tuning
