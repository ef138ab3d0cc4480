// OSDN's preconditioner scan in its chunked form (--chunk-parallel-precond-scan, ChunkPrecondScanOps.td,
// docs/math.md §5.2): the chunked IR (flat and partitioned) run by the float64 executor equals dsl's
// token-by-token reference (<= 1e-9) and the token-by-token pass's chunk-start d and step coefficients
// (<= 1e-12), with partial chunks, varlen (empty and one-token documents), initial d, retention (APF), both
// write timings, zero keys and nearly parallel keys at the scan's stability limit.
#include <sstream>

#include "CompilerTestUtil.h"
#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Emit/Package.h"
#include "dgps/Executor/Executor.h"
#include "dgps/dsl/InputGen.h"
#include "dgps/dsl/Reference.h"
#include "mlir/IR/Builders.h"

namespace dgps::test {
namespace {

constexpr double kTolerance = 1e-9;
constexpr double kPassTolerance = 1e-12;  ///< the d-scan alone: no long product chain after it

Spec osdn(const std::string& name) {
  Spec s = loadSpec(std::string(DGPS_SPECS_DIR) + "/" + name + ".yaml");
  s.key_dims = {16, 20, 64};
  s.value_dims = {16, 20, 64};
  s.varlen = true;
  return s;
}

/// Stores the pass's chunk-start d and coefficients as extra outputs ("saved.scan_start", "saved.scan_coef": the
/// verifier's name for a stored forward value), so that the two forms of the scan can be compared directly.
template <typename PassOp>
void exposeScan(mlir::ModuleOp m) {
  m.walk([](PassOp op) {
    mlir::OpBuilder b(op->getBlock()->getTerminator());
    b.create<chunk::StoreOp>(op.getLoc(), b.getStringAttr("saved.scan_start"), op.getStart());
    b.create<chunk::StoreOp>(op.getLoc(), b.getStringAttr("saved.scan_coef"), op.getCoef());
  });
}

template <typename OpTy>
int count(mlir::ModuleOp m) {
  int n = 0;
  m.walk([&](OpTy) { ++n; });
  return n;
}

/// The forward three ways: token-by-token (fused, unpartitioned), chunked flat, chunked partitioned.
struct Forms {
  mlir::OwningOpRef<mlir::ModuleOp> sequential, chunked, plan;
};

Forms lowerAll(Context& c, const Spec& spec) {
  Forms f;
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, spec);
  EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, mlir::createCanonicalizerPass())));
  EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createLowerToChunk())));
  EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, mlir::createCanonicalizerPass())));
  EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createFusePreconditioner())));
  f.sequential = m->clone();
  EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createParallelPrecondScan()))) << spec.name;
  EXPECT_TRUE(mlir::succeeded(mlir::verify(*m))) << spec.name;
  f.chunked = m->clone();
  EXPECT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createPartitionKernels()))) << spec.name;
  EXPECT_TRUE(mlir::succeeded(mlir::verify(*m))) << spec.name;
  f.plan = std::move(m);
  exposeScan<chunk::HypergradPassOp>(*f.sequential);
  EXPECT_TRUE(mlir::succeeded(mlir::verify(*f.sequential)));
  exposeScan<chunk::HypergradPassOp>(*f.chunked);  // a clamped scan keeps the token-by-token pass
  exposeScan<chunk::HypergradChunkPassOp>(*f.chunked);
  EXPECT_TRUE(mlir::succeeded(mlir::verify(*f.chunked)));
  return f;
}

std::string describe(const ReferenceProblem& p, int64_t chunk) {
  std::ostringstream os;
  os << "B=" << p.batch << " T=" << p.seq_len << " H=" << p.heads_qk << " K=" << p.key_dim << " V=" << p.value_dim
     << " C=" << chunk;
  if (!p.cu_seqlens.empty()) {
    os << " cu_seqlens=[";
    for (size_t i = 0; i < p.cu_seqlens.size(); ++i) os << (i ? "," : "") << p.cu_seqlens[i];
    os << "]";
  }
  return os.str();
}

