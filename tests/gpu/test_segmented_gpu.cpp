// GPU check of the sequence-parallel state pass (docs/architecture.md, "Long sequences: the segmented state
// pass") of one generated package ($DGPS_GPU_PACKAGE): the forward with LaunchOptions::segment_chunks = L
// (segment_summary, segment_fold, segment_state_output after chunk_local) against the plain forward
// (segment_chunks = 0) and the float64 reference, for B = 1, T = 4096 and a packed batch with a 3000-token
// document among short ones (one of 1 token), with initial and final states, at several L (1, a few, the
// runtime's rule and one longer than the sequence), and at every chunk the package tunes. Fresh seeded inputs,
// NaN-poisoned outputs and workspace.
// A preconditioned package runs precond_summary / precond_scan first and its segment walks load the preconditioned
// key (or query) chunk_local stored, or rebuild it from the chunk-start states (--write-key=rebuilt); its final
// preconditioner state is checked too.
// Several Householder steps per token (gated_deltaproduct): the walks run over the T·n_h step rows and the
// lengths L count chunks of rows. A package without launch.forward_segmented fails (every shipped chunk forward has
// it). Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "GpuTestUtil.h"
#include "dgps/dsl/SegmentScan.h"
#include "dgps/runtime/Error.h"

namespace dgps {
namespace {

using gputest::compare;
using gputest::ErrorStats;
using gputest::GpuOutputs;

// vs float64: the suite's forward tolerance (bf16 operands, fp32 accumulation and state).
constexpr double kTolRef = 1.5e-2;
// vs the plain forward: both round the state to bf16 for the tensor cores, at different points (the
// segmented state reaches a segment start through the fp32 fold E + M·h), a few 1e-3 relative.
constexpr double kTolPlain = 1e-2;

class SegmentedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DGPS_REQUIRE_GPU();
    const std::string dir = gputest::packageUnderTest();
    if (dir.empty()) GTEST_SKIP() << "no package: generated/ held no package when the build was configured";
    pkg_ = std::make_unique<Package>(Package::open(dir));
    ASSERT_FALSE(pkg_->manifest().launch.forward_segmented.empty())
        << pkg_->name() << " has no segmented state pass (launch.forward_segmented): recompile it with dgpsc compile";
    RuntimeOptions o;
    o.cache_dir = std::string(DGPS_GPU_CACHE_DIR);
    rt_ = std::make_unique<Runtime>(o);
  }

  // One problem: the plain forward, then the segmented one at each L, each against the plain and float64.
  void check(const ReferenceProblem& s, std::uint64_t seed, bool passWorkspace) {
    const ScalarType act = toScalarType(pkg_->spec().input_dtypes.front());
    const ReferenceInputs in = generateInputs(pkg_->spec(), s, seed, act);
    const ReferenceOutputs ref = runReference(pkg_->spec(), in);
    LaunchOptions plainOpt;
    plainOpt.segment_chunks = 0;
    const GpuOutputs plain = gputest::gpuForward(*rt_, *pkg_, in, nullptr, &plainOpt, passWorkspace);
    const ErrorStats ep = compare(plain.o, ref.o);
    EXPECT_TRUE(ep.finite && ep.rel <= kTolRef) << "plain o: " << ep.str();
    // two segments and one longer than the sequence, counted in chunks of every chunk length the package tunes:
    // a forced L runs at the runtime's wide configuration (chunk 32 where allowed), not the manifest default's
    const std::int64_t rows = s.seq_len * householderSteps(pkg_->spec());  // the kernels' row axis
    std::vector<std::int64_t> lengths{1, 3, 8};
    for (int C : pkg_->manifest().tunables.chunk) {
      const std::int64_t NT = (rows + C - 1) / C;
      for (std::int64_t L : {NT / 2 + 1, NT + 5})
        if (std::find(lengths.begin(), lengths.end(), L) == lengths.end()) lengths.push_back(L);
    }
    for (std::int64_t L : lengths) {
      SCOPED_TRACE("L=" + std::to_string(L) + " chunks per segment");
      LaunchOptions opt;
      opt.segment_chunks = L;
      const GpuOutputs seg = gputest::gpuForward(*rt_, *pkg_, in, nullptr, &opt, passWorkspace);
      const ErrorStats eo = compare(seg.o, ref.o), eop = compare(seg.o, plain.o);
      EXPECT_TRUE(eo.finite && eo.rel <= kTolRef) << "o vs float64: " << eo.str();
      EXPECT_TRUE(eop.finite && eop.rel <= kTolPlain) << "o vs plain: " << eop.str();
      if (ref.has_final_state) {
        ASSERT_TRUE(seg.has_final_state && plain.has_final_state);
        const ErrorStats es = compare(seg.final_state, ref.final_state), esp = compare(seg.final_state, plain.final_state);
        EXPECT_TRUE(es.finite && es.rel <= kTolRef) << "final_state vs float64: " << es.str();
        EXPECT_TRUE(esp.finite && esp.rel <= kTolPlain) << "final_state vs plain: " << esp.str();
      }
      if (ref.has_final_precond_state) {  // precond_scan's, launched first by the segmented forward too
        ASSERT_TRUE(seg.has_final_precond_state);
        const ErrorStats epr = compare(seg.final_precond_state, ref.final_precond_state);
        EXPECT_TRUE(epr.finite && epr.rel <= kTolRef) << "final_precond_state vs float64: " << epr.str();
      }
    }
  }

  ReferenceProblem shape(std::int64_t T, int KV) const {
    ReferenceProblem s;
    s.batch = 1;
    s.seq_len = T;
    s.heads_qk = pkg_->spec().heads_qk > 0 ? pkg_->spec().heads_qk : 2;
    s.heads_v = s.heads_qk * pkg_->spec().gva_ratio;
    s.key_dim = s.value_dim = KV;
    return s;
  }

