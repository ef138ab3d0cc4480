// The partitioned backward (--chunk-partition-backward): kernel roles in launch order, a cost estimate on
// the function, kept intermediates stored by the forward (and only those), and a forward plan that is
// the same with or without a derived backward beside it.
#include "BackwardTestUtil.h"
#include "dgps/Transforms/PlanCost.h"

namespace dgps::test {
namespace {

using namespace dgps::chunk;

mlir::func::FuncOp function(mlir::ModuleOp m, bool backward) {
  for (auto fn : m.getOps<mlir::func::FuncOp>())
    if (fn->hasAttr(kBackwardOfAttr) == backward) return fn;
  return {};
}

std::vector<std::string> storeNames(mlir::func::FuncOp fn) {
  std::vector<std::string> names;
  fn.walk([&](StoreOp s) { names.push_back(s.getName().str()); });
  return names;
}

class BackwardPlan : public ::testing::TestWithParam<std::string> {};

TEST_P(BackwardPlan, RolesCostAndSavedValues) {
  Context ctx;
  const Spec spec = loadSpec(GetParam());
  mlir::OwningOpRef<mlir::ModuleOp> m = backwardModule(ctx, spec, /*partitioned=*/true);
  ASSERT_TRUE(m);
  mlir::func::FuncOp bwd = function(*m, true), fwd = function(*m, false);
  ASSERT_TRUE(bwd && fwd);

  // Kernels in the launch order of kBackwardRoles; every op inside a kernel.
  std::vector<std::string> roles;
  for (KernelOp k : bwd.getBody().getOps<KernelOp>()) roles.push_back(k.getRole().str());
  std::vector<std::string> order(std::begin(kBackwardRoles), std::end(kBackwardRoles));
  size_t next = 0;
  for (const std::string& r : roles) {
    auto it = std::find(order.begin() + next, order.end(), r);
    ASSERT_NE(it, order.end()) << "role " << r << " out of order";
    next = static_cast<size_t>(it - order.begin()) + 1;
  }
  for (const char* must : {"bwd_output_grad", "bwd_state_reverse", "bwd_chunk_grad", "bwd_prologue_grad"})
    EXPECT_NE(std::find(roles.begin(), roles.end(), must), roles.end()) << must;
  for (mlir::Operation& op : bwd.getBody().front().without_terminator())
    EXPECT_TRUE(mlir::isa<KernelOp>(op)) << "op outside a kernel: " << op.getName().getStringRef().str();

  // The estimate: positive, and the backward does more work than the forward.
  auto plan = bwd->getAttrOfType<PlanAttr>(kPlanAttr);
  auto fplan = fwd->getAttrOfType<PlanAttr>(kPlanAttr);
  ASSERT_TRUE(plan && fplan);
  EXPECT_GT(plan.getBytesPerTokenHead(), 0);
  EXPECT_GT(plan.getFlopsPerTokenHead(), fplan.getFlopsPerTokenHead());

  // Default policy: 𝒯 is stored by the forward (delta rule only) and loaded by the backward.
  std::vector<std::string> fstores = storeNames(fwd);
  bool delta = spec.solve.kind == SolveKind::Delta;
  EXPECT_EQ(std::count(fstores.begin(), fstores.end(), "saved.solve_tril"), delta ? 1 : 0);
  for (const std::string& s : fstores) EXPECT_TRUE(s == "saved.solve_tril" || s.rfind("saved.", 0) != 0) << s;
  auto keep = bwd->getAttrOfType<mlir::ArrayAttr>(kBwdKeepAttr);
  ASSERT_TRUE(keep);
  EXPECT_EQ(keep.size(), delta ? 1u : 0u);

  // A gradient store for every floating input the forward loads.
  std::vector<std::string> bstores = storeNames(bwd);
  fwd.walk([&](LoadOp l) {
    EXPECT_NE(std::find(bstores.begin(), bstores.end(), "d" + l.getName().str()), bstores.end())
        << "no gradient store for " << l.getName().str();
  });

  // The forward plan is unchanged by deriving a backward beside it.
  Context plain;
  std::vector<Snapshot> snaps = snapshots(plain, spec);
  mlir::func::FuncOp ref = function(*snaps.back().module, false);
  ASSERT_TRUE(ref);
  auto refPlan = ref->getAttrOfType<PlanAttr>(kPlanAttr);
  ASSERT_TRUE(refPlan);
  EXPECT_EQ(refPlan.getBytesPerTokenHead(), fplan.getBytesPerTokenHead()) << "forward plan changed";
  EXPECT_EQ(refPlan.getFlopsPerTokenHead(), fplan.getFlopsPerTokenHead()) << "forward plan changed";
}

INSTANTIATE_TEST_SUITE_P(ShippedSpecs, BackwardPlan, ::testing::ValuesIn(derivedSpecPaths()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return std::filesystem::path(info.param).stem().string();
                         });

}  // namespace
}  // namespace dgps::test
