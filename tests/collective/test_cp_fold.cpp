// The cross-rank fold of the context-parallel forward has one definition, cp::continuedStartState; the
// entry points that run it (cp::rankStartStates, the float64 tests' and the host tests' fold; foldPrecondStart,
// the preconditioner fold; the runtime's phases, which call continuedStartState on the host copies of the
// gathered slots) must all give its value. Checked here against a sequential fold written out in float64 from
// the plan's fragments (not from foldFrom), for the memory state (full K×K M, width V) and the preconditioner
// state of every shipped package with the preconditioner round (ema_sq_squash: diagonal Γ; unclamped
// hypergrad_ogd: K×K M), over drawn plans with documents crossing several ranks, empty ranks and empty
// documents. The slots of ranks that publish nothing are NaN, so a fold reading one fails.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "TestUtil.h"
#include "dgps/dsl/ContextParallelPlan.h"
#include "dgps/runtime/ContextParallelForward.h"
#include "dgps/runtime/ContextParallelSupport.h"
#include "dgps/runtime/Package.h"

namespace dgps::test {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Drawn cu_seqlens over T tokens (some documents empty, the last ones ending before T: padding) and G + 1
/// rank bounds (some ranks empty).
struct DrawnSplit {
  std::vector<std::int64_t> cu, bounds;
};
DrawnSplit drawSplit(std::mt19937_64& rng, std::int64_t T, int G) {
  std::uniform_int_distribution<std::int64_t> token(0, T);
  DrawnSplit s;
  const int docs = 1 + int(rng() % 5);
  std::vector<std::int64_t> cuts;
  for (int i = 0; i < docs; ++i) cuts.push_back(token(rng));
  std::sort(cuts.begin(), cuts.end());
  s.cu = {0};
  for (std::int64_t c : cuts) s.cu.push_back(c);
  std::vector<std::int64_t> b;
  for (int i = 1; i < G; ++i) b.push_back(token(rng));
  std::sort(b.begin(), b.end());
  s.bounds = {0};
  for (std::int64_t x : b) s.bounds.push_back(x);
  s.bounds.push_back(T);
  return s;
}

/// One carried state's slots of G ranks: a publishing rank's M (a contraction-sized map: the fold stays
/// bounded over many ranks) and E drawn, every other slot NaN (its contents are unspecified and never read).
std::vector<double> drawSlots(std::mt19937_64& rng, const cp::Plan& plan, const cp::SummaryLayout& layout) {
  const segment::FoldShape& f = layout.states[0];
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> slots(std::size_t(plan.ranks) * layout.slotElements(), kNaN);
  for (int j = 0; j < plan.ranks; ++j) {
    if (!plan.rank[std::size_t(j)].continuesOut) continue;
    double* s = slots.data() + std::size_t(j) * layout.slotElements();
    for (std::size_t x = 0; x < layout.transElements(0); ++x) {
      const bool onDiagonal = f.diagonal || (x % std::size_t(f.K * f.K)) % std::size_t(f.K + 1) == 0;
      s[layout.transOffset(0) + x] = onDiagonal ? 0.6 + 0.3 * u(rng) : 0.3 * u(rng) / double(f.K);
    }
    for (std::size_t x = 0; x < layout.stateElements(0); ++x) s[layout.extOffset(0) + x] = u(rng);
  }
  return slots;
}

/// The start of `rank`'s fragments[0] written out: X = docInit[n]; for every earlier rank holding a fragment of
/// document n, in rank order, X = M_j X + E_j, per head (M_j [K, K] or its diagonal [K]; X [K, width]).
std::vector<double> sequentialFold(const cp::Plan& plan, int rank, const cp::SummaryLayout& layout,
                                   const std::vector<double>& slots, const std::vector<double>& docInit) {
  const segment::FoldShape& f = layout.states[0];
  const std::int64_t H = f.heads, K = f.K, W = f.width, X = H * K * W;
  const std::int64_t n = plan.rank[std::size_t(rank)].fragments.front().seq;
  std::vector<double> state(docInit.begin() + n * X, docInit.begin() + (n + 1) * X);
  for (int j = 0; j < rank; ++j) {
    bool holds = false;
    for (const segment::Segment& s : plan.rank[std::size_t(j)].fragments) holds = holds || s.seq == n;
    if (!holds) continue;
    const double* M = slots.data() + std::size_t(j) * layout.slotElements() + layout.transOffset(0);
    const double* E = slots.data() + std::size_t(j) * layout.slotElements() + layout.extOffset(0);
    std::vector<double> next(state.size());
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t r = 0; r < K; ++r)
        for (std::int64_t c = 0; c < W; ++c) {
          double acc = E[(h * K + r) * W + c];
          for (std::int64_t m = 0; m < K; ++m) {
            const double a = f.diagonal ? (m == r ? M[h * K + r] : 0.0) : M[(h * K + r) * K + m];
            acc += a * state[std::size_t((h * K + m) * W + c)];
          }
          next[std::size_t((h * K + r) * W + c)] = acc;
        }
    state.swap(next);
  }
  return state;
}

/// max |got − ref| / max(1, max |ref|); inf when got has a non-finite entry.
double maxRel(const std::vector<float>& got, const std::vector<double>& ref) {
  double num = 0.0, den = 1.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num = std::max(num, std::fabs(double(got[i]) - ref[i]));
    den = std::max(den, std::fabs(ref[i]));
  }
  return num / den;
}

