// Runtime::segmentChunks, the choice between the plain and the segmented state pass (Runtime.h;
// docs/architecture.md "Long sequences: the segmented state pass"), on the shipped packages, without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "dgps/dsl/Reference.h"
#include "dgps/dsl/ContextParallelPlan.h"
#include "dgps/runtime/ContextParallelForward.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Package.h"
#include "dgps/runtime/Runtime.h"
#include "RuntimeTestUtil.h"

namespace dgps {
namespace {

RuntimeOptions cacheIn(const std::string& name) {
  RuntimeOptions o;
  o.cache_dir = ::testing::TempDir() + "/" + name;
  return o;
}

/// generated/gdn without launch.forward_segmented (RuntimeTestUtil.h), in a fresh folder under the test's TempDir.
Package packageWithoutSegmentKernels(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  Package p = Package::open(test::writePackageWithoutSegmentKernels(std::string(DGPS_SOURCE_DIR) + "/generated/gdn", dir));
  EXPECT_TRUE(p.manifest().launch.forward_segmented.empty()) << "the copy in " << dir << " still has the block";
  return p;
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
  const Package none = packageWithoutSegmentKernels("segment_choice_none");
  // several Householder steps per token: the walks run over the step rows (2·T of them)
  const Package gdp = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/gated_deltaproduct");
  // a preconditioned package has them (its walks rebuild the preconditioned key from precond_scan's states)
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
    EXPECT_EQ(rt.segmentChunks(pgdn, longProblem(pgdn.manifest()), pgdn.manifest().default_config, forced), 4);
    EXPECT_EQ(rt.segmentChunks(gdp, longProblem(gdp.manifest()), gdp.manifest().default_config, forced), 4);
    try {
      rt.segmentChunks(none, longProblem(none.manifest()), none.manifest().default_config, forced);
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
    EXPECT_EQ(rt.segmentChunks(none, longProblem(none.manifest()), none.manifest().default_config, LaunchOptions()), 0);
    EXPECT_EQ(rt.segmentChunks(gdp, longProblem(gdp.manifest()), gdp.manifest().default_config, LaunchOptions()), 8);
    EXPECT_EQ(rt.segmentChunks(pgdn, longProblem(pgdn.manifest()), pgdn.manifest().default_config, LaunchOptions()), 8);
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

// A tuned segment length travels in the configuration (TileConfig::segment_chunks, e.g. a tuning record's):
// applied when LaunchOptions and DGPS_SEGMENT_CHUNKS say nothing, the plain pass when it would not split the
// sequence (L >= ⌈T/chunk⌉), overridden by LaunchOptions; checkConfig refuses it for a package without
// segmented kernels and refuses a negative length other than -1 (unset).
TEST(SegmentChoice, ATunedSegmentLengthInTheConfigurationIsApplied) {
  ::unsetenv("DGPS_SEGMENT_CHUNKS");
  const Package gdn = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/gdn");
  const Package none = packageWithoutSegmentKernels("segment_choice_tuned_none");
  const ForwardProblem p = longProblem(gdn.manifest());  // T = 32768
  Runtime rt(cacheIn("segment_choice_tuned"));
  TileConfig c = gdn.manifest().default_config;
  const std::int64_t NT = (p.seq_len + c.chunk - 1) / c.chunk;
  c.segment_chunks = 24;
  EXPECT_NO_THROW(gdn.checkConfig(c));
  EXPECT_EQ(rt.segmentChunks(gdn, p, c, LaunchOptions()), 24);
  EXPECT_EQ(rt.forwardWorkspaceBytes(gdn, p, c),
            rt.forwardWorkspaceBytes(gdn, p, gdn.manifest().default_config, [] {
              LaunchOptions o;
              o.segment_chunks = 24;
              return o;
            }()))
      << "the workspace follows the configuration's segment length";
  LaunchOptions plain;
  plain.segment_chunks = 0;
  EXPECT_EQ(rt.segmentChunks(gdn, p, c, plain), 0) << "LaunchOptions win over the configuration";
  c.segment_chunks = int(NT);
  EXPECT_EQ(rt.segmentChunks(gdn, p, c, LaunchOptions()), 0) << "L >= NT splits nothing: the plain pass";
  c.segment_chunks = 0;
  EXPECT_EQ(rt.segmentChunks(gdn, p, c, LaunchOptions()), 0);
  c.segment_chunks = -2;
  EXPECT_THROW(gdn.checkConfig(c), RuntimeError);
  // several Householder steps per token: a tuned length counts chunks of the step rows (2·T), as the tuner's
  const Package gdp = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/gated_deltaproduct");
  ForwardProblem pd = p;
  pd.row_steps = 2;
  TileConfig dc = gdp.manifest().default_config;
  dc.segment_chunks = int((pd.seq_len + dc.chunk - 1) / dc.chunk);  // >= the chunks of T, < those of 2·T
  EXPECT_EQ(rt.segmentChunks(gdp, pd, dc, LaunchOptions()), dc.segment_chunks);
  TileConfig pc = none.manifest().default_config;
  pc.segment_chunks = 0;
  EXPECT_NO_THROW(none.checkConfig(pc)) << "the plain pass is every package's";
  pc.segment_chunks = 16;
  try {
    none.checkConfig(pc);
    ADD_FAILURE() << "a segment length accepted for a package without segmented kernels";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("segment_chunks=16"), std::string::npos) << e.what();
  }
  ::setenv("DGPS_SEGMENT_CHUNKS", "8", 1);
  {
    Runtime env(cacheIn("segment_choice_tuned_env"));
    c.segment_chunks = 24;
    EXPECT_EQ(env.segmentChunks(gdn, p, c, LaunchOptions()), 8) << "the environment wins over the configuration";
  }
  ::unsetenv("DGPS_SEGMENT_CHUNKS");
}

/// A forward call's views at `s` with placeholder device pointers, distinct and far apart (validation reads
/// only the views, and refuses aliasing): enough to reach the checks made before anything is launched.
ForwardTensors placeholderCall(const Package& pkg, const ReferenceProblem& s) {
  std::uintptr_t next = std::uintptr_t(1) << 32;
  ForwardTensors t;
  for (const TensorSlot& slot : referenceInputSlots(pkg.spec(), s)) {
    void* fake = reinterpret_cast<void*>(next += std::uintptr_t(1) << 28);
    const ScalarType dt = slot.type == SlotType::Activation ? ScalarType::BF16
                          : slot.type == SlotType::Index    ? ScalarType::I64
                                                            : ScalarType::F32;
    const TensorView v(fake, dt, slot.shape);
    if (slot.name == "q") t.q = v;
    else if (slot.name == "k") t.k = v;
    else if (slot.name == "v") t.v = v;
    else if (slot.name == "g") t.g = v;
    else if (slot.name == "beta") t.beta = v;
    else if (slot.name == "precond_g") t.precond_g = v;
    else if (slot.name == "precond_beta") t.precond_beta = v;
    else if (slot.name == "precond_center") t.precond_center = v;
    else if (slot.name == "cu_seqlens") t.cu_seqlens = v;
  }
  t.o = TensorView(reinterpret_cast<void*>(next + (std::uintptr_t(1) << 28)), ScalarType::BF16,
                   {s.batch, s.seq_len, s.heads_v, s.value_dim});
  return t;
}

// Runtime::forwardSummary refuses, with one message naming the problem and before any launch: a package
// contextParallelSupport refuses (no segment kernels; several Householder steps per token), a sequence
// outside [0, N), summary tensors of the wrong shape or dtype, and a forced segment length (the summary chooses it).
TEST(SegmentChoice, ForwardSummaryRefusesBadRequestsBeforeLaunching) {
  const Package gdn = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/gdn");
  const Package dp = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/gated_deltaproduct");
  const Package none = packageWithoutSegmentKernels("forward_summary_errors_none");
  Runtime rt(cacheIn("forward_summary_errors"));
  ReferenceProblem s;
  s.batch = 1;
  s.seq_len = 300;
  s.heads_qk = 2;
  s.heads_v = 2 * gdn.spec().gva_ratio;
  s.key_dim = s.value_dim = gdn.manifest().key_dims.back();
  s.cu_seqlens = {0, 100, 300};
  const ForwardTensors t = placeholderCall(gdn, s);
  void* fake = reinterpret_cast<void*>(std::uintptr_t(1) << 24);
  const std::int64_t HV = s.heads_v, K = s.key_dim, V = s.value_dim;
  const TensorView trans(fake, ScalarType::F32, {HV, K, K}), ext(fake, ScalarType::F32, {HV, K, V});
  auto expectError = [&](const Package& pkg, std::int64_t seq, const TensorView& tr, const TensorView& ex,
                         const LaunchOptions& o, const std::string& what) {
    SCOPED_TRACE(what);
    try {
      rt.forwardSummary(pkg, t, seq, tr, ex, o);
      ADD_FAILURE() << "accepted; expected an error with \"" << what << "\"";
    } catch (const RuntimeError& e) {
      EXPECT_EQ(e.code(), RuntimeErrorCode::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expectError(none, 0, trans, ext, {}, "forwardSummary: package gdn has no segment kernels");
  expectError(dp, 0, trans, ext, {}, "forwardSummary: package gated_deltaproduct runs 2 Householder steps per token");
  expectError(gdn, 2, trans, ext, {}, "sequence 2 is outside [0, N = 2)");
  expectError(gdn, -1, trans, ext, {}, "sequence -1 is outside");
  expectError(gdn, 1, TensorView(fake, ScalarType::F32, {HV + 1, K, K}), ext, {}, "tensor 'trans' has shape");
  expectError(gdn, 1, trans, TensorView(fake, ScalarType::BF16, {HV, K, V}), {},
              "tensor 'ext' has dtype bf16, expected f32");
  LaunchOptions forced;
  forced.segment_chunks = 4;
  expectError(gdn, 0, trans, ext, forced, "segment_chunks is set");
  // the summary's workspace holds one segment slot per sequence: more than the chunk regions alone
  const TileConfig c = gdn.manifest().default_config;
  ForwardProblem p;
  p.batch = 1, p.seq_len = 300, p.num_seqs = 2, p.heads_qk = 2, p.heads_v = HV, p.key_dim = K, p.value_dim = V;
  p.varlen = true;
  LaunchOptions plain;
  plain.segment_chunks = 0;
  EXPECT_GT(rt.forwardSummaryWorkspaceBytes(gdn, p, c), rt.forwardWorkspaceBytes(gdn, p, c, plain));
}

// Runtime::forwardPrecondSummary refuses before any launch: a package without a preconditioner state, a sequence
// outside [0, N), Γ or Σ of the wrong shape or dtype (for hypergrad_ogd: M [H, K, K], not Γ's [H, K]), a forced
// segment length; its
// workspace holds the plain forward's and the scans' three [N, H, K] buffers.
TEST(SegmentChoice, ForwardPrecondSummaryRefusesBadRequestsBeforeLaunching) {
  const Package pgdn = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/pgdn");
  const Package gdn = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/gdn");
  const Package osdn = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/osdn");
  Runtime rt(cacheIn("forward_precond_summary_errors"));
  ReferenceProblem s;
  s.batch = 1;
  s.seq_len = 300;
  s.heads_qk = s.heads_v = 2;
  s.key_dim = s.value_dim = pgdn.manifest().key_dims.back();
  s.cu_seqlens = {0, 100, 300};
  void* fake = reinterpret_cast<void*>(std::uintptr_t(1) << 24);
  const std::int64_t H = s.heads_qk, K = s.key_dim;
  const TensorView gamma(fake, ScalarType::F32, {H, K}), sigma(fake, ScalarType::F32, {H, K});
  auto expectError = [&](const Package& pkg, std::int64_t seq, const TensorView& g, const TensorView& sg,
                         const LaunchOptions& o, const std::string& what) {
    SCOPED_TRACE(what);
    try {
      rt.forwardPrecondSummary(pkg, placeholderCall(pkg, s), seq, g, sg, o);
      ADD_FAILURE() << "accepted; expected an error with \"" << what << "\"";
    } catch (const RuntimeError& e) {
      EXPECT_EQ(e.code(), RuntimeErrorCode::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expectError(gdn, 0, gamma, sigma, {}, "forwardPrecondSummary: package gdn has no preconditioner state");
  expectError(osdn, 0, gamma, sigma, {},
              "forwardPrecondSummary: tensor 'gamma' has shape [2, " + std::to_string(K) + "], expected [2, " +
                  std::to_string(K) + ", " + std::to_string(K) + "]");
  expectError(pgdn, 2, gamma, sigma, {}, "sequence 2 is outside [0, N = 2)");
  expectError(pgdn, 0, TensorView(fake, ScalarType::F32, {H, K, 1}), sigma, {},
              "forwardPrecondSummary: tensor 'gamma' has shape [2, " + std::to_string(K) + ", 1], expected [2, " +
                  std::to_string(K) + "]");
  expectError(pgdn, 0, gamma, TensorView(fake, ScalarType::BF16, {H, K}), {},
              "tensor 'sigma' has dtype bf16, expected f32");
  LaunchOptions forced;
  forced.segment_chunks = 4;
  expectError(pgdn, 0, gamma, sigma, forced, "segment_chunks is set");
  const TileConfig c = pgdn.manifest().default_config;
  ForwardProblem p;
  p.batch = 1, p.seq_len = 300, p.num_seqs = 2, p.heads_qk = H, p.heads_v = H, p.key_dim = K, p.value_dim = K;
  p.varlen = true;
  LaunchOptions plain;
  plain.segment_chunks = 0;
  EXPECT_GE(rt.forwardPrecondSummaryWorkspaceBytes(pgdn, p, c),
            rt.forwardWorkspaceBytes(pgdn, p, c, plain) + 3 * std::size_t(2 * H * K) * 4);
}

// A hypergrad_ogd package's d starts at the spec's init when the caller gives no initial state (forward, the
// reference); the manifest does not carry init, so the context-parallel phases refuse a missing doc_initial
// instead of starting d at zero (which silently differed from the single-GPU call), before launching anything.
TEST(SegmentChoice, HypergradContextParallelNeedsTheInitialD) {
  const Package osdn = Package::open(std::string(DGPS_SOURCE_DIR) + "/generated/osdn");
  Runtime rt(cacheIn("cp_hypergrad_initial_d"));
  const std::int64_t H = 2, K = osdn.spec().key_dims.front();
  ReferenceProblem s;
  s.batch = 1;
  s.seq_len = 150;
  s.heads_qk = s.heads_v = H;
  s.key_dim = s.value_dim = K;
  const cp::Plan plan = cp::makePlan({0, 300}, {0, 150, 300});  // one document over two ranks
  void* fake = reinterpret_cast<void*>(std::uintptr_t(1) << 24);
  PiecePrecond precond;
  precond.gathered = fake;
  precond.local_initial = TensorView(fake, ScalarType::F32, {1, H, K});
  try {
    publishPieceSummary(rt, osdn, plan, 0, placeholderCall(osdn, s), precond, fake);
    ADD_FAILURE() << "accepted a hypergrad_ogd piece without its initial d";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.code(), RuntimeErrorCode::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("PiecePrecond 'doc_initial' is not given"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dgps
