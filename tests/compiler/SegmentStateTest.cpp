// The sequence-parallel state pass (--chunk-segment-state-pass, ChunkSegmentOps.td, docs/math.md §8):
// for every shipped spec, the segmented IR (flat and partitioned) run by the float64 executor equals the
// sequential IR and dsl's token-by-token reference, with initial/final states, GVA, varlen with a long
// document among short ones, and segment lengths that do not divide the sequence. Relative error <= 1e-9.
// For the preconditioned specs also the GPU kernels' form: the preconditioner's passes kept sequential
// (segment-precond-scan=false), only the state pass segmented.
#include <sstream>

#include "CompilerTestUtil.h"
#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Emit/Package.h"
#include "dgps/Executor/Executor.h"
#include "dgps/Transforms/PlanCost.h"
#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Reference.h"

namespace dgps::test {
namespace {

constexpr double kTolerance = 1e-9;

Spec gridSpec(Spec s) {
  s.key_dims = {16, 20, 64};
  s.value_dims = {16, 20, 64};
  s.varlen = true;
  return s;
}

std::unique_ptr<mlir::Pass> segmentPass(int64_t segmentChunks, bool segmentPrecondScan = true) {
  SegmentStatePassOptions o;
  o.segmentChunks = segmentChunks;
  o.segmentPrecondScan = segmentPrecondScan;
  return createSegmentStatePass(o);
}

/// The forward three ways: sequential (fused, unpartitioned), segmented flat, segmented partitioned.
struct Forms {
  mlir::OwningOpRef<mlir::ModuleOp> sequential, segmented, plan;
};

/// `gpuForm`: the form dgpsc compiles into the segment kernels: OSDN's d-scan chunked
/// (--chunk-parallel-precond-scan) and every preconditioner pass kept sequential (segment-precond-scan=false), so
/// only the state pass is segmented and its walks rebuild the preconditioned key from the chunk-start states.
Forms lowerAll(Context& c, const Spec& spec, bool gpuForm = false) {
  Forms f;
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, spec);
  EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, mlir::createCanonicalizerPass())));
  EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createLowerToChunk())));
  EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, mlir::createCanonicalizerPass())));
  EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createFusePreconditioner())));
  if (gpuForm) EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createParallelPrecondScan()))) << spec.name;
  f.sequential = m->clone();
  EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, segmentPass(0, /*segmentPrecondScan=*/!gpuForm)))) << spec.name;
  EXPECT_TRUE(mlir::succeeded(mlir::verify(*m))) << spec.name;
  f.segmented = m->clone();
  EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createPartitionKernels()))) << spec.name;
  EXPECT_TRUE(mlir::succeeded(mlir::verify(*m))) << spec.name;
  f.plan = std::move(m);
  return f;
}

template <typename OpTy>
int count(mlir::ModuleOp m) {
  int n = 0;
  m.walk([&](OpTy) { ++n; });
  return n;
}

std::string describe(const ReferenceProblem& p, int64_t chunk, int64_t segment) {
  std::ostringstream os;
  os << "B=" << p.batch << " T=" << p.seq_len << " H=" << p.heads_qk << " HV=" << p.heads_v << " K=" << p.key_dim
     << " V=" << p.value_dim << " C=" << chunk << " L=" << segment;
  if (!p.cu_seqlens.empty()) {
    os << " cu_seqlens=[";
    for (size_t i = 0; i < p.cu_seqlens.size(); ++i) os << (i ? "," : "") << p.cu_seqlens[i];
    os << "]";
  }
  return os.str();
}

