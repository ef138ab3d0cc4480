// Context parallelism end to end in float64 (docs/context_parallel.md): G ∈ {2, 4, 8} simulated ranks
// each hold a contiguous piece of a packed varlen batch (documents cross rank boundaries, one spans five
// ranks, one is empty, the tail is padding, some ranks hold padding only). Each rank computes the
// summaries of its piece with the float64 reference, the slots are all-gathered through LocalCollective
// (host memory), each rank folds them with cp::rankStartStates (segment::foldSegments) and reruns its
// piece from the folded start states. Outputs and final states must equal the single-sequence reference,
// with initial states on every document, for scalar and per-channel decay, grouped value heads and both
// preconditioner sources (their carried state gathered and folded first, in its own round).
#include <algorithm>
#include <limits>

#include "TestUtil.h"
#include "dgps/dsl/ContextParallelPlan.h"
#include "dgps/runtime/ContextParallel.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/LocalCollective.h"

namespace dgps::test {
namespace {

using segment::FoldShape;

constexpr double kTolerance = 1e-9;
const double kNaN = std::numeric_limits<double>::quiet_NaN();

/// One simulated context-parallel forward over a plan.
class SimulatedRun {
 public:
  SimulatedRun(const Spec& spec, const ReferenceInputs& full, const cp::Plan& plan, std::int64_t H, std::int64_t HV,
               std::int64_t K, std::int64_t V)
      : spec_(spec), full_(full), plan_(plan), H_(H), HV_(HV), K_(K), V_(V) {}

  /// Rank r's local varlen batch (its rows of every per-token input, its fragments as documents) run by
  /// the reference from the given per-fragment start states, with v zeroed when asked.
  ReferenceOutputs runRank(int r, const Tensor& state, const Tensor* pstate, bool zeroValues) const {
    const cp::RankPlan& rp = plan_.rank[r];
    ReferenceInputs in;
    for (const auto& [name, t] : full_) {
      if (name == "cu_seqlens" || name == "initial_state" || name == "initial_precond_state") continue;
      in[name] = name == "precond_center" ? t : sliceT(t, rp.begin, rp.end);
    }
    if (zeroValues)
      in["v"] = Tensor::fromDoubles(ScalarType::F64, in["v"].shape(), std::vector<double>(in["v"].numel(), 0.0));
    in["cu_seqlens"] = Tensor::fromDoubles(ScalarType::I64, {static_cast<std::int64_t>(rp.localCuSeqlens.size())},
                                           std::vector<double>(rp.localCuSeqlens.begin(), rp.localCuSeqlens.end()));
    in["initial_state"] = state;
    if (pstate) in["initial_precond_state"] = *pstate;
    return runReference(spec_, in);
  }

  /// Gathers every rank's slot through a host LocalCollective (gatherSummaries): out[r] is rank r's
  /// received buffer, poisoned before the gather.
  std::vector<std::vector<double>> gather(const cp::SummaryLayout& layout,
                                          const std::vector<std::vector<double>>& slots) const {
    const int G = plan_.ranks;
    const std::size_t slot = layout.slotElements();
    auto ranks = LocalCollective::group(G, LocalMemory::Host);
    std::vector<std::vector<double>> recv(G, std::vector<double>(G * slot, kNaN));
    for (int r = 0; r < G; ++r)
      gatherSummaries(*ranks[r], plan_, layout, sizeof(double), slots[r].data(), recv[r].data(),
                      recv[r].size() * sizeof(double), nullptr);
    return recv;
  }

