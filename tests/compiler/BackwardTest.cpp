// The derived backward (--chunk-derive-backward), run by the float64 executor, against central finite
// differences of the executor's own float64 forward: for every input x and a fresh random direction δ,
// ⟨dx, δ⟩ must match (L(x + hδ) − L(x − hδ)) / 2h (a fourth-order stencil) for the loss
// L = Σ ⟨cotangent, output⟩. Every shipped spec (derivedSpecPaths), T in {1, 63, 64, 65, 200}, GVA (not for
// OSDN's hypergrad_ogd preconditioner, which requires gva_ratio 1),
// varlen with length-1 sequences, with and without initial states, flat and partitioned IR, two keep
// policies. K and V are small (4..12) so that the suite runs in seconds.
#include <limits>
#include <sstream>

#include "BackwardTestUtil.h"
#include "dgps/Dialect/Chunk/IR/Chunk.h"

namespace dgps::test {
namespace {

/// |FD − ⟨dx, δ⟩| relative to Σ |dx_i δ_i| (the size of the terms the directional derivative sums), plus
/// the finite difference's own rounding floor, 8 ε · Σ|cotangent · output| / (h/2).
constexpr double kTolerance = 1e-9;
/// The fourth-order stencil's step. Small K makes l2norm strongly curved, so h = 2e-4 (truncation well
/// under 1e-9). The squash M(r) = x^{−r/(1+|r|)} is C¹ but not C² at r = 0, and a stencil that carries
/// some r across 0 errs by O(h) times that element's weight; perturbing precond_g, precond_beta or k moves
/// every r of a sequence, so such crossings are common unless h is tiny. Preconditioned specs therefore
/// use h = 2e-6 and accept the larger rounding floor (about 1e-7 of the gradient for the squash's own
/// parameters; the elementwise comparison with dsl's reference gradients, BackwardVsReferenceTest, is
/// the tight check there). Every check also requires the stencils at h and h/2 to agree (which bounds the
/// truncation error); a direction where they do not is redrawn, up to kDirections times.
double stepFor(const Spec& s) { return hasPrecond(s) ? 2e-6 : 2e-4; }
constexpr int kDirections = 4;

struct Case {
  ReferenceProblem shape;
  bool initialStates = true;
  bool partitioned = false;
  std::vector<std::string> keep;
};

std::string describe(const Spec& spec, const Case& c, std::uint64_t seed) {
  std::ostringstream os;
  os << spec.name << " B=" << c.shape.batch << " T=" << c.shape.seq_len << " H=" << c.shape.heads_qk
     << " HV=" << c.shape.heads_v << " K=" << c.shape.key_dim << " V=" << c.shape.value_dim
     << (c.initialStates ? " with" : " without") << " initial states" << (c.partitioned ? ", partitioned" : ", flat")
     << " seed=" << seed;
  if (!c.shape.cu_seqlens.empty()) {
    os << " cu_seqlens=[";
    for (size_t i = 0; i < c.shape.cu_seqlens.size(); ++i) os << (i ? "," : "") << c.shape.cu_seqlens[i];
    os << "]";
  }
  return os.str();
}

/// Checks every input's gradient along one random direction.
void checkAgainstFiniteDifferences(Context& ctx, const Spec& spec, const Case& c) {
  const std::uint64_t seed = freshSeed();
  SCOPED_TRACE(describe(spec, c, seed));
  Spec irSpec = spec;
  irSpec.key_dims = {16}, irSpec.value_dims = {16};
  mlir::OwningOpRef<mlir::ModuleOp> m = backwardModule(ctx, irSpec, c.partitioned, c.keep);
  ASSERT_TRUE(m);
  InputGenOptions opts;
  opts.initial_state = c.initialStates;
  opts.initial_precond_state = c.initialStates;
  opts.float_dtype = ScalarType::F64;
  TensorMap inputs = generateInputs(spec, c.shape, seed, ScalarType::F64, opts);

  ExecutorResult fwd = executeChunkIR(*m, inputs);
  ASSERT_TRUE(fwd.ok) << fwd.error;
  TensorMap cot = randomCotangents(fwd.outputs, seed + 1);
  double lossMagnitude = 0;
  loss(*m, inputs, cot, &lossMagnitude);
  ExecutorResult bwd = executeChunkBackward(*m, inputs, cot);
  ASSERT_TRUE(bwd.ok) << bwd.error;

  std::mt19937_64 rng(seed + 2);
  std::normal_distribution<double> n01;
  size_t checked = 0;
  for (const auto& [name, x] : inputs) {
    if (!differentiable(name)) continue;
    auto g = bwd.outputs.find("d" + name);
    ASSERT_NE(g, bwd.outputs.end()) << "no gradient for input " << name;
    ASSERT_EQ(g->second.shape(), x.shape()) << "d" << name;
    std::vector<double> base = x.toDoubles(), grad = g->second.toDoubles(), dir(base.size());
    for (size_t i = 0; i < grad.size(); ++i) ASSERT_TRUE(std::isfinite(grad[i])) << "d" << name << "[" << i << "]";
    auto at = [&](double t) {
      std::vector<double> y(base);
      for (size_t i = 0; i < y.size(); ++i) y[i] += t * dir[i];
      TensorMap shifted = inputs;
      shifted[name] = Tensor::fromDoubles(ScalarType::F64, x.shape(), y);
      return loss(*m, shifted, cot);
    };
    auto stencil = [&](double h) { return (8 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12 * h); };
    const double h = stepFor(spec);
    const double floor = 8 * std::numeric_limits<double>::epsilon() * lossMagnitude / (h / 2);
    bool settled = false;
    for (int attempt = 0; attempt < kDirections && !settled; ++attempt) {
      double analytic = 0, magnitude = 0;
      for (size_t i = 0; i < base.size(); ++i) {
        dir[i] = n01(rng);
        analytic += grad[i] * dir[i];
        magnitude += std::fabs(grad[i] * dir[i]);
      }
      const double tol = kTolerance * magnitude + floor;
      const double coarse = stencil(h), fine = stencil(h / 2);
      if (std::fabs(coarse - fine) > tol) continue;  // not smooth at this step along δ: another direction
      settled = true;
      EXPECT_LE(std::fabs(fine - analytic), tol) << "d" << name << ": finite difference " << fine << ", backward "
                                                 << analytic << " (terms " << magnitude << ")";
    }
    EXPECT_TRUE(settled) << "d" << name << ": the finite differences at h and h/2 disagree along " << kDirections
                         << " random directions";
    ++checked;
  }
  EXPECT_GE(checked, 3u) << "too few inputs checked";
  // Gradients only for inputs that were given.
  for (const auto& [name, t] : bwd.outputs) EXPECT_TRUE(inputs.count(name.substr(1))) << name;
}

ReferenceProblem shape(const Spec& spec, int64_t B, int64_t T, int64_t K, int64_t V, int64_t gva) {
  ReferenceProblem p;
  p.batch = B, p.seq_len = T, p.heads_qk = 2, p.heads_v = 2 * gva, p.key_dim = K, p.value_dim = V;
  (void)spec;
  return p;
}

class BackwardVsFiniteDifferences : public ::testing::TestWithParam<std::string> {};

TEST_P(BackwardVsFiniteDifferences, SequenceLengths) {
  Context ctx;
  const Spec spec = smallDimsSpec(loadSpec(GetParam()));
  for (int64_t T : {1, 63, 64, 65, 200}) {
    checkAgainstFiniteDifferences(ctx, spec, {shape(spec, 2, T, 8, 4, spec.gva_ratio)});
    if (HasFatalFailure()) return;
  }
}

TEST_P(BackwardVsFiniteDifferences, NoInitialStates) {
  Context ctx;
  const Spec spec = smallDimsSpec(loadSpec(GetParam()));
  checkAgainstFiniteDifferences(ctx, spec, {shape(spec, 2, 130, 4, 8, spec.gva_ratio), false});
}

TEST_P(BackwardVsFiniteDifferences, VarlenWithLengthOneSequences) {
  Context ctx;
  const Spec spec = smallDimsSpec(loadSpec(GetParam()));
  Case c{shape(spec, 1, 200, 8, 4, spec.gva_ratio)};
  c.shape.cu_seqlens = {0, 1, 64, 65, 130, 200};  // lengths 1, 63, 1, 65, 70
  checkAgainstFiniteDifferences(ctx, spec, c);
  c.initialStates = false;
  checkAgainstFiniteDifferences(ctx, spec, c);
}

TEST_P(BackwardVsFiniteDifferences, GroupedValueHeads) {
  Context ctx;
  Spec spec = smallDimsSpec(loadSpec(GetParam()));
  if (usesHypergrad(spec)) GTEST_SKIP() << "hypergrad_ogd requires gva_ratio 1 (the spec validator refuses GVA)";
  spec.gva_ratio = 3;
  checkAgainstFiniteDifferences(ctx, spec, {shape(spec, 2, 65, 4, 4, 3)});
}

TEST_P(BackwardVsFiniteDifferences, PartitionedAndEveryIntermediateKept) {
  Context ctx;
  const Spec spec = smallDimsSpec(loadSpec(GetParam()));
  Case c{shape(spec, 1, 100, 4, 4, spec.gva_ratio)};
  c.shape.cu_seqlens = {0, 1, 70, 100};
  c.partitioned = true;
  checkAgainstFiniteDifferences(ctx, spec, c);
  c.keep = {"kkt", "solve_tril", "qk_attn", "wy_recompute.w", "wy_recompute.u", "state_pass.v_new",
            "state_pass.states"};
  checkAgainstFiniteDifferences(ctx, spec, c);
  c.keep = {"none"};
  checkAgainstFiniteDifferences(ctx, spec, c);
}

INSTANTIATE_TEST_SUITE_P(ShippedSpecs, BackwardVsFiniteDifferences, ::testing::ValuesIn(derivedSpecPaths()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return std::filesystem::path(info.param).stem().string();
                         });

// ---- what is refused, and how ---------------------------------------------------------------------

TEST(DeriveBackward, DerivesOSDN) {
  // The hypergrad_ogd scan gets its reverse sweep; diag_apply's adjoint is two diag_applies.
  for (const char* name : {"osdn.yaml", "osdn_apf.yaml"}) {
    Context ctx;
    const Spec spec = loadSpec(std::string(DGPS_SPECS_DIR) + "/" + name);
    mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*ctx.ctx, spec);
    ASSERT_TRUE(mlir::succeeded(runPass(*ctx.ctx, *m, mlir::createCanonicalizerPass())));
    ASSERT_TRUE(mlir::succeeded(runPass(*ctx.ctx, *m, createLowerToChunk())));
    ASSERT_TRUE(mlir::succeeded(runPass(*ctx.ctx, *m, createDeriveBackward()))) << name;
    EXPECT_TRUE(ctx.diagnostics.empty()) << name << ": " << (ctx.diagnostics.empty() ? "" : ctx.diagnostics[0]);
    int grads = 0, applies = 0;
    m->walk([&](mlir::func::FuncOp fn) {
      if (!fn->hasAttr(dgps::chunk::kBackwardOfAttr)) return;
      fn.walk([&](dgps::chunk::HypergradScanGradOp g) {
        ++grads;
        EXPECT_TRUE(g.getDiag().getDefiningOp<dgps::chunk::HypergradScanOp>()) << name << ": reads the recomputed d";
      });
      fn.walk([&](dgps::chunk::DiagApplyOp) { ++applies; });
    });
    EXPECT_EQ(grads, 1) << name;
    EXPECT_EQ(applies, 3) << name << ": the recomputed write key and the two products of its adjoint";
  }
}

TEST(DeriveBackward, UnknownKeepNameIsOneError) {
  Context ctx;
  const Spec spec = loadSpec(std::string(DGPS_SPECS_DIR) + "/gdn.yaml");
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*ctx.ctx, spec);
  ASSERT_TRUE(mlir::succeeded(runPass(*ctx.ctx, *m, createLowerToChunk())));
  EXPECT_TRUE(mlir::failed(runPass(*ctx.ctx, *m, createDeriveBackward(DeriveBackwardOptions{{"l2norm.k"}}))));
  ASSERT_EQ(ctx.diagnostics.size(), 1u);
  EXPECT_NE(ctx.diagnostics[0].find("'l2norm.k'"), std::string::npos) << ctx.diagnostics[0];
  EXPECT_NE(ctx.diagnostics[0].find("solve_tril"), std::string::npos) << ctx.diagnostics[0];
}

TEST(ExecuteBackward, RefusesUnknownAndMissingCotangents) {
  Context ctx;
  const Spec spec = smallDimsSpec(loadSpec(std::string(DGPS_SPECS_DIR) + "/gdn.yaml"));
  mlir::OwningOpRef<mlir::ModuleOp> m = backwardModule(ctx, varlenSpec(loadSpec(std::string(DGPS_SPECS_DIR) + "/gdn.yaml")), false);
  ASSERT_TRUE(m);
  ReferenceProblem p = shape(spec, 1, 9, 4, 4, 1);
  TensorMap inputs = generateInputs(spec, p, freshSeed(), ScalarType::F32);
  ExecutorResult fwd = executeChunkIR(*m, inputs);
  ASSERT_TRUE(fwd.ok) << fwd.error;
  TensorMap cot = randomCotangents(fwd.outputs, freshSeed());
  cot["dq"] = cot.at("do");
  ExecutorResult r = executeChunkBackward(*m, inputs, cot);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("unknown cotangent 'dq'"), std::string::npos) << r.error;
  cot.erase("dq");
  cot.erase("do");
  r = executeChunkBackward(*m, inputs, cot);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("'do'"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace dgps::test
