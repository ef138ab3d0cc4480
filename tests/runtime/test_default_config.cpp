// The shape-aware default tile configuration (runtime/include/dgps/runtime/DefaultConfig.h).
#include <gtest/gtest.h>

#include "dgps/runtime/DefaultConfig.h"

namespace dgps {
namespace {

Manifest manifestWith(std::vector<int> block_v, int default_bv) {
  Manifest m;
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

}  // namespace
}  // namespace dgps
