// The preconditioner round of the context-parallel forward on the CPU (ContextParallelForward.h): each rank's
// last fragment is summarised as A_end = Γ ⊙ A_start + Σ per key head and channel — Γ from its definition (the
// product of the accumulator gates exp(precond_g) over the fragment's tokens), Σ the float64 reference's end
// accumulator of the fragment from A = 0 — the fp32 slots (precondSummaryLayout) are all-gathered through the
// host LocalCollective, and every rank continuing a document folds its start with foldPrecondStart, the host
// fold phases 1 and 2 run. The result must equal the float64 reference's accumulator at the fragment's first
// token in the single-sequence run (the document's prefix from its initial accumulator), for G ∈ {2, 4, 8} and an
// uneven split, documents crossing several ranks, drawn initial accumulators, for PGDN, PKDA, PDN and the
// ungated accumulator. The same for the unclamped hypergrad_ogd d (OSDN with and without retention, pre and post
// write timing): its slot is d_end = M d_start + e with M K×K, composed in float64 from the per-token step.
// Also the one rule of which packages run context-parallel (contextParallelSupport), the clamp refused.
#include <algorithm>
#include <cmath>
#include <limits>

#include "TestUtil.h"
#include "dgps/dsl/ContextParallelPlan.h"
#include "dgps/runtime/ContextParallel.h"
#include "dgps/runtime/ContextParallelForward.h"
#include "dgps/runtime/ContextParallelSupport.h"
#include "dgps/runtime/LocalCollective.h"
#include "dgps/runtime/Package.h"