  int dim() const {
    const Spec& sp = pkg_->spec();
    for (int d : {128, 64})
      if (std::count(sp.key_dims.begin(), sp.key_dims.end(), d) && std::count(sp.value_dims.begin(), sp.value_dims.end(), d))
        return d;
    return sp.key_dims.front();
  }

  std::unique_ptr<Package> pkg_;
  std::unique_ptr<Runtime> rt_;
};

TEST_F(SegmentedTest, SegmentedForwardMatchesPlainAndReferenceOnOneLongSequence) {
  check(shape(4096, dim()), 4100, false);
}

TEST_F(SegmentedTest, SegmentedForwardMatchesPlainAndReferenceOnAMixedVarlenBatch) {
  if (!pkg_->spec().varlen) GTEST_SKIP() << pkg_->name() << " takes no cu_seqlens";
  ReferenceProblem s = shape(0, dim());
  s.cu_seqlens = {0, 100, 3100, 3101, 3400, 3650};  // 100, 3000, 1, 299, 250 tokens
  s.seq_len = s.cu_seqlens.back();
  check(s, 4200, true);  // with a caller's workspace sized by forwardWorkspaceBytes (poisoned)
}

// A tuned record may pair any chunk of the package's tunables with a segment length (the tuner searches both), while
// the forced lengths above run at the runtime's wide configuration only (chunk 64 for a sequential preconditioner
// pass): here every tuned chunk runs the segmented pass explicitly, at the configuration that pairs two segment
// summaries per SM where the chunk allows it (128-column value tiles, two stages).
TEST_F(SegmentedTest, SegmentedForwardMatchesAtEveryTunedChunk) {
  const ScalarType act = toScalarType(pkg_->spec().input_dtypes.front());
  const ReferenceProblem s = shape(4096, dim());
  const ReferenceInputs in = generateInputs(pkg_->spec(), s, 4400, act);
  const ReferenceOutputs ref = runReference(pkg_->spec(), in);
  const std::int64_t rows = s.seq_len * householderSteps(pkg_->spec());
  const auto& tunables = pkg_->manifest().tunables;
  for (int C : tunables.chunk) {
    TileConfig c = pkg_->manifest().default_config;
    c.chunk = C;
    if (std::count(tunables.block_v.begin(), tunables.block_v.end(), 128)) c.block_v = 128;
    if (std::count(tunables.stages.begin(), tunables.stages.end(), 2)) c.stages = 2;
    const std::int64_t NT = (rows + C - 1) / C;
    SCOPED_TRACE("chunk " + std::to_string(C) + ", L=" + std::to_string(NT / 4 + 1) + " chunks per segment");
    LaunchOptions opt;
    opt.config = c;
    opt.segment_chunks = NT / 4 + 1;  // four segments, the last one shorter
    const GpuOutputs seg = gputest::gpuForward(*rt_, *pkg_, in, nullptr, &opt);
    const ErrorStats eo = compare(seg.o, ref.o);
    EXPECT_TRUE(eo.finite && eo.rel <= kTolRef) << "o vs float64: " << eo.str();
    if (ref.has_final_state) {
      ASSERT_TRUE(seg.has_final_state);
      const ErrorStats es = compare(seg.final_state, ref.final_state);
      EXPECT_TRUE(es.finite && es.rel <= kTolRef) << "final_state vs float64: " << es.str();
    }
    if (ref.has_final_precond_state) {
      ASSERT_TRUE(seg.has_final_precond_state);
      const ErrorStats epr = compare(seg.final_precond_state, ref.final_precond_state);
      EXPECT_TRUE(epr.finite && epr.rel <= kTolRef) << "final_precond_state vs float64: " << epr.str();
    }
  }
}

// The runtime's rule picks the segmented pass for one long sequence on few heads, and the plain pass for a
// short one; both match the reference (the rule's choice is what a caller without options gets).
TEST_F(SegmentedTest, TheRuleSegmentsOnlyLongUnderfilledSequences) {
  if (std::getenv("DGPS_SEGMENT_CHUNKS")) GTEST_SKIP() << "DGPS_SEGMENT_CHUNKS is set: it overrides the rule";
  const ScalarType act = toScalarType(pkg_->spec().input_dtypes.front());
  const TileConfig c = pkg_->manifest().default_config;
  // Long enough for the rule (segment::kMinSegmentedChunks chunks of the default length).
  const std::int64_t longT = segment::kMinSegmentedChunks * c.chunk;
  ReferenceProblem longShape = shape(longT, dim()), shortShape = shape(256, dim());
  const ReferenceInputs in = generateInputs(pkg_->spec(), longShape, 4300, act);
  ForwardProblem lp, sp;
  lp.batch = 1, lp.seq_len = longT, lp.num_seqs = 1, lp.heads_qk = longShape.heads_qk, lp.heads_v = longShape.heads_v;
  lp.key_dim = lp.value_dim = dim();
  lp.row_steps = householderSteps(pkg_->spec());
  sp = lp;
  sp.seq_len = 256;
  EXPECT_GT(rt_->segmentChunks(*pkg_, lp, c, LaunchOptions()), 0);
  EXPECT_EQ(rt_->segmentChunks(*pkg_, sp, c, LaunchOptions()), 0);
  const ReferenceOutputs ref = runReference(pkg_->spec(), in);
  const GpuOutputs got = gputest::gpuForward(*rt_, *pkg_, in);
  const ErrorStats eo = compare(got.o, ref.o);
  EXPECT_TRUE(eo.finite && eo.rel <= kTolRef) << "o: " << eo.str();
}

}  // namespace
}  // namespace dgps
