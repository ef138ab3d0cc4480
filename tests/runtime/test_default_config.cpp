// The shape-aware default tile configuration (runtime/include/dgps/runtime/DefaultConfig.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "dgps/runtime/DefaultConfig.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/dsl/SegmentScan.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Runtime.h"
#include "RuntimeTestUtil.h"

namespace dgps {
namespace {

// chunk 64 only unless a test adds 32 (the spec language's default lists both)
Manifest manifestWith(std::vector<int> block_v, int default_bv) {
  Manifest m;
  m.tunables.chunk = {64};
  m.tunables.block_v = std::move(block_v);
  m.default_config = TileConfig{64, default_bv, 4, 2};
  return m;
}

TEST(ShapeDefaultConfig, KeepsTheManifestDefaultWhenTheGpuIsFull) {
  const Manifest m = manifestWith({32, 64, 128}, 128);
  // B=8, HV=16, V=128: 128 CTAs on 132 SMs
  EXPECT_EQ(shapeDefaultConfig(m, 8, 16, 128, 132), m.default_config);
  EXPECT_EQ(shapeDefaultConfig(m, 64, 32, 128, 132), m.default_config);
}

TEST(ShapeDefaultConfig, HalvesBlockVForFewSequencesAndHeads) {
  const Manifest m = manifestWith({32, 64, 128}, 128);
  // B=1, HV=16: 16 CTAs at 128 columns, 32 at 64; never below 64 (warpgroup MMA)
  TileConfig c = shapeDefaultConfig(m, 1, 16, 128, 132);
  EXPECT_EQ(c.block_v, 64);
  EXPECT_EQ(c.chunk, m.default_config.chunk);
  EXPECT_EQ(c.warps, m.default_config.warps);
  EXPECT_EQ(c.stages, m.default_config.stages);
  // B=4, HV=16: 64 CTAs, fewer than half of 132
  EXPECT_EQ(shapeDefaultConfig(m, 4, 16, 128, 132).block_v, 64);
  // B=5: 80 CTAs, more than half
  EXPECT_EQ(shapeDefaultConfig(m, 5, 16, 128, 132).block_v, 128);
}

TEST(ShapeDefaultConfig, OnlyPicksAllowedValues) {
  // 64 is not among the package's tunables: keep 128
  EXPECT_EQ(shapeDefaultConfig(manifestWith({32, 128}, 128), 1, 16, 128, 132).block_v, 128);
  // a 256-column default halves twice
  EXPECT_EQ(shapeDefaultConfig(manifestWith({64, 128, 256}, 256), 1, 8, 256, 132).block_v, 64);
}

TEST(ShapeDefaultConfig, ShorterChunksOnlyWhenTheGpuIsFullAndAllowed) {
  Manifest m = manifestWith({32, 64, 128}, 128);
  m.tunables.chunk = {32, 64};
  // B=8, HV=16, V=128: 128 CTAs >= 7/8 of 132 -> chunk 32, block_v kept
  TileConfig c = shapeDefaultConfig(m, 8, 16, 128, 132);
  EXPECT_EQ(c.chunk, 32);
  EXPECT_EQ(c.block_v, 128);
  // B=7: 112 CTAs < 115.5 -> chunk 64
  EXPECT_EQ(shapeDefaultConfig(m, 7, 16, 128, 132).chunk, 64);
  // B=1: block_v halves to 64 (32 CTAs), chunk stays 64
  c = shapeDefaultConfig(m, 1, 16, 128, 132);
  EXPECT_EQ(c.chunk, 64);
  EXPECT_EQ(c.block_v, 64);
  // a package whose tunables have no chunk 32 keeps its chunk
  m.tunables.chunk = {64};
  EXPECT_EQ(shapeDefaultConfig(m, 8, 16, 128, 132).chunk, 64);
}

TEST(ShapeDefaultConfig, UnknownDeviceOrEmptyProblemKeepsTheDefault) {
  const Manifest m = manifestWith({32, 64, 128}, 128);
  EXPECT_EQ(shapeDefaultConfig(m, 1, 16, 128, 0), m.default_config);
  EXPECT_EQ(shapeDefaultConfig(m, 0, 16, 128, 132), m.default_config);
  EXPECT_EQ(shapeDefaultConfig(m, 1, 0, 128, 132), m.default_config);
}

ForwardDefaultInputs call(std::int64_t B, std::int64_t T, bool segmented) {
  ForwardDefaultInputs in;
  in.sequences = B;
  in.heads_v = 16;
  in.key_dim = in.value_dim = 128;
  in.rows = T;
  in.segmented = segmented;
  in.sm_count = 132;
  return in;
}

TEST(ForwardDefaultConfig, ASegmentedLongSequenceKeepsTheFullWidth) {
  Manifest m = manifestWith({32, 64, 128}, 128);
  m.tunables.chunk = {32, 64};
  // B=1, T=32768: the segmented pass splits the sequence, so no value-tile halving; chunk 32 as on a full GPU
  const TileConfig c = forwardDefaultConfig(m, call(1, 32768, true));
  EXPECT_EQ(c.block_v, 128);
  EXPECT_EQ(c.chunk, 32);
  EXPECT_EQ(c.warps, m.default_config.warps);
  EXPECT_EQ(c.stages, m.default_config.stages);
  EXPECT_GT(autoSegmentChunks(call(1, 32768, true), c), 0);
  // without chunk 32 among the tunables the chunk stays
  m.tunables.chunk = {64};
  EXPECT_EQ(forwardDefaultConfig(m, call(1, 32768, true)), m.default_config);
}

TEST(ForwardDefaultConfig, ASequentialPreconditionerPassKeepsItsChunkWhenSplit) {
  // OSDN's hypergrad_ogd pass walks each sequence's chunks in one CTA per head, outside the segmented split
  Manifest m = manifestWith({32, 64, 128}, 128);
  m.tunables.chunk = {32, 64};
  m.features.precond = PrecondKind::Diagonal;
  m.features.precond_source = PrecondSource::HypergradOgd;
  const TileConfig c = forwardDefaultConfig(m, call(1, 32768, true));
  EXPECT_EQ(c.chunk, 64);
  EXPECT_EQ(c.block_v, 128);
  EXPECT_GT(autoSegmentChunks(call(1, 32768, true), c), 0);
  // a full GPU is not split: the shape rule's chunk 32 (OSDN at B=8: 0.855 against 0.876 ms at 64)
  EXPECT_EQ(forwardDefaultConfig(m, call(8, 4096, true)).chunk, 32);
  // the squash accumulator's pass is a short affine scan: it keeps the full-GPU rule
  m.features.precond_source = PrecondSource::EmaSqSquash;
  EXPECT_EQ(forwardDefaultConfig(m, call(1, 32768, true)).chunk, 32);
}

TEST(ForwardDefaultConfig, WithoutASplitItIsTheShapeRule) {
  Manifest m = manifestWith({32, 64, 128}, 128);
  m.tunables.chunk = {32, 64};
  // no segmented pass in the package: the plain walk's rule (block_v halves to 64 at B=1)
  EXPECT_EQ(forwardDefaultConfig(m, call(1, 32768, false)), shapeDefaultConfig(m, 1, 16, 128, 132));
  EXPECT_EQ(forwardDefaultConfig(m, call(1, 32768, false)).block_v, 64);
  // a sequence too short to split (16 chunks of 32 rows)
  EXPECT_EQ(autoSegmentChunks(call(1, 512, true), TileConfig{32, 128, 4, 2}), 0);
  EXPECT_EQ(forwardDefaultConfig(m, call(1, 512, true)), shapeDefaultConfig(m, 1, 16, 128, 132));
  // a full GPU (B=8, T=4096) is not split and takes the shape rule's chunk 32 at full width
  EXPECT_EQ(autoSegmentChunks(call(8, 4096, true), TileConfig{32, 128, 4, 2}), 0);
  EXPECT_EQ(forwardDefaultConfig(m, call(8, 4096, true)), shapeDefaultConfig(m, 8, 16, 128, 132));
  // an unknown device keeps the manifest default
  ForwardDefaultInputs unknown = call(1, 32768, true);
  unknown.sm_count = 0;
  EXPECT_EQ(forwardDefaultConfig(m, unknown), m.default_config);
}

TEST(ForwardDefaultConfig, AForcedStatePassDecidesTheWidth) {
  Manifest m = manifestWith({32, 64, 128}, 128);
  m.tunables.chunk = {32, 64};
  // B=1, T=32768 forced onto the plain pass: the walk needs the halved value tile, as without segments
  ForwardDefaultInputs plain = call(1, 32768, true);
  plain.forced_segment_chunks = 0;
  EXPECT_EQ(forwardDefaultConfig(m, plain), shapeDefaultConfig(m, 1, 16, 128, 132));
  EXPECT_EQ(forwardDefaultConfig(m, plain).block_v, 64);
  // B=1, T=1024 (32 chunks of 32 rows, too short for the rule) forced into segments of 8 chunks: full width
  ForwardDefaultInputs forced = call(1, 1024, true);
  EXPECT_EQ(forwardDefaultConfig(m, forced).block_v, 64) << "the rule alone does not split 32 chunks";
  forced.forced_segment_chunks = 8;
  EXPECT_EQ(forwardDefaultConfig(m, forced), (TileConfig{32, 128, 4, 2}));
  // a forced length that does not cut the sequence (L >= 32 chunks) is the plain pass
  forced.forced_segment_chunks = 32;
  EXPECT_EQ(forwardDefaultConfig(m, forced).block_v, 64);
  // a package without the segmented pass ignores a forced length (Runtime::segmentChunks rejects it)
  ForwardDefaultInputs none = call(1, 1024, false);
  none.forced_segment_chunks = 8;
  EXPECT_EQ(forwardDefaultConfig(m, none).block_v, 64);
}

TEST(ForwardDefaultConfig, SegmentChoiceIsTheRuleOfSegmentScan) {
  // the runtime's own choice for a call (Runtime::segmentChunks) and the default's agree: the same inputs
  // through dsl/SegmentScan.h chooseSegmentChunks
  const ForwardDefaultInputs in = call(1, 32768, true);
  segment::SegmentRuleInputs rule;
  rule.chunksPerSeq = 32768 / 32;
  rule.parallelWork = 16;
  rule.summaryWork = 32;
  rule.smCount = 132;
  rule.K = 128;
  rule.C = 32;
  EXPECT_EQ(autoSegmentChunks(in, TileConfig{32, 128, 4, 2}), segment::chooseSegmentChunks(rule));
}

TEST(ForwardDefaultConfig, TheRuleCountsTwoSummariesPerSmOnlyWhereTheVariantRunsThem) {
  // 56 walk CTAs (B = 7, HV = 8): with one summary per SM the rule keeps the plain pass, with two it splits
  // (tests/reference SegmentScan.SegmentLengthRule); the runtime passes two exactly when the variant's launch
  // bound has two (launch_rules.h segmentSummaryCtasPerSm over the package's producers and the config)
  ForwardDefaultInputs in = call(7, 32768, true);
  in.heads_v = 8;
  const TileConfig c32{32, 128, 4, 2};
  segment::SegmentRuleInputs rule;
  rule.chunksPerSeq = 1024;
  rule.parallelWork = 56;
  rule.summaryWork = 112;
  rule.smCount = 132;
  rule.K = 128;
  rule.C = 32;
  EXPECT_EQ(autoSegmentChunks(in, c32), 0) << "off: one summary per SM, the plain pass";
  in.summary_pairs = true;
  rule.summaryCtasPerSm = 2;
  EXPECT_EQ(autoSegmentChunks(in, c32), segment::chooseSegmentChunks(rule));
  EXPECT_GT(autoSegmentChunks(in, c32), 0);
  in.summary_producers = true;  // a summary that rebuilds the write key (--write-key=rebuilt): one per SM
  EXPECT_EQ(autoSegmentChunks(in, c32), 0);
  in.summary_producers = false;
  EXPECT_EQ(autoSegmentChunks(in, TileConfig{32, 128, 4, 1}), 0) << "one stage: one per SM";
  in.f16 = true;
  EXPECT_EQ(autoSegmentChunks(in, c32), 0) << "fp16 inputs: one per SM";
}

TEST(SummaryPairs, ProducersComeFromTheManifestsFeatures) {
  auto producers = [](const char* name) {
    return summaryHasProducers(Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/" + name));
  };
  EXPECT_FALSE(producers("gdn"));
  EXPECT_FALSE(producers("pgdn")) << "its write key is stored for the segment walks";
  EXPECT_FALSE(producers("osdn")) << "its write key is stored for every walk";
  // the manifest's answer is the launch contract's over the whole spec, for the preconditioned packages and two plain
  // ones
  for (const char* name : {"gdn", "kda", "pgdn", "pdn", "pkda", "atq", "osdn", "osdn_apf", "gated_deltaproduct"}) {
    const Package pkg = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/" + name);
    launch::FeatureSet f = deviceFeatures(pkg.spec());
    f.write_key = pkg.manifest().features.write_key;
    EXPECT_EQ(summaryHasProducers(pkg), launch::walkRebuildsKw(f, true)) << name;
    const PackageFeatures& m = pkg.manifest().features;  // the manifest records the spec's axes
    const launch::FeatureSet a = axisFeatures(m.decay, m.gain, m.precond, m.precond_side, m.precond_source, m.solve);
    EXPECT_TRUE(a.decay == f.decay && a.gain == f.gain && a.precond == f.precond && a.side == f.side &&
                a.source == f.source && a.solve == f.solve)
        << name;
  }
  // osdn's manifest with the write key absent (= rebuilt, dgpsc --write-key=rebuilt): its walks rebuild the key in a
  // producer warpgroup. spec.yaml is deleted after opening: the question is the manifest's, and the forward's default
  // configuration and workspace are asked of the manifest alone
  test::TempDir dir;
  const std::string from = std::string(DGPS_SOURCE_DIR) + "/generated/osdn/";
  for (const char* f : {"spec.yaml", "kernels.cu"}) test::writeFile(dir / f, test::readFile(from + f));
  std::string manifest = test::readFile(from + "manifest.yaml");
  const std::string stored = ", write_key: stored}";
  ASSERT_NE(manifest.find(stored), std::string::npos) << "generated/osdn stores its write key";
  manifest.replace(manifest.find(stored), stored.size(), "}");
  test::writeFile(dir / "manifest.yaml", manifest);
  const Package rebuilt = Package::open(dir.path());
  ASSERT_EQ(std::remove((dir / "spec.yaml").c_str()), 0);
  EXPECT_TRUE(summaryHasProducers(rebuilt));
  ForwardProblem p;
  p.batch = p.num_seqs = 1;
  p.seq_len = 32768;
  p.heads_qk = p.heads_v = 16;
  p.key_dim = p.value_dim = 128;
  p.input_dtype = ScalarType::BF16;
  const ForwardDefaultInputs in = forwardDefaultInputs(rebuilt, p, 132);
  EXPECT_EQ(in.summary_producers, in.summary_pairs) << "asked whenever pairs are on";
  (void)forwardDefaultConfig(rebuilt.manifest(), in);
}

TEST(SummaryPairs, TheSwitchIsOnUnlessZeroAndNamedWhenWrong) {
  EXPECT_TRUE(parseSummaryPairs(nullptr)) << "on by default";
  EXPECT_TRUE(parseSummaryPairs(""));
  EXPECT_FALSE(parseSummaryPairs("0"));
  EXPECT_TRUE(parseSummaryPairs("1"));
  for (const char* bad : {"yes", "2", " 1", "on"}) {
    try {
      parseSummaryPairs(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const RuntimeError& e) {
      EXPECT_EQ(e.code(), RuntimeErrorCode::InvalidArgument);
      const std::string m = e.what();
      EXPECT_NE(m.find("DGPS_SUMMARY_PAIRS"), std::string::npos) << m;
      EXPECT_NE(m.find(std::string("'") + bad + "'"), std::string::npos) << m;
      EXPECT_NE(m.find("expected 0 or 1"), std::string::npos) << m;
    }
  }
}

TEST(SummaryPairs, TheVariantCarriesTheDefineExactlyWhenTheSwitchIsOn) {
  const std::vector<std::string> d = variantDefines(128, 128, ScalarType::BF16, TileConfig{32, 128, 4, 2});
  const bool has = std::find(d.begin(), d.end(), "DGPS_SUMMARY_PAIRS=1") != d.end();
  EXPECT_EQ(has, summaryPairsEnabled());
  EXPECT_EQ(d.size(), has ? 8u : 7u) << "nothing else changes with the switch";
}

}  // namespace
}  // namespace dgps
