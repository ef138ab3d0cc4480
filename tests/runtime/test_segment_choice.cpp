// Runtime::segmentChunks, the choice between the plain and the segmented state pass (Runtime.h;
// docs/architecture.md "Long sequences: the segmented state pass"), on the shipped packages, without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/Runtime.h"

namespace dgps {
namespace {

RuntimeOptions cacheIn(const std::string& name) {
  RuntimeOptions o;
  o.cache_dir = ::testing::TempDir() + "/" + name;
  return o;
}

ForwardProblem longProblem(const Manifest& m) {
  ForwardProblem p;
  p.batch = p.num_seqs = 1;
  p.seq_len = 32768;
  p.heads_qk = p.heads_v = 2;
  p.key_dim = m.key_dims.back();
  p.value_dim = m.value_dims.back();
  return p;
}

// Runtime::segmentChunks without a GPU: a forced L is honoured (and refused, named, where the package has no
// segmented kernels or L < 0); the rule keeps the plain pass when the SM count is unknown; DGPS_SEGMENT_CHUNKS
// (read when the Runtime is made) forces L for a package with segmented kernels, is ignored by one without,
// and a malformed value is one error naming it.
TEST(SegmentChoice, OptionsEnvironmentAndRule) {
  const Package gdn = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/gdn");
  const Package pgdn = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/pgdn");
  const TileConfig c = gdn.manifest().default_config;
  const ForwardProblem p = longProblem(gdn.manifest());
  ::unsetenv("DGPS_SEGMENT_CHUNKS");
  {
    Runtime rt(cacheIn("segment_choice"));
    LaunchOptions forced;
    forced.segment_chunks = 16;
    EXPECT_EQ(rt.segmentChunks(gdn, p, c, forced), 16);
    forced.segment_chunks = 0;
    EXPECT_EQ(rt.segmentChunks(gdn, p, c, forced), 0);
    forced.segment_chunks = -2;
    EXPECT_THROW(rt.segmentChunks(gdn, p, c, forced), RuntimeError);
    forced.segment_chunks = 4;
    try {
      rt.segmentChunks(pgdn, longProblem(pgdn.manifest()), pgdn.manifest().default_config, forced);
      ADD_FAILURE() << "a forced L accepted for a package without segmented kernels";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("has no segmented state pass"), std::string::npos) << e.what();
    }
    std::string why;
    if (!cudaAvailable(&why)) EXPECT_EQ(rt.segmentChunks(gdn, p, c, LaunchOptions()), 0) << "no SM count: plain pass";
    // the workspace of a forced segmented forward holds the segment regions after the chunk regions
    forced.segment_chunks = 16;
    EXPECT_GT(rt.forwardWorkspaceBytes(gdn, p, c, forced), rt.forwardWorkspaceBytes(gdn, p, c, LaunchOptions{}));
  }
  ::setenv("DGPS_SEGMENT_CHUNKS", "8", 1);
  {
    Runtime rt(cacheIn("segment_choice_env"));
    EXPECT_EQ(rt.segmentChunks(gdn, p, c, LaunchOptions()), 8);
    EXPECT_EQ(rt.segmentChunks(pgdn, longProblem(pgdn.manifest()), pgdn.manifest().default_config, LaunchOptions()), 0);
    LaunchOptions plain;
    plain.segment_chunks = 0;
    EXPECT_EQ(rt.segmentChunks(gdn, p, c, plain), 0) << "LaunchOptions win over the environment";
  }
  ::setenv("DGPS_SEGMENT_CHUNKS", "8x", 1);
  {
    Runtime rt(cacheIn("segment_choice_env"));
    try {
      rt.segmentChunks(gdn, p, c, LaunchOptions());
      ADD_FAILURE() << "a malformed DGPS_SEGMENT_CHUNKS accepted";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("DGPS_SEGMENT_CHUNKS='8x'"), std::string::npos) << e.what();
    }
  }
  ::unsetenv("DGPS_SEGMENT_CHUNKS");
}

}  // namespace
}  // namespace dgps
