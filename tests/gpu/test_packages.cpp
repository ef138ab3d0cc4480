// GPU correctness of one generated package ($DGPS_GPU_PACKAGE) against the float64 reference
// (runReference): forward over T in {1, 63, 64, 65, 1000, 4096} for every input dtype and K = V in
// {64, 128} (and 120 where the spec has it) with initial and final states; GVA; varlen with a length-1
// sequence; varlen in a padded token buffer (zeros past cu_seqlens[N]); decode; forward over T then one decode step == forward over T+1. Outputs are poisoned with
// NaN before every run, inputs are fresh random draws (InputGen.h). Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>

#include "GpuTestUtil.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Error.h"

namespace dgps {
namespace {

using gputest::compare;
using gputest::ErrorStats;
using gputest::GpuOutputs;

// Tolerances of the relative Frobenius error (bf16/fp16 operands, fp32 accumulation and state).
constexpr double kTolOut = 1.5e-2;
constexpr double kTolState = 1.5e-2;
constexpr double kTolPrecond = 1e-3;
constexpr double kTolDecodeOut = 1e-2;
constexpr double kTolDecodeState = 1e-4;

class PackageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DGPS_REQUIRE_GPU();
    dir_ = gputest::packageUnderTest();
    if (dir_.empty()) GTEST_SKIP() << "no package: generated/ held no package when the build was configured";
    pkg_ = std::make_unique<Package>(Package::open(dir_));
    RuntimeOptions o;
    o.cache_dir = std::string(DGPS_GPU_CACHE_DIR);
    rt_ = std::make_unique<Runtime>(o);
  }

  std::vector<int> squareDims() const {
    std::vector<int> out;
    const Spec& s = pkg_->spec();
    for (int d : {64, 120, 128}) {
      if (std::count(s.key_dims.begin(), s.key_dims.end(), d) && std::count(s.value_dims.begin(), s.value_dims.end(), d))
        out.push_back(d);
    }
    return out;
  }

  ReferenceProblem shape(std::int64_t B, std::int64_t T, int KV, int H = 2) const {
    ReferenceProblem s;
    s.batch = B;
    s.seq_len = T;
    s.heads_qk = pkg_->spec().heads_qk > 0 ? pkg_->spec().heads_qk : H;
    s.heads_v = s.heads_qk * pkg_->spec().gva_ratio;
    s.key_dim = s.value_dim = KV;
    return s;
  }

  // Runs forward on the GPU and checks every output against the reference.
  void checkForward(const Package& pkg, const ReferenceProblem& shape, ScalarType act, std::uint64_t seed,
                    const InputGenOptions& gen = {}) {
    SCOPED_TRACE(pkg.name() + " " + toString(act) + " B=" + std::to_string(shape.batch) + " T=" +
                 std::to_string(shape.seq_len) + " H=" + std::to_string(shape.heads_qk) + " HV=" +
                 std::to_string(shape.heads_v) + " K=V=" + std::to_string(shape.key_dim) +
                 (shape.cu_seqlens.empty() ? "" : " varlen N=" + std::to_string(shape.numSeqs())));
    ReferenceInputs in = generateInputs(pkg.spec(), shape, seed, act, gen);
    ReferenceOutputs ref = runReference(pkg.spec(), in);
    GpuOutputs got = gputest::gpuForward(*rt_, pkg, in);
    ErrorStats eo = compare(got.o, ref.o);
    EXPECT_TRUE(eo.finite && eo.rel <= kTolOut) << "o: " << eo.str();
    if (ref.has_final_state) {
      ASSERT_TRUE(got.has_final_state);
      ErrorStats es = compare(got.final_state, ref.final_state);
      EXPECT_TRUE(es.finite && es.rel <= kTolState) << "final_state: " << es.str();
    }
    if (ref.has_final_precond_state) {
      ASSERT_TRUE(got.has_final_precond_state);
      ErrorStats ep = compare(got.final_precond_state, ref.final_precond_state);
      EXPECT_TRUE(ep.finite && ep.rel <= kTolPrecond) << "final_precond_state: " << ep.str();
    }
  }

  std::string dir_;
  std::unique_ptr<Package> pkg_;
  std::unique_ptr<Runtime> rt_;
};