/// Runs the three forms on `inputs` and compares: every output with the reference, the chunked scan's start
/// states and coefficients with the token-by-token pass's.
void checkInputs(const Forms& f, const Spec& spec, const ReferenceInputs& inputs, int64_t chunk) {
  TensorMap expected = runReference(spec, inputs).toMap();
  ExecutorOptions eo;
  eo.chunkSize = chunk;
  ExecutorResult sequential = executeChunkIR(*f.sequential, inputs, eo);
  ASSERT_TRUE(sequential.ok) << sequential.error;
  for (mlir::ModuleOp m : {*f.chunked, *f.plan}) {
    ExecutorResult r = executeChunkIR(m, inputs, eo);
    ASSERT_TRUE(r.ok) << r.error;
    for (const auto& [name, ref] : expected) {
      auto it = r.outputs.find(name);
      ASSERT_NE(it, r.outputs.end()) << "missing output " << name;
      EXPECT_LE(relativeError(it->second, ref), kTolerance) << name << " vs reference";
    }
  }
  ExecutorResult chunked = executeChunkIR(*f.chunked, inputs, eo);
  ASSERT_TRUE(chunked.ok) << chunked.error;
  for (const char* name : {"saved.scan_start", "saved.scan_coef"})
    EXPECT_LE(relativeError(chunked.outputs.at(name), sequential.outputs.at(name)), kPassTolerance) << name;
}

void checkShape(const Forms& f, const Spec& spec, const ReferenceProblem& shape, bool initialStates, int64_t chunk) {
  const std::uint64_t seed = freshSeed();
  SCOPED_TRACE(describe(shape, chunk) + " seed=" + std::to_string(seed));
  InputGenOptions opts;
  opts.initial_state = initialStates;
  opts.initial_precond_state = initialStates;
  checkInputs(f, spec, generateInputs(spec, shape, seed, ScalarType::F64, opts), chunk);
}

/// The shipped OSDN specs and variants of their timing, initial value and step size.
struct Variant {
  std::string name, spec;
  WriteTiming timing = WriteTiming::Pre;
  double init = 1.0, eta = 1.0;
};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }
std::vector<Variant> variants() {
  return {{"osdn", "osdn"},
          {"osdn_apf", "osdn_apf"},
          {"osdn_post_init_half", "osdn", WriteTiming::Post, 0.5, 1.0},
          {"osdn_apf_post_eta_half", "osdn_apf", WriteTiming::Post, 1.0, 0.5}};
}
Spec specOf(const Variant& v) {
  Spec s = osdn(v.spec);
  s.precond.hypergrad.timing = v.timing;
  s.precond.hypergrad.init = v.init;
  s.precond.hypergrad.eta = v.eta;
  return s;
}

class ChunkedVsReference : public ::testing::TestWithParam<Variant> {};

TEST_P(ChunkedVsReference, ReplacesTheTokenScan) {
  Context c;
  Forms f = lowerAll(c, specOf(GetParam()));
  EXPECT_EQ(count<chunk::HypergradPassOp>(*f.chunked), 0);
  EXPECT_EQ(count<chunk::HypergradChunkSummaryOp>(*f.chunked), 1);
  EXPECT_EQ(count<chunk::HypergradChunkPassOp>(*f.chunked), 1);
  EXPECT_EQ(count<chunk::HypergradApplyOp>(*f.chunked), count<chunk::HypergradApplyOp>(*f.sequential));
  std::vector<std::string> roles;
  f.plan->walk([&](chunk::KernelOp k) { roles.push_back(k.getRole().str()); });
  EXPECT_EQ(roles, (std::vector<std::string>{"precond_summary", "precond_scan", "chunk_local", "state_output"}));
}

