// GPU check of the context-parallel forward with G simulated ranks on ONE GPU (docs/context_parallel.md) for
// one generated package ($DGPS_GPU_PACKAGE): each rank's piece of a packed batch is summarised by the
// package's segment kernels (publishPieceSummary -> Runtime::forwardSummary), the summaries are all-gathered
// through the device LocalCollective (one stream per rank), folded, and every piece runs from its corrected
// start (runPieceForward); o and the documents' final states must equal the single-GPU forward and the
// float64 reference. Cases: one sequence over G in {2, 4, 8} ranks; a packed batch whose documents cross
// pieces (one over several ranks, an empty document, a 1-token one, padding past cu[N]) over G in {2, 4, 8}
// and an uneven split with an empty rank and a rank of padding only. Also Runtime::forwardSummary alone: E
// against the float64 end state from zero, M·X0 + E against the float64 end state from X0. For the packages
// with a preconditioner state (ema_sq_squash: pgdn, pkda, pdn, atq; unclamped hypergrad_ogd: osdn, osdn_apf) the
// preconditioner round runs first (phase 0: publishPiecePrecondSummary, its own gather, the state folded before
// phase 1), the documents carry drawn initial preconditioner states and the final ones are checked too;
// Runtime::forwardPrecondSummary alone: Σ (or e) against the float64 end state from zero, Γ ⊙ A0 + Σ (or
// M d0 + e) against the one from A0 (d0). Fresh seeded inputs; outputs, scratch and summary buffers
// NaN-poisoned. Packages contextParallelSupport refuses (no launch.forward_segmented; a clamped hypergrad_ogd
// preconditioner) are skipped with its reason. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "GpuTestUtil.h"
#include "dgps/runtime/ContextParallel.h"
#include "dgps/runtime/ContextParallelForward.h"
#include "dgps/runtime/ContextParallelSupport.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/DeviceTensor.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/LocalCollective.h"