TEST_F(PackageTest, ForwardMatchesReferenceAcrossLengthsDtypesAndDims) {
  if (!pkg_->manifest().has_forward) GTEST_SKIP() << pkg_->name() << " has no forward kernels";
  std::uint64_t seed = 1000;
  for (DType dt : pkg_->spec().input_dtypes) {
    for (int kv : squareDims()) {
      for (std::int64_t T : {1, 63, 64, 65, 1000, 4096}) {
        checkForward(*pkg_, shape(T >= 1000 ? 1 : 2, T, kv), toScalarType(dt), seed++);
      }
    }
  }
}

TEST_F(PackageTest, ForwardWithoutInitialStates) {
  if (!pkg_->manifest().has_forward) GTEST_SKIP() << pkg_->name() << " has no forward kernels";
  InputGenOptions gen;
  gen.initial_state = false;
  gen.initial_precond_state = false;
  checkForward(*pkg_, shape(2, 130, squareDims().front()), toScalarType(pkg_->spec().input_dtypes.front()), 77, gen);
}

TEST_F(PackageTest, GroupedValueHeads) {
  if (!pkg_->manifest().has_forward) GTEST_SKIP() << pkg_->name() << " has no forward kernels";
  if (usesHypergrad(pkg_->spec())) GTEST_SKIP() << "hypergrad_ogd needs one gain per key head (gva_ratio 1)";
  for (int ratio : {2, 3}) {
    std::string dir = gputest::writeGvaVariant(*pkg_, ratio, gputest::tempDir() + "/" + pkg_->name());
    Package gva = Package::open(dir);
    ReferenceProblem s = shape(1, 200, squareDims().front(), 2);
    s.heads_v = s.heads_qk * ratio;
    checkForward(gva, s, toScalarType(gva.spec().input_dtypes.front()), 500 + ratio);
  }
}

TEST_F(PackageTest, VarlenWithALengthOneSequence) {
  if (!pkg_->manifest().has_forward || !pkg_->spec().varlen) GTEST_SKIP() << pkg_->name() << " takes no cu_seqlens";
  for (DType dt : pkg_->spec().input_dtypes) {
    ReferenceProblem s = shape(1, 0, squareDims().back());
    s.cu_seqlens = {0, 1, 64, 128, 193, 393, 394};  // lengths 1, 63, 64, 65, 200, 1
    s.seq_len = s.cu_seqlens.back();
    checkForward(*pkg_, s, toScalarType(dt), 900);
  }
}