TEST_P(ChunkedVsReference, PartialChunks) {
  Context c;
  const Spec spec = specOf(GetParam());
  Forms f = lowerAll(c, spec);
  ReferenceProblem p;
  p.batch = 2, p.seq_len = 200, p.heads_qk = 2, p.heads_v = 2, p.key_dim = 20, p.value_dim = 16;
  checkShape(f, spec, p, /*initialStates=*/true, 16);  // 13 chunks, the last of 8 tokens
  if (HasFatalFailure()) return;
  checkShape(f, spec, p, /*initialStates=*/false, 64);  // 4 chunks, the last of 8 tokens
}

TEST_P(ChunkedVsReference, VarlenWithEmptyAndOneTokenDocuments) {
  Context c;
  const Spec spec = specOf(GetParam());
  Forms f = lowerAll(c, spec);
  ReferenceProblem p;
  p.batch = 1, p.seq_len = 250, p.heads_qk = 2, p.heads_v = 2, p.key_dim = 16, p.value_dim = 20;
  p.cu_seqlens = {0, 3, 170, 171, 171, 190, 230};  // rows 230..249 are padding
  checkShape(f, spec, p, /*initialStates=*/true, 16);
  if (HasFatalFailure()) return;
  checkShape(f, spec, p, /*initialStates=*/false, 64);
}

INSTANTIATE_TEST_SUITE_P(Osdn, ChunkedVsReference, ::testing::ValuesIn(variants()),
                         [](const ::testing::TestParamInfo<Variant>& info) { return info.param.name; });

// ---- hard inputs -------------------------------------------------------------------------------------

ReferenceProblem smallShape() {
  ReferenceProblem p;
  p.batch = 2, p.seq_len = 70, p.heads_qk = 2, p.heads_v = 2, p.key_dim = 16, p.value_dim = 16;
  return p;
}

TEST(ParallelPrecondScan, ZeroKeysTakeNoStep) {
  // k = 0 gives k̂ = 0: κ = 0, the token's step is dropped; every third token of every head.
  Context c;
  const Spec spec = osdn("osdn_apf");
  Forms f = lowerAll(c, spec);
  const std::uint64_t seed = freshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  ReferenceInputs in = generateInputs(spec, smallShape(), seed, ScalarType::F64, {});
  Tensor& k = in.at("k");
  const int64_t K = k.dim(3), rows = k.numel() / K;
  for (int64_t r = 0; r < rows; r += 3)
    for (int64_t x = 0; x < K; ++x) k.set(r * K + x, 0.0);
  checkInputs(f, spec, in, 16);
}

TEST(ParallelPrecondScan, NearlyParallelKeysAtTheStabilityLimit) {
  // η β² = 2 with unit, nearly equal keys: the step's matrix has an eigenvalue near −1 (docs/math.md §5.2), the
  // chunk's (I + 𝒢) is far from the identity, and the chunked form must still match the token scan.
  Context c;
  Spec spec = osdn("osdn");
  spec.precond.hypergrad.eta = 2.0;
  Forms f = lowerAll(c, spec);
  const std::uint64_t seed = freshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  ReferenceInputs in = generateInputs(spec, smallShape(), seed, ScalarType::F64, {});
  Tensor& k = in.at("k");
  Tensor& beta = in.at("beta");
  const int64_t K = k.dim(3), rows = k.numel() / K;
  std::vector<double> first(K);
  for (int64_t x = 0; x < K; ++x) first[x] = k.get(x);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t x = 0; x < K; ++x) k.set(r * K + x, first[x] + 1e-3 * k.get(r * K + x));
  for (int64_t i = 0; i < beta.numel(); ++i) beta.set(i, 1.0);
  checkInputs(f, spec, in, 32);
}