  /// Round 1: the preconditioner state, whose updates do not read the memory state. Its summary of a
  /// fragment is p_end = M p_start + E: E from p = 0, M's columns from the unit vectors (the diagonal of
  /// the squash accumulator's M from one run from p = 1). Returns each rank's start states [frags, H, K].
  std::vector<Tensor> precondStarts() const {
    const bool diagonal = usesSquash(spec_);
    cp::SummaryLayout layout{{FoldShape{plan_.numDocs, H_, K_, 1, diagonal}}};
    const int G = plan_.ranks;
    std::vector<std::vector<double>> slots(G, std::vector<double>(layout.slotElements(), kNaN));
    for (int r = 0; r < G; ++r) {
      const cp::RankPlan& rp = plan_.rank[r];
      if (!rp.continuesOut) continue;  // its slot is never read: left poisoned
      const std::int64_t n = static_cast<std::int64_t>(rp.fragments.size()), last = n - 1;
      auto fill = [&](auto&& value) {
        std::vector<double> d(n * H_ * K_);
        for (std::size_t i = 0; i < d.size(); ++i) d[i] = value(static_cast<std::int64_t>(i) % K_);
        return Tensor::fromDoubles(ScalarType::F64, {n, H_, K_}, d);
      };
      const Tensor zeroS = zeros({n, HV_, K_, V_});
      const Tensor p0 = fill([](std::int64_t) { return 0.0; });
      const std::vector<double> E = runRank(r, zeroS, &p0, false).final_precond_state.toDoubles();
      double* M = slots[r].data() + layout.transOffset(0);
      double* Eslot = slots[r].data() + layout.extOffset(0);
      for (std::int64_t x = 0; x < H_ * K_; ++x) Eslot[x] = E[last * H_ * K_ + x];
      for (std::int64_t j = 0; j < (diagonal ? 1 : K_); ++j) {
        const Tensor unit = fill([&](std::int64_t k) { return diagonal || k == j ? 1.0 : 0.0; });
        const std::vector<double> p = runRank(r, zeroS, &unit, false).final_precond_state.toDoubles();
        for (std::int64_t h = 0; h < H_; ++h)
          for (std::int64_t k = 0; k < K_; ++k) {
            const double col = p[(last * H_ + h) * K_ + k] - E[(last * H_ + h) * K_ + k];
            if (diagonal)
              M[h * K_ + k] = col;
            else
              M[(h * K_ + k) * K_ + j] = col;
          }
      }
    }
    return fold(layout, gather(layout, slots), full_.at("initial_precond_state").toDoubles(), {H_, K_});
  }

  /// Round 2: the memory state, E from S = 0, M from S = column blocks of the identity with v = 0 (M acts
  /// on the K rows; block j0 holds columns [j0, j0 + V) of I_K, zero-padded), both from the folded
  /// preconditioner start states. Returns each rank's start states [frags, HV, K, V].
  std::vector<Tensor> memoryStarts(const std::vector<Tensor>& pStarts) const {
    cp::SummaryLayout layout{{FoldShape{plan_.numDocs, HV_, K_, V_, false}}};
    const int G = plan_.ranks;
    const bool precond = hasPrecond(spec_);
    std::vector<std::vector<double>> slots(G, std::vector<double>(layout.slotElements(), kNaN));
    for (int r = 0; r < G; ++r) {
      const cp::RankPlan& rp = plan_.rank[r];
      if (!rp.continuesOut) continue;
      const std::int64_t n = static_cast<std::int64_t>(rp.fragments.size()), last = n - 1, X = HV_ * K_ * V_;
      const Tensor* p = precond ? &pStarts[r] : nullptr;
      const std::vector<double> E = runRank(r, zeros({n, HV_, K_, V_}), p, false).final_state.toDoubles();
      std::copy(E.begin() + last * X, E.begin() + (last + 1) * X, slots[r].begin() + layout.extOffset(0));
      double* M = slots[r].data() + layout.transOffset(0);
      for (std::int64_t j0 = 0; j0 < K_; j0 += V_) {
        std::vector<double> eye(n * X, 0.0);
        for (std::int64_t x = 0; x < n * HV_; ++x)
          for (std::int64_t c = 0; c < V_ && j0 + c < K_; ++c) eye[(x * K_ + j0 + c) * V_ + c] = 1.0;
        const Tensor I = Tensor::fromDoubles(ScalarType::F64, {n, HV_, K_, V_}, eye);
        const std::vector<double> m = runRank(r, I, p, true).final_state.toDoubles();
        for (std::int64_t hv = 0; hv < HV_; ++hv)
          for (std::int64_t k = 0; k < K_; ++k)
            for (std::int64_t c = 0; c < V_ && j0 + c < K_; ++c)
              M[(hv * K_ + k) * K_ + j0 + c] = m[last * X + (hv * K_ + k) * V_ + c];
      }
    }
    return fold(layout, gather(layout, slots), full_.at("initial_state").toDoubles(), {HV_, K_, V_});
  }