// A varlen token buffer longer than its sequences (T = 4096, cu_seqlens = [0, 1500, 3000]): rows t >= cu[N]
// of o belong to no sequence and must read back as exactly 0 (o is NaN-poisoned first), with the sequences'
// rows and states matching the float64 reference. Runs the default configuration and every tunable chunk
// length, because the tail rows are zeroed per chunk slot.
TEST_F(PackageTest, VarlenPaddedTokenBufferWritesZerosPastTheLastSequence) {
  if (!pkg_->manifest().has_forward || !pkg_->spec().varlen) GTEST_SKIP() << pkg_->name() << " takes no cu_seqlens";
  ReferenceProblem s = shape(1, 4096, squareDims().back());
  s.cu_seqlens = {0, 1500, 3000};
  const std::int64_t end = s.cu_seqlens.back();
  const ScalarType act = toScalarType(pkg_->spec().input_dtypes.front());
  const ReferenceInputs in = generateInputs(pkg_->spec(), s, 4242, act);
  const ReferenceOutputs ref = runReference(pkg_->spec(), in);
  std::vector<TileConfig> configs = {pkg_->manifest().default_config};
  for (int chunk : pkg_->manifest().tunables.chunk) {
    TileConfig c = pkg_->manifest().default_config;
    c.chunk = chunk;
    if (std::find(configs.begin(), configs.end(), c) == configs.end()) configs.push_back(c);
  }
  const std::int64_t rowElems = s.heads_v * s.value_dim;
  for (const TileConfig& config : configs) {
    SCOPED_TRACE(toString(config));
    LaunchOptions opts;
    opts.config = config;
    const GpuOutputs got = gputest::gpuForward(*rt_, *pkg_, in, nullptr, &opts);
    ASSERT_EQ(got.o.shape(), ref.o.shape());
    std::int64_t nonZeroTail = 0;
    for (std::int64_t i = end * rowElems; i < got.o.numel(); ++i) nonZeroTail += got.o.get(i) != 0.0;  // NaN counts
    EXPECT_EQ(nonZeroTail, 0) << "of " << (s.seq_len - end) * rowElems << " values in rows " << end << ".."
                              << s.seq_len - 1 << " of o are not 0";
    const std::vector<std::uint8_t>& gb = got.o.bytes();
    const std::vector<std::uint8_t>& rb = ref.o.bytes();
    const std::size_t gRow = gb.size() / std::size_t(s.seq_len), rRow = rb.size() / std::size_t(s.seq_len);
    const Tensor gotSeq = Tensor::fromBytes(got.o.dtype(), {1, end, s.heads_v, s.value_dim},
                                            std::vector<std::uint8_t>(gb.begin(), gb.begin() + gRow * end));
    const Tensor refSeq = Tensor::fromBytes(ref.o.dtype(), {1, end, s.heads_v, s.value_dim},
                                            std::vector<std::uint8_t>(rb.begin(), rb.begin() + rRow * end));
    const ErrorStats eo = compare(gotSeq, refSeq);
    EXPECT_TRUE(eo.finite && eo.rel <= kTolOut) << "o rows 0.." << end - 1 << ": " << eo.str();
    if (ref.has_final_state) {
      ASSERT_TRUE(got.has_final_state);
      const ErrorStats es = compare(got.final_state, ref.final_state);
      EXPECT_TRUE(es.finite && es.rel <= kTolState) << "final_state: " << es.str();
    }
    if (ref.has_final_precond_state) {
      ASSERT_TRUE(got.has_final_precond_state);
      const ErrorStats ep = compare(got.final_precond_state, ref.final_precond_state);
      EXPECT_TRUE(ep.finite && ep.rel <= kTolPrecond) << "final_precond_state: " << ep.str();
    }
  }
}

TEST_F(PackageTest, DecodeMatchesReference) {
  if (!pkg_->manifest().has_decode) GTEST_SKIP() << pkg_->name() << " has no decode kernel";
  std::uint64_t seed = 2000;
  for (DType dt : pkg_->spec().input_dtypes) {
    for (int kv : squareDims()) {
      SCOPED_TRACE(std::string(toString(dt)) + " K=V=" + std::to_string(kv));
      ReferenceProblem s = shape(3, 1, kv);
      ReferenceInputs in = generateInputs(pkg_->spec(), s, seed++, toScalarType(dt));
      ReferenceOutputs ref = runReference(pkg_->spec(), in);
      GpuOutputs got = gputest::gpuDecode(*rt_, *pkg_, in);
      ErrorStats eo = compare(got.o, ref.o);
      EXPECT_TRUE(eo.finite && eo.rel <= kTolDecodeOut) << "o: " << eo.str();
      if (ref.has_final_state) {
        ErrorStats es = compare(got.final_state, ref.final_state);
        EXPECT_TRUE(es.finite && es.rel <= kTolDecodeState) << "state: " << es.str();
      }
      if (ref.has_final_precond_state) {
        ErrorStats ep = compare(got.final_precond_state, ref.final_precond_state);
        EXPECT_TRUE(ep.finite && ep.rel <= kTolDecodeState) << "precond_state: " << ep.str();
      }
    }
  }
}

