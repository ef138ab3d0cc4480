// Several Householder steps per token (solve.steps = n_h, Gated DeltaProduct, docs/math.md §3.7) through
// the chunk IR: after every pass the float64 executor matches the token-by-token reference for n_h in
// {1, 2, 3}, every decay kind, partial chunks (chunk boundaries inside a token), varlen and GVA; n_h = 1
// lowers to exactly GDN's IR; the executor refuses step rows that do not match the tokens.
#include <sstream>

#include "CompilerTestUtil.h"
#include "dgps/Executor/Executor.h"
#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Reference.h"

namespace dgps::test {
namespace {

constexpr double kTolerance = 1e-10;

Spec gdpSpec(int steps, DecayKind decay) {
  Spec s = loadSpec(std::string(DGPS_SPECS_DIR) + "/gated_deltaproduct.yaml");
  s.solve.steps = steps;
  s.decay.kind = decay;
  s.key_dims = {16, 20};
  s.value_dims = {16, 24};
  return s;
}

ReferenceProblem shapeOf(int64_t B, int64_t T, int64_t H, int64_t HV, int64_t K, int64_t V, std::vector<int64_t> cu = {}) {
  ReferenceProblem p;
  p.batch = B, p.seq_len = T, p.heads_qk = H, p.heads_v = HV, p.key_dim = K, p.value_dim = V;
  p.cu_seqlens = std::move(cu);
  return p;
}

/// Every snapshot of the pipeline against the reference, outputs poisoned-checked (non-zero o).
void expectAllStagesMatch(const Spec& spec, const ReferenceProblem& shape, std::optional<int64_t> chunk = {}) {
  Context c;
  std::vector<Snapshot> snaps = snapshots(c, spec);
  const uint64_t seed = freshSeed();
  ReferenceInputs inputs = generateInputs(spec, shape, seed, ScalarType::F64);
  const TensorMap expected = runReference(spec, inputs).toMap();
  double norm = 0;
  for (double x : expected.at("o").toDoubles()) norm = std::max(norm, std::fabs(x));
  ASSERT_GT(norm, 1e-3) << "an all-zero reference output makes the comparison vacuous";
  ExecutorOptions eo;
  eo.chunkSize = chunk;
  for (const Snapshot& s : snaps) {
    SCOPED_TRACE("stage " + s.stage + " seed=" + std::to_string(seed) + " steps=" + std::to_string(spec.solve.steps) +
                 " decay=" + toString(spec.decay.kind) + " T=" + std::to_string(shape.seq_len) +
                 (chunk ? " C=" + std::to_string(*chunk) : ""));
    mlir::OwningOpRef<mlir::ModuleOp> m = executable(c, s);
    ExecutorResult r = executeChunkIR(*m, inputs, eo);
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.outputs.size(), expected.size());
    for (const auto& [name, ref] : expected) {
      auto it = r.outputs.find(name);
      ASSERT_NE(it, r.outputs.end()) << "missing output " << name;
      EXPECT_LE(relativeError(it->second, ref), kTolerance) << name;
    }
  }
}

TEST(DeltaProductExecutor, MatchesTheReferenceForOneTwoAndThreeSteps) {
  for (int steps : {1, 2, 3})
    for (DecayKind decay : {DecayKind::Scalar, DecayKind::None, DecayKind::Diagonal}) {
      const Spec spec = gdpSpec(steps, decay);
      // T·n_h = 2·21..3·21 steps: chunks of 16 end inside tokens and the last chunk is partial.
      expectAllStagesMatch(spec, shapeOf(2, 21, 2, 2, 20, 16), 16);
      if (HasFatalFailure()) return;
    }
}

TEST(DeltaProductExecutor, VarlenCountsTokensNotSteps) {
  for (int steps : {2, 3}) {
    const Spec spec = gdpSpec(steps, DecayKind::Scalar);
    // lengths 1, 0, 22, 9 and padding rows 32..39; with chunk 16 a sequence's chunks start at its first step
    expectAllStagesMatch(spec, shapeOf(1, 40, 1, 1, 16, 24, {0, 1, 1, 23, 32}), 16);
    expectAllStagesMatch(spec, shapeOf(1, 40, 1, 1, 16, 24, {0, 1, 1, 23, 32}));  // the spec's chunk (64)
    if (HasFatalFailure()) return;
  }
}

TEST(DeltaProductExecutor, GroupedValueHeads) {
  Spec spec = gdpSpec(3, DecayKind::Scalar);
  spec.gva_ratio = 2;
  expectAllStagesMatch(spec, shapeOf(1, 11, 2, 4, 16, 16), 32);
}

/// The IR after lowering and canonicalisation, printed.
std::string loweredText(Context& c, const Spec& spec) {
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, spec);
  EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, mlir::createCanonicalizerPass())));
  EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createLowerToChunk())));
  EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, mlir::createCanonicalizerPass())));
  std::string text;
  llvm::raw_string_ostream os(text);
  m->print(os, mlir::OpPrintingFlags().printGenericOpForm(false));
  return text;
}

TEST(DeltaProductExecutor, OneStepLowersToExactlyGdn) {
  Context c;
  Spec gdp = loadSpec(std::string(DGPS_SPECS_DIR) + "/gated_deltaproduct.yaml");
  Spec gdn = loadSpec(std::string(DGPS_SPECS_DIR) + "/gdn.yaml");
  gdp.solve.steps = 1;
  gdp.name = gdn.name;  // the function name and location are the only other differences
  gdp.description = gdn.description;
  gdp.kernels = gdn.kernels;
  gdp.loc = gdn.loc;
  gdp.decay.loc = gdn.decay.loc, gdp.gain.loc = gdn.gain.loc, gdp.precond.loc = gdn.precond.loc, gdp.solve.loc = gdn.solve.loc;
  const std::string a = loweredText(c, gdp), b = loweredText(c, gdn);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.find("_steps"), std::string::npos);
  Spec two = gdp;
  two.solve.steps = 2;
  const std::string t = loweredText(c, two);
  EXPECT_NE(t.find("chunk.spread_steps"), std::string::npos) << t;
  EXPECT_NE(t.find("chunk.gather_steps"), std::string::npos) << t;
}

TEST(DeltaProductExecutor, StepRowsThatDoNotMatchTheTokensAreOneError) {
  Context c;
  const Spec spec = gdpSpec(2, DecayKind::Scalar);
  std::vector<Snapshot> snaps = snapshots(c, spec);
  ReferenceInputs inputs = generateInputs(spec, shapeOf(1, 6, 1, 1, 16, 16), freshSeed(), ScalarType::F32);
  inputs["v"] = Tensor(ScalarType::F32, {1, 6, 1, 16});  // T rows where T·2 are needed
  ExecutorResult r = executeChunkIR(*snaps.back().module, inputs);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("input v"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("6·2 = 12"), std::string::npos) << r.error;
  inputs = generateInputs(spec, shapeOf(1, 6, 1, 1, 16, 16), freshSeed(), ScalarType::F32);
  inputs["k"] = Tensor(ScalarType::F32, {1, 6, 1, 16});
  r = executeChunkIR(*snaps.back().module, inputs);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("'k'"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace dgps::test