TEST(ParallelPrecondScan, ComposesWithTheSegmentedStatePass) {
  // Long sequences: the chunked d-scan first, then the state pass split into segments (ChunkSegmentOps.td).
  Context c;
  const Spec spec = osdn("osdn_apf");
  Forms f = lowerAll(c, spec);
  mlir::OwningOpRef<mlir::ModuleOp> m = f.chunked->clone();
  SegmentStatePassOptions o;
  o.segmentChunks = 3;
  ASSERT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createSegmentStatePass(o))))
      << (c.diagnostics.empty() ? std::string() : c.diagnostics.back());
  ASSERT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createPartitionKernels())));
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*m)));
  EXPECT_EQ(count<chunk::HypergradChunkPassOp>(*m), 1);
  EXPECT_EQ(count<chunk::SegmentSummaryOp>(*m), 1);
  ReferenceProblem p;
  p.batch = 1, p.seq_len = 250, p.heads_qk = 2, p.heads_v = 2, p.key_dim = 16, p.value_dim = 16;
  p.cu_seqlens = {0, 3, 170, 171, 171, 190, 230};
  const std::uint64_t seed = freshSeed();
  SCOPED_TRACE(describe(p, 16) + " seed=" + std::to_string(seed));
  InputGenOptions opts;
  opts.initial_state = true;
  opts.initial_precond_state = true;
  ReferenceInputs in = generateInputs(spec, p, seed, ScalarType::F64, opts);
  TensorMap expected = runReference(spec, in).toMap();
  ExecutorOptions eo;
  eo.chunkSize = 16;
  ExecutorResult r = executeChunkIR(*m, in, eo);
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& [name, ref] : expected) EXPECT_LE(relativeError(r.outputs.at(name), ref), kTolerance) << name;
}

// ---- the pass's refusals, the clamp, the plan -------------------------------------------------------

TEST(ParallelPrecondScan, KeepsAClampedScanTokenByToken) {
  Context c;
  Spec spec = osdn("osdn");
  spec.precond.hypergrad.clamp_min = 0.25;
  spec.precond.hypergrad.clamp_max = 1.5;
  Forms f = lowerAll(c, spec);
  EXPECT_EQ(count<chunk::HypergradPassOp>(*f.chunked), 1);
  EXPECT_EQ(count<chunk::HypergradChunkSummaryOp>(*f.chunked), 0);
  checkShape(f, spec, smallShape(), /*initialStates=*/true, 16);
}

TEST(ParallelPrecondScan, LeavesOtherSpecsUnchanged) {
  Context c;
  for (const char* name : {"gdn", "pgdn", "pkda"}) {
    Forms f = lowerAll(c, osdn(name));
    std::string before, after;
    llvm::raw_string_ostream a(before), b(after);
    f.sequential->print(a);
    f.chunked->print(b);
    EXPECT_EQ(a.str(), b.str()) << name;
  }
}

TEST(ParallelPrecondScan, RefusesAPartitionedFunction) {
  Context c;
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, osdn("osdn"));
  mlir::PassManager pm(c.ctx.get());
  buildPipeline(pm);
  ASSERT_TRUE(mlir::succeeded(pm.run(*m)));
  EXPECT_TRUE(mlir::failed(runPass(*c.ctx, *m, createParallelPrecondScan())));
  ASSERT_FALSE(c.diagnostics.empty());
  EXPECT_NE(c.diagnostics.back().find("before --chunk-partition-kernels"), std::string::npos) << c.diagnostics.back();
}

TEST(ParallelPrecondScan, RefusesAnUnfusedScan) {
  Context c;
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, osdn("osdn"));
  ASSERT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createLowerToChunk())));
  EXPECT_TRUE(mlir::failed(runPass(*c.ctx, *m, createParallelPrecondScan())));
  ASSERT_FALSE(c.diagnostics.empty());
  EXPECT_NE(c.diagnostics.back().find("--chunk-fuse-preconditioner"), std::string::npos) << c.diagnostics.back();
}