// Prefill T tokens with the chunked forward, then one decode step, equals the forward over T+1 tokens.
TEST_F(PackageTest, ForwardThenDecodeEqualsForwardOverOneMoreToken) {
  const Spec& spec = pkg_->spec();
  if (!pkg_->manifest().has_forward || !pkg_->manifest().has_decode) GTEST_SKIP() << "needs forward and decode";
  if (!spec.final_state || (hasPrecond(spec) && !spec.final_precond_state)) {
    GTEST_SKIP() << "the forward does not return the states decode would continue from";
  }
  for (DType dt : spec.input_dtypes) {
    for (std::int64_t T : {64, 130}) {
      SCOPED_TRACE(std::string(toString(dt)) + " T=" + std::to_string(T));
      const int kv = squareDims().back();
      ReferenceProblem full = shape(2, T + 1, kv);
      ReferenceInputs in = generateInputs(spec, full, 3000 + T, toScalarType(dt));
      GpuOutputs whole = gputest::gpuForward(*rt_, *pkg_, in);
      ReferenceOutputs ref = runReference(spec, in);

      const std::int64_t steps = householderSteps(spec);  // k, v and beta rows per token
      GpuOutputs prefix = gputest::gpuForward(*rt_, *pkg_, gputest::sliceTokens(in, 0, T, steps));
      ReferenceInputs step = gputest::sliceTokens(in, T, T + 1, steps);
      step.erase("initial_state");
      step.erase("initial_precond_state");
      step.emplace("initial_state", prefix.final_state);
      if (prefix.has_final_precond_state) step.emplace("initial_precond_state", prefix.final_precond_state);
      GpuOutputs last = gputest::gpuDecode(*rt_, *pkg_, step);

      Tensor whole_last = gputest::sliceTokens(ReferenceInputs{{"o", whole.o}}, T, T + 1).at("o");
      Tensor ref_last = gputest::sliceTokens(ReferenceInputs{{"o", ref.o}}, T, T + 1).at("o");
      ErrorStats e1 = compare(last.o, whole_last);
      ErrorStats e2 = compare(last.o, ref_last);
      EXPECT_TRUE(e1.finite && e1.rel <= kTolOut) << "decode o vs forward(T+1) o: " << e1.str();
      EXPECT_TRUE(e2.finite && e2.rel <= kTolOut) << "decode o vs reference: " << e2.str();
      ErrorStats es = compare(last.final_state, whole.final_state);
      EXPECT_TRUE(es.finite && es.rel <= kTolState) << "state after decode vs forward(T+1): " << es.str();
      if (last.has_final_precond_state) {
        ErrorStats ep = compare(last.final_precond_state, whole.final_precond_state);
        EXPECT_TRUE(ep.finite && ep.rel <= kTolPrecond) << "precond state: " << ep.str();
      }
    }
  }
}

TEST_F(PackageTest, EveryTunableConfigIsCorrectAndSpillFree) {
  if (!pkg_->manifest().has_forward) GTEST_SKIP() << pkg_->name() << " has no forward kernels";
  const Manifest& m = pkg_->manifest();
  const ScalarType act = toScalarType(pkg_->spec().input_dtypes.front());
  // The largest head dim, and 120 where the spec offers it (KDA-1B / PKDA-1B): a masked last value tile for
  // every block_v that does not divide it, and block_v 128 > V (launch_rules.h valueTile).
  std::vector<int> dims = {squareDims().back()};
  const std::vector<int> offered = squareDims();
  if (std::count(offered.begin(), offered.end(), 120) && dims.front() != 120) dims.push_back(120);
  for (int kv : dims) {
    SCOPED_TRACE("K=V=" + std::to_string(kv));
    ReferenceProblem s = shape(1, 333, kv);
    ReferenceInputs in = generateInputs(pkg_->spec(), s, 4242, act);
    ReferenceOutputs ref = runReference(pkg_->spec(), in);
    for (int c : m.tunables.chunk)
      for (int b : m.tunables.block_v)
        for (int w : m.tunables.warps)
          for (int st : m.tunables.stages) {
            TileConfig cfg{c, b, w, st};
            SCOPED_TRACE(toString(cfg));
            VariantInfo info = rt_->prepare(*pkg_, kv, kv, act, cfg, 0);
            for (const auto& k : info.kernels) EXPECT_EQ(k.local_bytes, 0) << k.symbol << " uses local memory (docs/math.md §7.5)";
            LaunchOptions opts;
            opts.config = cfg;
            GpuOutputs got = gputest::gpuForward(*rt_, *pkg_, in, nullptr, &opts, /*pass_workspace=*/true);
            ErrorStats eo = compare(got.o, ref.o);
            EXPECT_TRUE(eo.finite && eo.rel <= kTolOut) << "o: " << eo.str();
          }
  }
}

}  // namespace
}  // namespace dgps
