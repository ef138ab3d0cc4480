// K = V = 120 (the KDA-1B / PKDA-1B head dim), which specs/kda.yaml and specs/pkda.yaml offer: the tuner's
// pruning must leave candidates (the kernels mask the last value tile, launch_rules.h valueTile), and each
// distinct value tile among them must NVRTC-compile for sm_90a without spills or local memory. No GPU needed;
// the GPU side (timing and correctness at K = V = 120) is tests/gpu (gpu.kda, gpu.pkda) and dgps-tune.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "TuneTestUtil.h"
#include "dgps/runtime/Jit.h"
#include "dgps/runtime/Runtime.h"
#include "dgps/runtime/tune/TuneJob.h"

namespace dgps {
namespace {

tuning::DeviceFingerprint h200(const Package& pkg) {
  tuning::DeviceFingerprint f;
  f.name = "NVIDIA H200";
  f.compute_capability = "9.0a";
  f.sm_count = 132;
  f.codegen_version = tune::codegenIdentity(pkg);
  f.smem_per_block_optin = 232448;
  f.smem_per_sm = 233472;
  f.regs_per_sm = 65536;
  f.max_threads_per_block = 1024;
  return f;
}

ForwardProblem problem120() {
  ForwardProblem p;
  p.batch = p.num_seqs = 8;
  p.seq_len = 4096;
  p.heads_qk = p.heads_v = 16;
  p.key_dim = p.value_dim = 120;
  p.input_dtype = ScalarType::BF16;
  p.scale = float(1.0 / std::sqrt(120.0));
  return p;
}

class ValueDim120 : public ::testing::TestWithParam<std::string> {};

TEST_P(ValueDim120, TunerKeepsCandidatesThatCompile) {
  const std::string dir = tunetest::shippedPackage(GetParam());
  if (dir.empty()) GTEST_SKIP() << "generated/" << GetParam() << " is absent";
  const Package pkg = Package::open(dir);
  const auto& dims = pkg.spec().value_dims;
  ASSERT_NE(std::find(dims.begin(), dims.end(), 120), dims.end()) << GetParam() << " no longer offers V = 120";

  const tuning::CandidateSet set = tune::forwardCandidates(pkg, tune::tuningShape(problem120()), h200(pkg));
  std::string pruned;
  for (const auto& p : set.pruned) pruned += "\n  " + toString(p.config) + ": " + p.reason;
  ASSERT_FALSE(set.kept.empty()) << "every candidate pruned at K = V = 120:" << pruned;
  // Every block_v of the manifest at or below 128 (= V rounded up to 16) is a distinct kernel and must survive.
  std::set<int> keptBlockV;
  for (const auto& c : set.kept) keptBlockV.insert(c.block_v);
  for (int bv : pkg.manifest().tunables.block_v)
    if (bv <= 128) EXPECT_TRUE(keptBlockV.count(bv)) << "block_v " << bv << " pruned:" << pruned;

  // One NVRTC compile per distinct block_v (the value-tile masking is what V = 120 changes).
  const JitCompiler jit;  // the cache of $DGPS_CACHE_DIR (the test's private folder)
  const JitTarget target = parseJitTarget("sm_90a");
  std::set<int> compiled;
  for (const auto& c : set.kept) {
    if (!compiled.insert(c.block_v).second) continue;
    TileConfig config = pkg.manifest().default_config;
    config.chunk = c.chunk, config.block_v = c.block_v, config.warps = c.warps, config.stages = c.stages;
    SCOPED_TRACE(GetParam() + " K=V=120 " + toString(config));
    JitBinary bin;
    ASSERT_NO_THROW(bin = jit.compile(variantRequest(pkg, 120, 120, ScalarType::BF16, config, target)));
    for (const std::string& sym : pkg.manifest().forward_symbols) {
      auto it = std::find_if(bin.usage.begin(), bin.usage.end(),
                             [&](const KernelResourceUsage& u) { return u.name == sym; });
      ASSERT_NE(it, bin.usage.end()) << sym << " is not in ptxas' report";
      EXPECT_FALSE(it->spills()) << sym << ": stack " << it->stack_frame_bytes << " B, spill stores "
                                 << it->spill_store_bytes << " B";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shipped, ValueDim120, ::testing::Values("kda", "pkda"));

}  // namespace
}  // namespace dgps