TEST(ParallelPrecondScan, TheExecutorRefusesGroupedValueHeads) {
  // hypergrad_ogd needs HV = H (its step uses the gain of the key head's one value head).
  Context c;
  const Spec spec = osdn("osdn");
  Forms f = lowerAll(c, spec);
  ReferenceProblem p = smallShape();
  ReferenceInputs in = generateInputs(spec, p, 7, ScalarType::F64, {});
  p.heads_v = 4;
  ReferenceInputs wide = in;
  const int64_t B = p.batch, T = p.seq_len;
  wide["v"] = Tensor::fromDoubles(ScalarType::F64, {B, T, 4, p.value_dim},
                                  std::vector<double>(static_cast<size_t>(B * T * 4 * p.value_dim), 0.5));
  wide["beta"] = Tensor::fromDoubles(ScalarType::F64, {B, T, 4}, std::vector<double>(static_cast<size_t>(B * T * 4), 0.5));
  ExecutorResult r = executeChunkIR(*f.chunked, wide, {});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("HV == H"), std::string::npos) << r.error;
}

TEST(ParallelPrecondScan, TheEmitterWritesTheChunkedRoles) {
  // The launch contract runs the chunked scan as precond_summary + precond_scan (DeviceFeatures.h
  // hypergradChunked): the plan's roles and the manifest list both, in that order.
  Context c;
  const Spec spec = osdn("osdn");
  Forms f = lowerAll(c, spec);
  mlir::FailureOr<PlanSummary> s = summarizePlan(spec, *f.plan);
  ASSERT_TRUE(mlir::succeeded(s)) << (c.diagnostics.empty() ? std::string() : c.diagnostics.back());
  std::string error;
  mlir::FailureOr<std::string> man = emitManifest(spec, *s, &error);
  ASSERT_TRUE(mlir::succeeded(man)) << error;
  const size_t summary = man->find("dgps_osdn_fwd_precond_summary"), scan = man->find("dgps_osdn_fwd_precond_scan");
  ASSERT_NE(summary, std::string::npos) << *man;
  ASSERT_NE(scan, std::string::npos) << *man;
  EXPECT_LT(summary, scan);
  // (The chunked scan's workspace regions hgtri/hgvec are the tile IR's declaration, printed by emitPackage:
  // tests/lit/dgpsc/workspace.test checks them in osdn's manifest and their absence in a clamped spec's.)
}

TEST(ParallelPrecondScan, TheEmitterRefusesATokenScanPlanOfAnUnclampedSpec) {
  // Without a clamp the launch contract has no token-scan role list for OSDN: a plan that kept the token scan
  // (the pipeline without --chunk-parallel-precond-scan) must not become a package.
  Context c;
  const Spec spec = osdn("osdn");
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::importSpec(*c.ctx, spec);
  ASSERT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, mlir::createCanonicalizerPass())));
  ASSERT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createLowerToChunk())));
  ASSERT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, mlir::createCanonicalizerPass())));
  ASSERT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createFusePreconditioner())));
  ASSERT_TRUE(mlir::succeeded(runPass(*c.ctx, *m, createPartitionKernels())));
  c.diagnostics.clear();
  EXPECT_TRUE(mlir::failed(emitPackage(spec, *m)));
  ASSERT_FALSE(c.diagnostics.empty());
  EXPECT_NE(c.diagnostics.back().find("precond_summary"), std::string::npos) << c.diagnostics.back();
}

TEST(ParallelPrecondScan, AClampedSpecKeepsTheTokenScanRole) {
  Context c;
  Spec spec = osdn("osdn");
  spec.precond.hypergrad.clamp_min = 0.25;
  Forms f = lowerAll(c, spec);
  mlir::FailureOr<PlanSummary> s = summarizePlan(spec, *f.plan);
  ASSERT_TRUE(mlir::succeeded(s)) << (c.diagnostics.empty() ? std::string() : c.diagnostics.back());
  std::string error;
  mlir::FailureOr<std::string> man = emitManifest(spec, *s, &error);
  ASSERT_TRUE(mlir::succeeded(man)) << error;
  EXPECT_EQ(man->find("precond_summary"), std::string::npos) << *man;
  EXPECT_NE(man->find("dgps_osdn_fwd_precond_scan"), std::string::npos) << *man;
  EXPECT_EQ(man->find("hgtri"), std::string::npos) << *man;
}

}  // namespace
}  // namespace dgps::test