/// Runs the three forms at every segment length and compares every output with the reference and the
/// segmented outputs with the sequential ones.
void checkForms(const Forms& f, const Spec& spec, const ReferenceProblem& shape, bool initialStates, int64_t chunk,
                std::initializer_list<int64_t> segmentLengths) {
  const std::uint64_t seed = freshSeed();
  InputGenOptions opts;
  opts.initial_state = initialStates;
  opts.initial_precond_state = initialStates;
  ReferenceInputs inputs = generateInputs(spec, shape, seed, ScalarType::F64, opts);
  TensorMap expected = runReference(spec, inputs).toMap();
  ExecutorOptions seqOpts;
  seqOpts.chunkSize = chunk;
  ExecutorResult sequential = executeChunkIR(*f.sequential, inputs, seqOpts);
  ASSERT_TRUE(sequential.ok) << sequential.error;
  for (int64_t L : segmentLengths) {
    SCOPED_TRACE(describe(shape, chunk, L) + " seed=" + std::to_string(seed));
    ExecutorOptions eo = seqOpts;
    eo.segmentChunks = L;
    for (mlir::ModuleOp m : {*f.segmented, *f.plan}) {
      ExecutorResult r = executeChunkIR(m, inputs, eo);
      ASSERT_TRUE(r.ok) << r.error;
      ASSERT_EQ(r.outputs.size(), expected.size());
      for (const auto& [name, ref] : expected) {
        auto it = r.outputs.find(name);
        ASSERT_NE(it, r.outputs.end()) << "missing output " << name;
        EXPECT_LE(relativeError(it->second, ref), kTolerance) << name << " vs reference";
        EXPECT_LE(relativeError(it->second, sequential.outputs.at(name)), kTolerance) << name << " vs sequential";
      }
    }
  }
}

class SegmentedVsReference : public ::testing::TestWithParam<std::string> {};

TEST_P(SegmentedVsReference, RewritesEverySequentialPass) {
  Context c;
  const Spec spec = gridSpec(loadSpec(GetParam()));
  Forms f = lowerAll(c, spec);
  EXPECT_EQ(count<chunk::StatePassOp>(*f.segmented), 0);
  EXPECT_EQ(count<chunk::SegmentSummaryOp>(*f.segmented), 1);
  EXPECT_EQ(count<chunk::SegmentFoldOp>(*f.segmented), 1);
  EXPECT_EQ(count<chunk::SegmentStatePassOp>(*f.segmented), 1);
  EXPECT_EQ(count<chunk::AccumPassOp>(*f.segmented), 0);
  EXPECT_EQ(count<chunk::HypergradPassOp>(*f.segmented), 0);  // no shipped spec clamps d
  EXPECT_EQ(count<chunk::AccumSegmentPassOp>(*f.segmented), count<chunk::AccumPassOp>(*f.sequential));
  EXPECT_EQ(count<chunk::HypergradSegmentPassOp>(*f.segmented), count<chunk::HypergradPassOp>(*f.sequential));
  std::vector<std::string> roles;
  f.plan->walk([&](chunk::KernelOp k) { roles.push_back(k.getRole().str()); });
  ASSERT_GE(roles.size(), 3u);
  EXPECT_EQ(roles[roles.size() - 3], "segment_summary");
  EXPECT_EQ(roles[roles.size() - 2], "segment_fold");
  EXPECT_EQ(roles.back(), "state_output");
}

TEST_P(SegmentedVsReference, SegmentLengthsThatDoNotDivide) {
  Context c;
  const Spec spec = gridSpec(loadSpec(GetParam()));
  Forms f = lowerAll(c, spec);
  ReferenceProblem p;
  p.batch = 2, p.seq_len = 200, p.heads_qk = 2, p.heads_v = 2 * spec.gva_ratio, p.key_dim = 20, p.value_dim = 16;
  // C = 16: 13 chunks per sequence, the last partial; L = 1 (every chunk its own segment), 3 and 5 (do not
  // divide 13), 13 and 40 (one segment).
  checkForms(f, spec, p, /*initialStates=*/true, 16, {1, 3, 5, 13, 40});
  if (HasFatalFailure()) return;
  checkForms(f, spec, p, /*initialStates=*/false, 16, {2});
}

