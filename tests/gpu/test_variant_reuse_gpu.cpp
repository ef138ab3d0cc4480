// The runtime's resolved-variant table on a real GPU (runtime/lib/VariantTable.h): one Runtime serving
// interleaved calls that differ in one key field at a time — input dtype, tile configuration, package instance
// (the same folder re-opened, and a GVA copy with the same kernel source but another spec) — must give every
// call the kernels of its own variant. Each call is checked against the float64 reference on fresh inputs.
// Also the warm-call memo (runtime/lib/CallMemo.h): calls of one shape on fresh buffers (new pointers, same
// metadata: every call after the first is a memo hit) must each read and write their own tensors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "GpuTestUtil.h"
#include "dgps/runtime/Error.h"

namespace dgps {
namespace {

using gputest::compare;

constexpr double kTolOut = 1.5e-2;  // bf16/f16 outputs against float64 (as the package suite)

struct Call {
  std::string what;
  const Package* pkg;
  ScalarType dtype;
  TileConfig config;
  ReferenceInputs inputs;
  ReferenceOutputs ref;
};

class VariantReuseGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DGPS_REQUIRE_GPU();
    const std::string dir = gputest::packageUnderTest();
    if (dir.empty()) GTEST_SKIP() << "no package: generated/ held no package when the build was configured";
    pkg_ = std::make_unique<Package>(Package::open(dir));
    if (!pkg_->manifest().has_forward) GTEST_SKIP() << pkg_->name() << " has no forward kernels";
    RuntimeOptions o;
    o.cache_dir = std::string(DGPS_GPU_CACHE_DIR);
    rt_ = std::make_unique<Runtime>(o);
  }

  ReferenceProblem shapeFor(const Package& p, std::int64_t ratio) const {
    ReferenceProblem s;
    s.batch = 2;
    s.seq_len = 130;  // two full chunks and a ragged tail at C=64
    s.heads_qk = p.spec().heads_qk > 0 ? p.spec().heads_qk : 2;
    s.heads_v = s.heads_qk * ratio;
    s.key_dim = p.spec().key_dims.front();
    s.value_dim = p.spec().value_dims.front();
    return s;
  }

  Call makeCall(const std::string& what, const Package& p, ScalarType dtype, const TileConfig& config,
                std::int64_t ratio, std::uint64_t seed) const {
    Call c{what, &p, dtype, config, generateInputs(p.spec(), shapeFor(p, ratio), seed, dtype), {}};
    c.ref = runReference(p.spec(), c.inputs);
    return c;
  }

  void run(const Call& c) {
    SCOPED_TRACE(c.what);
    LaunchOptions opts;
    opts.config = c.config;
    const gputest::GpuOutputs got = gputest::gpuForward(*rt_, *c.pkg, c.inputs, nullptr, &opts);
    const gputest::ErrorStats e = compare(got.o, c.ref.o);
    EXPECT_TRUE(e.finite && e.rel <= kTolOut) << "o: " << e.str();
  }

  std::unique_ptr<Package> pkg_;
  std::unique_ptr<Runtime> rt_;
};

TEST_F(VariantReuseGpuTest, InterleavedVariantsEachGetTheirOwnKernels) {
  const Manifest& m = pkg_->manifest();
  const std::int64_t own = pkg_->spec().gva_ratio;  // the package's own value heads per query/key head
  std::vector<Call> calls;
  std::uint64_t seed = 7100;
  for (DType dt : pkg_->spec().input_dtypes) {
    calls.push_back(makeCall(std::string("dtype ") + toString(dt), *pkg_, toScalarType(dt), m.default_config, own,
                             seed++));
  }
  const ScalarType first = toScalarType(pkg_->spec().input_dtypes.front());
  // Another tile configuration: a different chunk length (changes the kernels' loop bounds) and block_v.
  for (int chunk : m.tunables.chunk) {
    if (chunk == m.default_config.chunk) continue;
    TileConfig c = m.default_config;
    c.chunk = chunk;
    calls.push_back(makeCall("config " + toString(c), *pkg_, first, c, own, seed++));
    break;
  }
  for (int bv : m.tunables.block_v) {
    if (bv == m.default_config.block_v) continue;
    TileConfig c = m.default_config;
    c.block_v = bv;
    calls.push_back(makeCall("config " + toString(c), *pkg_, first, c, own, seed++));
    break;
  }
  // The same folder opened again: a new instance, resolved afresh, same results.
  const Package reopened = Package::open(pkg_->directory());
  ASSERT_NE(reopened.instanceId(), pkg_->instanceId());
  calls.push_back(makeCall("re-opened package", reopened, first, m.default_config, own, seed++));
  // A GVA copy: the same kernels.cu under another spec (HV = 2H), so the same binary-cache key but another
  // package instance and another problem.
  std::unique_ptr<Package> gva;
  if (!usesHypergrad(pkg_->spec())) {
    gva = std::make_unique<Package>(
        Package::open(gputest::writeGvaVariant(*pkg_, 2, gputest::tempDir() + "/" + pkg_->name())));
    calls.push_back(makeCall("gva_ratio 2 copy", *gva, first, m.default_config, 2, seed++));
  }
  ASSERT_GE(calls.size(), 3u);
  // Every call twice, interleaved, so each warm call follows a call of another variant.
  for (int round = 0; round < 2; ++round) {
    for (const Call& c : calls) run(c);
  }
}

TEST_F(VariantReuseGpuTest, WarmCallsOnFreshBuffersUseTheirOwnTensors) {
  const ScalarType dtype = toScalarType(pkg_->spec().input_dtypes.front());
  const ReferenceProblem s = shapeFor(*pkg_, pkg_->spec().gva_ratio);
  for (int i = 0; i < 4; ++i) {  // forward: fresh inputs and outputs each call, workspace internal then given
    SCOPED_TRACE("forward call " + std::to_string(i));
    const ReferenceInputs in = generateInputs(pkg_->spec(), s, 7300 + std::uint64_t(i), dtype);
    const ReferenceOutputs ref = runReference(pkg_->spec(), in);
    const gputest::GpuOutputs got = gputest::gpuForward(*rt_, *pkg_, in, nullptr, nullptr, i % 2 == 1);
    const gputest::ErrorStats e = compare(got.o, ref.o);
    EXPECT_TRUE(e.finite && e.rel <= kTolOut) << "o: " << e.str();
  }
  if (!pkg_->manifest().has_decode) return;
  ReferenceProblem d = s;
  d.batch = 3;
  d.seq_len = 1;
  for (int i = 0; i < 4; ++i) {  // decode: one token, fresh buffers and states each call
    SCOPED_TRACE("decode call " + std::to_string(i));
    const ReferenceInputs in = generateInputs(pkg_->spec(), d, 7400 + std::uint64_t(i), dtype);
    const ReferenceOutputs ref = runReference(pkg_->spec(), in);
    const gputest::GpuOutputs got = gputest::gpuDecode(*rt_, *pkg_, in);
    const gputest::ErrorStats eo = compare(got.o, ref.o);
    EXPECT_TRUE(eo.finite && eo.rel <= 1e-2) << "o: " << eo.str();
    if (ref.has_final_state) {
      const gputest::ErrorStats es = compare(got.final_state, ref.final_state);
      EXPECT_TRUE(es.finite && es.rel <= 1e-4) << "state: " << es.str();
    }
  }
}

}  // namespace
}  // namespace dgps