namespace dgps::test {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

/// The reference's accumulator [H, K] of document n after its tokens [cu[n], stop): the run of the document's
/// prefix (a batch whose document n ends at `stop`; later documents dropped) from its initial accumulator.
std::vector<double> accumulatorAt(const Spec& spec, const ReferenceInputs& full, const std::vector<std::int64_t>& cu,
                                  std::int64_t n, std::int64_t stop, std::int64_t H, std::int64_t K) {
  ReferenceInputs in = full;
  std::vector<double> prefix(cu.begin(), cu.begin() + n + 1);
  prefix.push_back(double(stop));
  in["cu_seqlens"] = Tensor::fromDoubles(ScalarType::I64, {std::int64_t(prefix.size())}, prefix);
  const std::vector<double> init = full.at("initial_precond_state").toDoubles();
  in["initial_precond_state"] = Tensor::fromDoubles(ScalarType::F64, {n + 1, H, K},
                                                    std::vector<double>(init.begin(), init.begin() + (n + 1) * H * K));
  // the memory state's initial rows of the same documents (the accumulator does not read them)
  const std::vector<double> s0 = full.at("initial_state").toDoubles();
  const std::int64_t X = std::int64_t(s0.size()) / std::int64_t(cu.size() - 1);
  std::vector<std::int64_t> shape = full.at("initial_state").shape();
  shape[0] = n + 1;
  in["initial_state"] = Tensor::fromDoubles(full.at("initial_state").dtype(), shape,
                                            std::vector<double>(s0.begin(), s0.begin() + (n + 1) * X));
  const std::vector<double> fp = runReference(spec, in).final_precond_state.toDoubles();
  return std::vector<double>(fp.begin() + n * H * K, fp.begin() + (n + 1) * H * K);
}

/// Rank r's slot: Γ, Σ of its last fragment [begin, end) of document n, in fp32.
std::vector<float> rankSlot(const Spec& spec, const ReferenceInputs& full, const cp::SummaryLayout& layout,
                            const segment::Segment& f, std::int64_t H, std::int64_t K) {
  std::vector<float> slot(layout.slotElements(), kNaN);
  // Σ: the fragment alone from A = 0 (a one-document batch over its tokens)
  ReferenceInputs in;
  for (const auto& [name, t] : full) {
    if (name == "cu_seqlens" || name == "initial_state" || name == "initial_precond_state") continue;
    in[name] = name == "precond_center" ? t : sliceT(t, f.begin, f.end);
  }
  in["cu_seqlens"] = Tensor::fromDoubles(ScalarType::I64, {2}, {0.0, double(f.length())});
  const std::vector<double> sigma = runReference(spec, in).final_precond_state.toDoubles();
  // Γ: exp of the accumulator's log-gates summed over the fragment (1 without the gate), per head
  const std::vector<double> g = spec.precond.squash.has_gate ? full.at("precond_g").toDoubles() : std::vector<double>();
  for (std::int64_t h = 0; h < H; ++h) {
    double logGamma = 0.0;
    for (std::int64_t t = f.begin; t < f.end && !g.empty(); ++t) logGamma += g[t * H + h];
    for (std::int64_t k = 0; k < K; ++k) {
      slot[layout.transOffset(0) + h * K + k] = float(std::exp(logGamma));
      slot[layout.extOffset(0) + h * K + k] = float(sigma[h * K + k]);
    }
  }
  return slot;
}

class PrecondRound : public ::testing::TestWithParam<Spec> {};

TEST_P(PrecondRound, FoldedAccumulatorStartsEqualTheSingleSequence) {
  const Spec spec = GetParam();
  const std::int64_t H = 2, K = 6, V = 4, T = 120;
  const std::vector<std::int64_t> cu = {0, 9, 69, 70, 70, 105};  // a 60-token document crosses several ranks
  DGPS_SEEDED(seed);
  const ReferenceInputs full = inputs64(spec, shapeOf(1, T, H, H, K, V, cu), seed);
  const std::vector<double> init = full.at("initial_precond_state").toDoubles();
  const std::vector<float> initF(init.begin(), init.end());  // the fp32 rows a rank's host fold reads
  ASSERT_GT(maxAbs(full.at("initial_precond_state")), 0.0);  // a drawn initial accumulator, not zeros

  std::vector<std::vector<std::int64_t>> splits;
  for (int G : {2, 4, 8}) splits.push_back(cp::equalRankBounds(T, G));
  splits.push_back({0, 5, 9, 9, 40, 69, 70, 100, 120});  // uneven: an empty rank, ranks ending on documents
  int folded = 0;
  for (const auto& bounds : splits) {
    const cp::Plan plan = cp::makePlan(cu, bounds);
    const int G = plan.ranks;
    SCOPED_TRACE("G=" + std::to_string(G) + " bounds[1]=" + std::to_string(bounds[1]));
    const cp::SummaryLayout layout = precondSummaryLayout(plan.numDocs, H, K, false);
    ASSERT_EQ(layout.slotElements(), std::size_t(2 * H * K));
    std::vector<std::vector<float>> send(G, std::vector<float>(layout.slotElements(), kNaN));
    for (int r = 0; r < G; ++r)
      if (plan.rank[r].continuesOut) send[r] = rankSlot(spec, full, layout, plan.rank[r].fragments.back(), H, K);
    auto ranks = LocalCollective::group(G, LocalMemory::Host);
    std::vector<std::vector<float>> recv(G, std::vector<float>(G * layout.slotElements(), kNaN));
    for (int r = 0; r < G; ++r)
      gatherSummaries(*ranks[r], plan, layout, sizeof(float), send[r].data(), recv[r].data(),
                      recv[r].size() * sizeof(float), nullptr);
    for (int r = 0; r < G; ++r) {
      const cp::RankPlan& rp = plan.rank[r];
      if (!rp.continuesIn) {
        EXPECT_THROW(foldPrecondStart(plan, r, H, K, false, recv[r].data(), nullptr), std::invalid_argument);
        continue;
      }
      const segment::Segment& f = rp.fragments[0];
      const std::vector<float> got =
          foldPrecondStart(plan, r, H, K, false, recv[r].data(), initF.data() + f.seq * H * K);
      const std::vector<double> want = accumulatorAt(spec, full, cu, f.seq, f.begin, H, K);
      double scale = 1.0;
      for (double w : want) scale = std::max(scale, std::fabs(w));
      for (std::int64_t x = 0; x < H * K; ++x)
        EXPECT_NEAR(got[x], want[x], 2e-6 * scale) << "rank " << r << " document " << f.seq << " element " << x;
      // the same value as the dsl fold of every fragment's start (cp::rankStartStates) with the diagonal layout
      std::vector<float> all(rp.fragments.size() * H * K, kNaN);
      cp::rankStartStates<float>(plan, r, layout, 0, recv[r].data(), initF.data(), all.data());
      for (std::int64_t x = 0; x < H * K; ++x) EXPECT_EQ(got[x], all[x]);
      ++folded;
    }
  }
  EXPECT_GE(folded, 10);  // continued fragments were folded in every split
}

std::vector<Spec> squashSpecs() {
  std::vector<Spec> out;
  Spec ungated = pgdn();
  ungated.name = "pgdn_ungated";
  ungated.precond.squash.has_gate = false;
  for (Spec s : {pgdn(), pkda(), pdn(), ungated}) {
    s.varlen = s.initial_state = s.final_state = true;
    s.initial_precond_state = s.final_precond_state = true;
    out.push_back(s);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Specs, PrecondRound, ::testing::ValuesIn(squashSpecs()),
                         [](const ::testing::TestParamInfo<Spec>& info) { return info.param.name; });

/// Rank r's slot for an unclamped hypergrad_ogd spec: M [H, K, K] then e [H, K] of its last fragment f, composed
/// in float64 from the per-token step of docs/math.md §5.2 (independent of the reference's scan and of the chunked
/// form): d ← (r_t I − c_t u_t u_tᵀ) d + κ_t u_t with u = k̂ ⊙ k̂, c = η β²/‖u‖₁, κ = η β/‖u‖₁, r = e^{precond_g}
/// (1 without retention). M = Π_t (r_t I − c_t u_t u_tᵀ), later tokens on the left; e the composition from d = 0.
/// (u is `sq` below.)
std::vector<float> hypergradSlot(const Spec& spec, const ReferenceInputs& full, const cp::SummaryLayout& layout,
                                 const segment::Segment& f, std::int64_t H, std::int64_t K) {
  std::vector<float> slot(layout.slotElements(), kNaN);
  const std::vector<double> k = full.at("k").toDoubles(), beta = full.at("beta").toDoubles();
  const bool retention = spec.precond.hypergrad.has_retention;
  const std::vector<double> g = retention ? full.at("precond_g").toDoubles() : std::vector<double>();
  const double eta = spec.precond.hypergrad.eta;
  for (std::int64_t h = 0; h < H; ++h) {
    std::vector<double> M(std::size_t(K * K), 0.0), e(std::size_t(K), 0.0), sq(static_cast<std::size_t>(K));
    for (std::int64_t i = 0; i < K; ++i) M[std::size_t(i * K + i)] = 1.0;
    for (std::int64_t t = f.begin; t < f.end; ++t) {
      double ss = 0.0;
      const double* kt = k.data() + (t * H + h) * K;
      for (std::int64_t i = 0; i < K; ++i) ss += kt[i] * kt[i];
      const double rk = spec.qk_l2norm ? 1.0 / std::sqrt(ss + spec.l2norm_eps) : 1.0;
      double uu = 0.0;
      for (std::int64_t i = 0; i < K; ++i) {
        const double kh = kt[i] * rk;
        sq[std::size_t(i)] = kh * kh;
        uu += kh * kh;
      }
      const double b = beta[std::size_t(t * H + h)];  // gva_ratio 1: value head h carries key head h's gain
      const double r = retention ? std::exp(g[std::size_t(t * H + h)]) : 1.0;
      const double c = uu > 0.0 ? eta * b * b / uu : 0.0, kappa = uu > 0.0 ? eta * b / uu : 0.0;
      // X ← r X − c u (uᵀ X) for X = M (every column) and X = e, then e += κ u
      for (std::int64_t j = 0; j <= K; ++j) {
        auto at = [&](std::int64_t i) -> double& { return j < K ? M[std::size_t(i * K + j)] : e[std::size_t(i)]; };
        double ux = 0.0;
        for (std::int64_t i = 0; i < K; ++i) ux += sq[std::size_t(i)] * at(i);
        for (std::int64_t i = 0; i < K; ++i) at(i) = r * at(i) - c * sq[std::size_t(i)] * ux;
      }
      for (std::int64_t i = 0; i < K; ++i) e[std::size_t(i)] += kappa * sq[std::size_t(i)];
    }
    float* mOut = slot.data() + layout.transOffset(0) + h * K * K;
    float* eOut = slot.data() + layout.extOffset(0) + h * K;
    for (std::int64_t x = 0; x < K * K; ++x) mOut[x] = float(M[std::size_t(x)]);
    for (std::int64_t x = 0; x < K; ++x) eOut[x] = float(e[std::size_t(x)]);
  }
  return slot;
}

class HypergradRound : public ::testing::TestWithParam<Spec> {};

/// The hypergrad_ogd preconditioner round: the fold d ← M_j d + e_j over the earlier ranks' K×K slots equals the
/// float64 reference's d at every continued fragment's first token, for G ∈ {2, 4, 8} and an uneven split.
TEST_P(HypergradRound, FoldedStartsEqualTheSingleSequence) {
  const Spec spec = GetParam();
  const std::int64_t H = 2, K = 6, V = 4, T = 120;
  const std::vector<std::int64_t> cu = {0, 9, 69, 70, 70, 105};  // a 60-token document crosses several ranks
  DGPS_SEEDED(seed);
  const ReferenceInputs full = inputs64(spec, shapeOf(1, T, H, H, K, V, cu), seed);
  const std::vector<double> init = full.at("initial_precond_state").toDoubles();
  const std::vector<float> initF(init.begin(), init.end());
  ASSERT_GT(maxAbs(full.at("initial_precond_state")), 0.0);  // a drawn initial d, not zeros

  std::vector<std::vector<std::int64_t>> splits;
  for (int G : {2, 4, 8}) splits.push_back(cp::equalRankBounds(T, G));
  splits.push_back({0, 5, 9, 9, 40, 69, 70, 100, 120});
  int folded = 0;
  for (const auto& bounds : splits) {
    const cp::Plan plan = cp::makePlan(cu, bounds);
    const int G = plan.ranks;
    SCOPED_TRACE("G=" + std::to_string(G) + " bounds[1]=" + std::to_string(bounds[1]));
    const cp::SummaryLayout layout = precondSummaryLayout(plan.numDocs, H, K, true);
    ASSERT_EQ(layout.slotElements(), std::size_t(H * K * (K + 1)));
    std::vector<std::vector<float>> send(G, std::vector<float>(layout.slotElements(), kNaN));
    for (int r = 0; r < G; ++r)
      if (plan.rank[r].continuesOut) send[r] = hypergradSlot(spec, full, layout, plan.rank[r].fragments.back(), H, K);
    auto ranks = LocalCollective::group(G, LocalMemory::Host);
    std::vector<std::vector<float>> recv(G, std::vector<float>(G * layout.slotElements(), kNaN));
    for (int r = 0; r < G; ++r)
      gatherSummaries(*ranks[r], plan, layout, sizeof(float), send[r].data(), recv[r].data(),
                      recv[r].size() * sizeof(float), nullptr);
    for (int r = 0; r < G; ++r) {
      const cp::RankPlan& rp = plan.rank[r];
      if (!rp.continuesIn) continue;
      const segment::Segment& f = rp.fragments[0];
      const std::vector<float> got =
          foldPrecondStart(plan, r, H, K, true, recv[r].data(), initF.data() + f.seq * H * K);
      const std::vector<double> want = accumulatorAt(spec, full, cu, f.seq, f.begin, H, K);
      double scale = 1.0;
      for (double w : want) scale = std::max(scale, std::fabs(w));
      for (std::int64_t x = 0; x < H * K; ++x)
        EXPECT_NEAR(got[x], want[x], 1e-5 * scale) << "rank " << r << " document " << f.seq << " element " << x;
      // a diagonal reading of the same slots (the ema layout) would be a different map: the layout matters
      std::vector<float> all(rp.fragments.size() * H * K, kNaN);
      cp::rankStartStates<float>(plan, r, layout, 0, recv[r].data(), initF.data(), all.data());
      for (std::int64_t x = 0; x < H * K; ++x) EXPECT_EQ(got[x], all[x]);
      ++folded;
    }
  }
  EXPECT_GE(folded, 10);
}

std::vector<Spec> hypergradSpecs() {
  std::vector<Spec> out;
  Spec post = osdn(WriteTiming::Post, false);
  post.name = "osdn_post_noretention";
  for (Spec s : {osdn(WriteTiming::Pre, true), post}) {
    s.varlen = s.initial_state = s.final_state = true;
    s.initial_precond_state = s.final_precond_state = true;
    out.push_back(s);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Specs, HypergradRound, ::testing::ValuesIn(hypergradSpecs()),
                         [](const ::testing::TestParamInfo<Spec>& info) { return info.param.name; });

/// A clamped hypergrad_ogd package (its d-scan token by token: no precond_summary role) stays refused.
TEST(ContextParallelSupport, ClampedHypergradIsRefused) {
  Manifest m = Package::open(std::string(DGPS_GENERATED_DIR) + "/osdn").manifest();
  auto dropSummary = [](std::vector<KernelLaunchRule>& ks) {
    auto isSummary = [](const KernelLaunchRule& k) { return k.role == "precond_summary"; };
    ks.erase(std::remove_if(ks.begin(), ks.end(), isSummary), ks.end());
  };
  dropSummary(m.launch.forward);  // what dgpsc emits for a clamp: the per-token scan alone
  const ContextParallelSupport s = contextParallelSupport(m);
  EXPECT_FALSE(s.supported);
  EXPECT_FALSE(s.precond_round);
  EXPECT_NE(s.reason.find("has a clamped hypergrad_ogd preconditioner: the clamp is a projection"), std::string::npos)
      << s.reason;
}

/// The one rule: every shipped package's verdict, and the reasons named.
TEST(ContextParallelSupport, ShippedPackages) {
  auto verdict = [](const std::string& name) {
    return contextParallelSupport(Package::open(std::string(DGPS_GENERATED_DIR) + "/" + name).manifest());
  };
  for (const char* name : {"gdn", "gdn_gva", "deltanet", "kda", "mamba2", "linear_attention"}) {
    const ContextParallelSupport s = verdict(name);
    EXPECT_TRUE(s.supported) << name << ": " << s.reason;
    EXPECT_FALSE(s.precond_round) << name;
  }
  for (const char* name : {"pgdn", "pkda", "pdn", "atq", "osdn", "osdn_apf"}) {
    const ContextParallelSupport s = verdict(name);
    EXPECT_TRUE(s.supported) << name << ": " << s.reason;
    EXPECT_TRUE(s.precond_round) << name;
    // the unclamped hypergrad_ogd packages carry d by its K×K map, the ema_sq_squash ones per channel
    EXPECT_EQ(s.precond_full_map, name[0] == 'o') << name;
    EXPECT_EQ(s.reason, "") << name;
  }
  const ContextParallelSupport dp = verdict("gated_deltaproduct");
  EXPECT_FALSE(dp.supported);
  EXPECT_NE(dp.reason.find("2 Householder steps per token"), std::string::npos) << dp.reason;
}

}  // namespace
}  // namespace dgps::test