TEST_P(SegmentedVsReference, VarlenLongDocumentAmongShortOnes) {
  Context c;
  const Spec spec = gridSpec(loadSpec(GetParam()));
  Forms f = lowerAll(c, spec);
  ReferenceProblem p;
  p.batch = 1, p.seq_len = 250, p.heads_qk = 2, p.heads_v = 2 * spec.gva_ratio, p.key_dim = 16, p.value_dim = 20;
  // Lengths 3, 167 (the long one: 11 chunks of 16), 1, 0, 19, 40; rows 230..249 are padding.
  p.cu_seqlens = {0, 3, 170, 171, 171, 190, 230};
  checkForms(f, spec, p, /*initialStates=*/true, 16, {1, 2, 4, 64});
  if (HasFatalFailure()) return;
  checkForms(f, spec, p, /*initialStates=*/false, 16, {3});
}

TEST_P(SegmentedVsReference, GroupedValueHeadsAndChunk64) {
  Context c;
  Spec spec = gridSpec(loadSpec(GetParam()));
  if (!usesHypergrad(spec)) spec.gva_ratio = 4;  // hypergrad_ogd needs one gain per key head
  Forms f = lowerAll(c, spec);
  ReferenceProblem p;
  p.batch = 1, p.seq_len = 300, p.heads_qk = 2, p.heads_v = 2 * spec.gva_ratio, p.key_dim = 16, p.value_dim = 16;
  checkForms(f, spec, p, /*initialStates=*/true, 64, {1, 2});
}

TEST_P(SegmentedVsReference, LaunchRuleWhenNoLengthIsSet) {
  Context c;
  const Spec spec = gridSpec(loadSpec(GetParam()));
  Forms f = lowerAll(c, spec);
  ReferenceProblem p;
  p.batch = 1, p.seq_len = 1000, p.heads_qk = 1, p.heads_v = spec.gva_ratio, p.key_dim = 16, p.value_dim = 16;
  InputGenOptions opts;
  const std::uint64_t seed = freshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  ReferenceInputs inputs = generateInputs(spec, p, seed, ScalarType::F64, opts);
  TensorMap expected = runReference(spec, inputs).toMap();
  ExecutorOptions eo;
  eo.chunkSize = 16;  // 63 chunks, one (sequence, head) pair: the rule splits it
  ExecutorResult r = executeChunkIR(*f.plan, inputs, eo);
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& [name, ref] : expected) EXPECT_LE(relativeError(r.outputs.at(name), ref), kTolerance) << name;
}

INSTANTIATE_TEST_SUITE_P(ShippedSpecs, SegmentedVsReference, ::testing::ValuesIn(shippedSpecPaths()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return std::filesystem::path(info.param).stem().string();
                         });

// ---- the preconditioned specs with only the state pass segmented (the GPU's form) -----------------
// The preconditioner's chunk-start states come from its sequential pass over all chunks before the state pass
// (precond_scan), so a segment starts at any chunk: its summary walks (E from zero, M from the identity) and its
// corrected walk rebuild the preconditioned write key (or query) from those states (docs/math.md §8.3).

std::vector<std::string> preconditionedSpecPaths() {
  std::vector<std::string> out;
  for (const std::string& path : shippedSpecPaths())
    if (loadSpec(path).precond.kind != PrecondKind::None) out.push_back(path);
  return out;
}

class SegmentedStatePassOnly : public ::testing::TestWithParam<std::string> {};

