// The chunk IR after every pass, run by the float64 executor, against dsl's token-by-token reference:
// every shipped spec, T in {1, 63, 64, 65, 200}, K and V in {16, 20, 64}, GVA, with and without initial
// states, varlen with length-1 sequences, chunk sizes 16/32/64. Relative error <= 1e-10.
#include <sstream>

#include "CompilerTestUtil.h"
#include "dgps/Executor/Executor.h"
#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Reference.h"

namespace dgps::test {
namespace {

constexpr double kTolerance = 1e-10;

/// The shipped spec with every head dim of the grid allowed and varlen on (the chunk IR does not
/// depend on either; the reference checks shapes against them).
Spec gridSpec(Spec s) {
  s.key_dims = {16, 20, 64};
  s.value_dims = {16, 20, 64};
  s.varlen = true;
  return s;
}

std::string describe(const ReferenceProblem& p, const std::string& stage) {
  std::ostringstream os;
  os << "stage " << stage << ": B=" << p.batch << " T=" << p.seq_len << " H=" << p.heads_qk << " HV=" << p.heads_v
     << " K=" << p.key_dim << " V=" << p.value_dim;
  if (!p.cu_seqlens.empty()) {
    os << " cu_seqlens=[";
    for (size_t i = 0; i < p.cu_seqlens.size(); ++i) os << (i ? "," : "") << p.cu_seqlens[i];
    os << "]";
  }
  return os.str();
}

/// Runs every snapshot on the inputs and compares every output with the reference.
void checkAllStages(Context& c, const std::vector<Snapshot>& snaps, const Spec& spec, const ReferenceProblem& shape,
                    bool initialStates, std::optional<int64_t> chunk = {}) {
  const std::uint64_t seed = freshSeed();
  InputGenOptions opts;
  opts.initial_state = initialStates;
  opts.initial_precond_state = initialStates;
  ReferenceInputs inputs = generateInputs(spec, shape, seed, ScalarType::F64, opts);
  TensorMap expected = runReference(spec, inputs).toMap();
  ExecutorOptions eo;
  eo.chunkSize = chunk;
  for (const Snapshot& s : snaps) {
    SCOPED_TRACE(describe(shape, s.stage) + " seed=" + std::to_string(seed) +
                 (chunk ? " C=" + std::to_string(*chunk) : ""));
    mlir::OwningOpRef<mlir::ModuleOp> m = executable(c, s);
    ExecutorResult r = executeChunkIR(*m, inputs, eo);
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.outputs.size(), expected.size()) << "the IR stores other outputs than the reference produces";
    for (const auto& [name, ref] : expected) {
      auto it = r.outputs.find(name);
      ASSERT_NE(it, r.outputs.end()) << "missing output " << name;
      EXPECT_LE(relativeError(it->second, ref), kTolerance) << name;
    }
  }
}

class ExecutorVsReference : public ::testing::TestWithParam<std::string> {};

TEST_P(ExecutorVsReference, EveryPassEveryShape) {
  Context c;
  const Spec spec = gridSpec(loadSpec(GetParam()));
  SCOPED_TRACE(spec.name);
  std::vector<Snapshot> snaps = snapshots(c, spec);
  ASSERT_EQ(snaps.size(), 7u);  // import and the six steps of dgpsc's pipeline (CompilerTestUtil.h snapshots)
  for (int64_t T : {1, 63, 64, 65, 200})
    for (int64_t K : {16, 64, 20})
      for (int64_t V : {16, 64, 20}) {
        ReferenceProblem p;
        p.batch = 2, p.seq_len = T, p.heads_qk = 2, p.heads_v = 2 * spec.gva_ratio, p.key_dim = K, p.value_dim = V;
        checkAllStages(c, snaps, spec, p, /*initialStates=*/true);
        if (HasFatalFailure()) return;
      }
}

TEST_P(ExecutorVsReference, NoInitialStates) {
  Context c;
  const Spec spec = gridSpec(loadSpec(GetParam()));
  std::vector<Snapshot> snaps = snapshots(c, spec);
  ReferenceProblem p;
  p.batch = 2, p.seq_len = 130, p.heads_qk = 1, p.heads_v = spec.gva_ratio, p.key_dim = 20, p.value_dim = 16;
  checkAllStages(c, snaps, spec, p, /*initialStates=*/false);
}

TEST_P(ExecutorVsReference, VarlenWithLengthOneSequences) {
  Context c;
  const Spec spec = gridSpec(loadSpec(GetParam()));
  std::vector<Snapshot> snaps = snapshots(c, spec);
  ReferenceProblem p;
  p.batch = 1, p.seq_len = 200, p.heads_qk = 2, p.heads_v = 2 * spec.gva_ratio, p.key_dim = 20, p.value_dim = 64;
  p.cu_seqlens = {0, 1, 64, 65, 130, 200};  // lengths 1, 63, 1, 65, 70
  checkAllStages(c, snaps, spec, p, /*initialStates=*/true);
  checkAllStages(c, snaps, spec, p, /*initialStates=*/false);
}

TEST_P(ExecutorVsReference, VarlenPaddedTokenBuffer) {
  Context c;
  const Spec spec = gridSpec(loadSpec(GetParam()));
  std::vector<Snapshot> snaps = snapshots(c, spec);
  ReferenceProblem p;
  p.batch = 1, p.seq_len = 200, p.heads_qk = 2, p.heads_v = 2 * spec.gva_ratio, p.key_dim = 20, p.value_dim = 16;
  p.cu_seqlens = {0, 70, 131};  // rows 131..199 belong to no sequence: the reference's o is 0 there
  checkAllStages(c, snaps, spec, p, /*initialStates=*/true);
}

TEST_P(ExecutorVsReference, GroupedValueHeads) {
  Context c;
  Spec spec = gridSpec(loadSpec(GetParam()));
  // hypergrad_ogd needs one gain per key head (Reference.h), so OSDN runs without GVA.
  if (!usesHypergrad(spec)) spec.gva_ratio = 4;
  std::vector<Snapshot> snaps = snapshots(c, spec);
  ReferenceProblem p;
  p.batch = 2, p.seq_len = 65, p.heads_qk = 2, p.heads_v = 2 * spec.gva_ratio, p.key_dim = 16, p.value_dim = 20;
  checkAllStages(c, snaps, spec, p, /*initialStates=*/true);
}

TEST_P(ExecutorVsReference, OtherChunkSizes) {
  Context c;
  const Spec spec = gridSpec(loadSpec(GetParam()));
  std::vector<Snapshot> snaps = snapshots(c, spec);
  ReferenceProblem p;
  p.batch = 1, p.seq_len = 200, p.heads_qk = 2, p.heads_v = 2 * spec.gva_ratio, p.key_dim = 20, p.value_dim = 20;
  p.cu_seqlens = {0, 1, 100, 200};
  for (int64_t chunk : {16, 32}) checkAllStages(c, snaps, spec, p, /*initialStates=*/true, chunk);
}

INSTANTIATE_TEST_SUITE_P(ShippedSpecs, ExecutorVsReference, ::testing::ValuesIn(shippedSpecPaths()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return std::filesystem::path(info.param).stem().string();
                         });

// ---- bad inputs give one error, never a crash ----------------------------------------------------

class ExecutorErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    Spec spec = gridSpec(loadSpec(std::string(DGPS_SPECS_DIR) + "/pgdn.yaml"));
    snaps_ = snapshots(c_, spec);
    ReferenceProblem p;
    p.batch = 1, p.seq_len = 8, p.heads_qk = 1, p.heads_v = 1, p.key_dim = 16, p.value_dim = 16;
    inputs_ = generateInputs(spec, p, freshSeed(), ScalarType::F32);
  }
  Context c_;
  std::vector<Snapshot> snaps_;
  ReferenceInputs inputs_;
};

TEST_F(ExecutorErrors, MissingRequiredInput) {
  inputs_.erase("precond_center");
  ExecutorResult r = executeChunkIR(*snaps_.back().module, inputs_);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("precond_center"), std::string::npos) << r.error;
}

TEST_F(ExecutorErrors, WrongShapeNamesTheTensor) {
  inputs_["g"] = Tensor(ScalarType::F32, {1, 8, 1, 16});  // a KDA gate given to PGDN
  ExecutorResult r = executeChunkIR(*snaps_.back().module, inputs_);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("'g'"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("[1, 8, 1]"), std::string::npos) << r.error;
}

TEST_F(ExecutorErrors, DgpsIRIsRefused) {
  ExecutorResult r = executeChunkIR(*snaps_.front().module, inputs_);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("lower it first"), std::string::npos) << r.error;
}

TEST_F(ExecutorErrors, BadCuSeqlens) {
  Tensor cu(ScalarType::I64, {3});
  cu.setInt(0, 0), cu.setInt(1, 5), cu.setInt(2, 9);  // ends past T = 8
  inputs_["cu_seqlens"] = cu;
  ExecutorResult r = executeChunkIR(*snaps_.back().module, inputs_);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("cu_seqlens"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace dgps::test
