// Spec -> dgps IR -> Spec round trip, the verifier (dsl's validation on hand-written IR), and the
// canonicalisation of dgps.recurrence.
#include "CompilerTestUtil.h"
#include "dgps/dsl/Canonical.h"
#include "mlir/Parser/Parser.h"

namespace dgps::test {
namespace {

std::string print(mlir::Operation* op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  op->print(os);
  return s;
}

ir::RecurrenceOp recurrenceOf(mlir::ModuleOp m) {
  auto ops = m.getOps<ir::RecurrenceOp>();
  return ops.empty() ? ir::RecurrenceOp() : *ops.begin();
}

class ShippedSpec : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedSpec, RoundTripsThroughDgpsIR) {
  Context c;
  Spec spec = loadSpec(GetParam());
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, spec);
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*m))) << (c.diagnostics.empty() ? "" : c.diagnostics[0]);
  EXPECT_EQ((*m)->getAttrOfType<mlir::StringAttr>(ir::kTargetAttrName).str(), "sm_90a");
  Spec back = ir::exportSpec(recurrenceOf(*m));
  EXPECT_EQ(canonicalYaml(back), canonicalYaml(spec));
  EXPECT_EQ(specHash(back), specHash(spec));
  // The op is located at the spec file's `name:` position.
  EXPECT_EQ(back.loc.file, spec.loc.file);
}

TEST_P(ShippedSpec, TextualIRParsesBack) {
  Context c;
  Spec spec = loadSpec(GetParam());
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, spec);
  std::string text = print(*m);
  mlir::OwningOpRef<mlir::ModuleOp> again = mlir::parseSourceString<mlir::ModuleOp>(text, c.ctx.get());
  ASSERT_TRUE(again) << text;
  EXPECT_EQ(print(*again), text);
  EXPECT_EQ(canonicalYaml(ir::exportSpec(recurrenceOf(*again))), canonicalYaml(spec));
}

TEST_P(ShippedSpec, CanonicalizationKeepsAParsedSpec) {
  // The parser already drops what canonicalisation would drop, so shipped specs are fixed points.
  Context c;
  Spec spec = loadSpec(GetParam());
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, spec);
  std::string before = print(*m);
  ASSERT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, mlir::createCanonicalizerPass())));
  EXPECT_EQ(print(*m), before);
}

INSTANTIATE_TEST_SUITE_P(ShippedSpecs, ShippedSpec, ::testing::ValuesIn(shippedSpecPaths()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return std::filesystem::path(info.param).stem().string();
                         });

Spec pgdn() { return loadSpec(std::string(DGPS_SPECS_DIR) + "/pgdn.yaml"); }

/// Verifies the imported spec and returns the first error (empty when it verifies).
std::string verifyError(const Spec& spec) {
  Context c;
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, spec);
  if (mlir::succeeded(mlir::verify(*m))) return "";
  return c.diagnostics.empty() ? "<no message>" : c.diagnostics.front();
}

TEST(Verifier, AppliesTheSpecLanguageRules) {
  Spec s = pgdn();
  s.precond.squash.x = 0.5;
  EXPECT_NE(verifyError(s).find("precond.squash.x: must be > 1"), std::string::npos) << verifyError(s);

  s = pgdn();
  s.tuning.chunk = {48};
  EXPECT_NE(verifyError(s).find("tuning.chunk"), std::string::npos) << verifyError(s);

  s = pgdn();
  s.key_dims = {300};
  EXPECT_NE(verifyError(s).find("dims.key"), std::string::npos) << verifyError(s);

  s = pgdn();
  s.name = "Bad-Name";
  EXPECT_NE(verifyError(s).find("name"), std::string::npos) << verifyError(s);

  s = pgdn();  // beta < 2 with M < 1.5: write eigenvalue down to -2 (docs/math.md §3.4, §7.2)
  s.gain.hi = 2.0;
  EXPECT_NE(verifyError(s).find("unstable write"), std::string::npos) << verifyError(s);
  s.allow_unstable = true;
  EXPECT_EQ(verifyError(s), "");

  EXPECT_EQ(verifyError(pgdn()), "");
}

TEST(Verifier, RejectsAMissingParameterGroup) {
  Context c;
  const char* text = R"mlir(
    module {
      dgps.recurrence @p {decay = #dgps.decay<scalar>, gain = #dgps.gain<scalar>, gain_lo = 0.0, gain_hi = 1.0,
        precond = #dgps.precond<diagonal>, precond_side = #dgps.side<key>, precond_source = #dgps.source<ema_sq_squash>,
        solve = #dgps.solve<delta>, qk_l2norm = true, l2norm_eps = 1.0e-6, heads_qk = 0, gva_ratio = 1,
        key_dims = array<i64: 128>, value_dims = array<i64: 128>, input_dtypes = [bf16], state_dtype = f32,
        io = #dgps.io<initial_state = true, final_state = true, initial_precond_state = true,
                      final_precond_state = true, varlen = true>,
        kernels = [#dgps.kernel<chunk_forward>],
        tuning = #dgps.tuning<chunk = [64], block_v = [64], warps = [4], stages = [1]>}
    })mlir";
  mlir::OwningOpRef<mlir::ModuleOp> m = mlir::parseSourceString<mlir::ModuleOp>(text, c.ctx.get());
  EXPECT_FALSE(m);
  ASSERT_FALSE(c.diagnostics.empty());
  EXPECT_NE(c.diagnostics.front().find("needs the `squash` parameters"), std::string::npos) << c.diagnostics.front();
}

TEST(Canonicalize, IdentityHypergradientIsNoPreconditioner) {
  Context c;
  Spec s = loadSpec(std::string(DGPS_SPECS_DIR) + "/osdn.yaml");
  s.precond.hypergrad.eta = 0.0;  // d never moves from init = 1
  s.initial_precond_state = false;
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, s);
  ASSERT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, mlir::createCanonicalizerPass())));
  Spec out = ir::exportSpec(recurrenceOf(*m));
  EXPECT_EQ(out.precond.kind, PrecondKind::None);
  EXPECT_FALSE(out.final_precond_state);
  EXPECT_FALSE(recurrenceOf(*m).getHypergradAttr());

  // With an initial state d0 != 1 the preconditioner is not the identity.
  s.initial_precond_state = true;
  m = ir::importSpec(*c.ctx, s);
  ASSERT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, mlir::createCanonicalizerPass())));
  EXPECT_EQ(ir::exportSpec(recurrenceOf(*m)).precond.kind, PrecondKind::Diagonal);
}

}  // namespace
}  // namespace dgps::test