TEST_P(SegmentedStatePassOnly, KeepsThePreconditionerPassesSequential) {
  Context c;
  const Spec spec = gridSpec(loadSpec(GetParam()));
  Forms f = lowerAll(c, spec, /*gpuForm=*/true);
  EXPECT_EQ(count<chunk::StatePassOp>(*f.segmented), 0);
  EXPECT_EQ(count<chunk::SegmentSummaryOp>(*f.segmented), 1);
  EXPECT_EQ(count<chunk::SegmentFoldOp>(*f.segmented), 1);
  EXPECT_EQ(count<chunk::SegmentStatePassOp>(*f.segmented), 1);
  EXPECT_EQ(count<chunk::AccumSegmentPassOp>(*f.segmented), 0);
  EXPECT_EQ(count<chunk::HypergradSegmentPassOp>(*f.segmented), 0);
  EXPECT_EQ(count<chunk::AccumPassOp>(*f.segmented), count<chunk::AccumPassOp>(*f.sequential));
  EXPECT_EQ(count<chunk::HypergradPassOp>(*f.segmented), count<chunk::HypergradPassOp>(*f.sequential));
  EXPECT_EQ(count<chunk::HypergradChunkPassOp>(*f.segmented), count<chunk::HypergradChunkPassOp>(*f.sequential));
  EXPECT_GE(count<chunk::AccumPassOp>(*f.segmented) + count<chunk::HypergradPassOp>(*f.segmented) +
                count<chunk::HypergradChunkPassOp>(*f.segmented),
            1);
  // the plan keeps the preconditioner roles first, then chunk_local and the segmented state pass
  std::vector<std::string> roles;
  f.plan->walk([&](chunk::KernelOp k) { roles.push_back(k.getRole().str()); });
  ASSERT_GE(roles.size(), 5u);
  EXPECT_EQ(roles[roles.size() - 5], "precond_scan");
  EXPECT_EQ(roles[roles.size() - 4], "chunk_local");
  EXPECT_EQ(roles[roles.size() - 3], "segment_summary");
  EXPECT_EQ(roles[roles.size() - 2], "segment_fold");
  EXPECT_EQ(roles.back(), "state_output");
}

TEST_P(SegmentedStatePassOnly, DenseLengthsThatDoNotDivide) {
  Context c;
  const Spec spec = gridSpec(loadSpec(GetParam()));
  Forms f = lowerAll(c, spec, /*gpuForm=*/true);
  ReferenceProblem p;
  p.batch = 2, p.seq_len = 200, p.heads_qk = 2, p.heads_v = 2 * spec.gva_ratio, p.key_dim = 20, p.value_dim = 16;
  // C = 16: 13 chunks, the last partial; L = 1, 3, 5 (do not divide 13) and 40 (one segment)
  checkForms(f, spec, p, /*initialStates=*/true, 16, {1, 3, 5, 40});
  if (HasFatalFailure()) return;
  checkForms(f, spec, p, /*initialStates=*/false, 16, {2});
}

TEST_P(SegmentedStatePassOnly, VarlenShortAndEmptyDocuments) {
  Context c;
  const Spec spec = gridSpec(loadSpec(GetParam()));
  Forms f = lowerAll(c, spec, /*gpuForm=*/true);
  ReferenceProblem p;
  p.batch = 1, p.seq_len = 250, p.heads_qk = 2, p.heads_v = 2 * spec.gva_ratio, p.key_dim = 16, p.value_dim = 20;
  // lengths 3, 167 (11 chunks of 16), 1, 0, 19, 40; rows 230..249 are padding
  p.cu_seqlens = {0, 3, 170, 171, 171, 190, 230};
  checkForms(f, spec, p, /*initialStates=*/true, 16, {1, 2, 4, 64});
  if (HasFatalFailure()) return;
  checkForms(f, spec, p, /*initialStates=*/false, 16, {3});
}

INSTANTIATE_TEST_SUITE_P(PreconditionedSpecs, SegmentedStatePassOnly, ::testing::ValuesIn(preconditionedSpecPaths()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return std::filesystem::path(info.param).stem().string();
                         });

// ---- the pass's refusals, the clamp, the plan's cost --------------------------------------------

Spec shipped(const std::string& name) { return gridSpec(loadSpec(std::string(DGPS_SPECS_DIR) + "/" + name + ".yaml")); }