/// Every entry point of the fold on a layout of shapeOnly's state over drawn plans (the first one fixed: a
/// document over four ranks); `precond` (a precondSummaryLayout) also checks foldPrecondStart. Returns how many
/// continued starts were compared.
int checkFolds(std::mt19937_64& rng, const cp::SummaryLayout& shapeOnly, bool precond) {
  int compared = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const DrawnSplit split = trial == 0 ? DrawnSplit{{0, 5, 80}, {0, 20, 40, 60, 80}}
                                        : drawSplit(rng, 40 + std::int64_t(rng() % 60), 2 + trial % 7);
    const int G = int(split.bounds.size()) - 1;
    const cp::Plan plan = cp::makePlan(split.cu, split.bounds);
    cp::SummaryLayout layout = shapeOnly;
    layout.states[0].numSeqs = plan.numDocs;
    const std::size_t X = layout.stateElements(0);
    const std::vector<double> slots = drawSlots(rng, plan, layout);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<double> docInit(std::size_t(plan.numDocs) * X);
    for (double& x : docInit) x = u(rng);
    const std::vector<float> slotsF(slots.begin(), slots.end()), docInitF(docInit.begin(), docInit.end());
    for (int r = 0; r < G; ++r) {
      const cp::RankPlan& rp = plan.rank[std::size_t(r)];
      SCOPED_TRACE("trial " + std::to_string(trial) + ", G=" + std::to_string(G) + ", rank " + std::to_string(r));
      if (!rp.continuesIn) {
        std::vector<float> out(X);
        EXPECT_THROW(cp::continuedStartState<float>(plan, r, layout, 0, slotsF.data(), nullptr, out.data()),
                     std::invalid_argument);
        continue;
      }
      const std::int64_t n = rp.fragments[0].seq;
      const std::vector<double> want = sequentialFold(plan, r, layout, slots, docInit);
      // fp32, the runtime's precision: within rounding of the float64 fold
      std::vector<float> once(X, std::numeric_limits<float>::quiet_NaN());
      cp::continuedStartState<float>(plan, r, layout, 0, slotsF.data(), docInitF.data() + n * X, once.data());
      EXPECT_LE(maxRel(once, want), 2e-5);
      // float64: the same fold to float64 rounding
      std::vector<double> once64(X, kNaN);
      cp::continuedStartState<double>(plan, r, layout, 0, slots.data(), docInit.data() + n * X, once64.data());
      double err = 0.0;
      for (std::size_t x = 0; x < X; ++x) err = std::max(err, std::fabs(once64[x] - want[x]));
      EXPECT_LE(err, 1e-12);
      // rankStartStates: row 0 is the same fold, bit for bit; the other rows are the documents' initial rows
      std::vector<float> rows(rp.fragments.size() * X, std::numeric_limits<float>::quiet_NaN());
      cp::rankStartStates<float>(plan, r, layout, 0, slotsF.data(), docInitF.data(), rows.data());
      EXPECT_TRUE(std::equal(once.begin(), once.end(), rows.begin()));
      for (std::size_t i = 1; i < rp.fragments.size(); ++i)
        EXPECT_TRUE(std::equal(rows.begin() + i * X, rows.begin() + (i + 1) * X,
                               docInitF.begin() + rp.fragments[i].seq * X));
      // foldPrecondStart, the preconditioner's entry point: the same value bit for bit
      if (precond) {
        const segment::FoldShape& f = layout.states[0];
        const std::vector<float> viaPrecond =
            foldPrecondStart(plan, r, f.heads, f.K, !f.diagonal, slotsF.data(), docInitF.data() + n * X);
        EXPECT_TRUE(std::equal(once.begin(), once.end(), viaPrecond.begin()));
      }
      ++compared;
    }
  }
  return compared;
}

TEST(CpFold, MemoryStateFoldEqualsTheSequentialFloat64Fold) {
  DGPS_SEEDED(seed);
  std::mt19937_64 rng(seed);
  EXPECT_GT(checkFolds(rng, memorySummaryLayout(1, 2, 6, 4), false), 0);
}

// Every shipped package with the preconditioner round (generated/): its map (diagonal or K×K) from its manifest's
// contextParallelSupport, its key dimension from its spec, two key heads.
TEST(CpFold, PreconditionerFoldOfEveryPrecondSourceEqualsTheSequentialFloat64Fold) {
  DGPS_SEEDED(seed);
  std::mt19937_64 rng(seed);
  std::set<bool> maps;
  int packages = 0;
  for (const char* name : {"pgdn", "pkda", "pdn", "atq", "osdn", "osdn_apf"}) {
    SCOPED_TRACE(name);
    const Package pkg = Package::open(std::string(DGPS_GENERATED_DIR) + "/" + name);
    const ContextParallelSupport support = contextParallelSupport(pkg.manifest());
    ASSERT_TRUE(support.supported && support.precond_round) << support.reason;
    const std::int64_t K = pkg.spec().key_dims.front();
    EXPECT_GT(checkFolds(rng, precondSummaryLayout(1, 2, K, support.precond_full_map), true), 0);
    maps.insert(support.precond_full_map);
    ++packages;
  }
  EXPECT_EQ(packages, 6);
  EXPECT_EQ(maps.size(), 2u);  // both sources: ema_sq_squash's diagonal map and hypergrad_ogd's K×K one
}

}  // namespace
}  // namespace dgps::test
