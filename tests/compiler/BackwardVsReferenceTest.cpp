// The derived chunkwise backward (--chunk-derive-backward, run by the float64 executor, flat and
// partitioned) against dsl's float64 token-by-token reference gradients (ReferenceGrad.h): every shipped
// spec, T in {1, 63, 64, 65, 200}, GVA (for hypergrad_ogd, which requires gva_ratio 1: timing post and a
// clamp instead), varlen with length-1 sequences, with and without initial states. Every gradient element:
// max |a − b| / max |b| <= 1e-9.
//
// Built as its own target (dgps_compiler_backward_ref_tests, tests/compiler/CMakeLists.txt) because it
// links dsl's runReferenceBackward.
#include <sstream>

#include "BackwardTestUtil.h"
#include "dgps/dsl/ReferenceGrad.h"

namespace dgps::test {
namespace {

constexpr double kTolerance = 1e-9;

void checkAgainstReference(Context& ctx, const Spec& spec, const ReferenceProblem& shape, bool initialStates,
                           bool partitioned) {
  const std::uint64_t seed = freshSeed();
  std::ostringstream what;
  what << spec.name << " T=" << shape.seq_len << " HV=" << shape.heads_v << " K=" << shape.key_dim
       << " V=" << shape.value_dim << (shape.cu_seqlens.empty() ? "" : " varlen")
       << (initialStates ? " with" : " without") << " initial states" << (partitioned ? " partitioned" : " flat")
       << " seed=" << seed;
  SCOPED_TRACE(what.str());
  Spec irSpec = spec;
  irSpec.key_dims = {16}, irSpec.value_dims = {16};
  mlir::OwningOpRef<mlir::ModuleOp> m = backwardModule(ctx, irSpec, partitioned);
  ASSERT_TRUE(m);
  InputGenOptions opts;
  opts.initial_state = initialStates;
  opts.initial_precond_state = initialStates;
  opts.float_dtype = ScalarType::F64;
  TensorMap inputs = generateInputs(spec, shape, seed, ScalarType::F64, opts);
  ExecutorResult fwd = executeChunkIR(*m, inputs);
  ASSERT_TRUE(fwd.ok) << fwd.error;
  TensorMap cot = randomCotangents(fwd.outputs, seed + 1);

  TensorMap expected = runReferenceBackward(spec, inputs, cot);
  ExecutorResult got = executeChunkBackward(*m, inputs, cot);
  ASSERT_TRUE(got.ok) << got.error;
  EXPECT_EQ(got.outputs.size(), expected.size()) << "different sets of gradients";
  for (const auto& [name, ref] : expected) {
    auto it = got.outputs.find(name);
    ASSERT_NE(it, got.outputs.end()) << "missing gradient " << name;
    EXPECT_LE(relativeError(it->second, ref), kTolerance) << name;
  }
}

ReferenceProblem shapeOf(int64_t B, int64_t T, int64_t HV, int64_t K, int64_t V) {
  ReferenceProblem p;
  p.batch = B, p.seq_len = T, p.heads_qk = 2, p.heads_v = HV, p.key_dim = K, p.value_dim = V;
  return p;
}

class BackwardVsReference : public ::testing::TestWithParam<std::string> {};

TEST_P(BackwardVsReference, EveryShape) {
  Context ctx;
  Spec spec = smallDimsSpec(loadSpec(GetParam()));
  for (int64_t T : {1, 63, 64, 65, 200})
    for (bool partitioned : {false, true}) {
      checkAgainstReference(ctx, spec, shapeOf(2, T, 2 * spec.gva_ratio, 8, 12), true, partitioned);
      if (HasFatalFailure()) return;
    }
  checkAgainstReference(ctx, spec, shapeOf(2, 130, 2 * spec.gva_ratio, 4, 8), false, false);
  ReferenceProblem varlen = shapeOf(1, 200, 2 * spec.gva_ratio, 8, 4);
  varlen.cu_seqlens = {0, 1, 64, 65, 130, 200};
  checkAgainstReference(ctx, spec, varlen, true, false);
  checkAgainstReference(ctx, spec, varlen, false, true);
  if (usesHypergrad(spec)) {
    // hypergrad_ogd requires gva_ratio 1; instead the other branches of its update: timing post and a
    // clamp narrow enough to bind on some tokens (the adjoint then stops the gradient there).
    spec.precond.hypergrad.timing = WriteTiming::Post;
    spec.precond.hypergrad.clamp_min = 0.9;
    spec.precond.hypergrad.clamp_max = 1.2;
    checkAgainstReference(ctx, spec, shapeOf(2, 65, 2, 4, 4), true, false);
    checkAgainstReference(ctx, spec, varlen, false, true);
    return;
  }
  spec.gva_ratio = 3;
  checkAgainstReference(ctx, spec, shapeOf(2, 65, 6, 4, 4), true, false);
}

INSTANTIATE_TEST_SUITE_P(ShippedSpecs, BackwardVsReference, ::testing::ValuesIn(derivedSpecPaths()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return std::filesystem::path(info.param).stem().string();
                         });

}  // namespace
}  // namespace dgps::test