TEST(SegmentStatePass, RefusesAPartitionedFunction) {
  Context c;
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, shipped("gdn"));
  mlir::PassManager pm(c.ctx.get());
  buildPipeline(pm);
  ASSERT_TRUE(mlir::succeeded(pm.run(*m)));
  EXPECT_TRUE(mlir::failed(runPass(*c.ctx, *m, segmentPass(4))));
  ASSERT_FALSE(c.diagnostics.empty());
  EXPECT_NE(c.diagnostics.back().find("before --chunk-partition-kernels"), std::string::npos) << c.diagnostics.back();
}

TEST(SegmentStatePass, RefusesAnUnfusedPreconditionerScan) {
  Context c;
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, shipped("pgdn"));
  ASSERT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createLowerToChunk())));
  EXPECT_TRUE(mlir::failed(runPass(*c.ctx, *m, segmentPass(4))));
  ASSERT_FALSE(c.diagnostics.empty());
  EXPECT_NE(c.diagnostics.back().find("--chunk-fuse-preconditioner"), std::string::npos) << c.diagnostics.back();
}

TEST(SegmentStatePass, RefusesANegativeLength) {
  Context c;
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, shipped("gdn"));
  mlir::PassManager pm(c.ctx.get());
  buildPipeline(pm, Stage::Chunk);
  ASSERT_TRUE(mlir::succeeded(pm.run(*m)));
  EXPECT_TRUE(mlir::failed(runPass(*c.ctx, *m, segmentPass(-2))));
  ASSERT_FALSE(c.diagnostics.empty());
  EXPECT_NE(c.diagnostics.back().find("segment-chunks = -2"), std::string::npos) << c.diagnostics.back();
}

TEST(SegmentStatePass, SetsTheLengthAttributeAndThePlanCost) {
  Context c;
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, shipped("gdn"));
  mlir::PassManager pm(c.ctx.get());
  buildPipeline(pm, Stage::Chunk);
  ASSERT_TRUE(mlir::succeeded(pm.run(*m)));
  mlir::OwningOpRef<mlir::ModuleOp> plain = m->clone();
  ASSERT_TRUE(mlir::succeeded(runPass(*c.ctx, *plain, createPartitionKernels())));
  ASSERT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, segmentPass(8))));
  ASSERT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createPartitionKernels())));
  mlir::func::FuncOp fn = *m->getOps<mlir::func::FuncOp>().begin();
  auto L = fn->getAttrOfType<mlir::IntegerAttr>(chunk::kSegmentChunksAttr);
  ASSERT_TRUE(L);
  EXPECT_EQ(L.getInt(), 8);
  CostPoint at = costPointOf(fn);
  EXPECT_EQ(at.segmentChunks, 8);
  PlanCost segmented = estimatePlan(fn, at);
  PlanCost sequential = estimatePlan(*plain->getOps<mlir::func::FuncOp>().begin(), at);
  // Only the two new kernels add work: state_output's rerun costs what the sequential pass did. The summary
  // runs the pass on E and on the K×K identity (4K(V + K)) and forms W, U again from 𝒯 (2CK + 2CV); the
  // fold costs 2K²V per segment of 8 chunks.
  const double K = static_cast<double>(at.K), V = static_cast<double>(at.V), C = static_cast<double>(at.C);
  double summaryFlops = -1, foldFlops = -1;
  for (const KernelCost& k : segmented.kernels) {
    if (k.role == "segment_summary") summaryFlops = k.flops;
    if (k.role == "segment_fold") foldFlops = k.flops;
  }
  EXPECT_GE(summaryFlops, 4 * K * (V + K) + 2 * C * K + 2 * C * V);
  EXPECT_NEAR(foldFlops, 2 * K * K * V / (C * 8), 1e-9);
  EXPECT_NEAR(segmented.flops() - sequential.flops(), summaryFlops + foldFlops, 1e-6 * summaryFlops);
  EXPECT_GT(segmented.bytes(), sequential.bytes());  // E, M and the start states cross kernels
}