namespace dgps {
namespace {

using gputest::compare;
using gputest::ErrorStats;

// vs float64: the suite's forward tolerance (bf16 operands, fp32 accumulation and state).
constexpr double kTolRef = 1.5e-2;
// vs the single-GPU forward: both round the state to bf16 for the tensor cores at different points (a
// piece's start state comes through the fp32 fold E + M·h), as in SegmentedTest.
constexpr double kTolSingle = 1e-2;

/// Tokens [t0, t1) of a per-token host tensor [1, T, ...] (contiguous rows), as a tensor of its own: a rank of
/// a context-parallel job holds its piece in its own allocations (aligned as any allocation), not as a view
/// into another rank's memory.
Tensor tokenRows(const Tensor& x, std::int64_t t0, std::int64_t t1) {
  std::vector<std::int64_t> shape = x.shape();
  const std::size_t row = x.nbytes() / std::size_t(shape[1]);
  shape[1] = t1 - t0;
  const auto first = x.bytes().begin() + std::ptrdiff_t(std::size_t(t0) * row);
  return Tensor::fromBytes(x.dtype(), shape, std::vector<std::uint8_t>(first, first + std::ptrdiff_t(std::size_t(t1 - t0) * row)));
}

/// `rows` rows of `x` (a [1, T', ...] device tensor with T' >= rows) as a [1, rows, ...] view; an empty piece
/// keeps a one-row allocation, so its (unread) pointers are real ones, as a rank's empty buffers would be.
TensorView leadingRows(const DeviceTensor& x, std::int64_t rows) {
  std::vector<std::int64_t> shape = x.shape();
  shape[1] = rows;
  return TensorView(x.data(), x.dtype(), shape, x.device());
}

/// A rank's own device copy of tokens [t0, t1) of `x` (one zero row when the piece is empty).
DeviceTensor ownRows(const Tensor& x, std::int64_t t0, std::int64_t t1, int dev) {
  if (t1 > t0) return DeviceTensor::upload(tokenRows(x, t0, t1), dev);
  std::vector<std::int64_t> shape = x.shape();
  shape[1] = 1;
  return DeviceTensor::upload(Tensor(x.dtype(), shape), dev);
}

struct CpOutputs {
  Tensor o;
  Tensor final_state;
  Tensor final_precond_state;  ///< [N, H, K] with the preconditioner round, else empty
};

/// The context-parallel forward of `in` (packed, B = 1, with cu_seqlens) over the ranks of `bounds`.
CpOutputs runSimulatedRanks(Runtime& rt, const Package& pkg, const ReferenceInputs& in,
                            const std::vector<std::int64_t>& bounds) {
  const int dev = 0;
  const Tensor& cuHost = in.at("cu_seqlens");
  std::vector<std::int64_t> cu(std::size_t(cuHost.numel()));
  for (std::size_t i = 0; i < cu.size(); ++i) cu[i] = cuHost.getInt(std::int64_t(i));
  const cp::Plan plan = cp::makePlan(cu, bounds);
  const int G = plan.ranks;
  const Tensor& q = in.at("q");
  const Tensor& v = in.at("v");
  const std::int64_t T = q.dim(1), K = q.dim(3), HV = v.dim(2), V = v.dim(3), N = plan.numDocs;

  const std::int64_t H = q.dim(2);
  const ContextParallelSupport support = contextParallelSupport(pkg.manifest());
  const bool precond = support.precond_round;
  DeviceTensor docFinal(ScalarType::F32, {N, HV, K, V}, dev), docInitial;
  docFinal.poison();
  if (in.count("initial_state")) docInitial = DeviceTensor::upload(in.at("initial_state"), dev);
  const cp::SummaryLayout layout = memorySummaryLayout(N, HV, K, V);
  const std::size_t slotBytes = layout.slotElements() * 4;
  // the preconditioner round's documents' accumulators, slot layout and the preconditioner's global input
  DeviceTensor pDocFinal, pDocInitial, center;
  const cp::SummaryLayout pLayout = precondSummaryLayout(N, H, K, support.precond_full_map);
  const std::size_t pSlotBytes = pLayout.slotElements() * 4;
  if (precond) {
    pDocFinal = DeviceTensor(ScalarType::F32, {N, H, K}, dev);
    pDocFinal.poison();
    if (in.count("initial_precond_state")) pDocInitial = DeviceTensor::upload(in.at("initial_precond_state"), dev);
    if (in.count("precond_center")) center = DeviceTensor::upload(in.at("precond_center"), dev);
  }

  DeviceContextGuard guard(dev);
  const CudaDriver& drv = cudaDriver();
  struct Rank {
    CUstream stream = nullptr;
    DeviceTensor recv, cu, localInit, localFinal, o;
    DeviceTensor pRecv, pLocalInit, pLocalFinal;  // the preconditioner round's
    std::map<std::string, DeviceTensor> inputs;  // the rank's own copies of its tokens
    ForwardTensors piece;
    PieceStates states;
    PiecePrecond pStates;
    LaunchOptions opts;
  };
  std::vector<Rank> ranks(static_cast<std::size_t>(G));
  for (int r = 0; r < G; ++r) {
    Rank& k = ranks[std::size_t(r)];
    const cp::RankPlan& rp = plan.rank[std::size_t(r)];
    checkCuda(drv.cuStreamCreate(&k.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    k.opts.stream = k.stream;
    k.recv = DeviceTensor(ScalarType::F32, {std::int64_t(G) * std::int64_t(layout.slotElements())}, dev);
    k.recv.poison();
    Tensor localCu(ScalarType::I64, {std::int64_t(rp.localCuSeqlens.size())});
    for (std::size_t i = 0; i < rp.localCuSeqlens.size(); ++i) localCu.setInt(std::int64_t(i), rp.localCuSeqlens[i]);
    k.cu = DeviceTensor::upload(localCu, dev);
    for (const char* name : {"q", "k", "v", "g", "beta", "precond_g", "precond_beta"}) {
      if (!in.count(name)) continue;
      const DeviceTensor& own = k.inputs.emplace(name, ownRows(in.at(name), rp.begin, rp.end, dev)).first->second;
      const TensorView view = leadingRows(own, rp.end - rp.begin);
      if (std::string(name) == "q") k.piece.q = view;
      if (std::string(name) == "k") k.piece.k = view;
      if (std::string(name) == "v") k.piece.v = view;
      if (std::string(name) == "g") k.piece.g = view;
      if (std::string(name) == "beta") k.piece.beta = view;
      if (std::string(name) == "precond_g") k.piece.precond_g = view;
      if (std::string(name) == "precond_beta") k.piece.precond_beta = view;
    }
    if (center.data()) k.piece.precond_center = center.view();
    k.o = DeviceTensor(q.dtype(), {1, std::max<std::int64_t>(rp.end - rp.begin, 1), HV, V}, dev);
    k.o.poison();
    k.piece.o = leadingRows(k.o, rp.end - rp.begin);
    k.piece.cu_seqlens = k.cu.view();
    const std::int64_t n = std::int64_t(rp.fragments.size());
    if (in.count("initial_state")) k.states.doc_initial = docInitial.view();
    k.states.doc_final = docFinal.view();
    if (n > 0) {
      k.localInit = DeviceTensor(ScalarType::F32, {n, HV, K, V}, dev);
      k.localFinal = DeviceTensor(ScalarType::F32, {n, HV, K, V}, dev);
      k.localInit.poison();
      k.localFinal.poison();
      k.states.local_initial = k.localInit.view();
      k.states.local_final = k.localFinal.view();
    }
    if (precond) {
      k.pRecv = DeviceTensor(ScalarType::F32, {std::int64_t(G) * std::int64_t(pLayout.slotElements())}, dev);
      k.pRecv.poison();
      k.pStates.gathered = k.pRecv.data();
      if (pDocInitial.data()) k.pStates.doc_initial = pDocInitial.view();
      k.pStates.doc_final = pDocFinal.view();
      if (n > 0) {
        k.pLocalInit = DeviceTensor(ScalarType::F32, {n, H, K}, dev);
        k.pLocalFinal = DeviceTensor(ScalarType::F32, {n, H, K}, dev);
        k.pLocalInit.poison();
        k.pLocalFinal.poison();
        k.pStates.local_initial = k.pLocalInit.view();
        k.pStates.local_final = k.pLocalFinal.view();
      }
    }
  }
  auto group = LocalCollective::group(G, LocalMemory::Device);
  // each phase and its gather for every rank before the next phase (a LocalCollective gather completes at the
  // last rank's call): phase 0 (the accumulators) when preconditioned ...
  if (precond)
    for (int r = 0; r < G; ++r) {
      Rank& k = ranks[std::size_t(r)];
      void* send = static_cast<char*>(k.pRecv.data()) + std::size_t(r) * pSlotBytes;  // in place
      publishPiecePrecondSummary(rt, pkg, plan, r, k.piece, send, k.opts);
      gatherSummaries(*group[std::size_t(r)], plan, pLayout, 4, send, k.pRecv.data(), k.pRecv.nbytes(), k.stream);
    }
  // ... phase 1 (the memory state) ...
  for (int r = 0; r < G; ++r) {
    Rank& k = ranks[std::size_t(r)];
    void* send = static_cast<char*>(k.recv.data()) + std::size_t(r) * slotBytes;  // in place
    if (precond)
      publishPieceSummary(rt, pkg, plan, r, k.piece, k.pStates, send, k.opts);
    else
      publishPieceSummary(rt, pkg, plan, r, k.piece, send, k.opts);
    gatherSummaries(*group[std::size_t(r)], plan, layout, 4, send, k.recv.data(), k.recv.nbytes(), k.stream);
  }
  // ... then phase 2 for every rank
  for (int r = 0; r < G; ++r) {
    Rank& k = ranks[std::size_t(r)];
    if (precond)
      runPieceForward(rt, pkg, plan, r, k.piece, k.recv.data(), k.states, k.pStates, k.opts);
    else
      runPieceForward(rt, pkg, plan, r, k.piece, k.recv.data(), k.states, k.opts);
  }
  for (Rank& k : ranks) checkCuda(drv.cuStreamSynchronize(k.stream), "cuStreamSynchronize");
  for (Rank& k : ranks) drv.cuStreamDestroy(k.stream);
  // o of the whole batch: each rank's rows in place (every token belongs to exactly one rank)
  Tensor o(q.dtype(), {1, T, HV, V});
  const std::size_t row = o.nbytes() / std::size_t(T);
  for (int r = 0; r < G; ++r) {
    const cp::RankPlan& rp = plan.rank[std::size_t(r)];
    const Tensor piece = ranks[std::size_t(r)].o.download();
    std::copy_n(piece.bytes().begin(), std::size_t(rp.end - rp.begin) * row, o.data() + std::size_t(rp.begin) * row);
  }
  return {o, docFinal.download(), precond ? pDocFinal.download() : Tensor()};
}

class ContextParallelGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DGPS_REQUIRE_GPU();
    const std::string dir = gputest::packageUnderTest();
    if (dir.empty()) GTEST_SKIP() << "no package: generated/ held no package when the build was configured";
    pkg_ = std::make_unique<Package>(Package::open(dir));
    const ContextParallelSupport support = contextParallelSupport(pkg_->manifest());
    if (!support.supported) GTEST_SKIP() << "package " << pkg_->name() << " " << support.reason;
    precond_ = support.precond_round;
    if (!pkg_->spec().varlen) GTEST_SKIP() << pkg_->name() << " takes no cu_seqlens (pieces are varlen batches)";
    RuntimeOptions o;
    o.cache_dir = std::string(DGPS_GPU_CACHE_DIR);
    rt_ = std::make_unique<Runtime>(o);
  }

  ReferenceProblem shape(std::vector<std::int64_t> cu, std::int64_t T) const {
    const Spec& sp = pkg_->spec();
    ReferenceProblem s;
    s.batch = 1;
    s.seq_len = T;
    s.heads_qk = sp.heads_qk > 0 ? sp.heads_qk : 2;
    s.heads_v = s.heads_qk * sp.gva_ratio;
    int dim = sp.key_dims.front();
    for (int c : {128, 64})
      if (std::count(sp.key_dims.begin(), sp.key_dims.end(), c) && std::count(sp.value_dims.begin(), sp.value_dims.end(), c)) {
        dim = c;
        break;
      }
    s.key_dim = s.value_dim = dim;
    s.cu_seqlens = std::move(cu);
    return s;
  }

  // The simulated ranks against float64 and against the single-GPU forward, for each rank split.
  void check(const ReferenceProblem& s, std::uint64_t seed, const std::vector<std::vector<std::int64_t>>& splits) {
    const ScalarType act = toScalarType(pkg_->spec().input_dtypes.front());
    const ReferenceInputs in = generateInputs(pkg_->spec(), s, seed, act);
    const ReferenceOutputs ref = runReference(pkg_->spec(), in);
    const gputest::GpuOutputs single = gputest::gpuForward(*rt_, *pkg_, in);
    for (const std::vector<std::int64_t>& bounds : splits) {
      std::string text;
      for (std::int64_t b : bounds) text += (text.empty() ? "" : ",") + std::to_string(b);
      SCOPED_TRACE("rank bounds {" + text + "}");
      const CpOutputs got = runSimulatedRanks(*rt_, *pkg_, in, bounds);
      const ErrorStats eo = compare(got.o, ref.o), eos = compare(got.o, single.o);
      EXPECT_TRUE(eo.finite && eo.rel <= kTolRef) << "o vs float64: " << eo.str();
      EXPECT_TRUE(eos.finite && eos.rel <= kTolSingle) << "o vs single GPU: " << eos.str();
      if (ref.has_final_state && single.has_final_state) {
        const ErrorStats es = compare(got.final_state, ref.final_state);
        const ErrorStats ess = compare(got.final_state, single.final_state);
        EXPECT_TRUE(es.finite && es.rel <= kTolRef) << "final_state vs float64: " << es.str();
        EXPECT_TRUE(ess.finite && ess.rel <= kTolSingle) << "final_state vs single GPU: " << ess.str();
      }
      if (precond_) {
        ASSERT_TRUE(ref.has_final_precond_state && single.has_final_precond_state);
        const ErrorStats ep = compare(got.final_precond_state, ref.final_precond_state);
        const ErrorStats eps = compare(got.final_precond_state, single.final_precond_state);
        EXPECT_TRUE(ep.finite && ep.rel <= kTolRef) << "final_precond_state vs float64: " << ep.str();
        EXPECT_TRUE(eps.finite && eps.rel <= kTolSingle) << "final_precond_state vs single GPU: " << eps.str();
      }
    }
  }

  bool precond_ = false;
  std::unique_ptr<Package> pkg_;
  std::unique_ptr<Runtime> rt_;
};

TEST_F(ContextParallelGpuTest, OneSequenceOverTwoFourAndEightRanksEqualsOneGpu) {
  const std::int64_t T = 3000;  // no multiple of any chunk length: partial chunks at piece ends
  check(shape({0, T}, T), 5100, {cp::equalRankBounds(T, 2), cp::equalRankBounds(T, 4), cp::equalRankBounds(T, 8)});
}

TEST_F(ContextParallelGpuTest, PackedDocumentsCrossingPiecesEqualOneGpu) {
  // 700, 1200, 1, 699, 0 (empty), 500 tokens, then 200 rows of padding
  const std::vector<std::int64_t> cu{0, 700, 1900, 1901, 2600, 2600, 3100};
  const std::int64_t T = 3300;
  check(shape(cu, T), 5200,
        {cp::equalRankBounds(T, 2), cp::equalRankBounds(T, 4), cp::equalRankBounds(T, 8),
         {0, 150, 1850, 1850, 2650, 3150, 3300}});  // uneven: an empty rank, a rank of padding only
}

// Runtime::forwardSummary alone, on one sequence with a random start X0: E is the float64 end state from
// zero, and M·X0 + E the float64 end state from X0 (the summary is the sequence's affine map).
TEST_F(ContextParallelGpuTest, ForwardSummaryIsTheSequencesAffineMap) {
  const std::int64_t T = 1500;
  const ReferenceProblem s = shape({0, T}, T);
  const ScalarType act = toScalarType(pkg_->spec().input_dtypes.front());
  ReferenceInputs in = generateInputs(pkg_->spec(), s, 5300, act);
  ASSERT_TRUE(in.count("initial_state")) << "the spec takes an initial state";
  const ReferenceOutputs fromX0 = runReference(pkg_->spec(), in);
  const Tensor x0 = in.at("initial_state");
  Tensor zero = x0;
  for (std::int64_t i = 0; i < zero.numel(); ++i) zero.set(i, 0.0);
  ReferenceInputs inZero = in;
  inZero["initial_state"] = zero;
  const ReferenceOutputs fromZero = runReference(pkg_->spec(), inZero);
  ASSERT_TRUE(fromX0.has_final_state);

  const int dev = 0;
  std::map<std::string, DeviceTensor> d;
  for (const auto& kv : in) d.emplace(kv.first, DeviceTensor::upload(kv.second, dev));
  const std::int64_t HV = s.heads_v, K = s.key_dim, V = s.value_dim;
  ForwardTensors t;
  t.q = d.at("q").view();
  t.k = d.at("k").view();
  t.v = d.at("v").view();
  if (d.count("g")) t.g = d.at("g").view();
  if (d.count("beta")) t.beta = d.at("beta").view();
  if (d.count("precond_g")) t.precond_g = d.at("precond_g").view();
  if (d.count("precond_beta")) t.precond_beta = d.at("precond_beta").view();
  if (d.count("precond_center")) t.precond_center = d.at("precond_center").view();
  // the memory summary of a preconditioned package starts the accumulator where the reference does
  if (d.count("initial_precond_state")) t.initial_precond_state = d.at("initial_precond_state").view();
  t.cu_seqlens = d.at("cu_seqlens").view();
  DeviceTensor o(in.at("q").dtype(), {1, T, HV, V}, dev), trans(ScalarType::F32, {HV, K, K}, dev),
      ext(ScalarType::F32, {HV, K, V}, dev);
  o.poison();
  trans.poison();
  ext.poison();
  t.o = o.view();
  rt_->forwardSummary(*pkg_, t, 0, trans.view(), ext.view());
  {
    DeviceContextGuard guard(dev);
    checkCuda(cudaDriver().cuCtxSynchronize(), "cuCtxSynchronize");
  }
  const Tensor M = trans.download(), E = ext.download();
  Tensor end(ScalarType::F64, {1, HV, K, V});  // E as one sequence's state, the reference's shape
  for (std::int64_t i = 0; i < end.numel(); ++i) end.set(i, E.get(i));
  const ErrorStats ee = compare(end, fromZero.final_state);
  EXPECT_TRUE(ee.finite && ee.rel <= kTolRef) << "E vs float64 from zero: " << ee.str();
  Tensor affine(ScalarType::F64, {1, HV, K, V});
  for (std::int64_t h = 0; h < HV; ++h)
    for (std::int64_t a = 0; a < K; ++a)
      for (std::int64_t c = 0; c < V; ++c) {
        double acc = E.get((h * K + a) * V + c);
        for (std::int64_t b = 0; b < K; ++b) acc += M.get((h * K + a) * K + b) * x0.get((h * K + b) * V + c);
        affine.set((h * K + a) * V + c, acc);
      }
  const ErrorStats ea = compare(affine, fromX0.final_state);
  EXPECT_TRUE(ea.finite && ea.rel <= kTolRef) << "M·X0 + E vs float64 from X0: " << ea.str();
}

// Runtime::forwardPrecondSummary alone (packages with the preconditioner round), on a packed batch whose second
// document is summarised: Σ (e) is the float64 end state from zero, Γ ⊙ A0 + Σ (M d0 + e, hypergrad_ogd's K×K map:
// K + 1 scans) the float64 end state from A0 (d0).
TEST_F(ContextParallelGpuTest, ForwardPrecondSummaryIsTheAccumulatorsAffineMap) {
  if (!precond_) GTEST_SKIP() << pkg_->name() << " has no preconditioner round (no preconditioner state)";
  const bool full = contextParallelSupport(pkg_->manifest()).precond_full_map;
  const std::int64_t T = 1600;
  const ReferenceProblem s = shape({0, 300, 1500}, T);  // document 1: 1200 tokens, then padding
  const ScalarType act = toScalarType(pkg_->spec().input_dtypes.front());
  ReferenceInputs in = generateInputs(pkg_->spec(), s, 5400, act);
  ASSERT_TRUE(in.count("initial_precond_state")) << "the spec takes an initial accumulator";
  const ReferenceOutputs fromA0 = runReference(pkg_->spec(), in);
  Tensor zero = in.at("initial_precond_state");
  for (std::int64_t i = 0; i < zero.numel(); ++i) zero.set(i, 0.0);
  ReferenceInputs inZero = in;
  inZero["initial_precond_state"] = zero;
  const ReferenceOutputs fromZero = runReference(pkg_->spec(), inZero);
  ASSERT_TRUE(fromA0.has_final_precond_state);

  const int dev = 0;
  std::map<std::string, DeviceTensor> d;
  for (const auto& kv : in) d.emplace(kv.first, DeviceTensor::upload(kv.second, dev));
  const std::int64_t H = s.heads_qk, K = s.key_dim;
  ForwardTensors t;
  t.q = d.at("q").view();
  t.k = d.at("k").view();
  t.v = d.at("v").view();
  if (d.count("g")) t.g = d.at("g").view();
  if (d.count("beta")) t.beta = d.at("beta").view();
  if (d.count("precond_g")) t.precond_g = d.at("precond_g").view();
  if (d.count("precond_beta")) t.precond_beta = d.at("precond_beta").view();
  if (d.count("precond_center")) t.precond_center = d.at("precond_center").view();
  t.initial_precond_state = d.at("initial_precond_state").view();  // ignored: the summary starts from 0 and 1
  t.cu_seqlens = d.at("cu_seqlens").view();
  DeviceTensor o(in.at("q").dtype(), {1, T, s.heads_v, s.value_dim}, dev);  // validated, not written
  t.o = o.view();
  const std::vector<std::int64_t> mapShape =
      full ? std::vector<std::int64_t>{H, K, K} : std::vector<std::int64_t>{H, K};
  DeviceTensor gamma(ScalarType::F32, mapShape, dev), sigma(ScalarType::F32, {H, K}, dev);
  gamma.poison();
  sigma.poison();
  rt_->forwardPrecondSummary(*pkg_, t, 1, gamma.view(), sigma.view());
  {
    DeviceContextGuard guard(dev);
    checkCuda(cudaDriver().cuCtxSynchronize(), "cuCtxSynchronize");
  }
  const Tensor G = gamma.download(), S = sigma.download(), A0 = in.at("initial_precond_state");
  Tensor fromZeroEnd(ScalarType::F64, {1, H, K}), sigmaEnd(ScalarType::F64, {1, H, K});
  Tensor affine(ScalarType::F64, {1, H, K}), fromA0End(ScalarType::F64, {1, H, K});
  for (std::int64_t i = 0; i < H * K; ++i) {
    fromZeroEnd.set(i, fromZero.final_precond_state.get(H * K + i));
    fromA0End.set(i, fromA0.final_precond_state.get(H * K + i));
    sigmaEnd.set(i, S.get(i));
    if (!full) {
      affine.set(i, G.get(i) * A0.get(H * K + i) + S.get(i));
      continue;
    }
    const std::int64_t h = i / K;  // d_end[h][x] = Σ_y M[h][x][y] d0[h][y] + e[h][x]
    double acc = S.get(i);
    for (std::int64_t y = 0; y < K; ++y) acc += G.get(i * K + y) * A0.get(H * K + h * K + y);
    affine.set(i, acc);
  }
  const ErrorStats es = compare(sigmaEnd, fromZeroEnd);
  EXPECT_TRUE(es.finite && es.rel <= 1e-4) << "Σ (e) vs float64 from zero: " << es.str();
  const ErrorStats ea = compare(affine, fromA0End);
  EXPECT_TRUE(ea.finite && ea.rel <= 1e-4) << "Γ ⊙ A0 + Σ (M d0 + e) vs float64 from A0: " << ea.str();
  if (full) return;
  // Γ is one gate product per key head: the same in every channel
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t k = 1; k < K; ++k) EXPECT_EQ(G.get(h * K + k), G.get(h * K)) << "head " << h << " channel " << k;
}

}  // namespace
}  // namespace dgps