  /// Each rank's start states [frags, inner...] folded from its own gathered buffer.
  std::vector<Tensor> fold(const cp::SummaryLayout& layout, const std::vector<std::vector<double>>& recv,
                           const std::vector<double>& docInit, std::vector<std::int64_t> inner) const {
    std::vector<Tensor> starts;
    const std::size_t X = layout.stateElements(0);
    for (int r = 0; r < plan_.ranks; ++r) {
      const std::int64_t n = static_cast<std::int64_t>(plan_.rank[r].fragments.size());
      std::vector<double> out(n * X, kNaN);
      cp::rankStartStates<double>(plan_, r, layout, 0, recv[r].data(), docInit.data(), out.data());
      std::vector<std::int64_t> shape = inner;
      shape.insert(shape.begin(), n);
      starts.push_back(n ? Tensor::fromDoubles(ScalarType::F64, shape, out) : Tensor());
    }
    return starts;
  }

  static Tensor zeros(const std::vector<std::int64_t>& shape) {
    std::int64_t size = 1;
    for (std::int64_t d : shape) size *= d;
    return Tensor::fromDoubles(ScalarType::F64, shape, std::vector<double>(size, 0.0));
  }

 private:
  Spec spec_;
  const ReferenceInputs& full_;
  const cp::Plan& plan_;
  std::int64_t H_, HV_, K_, V_;
};

class ContextParallelEndToEnd : public ::testing::TestWithParam<Spec> {};

TEST_P(ContextParallelEndToEnd, GatheredFoldedRanksEqualTheSingleSequence) {
  const Spec spec = GetParam();
  const bool precond = hasPrecond(spec);
  const std::int64_t H = 2, HV = H * spec.gva_ratio, K = 6, V = 5, T = 120;
  // Documents of 9, 60, 1, 0 and 35 tokens; rows 105..119 are padding.
  const std::vector<std::int64_t> cu = {0, 9, 69, 70, 70, 105};
  const std::int64_t N = static_cast<std::int64_t>(cu.size()) - 1;
  DGPS_SEEDED(seed);
  const ReferenceInputs full = inputs64(spec, shapeOf(1, T, H, HV, K, V, cu), seed);
  const ReferenceOutputs expected = runReference(spec, full);

  std::vector<std::vector<std::int64_t>> splits;
  for (int G : {2, 4, 8}) splits.push_back(cp::equalRankBounds(T, G));
  splits.push_back({0, 5, 9, 9, 40, 69, 70, 100, 120});  // uneven: an empty rank, ranks ending on documents
  for (const auto& bounds : splits) {
    const cp::Plan plan = cp::makePlan(cu, bounds);
    const int G = plan.ranks;
    SCOPED_TRACE("G=" + std::to_string(G) + " bounds end " + std::to_string(bounds[1]));
    ASSERT_NE(std::count_if(plan.crossingDoc.begin(), plan.crossingDoc.end(), [](auto d) { return d >= 0; }), 0);
    SimulatedRun run(spec, full, plan, H, HV, K, V);

    std::vector<double> pFinal(N * H * K, kNaN), sFinal(N * HV * K * V, kNaN);  // poisoned
    std::vector<Tensor> pStarts(G);
    if (precond) pStarts = run.precondStarts();
    const std::vector<Tensor> sStarts = run.memoryStarts(pStarts);

    // Every rank reruns its piece from its folded start states and writes the final states it holds
    // (a rank without fragments still writes those of the empty documents assigned to it).
    const std::vector<double> sInit = full.at("initial_state").toDoubles();
    const std::vector<double> pInit = precond ? full.at("initial_precond_state").toDoubles() : std::vector<double>();
    std::vector<double> o(T * HV * V, kNaN);
    for (int r = 0; r < G; ++r) {
      const cp::RankPlan& rp = plan.rank[r];
      std::vector<double> fs, fp;
      if (rp.fragments.empty()) {  // padding only: o is 0 there, as in the reference
        std::fill(o.begin() + rp.begin * HV * V, o.begin() + rp.end * HV * V, 0.0);
      } else {
        const ReferenceOutputs out = run.runRank(r, sStarts[r], precond ? &pStarts[r] : nullptr, false);
        const std::vector<double> po = out.o.toDoubles();
        std::copy(po.begin(), po.end(), o.begin() + rp.begin * HV * V);
        fs = out.final_state.toDoubles();
        if (precond) fp = out.final_precond_state.toDoubles();
      }
      cp::scatterFinalStates<double>(plan, r, FoldShape{N, HV, K, V, false}, fs.data(), sInit.data(), sFinal.data());
      if (precond)
        cp::scatterFinalStates<double>(plan, r, FoldShape{N, H, K, 1, usesSquash(spec)}, fp.data(), pInit.data(),
                                       pFinal.data());
    }
    expectClose(Tensor::fromDoubles(ScalarType::F64, {1, T, HV, V}, o), expected.o, kTolerance, "o");
    expectClose(Tensor::fromDoubles(ScalarType::F64, {N, HV, K, V}, sFinal), expected.final_state, kTolerance,
                "final_state");
    if (precond)
      expectClose(Tensor::fromDoubles(ScalarType::F64, {N, H, K}, pFinal), expected.final_precond_state, kTolerance,
                  "final_precond_state");
  }
}

/// The gather refuses a collective whose group is not the plan's, and a recv of the wrong size.
TEST(ContextParallelGather, RankMismatchAndBufferSizeAreRefused) {
  const cp::Plan plan = cp::makePlan({0, 10, 30}, cp::equalRankBounds(30, 4));
  const cp::SummaryLayout layout{{FoldShape{2, 2, 3, 4, false}}};
  std::vector<double> send(layout.slotElements(), 1.0), recv(4 * layout.slotElements(), kNaN);
  auto message = [&](Collective& c, std::size_t recvBytes) {
    try {
      gatherSummaries(c, plan, layout, sizeof(double), send.data(), recv.data(), recvBytes, nullptr);
    } catch (const RuntimeError& e) {
      EXPECT_EQ(e.code(), RuntimeErrorCode::InvalidArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto two = LocalCollective::group(2, LocalMemory::Host);
  EXPECT_NE(message(*two[0], recv.size() * sizeof(double)).find("expected 4 ranks, the collective has 2"),
            std::string::npos);
  auto four = LocalCollective::group(4, LocalMemory::Host);
  const std::string m = message(*four[1], 3 * layout.slotElements() * sizeof(double));
  EXPECT_NE(m.find("expected 4 slots of " + std::to_string(layout.slotElements() * sizeof(double)) + " bytes"),
            std::string::npos)
      << m;
  EXPECT_TRUE(std::all_of(recv.begin(), recv.end(), [](double x) { return std::isnan(x); }));
}

/// Scalar and per-channel decay, grouped value heads, and both preconditioner sources.
std::vector<Spec> cpSpecs() {
  std::vector<Spec> out;
  Spec gva = gdn();
  gva.gva_ratio = 2;
  gva.name = "gdn_gva2";
  for (Spec s : {gdn(), gva, kda(), pgdn(), osdn(WriteTiming::Pre, true)}) {
    s.varlen = s.initial_state = s.final_state = true;
    s.initial_precond_state = s.final_precond_state = hasPrecond(s);
    out.push_back(s);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Specs, ContextParallelEndToEnd, ::testing::ValuesIn(cpSpecs()),
                         [](const ::testing::TestParamInfo<Spec>& info) { return info.param.name; });

}  // namespace
}  // namespace dgps::test