TEST(SegmentStatePass, TheEmitterRefusesASegmentedPlan) {
  // No device kernels exist for segment_summary / segment_fold: a package must not be written from it.
  Context c;
  const Spec spec = shipped("gdn");
  Forms f = lowerAll(c, spec);
  c.diagnostics.clear();
  EXPECT_TRUE(mlir::failed(emitPackage(spec, *f.plan)));
  ASSERT_FALSE(c.diagnostics.empty());
  EXPECT_NE(c.diagnostics.back().find("segment_summary"), std::string::npos) << c.diagnostics.back();
}

TEST(SegmentStatePass, KeepsAClampedHypergradientScanSequential) {
  Context c;
  Spec spec = shipped("osdn");
  spec.precond.hypergrad.clamp_min = 0.25;
  spec.precond.hypergrad.clamp_max = 1.5;
  Forms f = lowerAll(c, spec);
  EXPECT_EQ(count<chunk::HypergradPassOp>(*f.segmented), 1);
  EXPECT_EQ(count<chunk::HypergradSegmentPassOp>(*f.segmented), 0);
  EXPECT_EQ(count<chunk::SegmentSummaryOp>(*f.segmented), 1);  // the state pass is still segmented
  ReferenceProblem p;
  p.batch = 1, p.seq_len = 150, p.heads_qk = 2, p.heads_v = 2, p.key_dim = 16, p.value_dim = 16;
  checkForms(f, spec, p, /*initialStates=*/true, 16, {1, 4});
}

// ---- OSDN: the two-level d-scan against the token-by-token scan ---------------------------------

TEST(HypergradSegmentScan, EqualsTheTokenByTokenScan) {
  for (const char* name : {"osdn", "osdn_apf"}) {
    Context c;
    Spec spec = shipped(name);
    for (bool post : {false, true}) {
      spec.precond.hypergrad.timing = post ? WriteTiming::Post : WriteTiming::Pre;
      SCOPED_TRACE(std::string(name) + (post ? " post" : " pre"));
      Forms f = lowerAll(c, spec);
      ASSERT_EQ(count<chunk::HypergradSegmentPassOp>(*f.segmented), 1);
      ReferenceProblem p;
      p.batch = 1, p.seq_len = 260, p.heads_qk = 3, p.heads_v = 3, p.key_dim = 20, p.value_dim = 16;
      p.cu_seqlens = {0, 5, 230, 260};
      checkForms(f, spec, p, /*initialStates=*/true, 16, {1, 3, 7});
      if (HasFatalFailure()) return;
    }
  }
}

TEST(HypergradSegmentScan, VerifierRefusesAClamp) {
  Context c;
  Spec spec = shipped("osdn");
  Forms f = lowerAll(c, spec);
  chunk::HypergradSegmentPassOp op;
  f.segmented->walk([&](chunk::HypergradSegmentPassOp o) { op = o; });
  ASSERT_TRUE(op);
  op.setClampMaxAttr(mlir::FloatAttr::get(mlir::Float64Type::get(c.ctx.get()), 2.0));
  EXPECT_TRUE(mlir::failed(mlir::verify(op)));
  ASSERT_FALSE(c.diagnostics.empty());
  EXPECT_NE(c.diagnostics.back().find("not affine"), std::string::npos) << c.diagnostics.back();
}

TEST(SegmentExecutor, RejectsAZeroSegmentLength) {
  Context c;
  Forms f = lowerAll(c, shipped("gdn"));
  ReferenceProblem p;
  p.batch = 1, p.seq_len = 40, p.heads_qk = 1, p.heads_v = 1, p.key_dim = 16, p.value_dim = 16;
  ReferenceInputs inputs = generateInputs(shipped("gdn"), p, freshSeed(), ScalarType::F64, {});
  ExecutorOptions eo;
  eo.segmentChunks = 0;
  ExecutorResult r = executeChunkIR(*f.segmented, inputs, eo);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("segment length"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace dgps::test
