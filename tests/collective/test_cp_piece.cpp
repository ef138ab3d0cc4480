// The host bookkeeping of the GPU context-parallel forward (dgps/runtime/ContextParallelForward.h), without a
// GPU: on random packed batches and random rank ranges (empty documents, padding, empty ranks),
//  - pieceStartSources, applied with a naive fold X = M_j X + E_j over the gathered slots, gives the start
//    states cp::rankStartStates computes;
//  - pieceFinalWrites, applied to a NaN-poisoned final-state array, writes exactly the rows
//    cp::scatterFinalStates writes, with the same values, and over all ranks every document once;
//  - memorySummaryLayout is the one-state slot M [HV, K, K] then E [HV, K, V].
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "dgps/runtime/ContextParallelForward.h"
#include "dgps/runtime/Error.h"

namespace dgps {
namespace {

std::vector<std::int64_t> randomCuts(std::mt19937_64& rng, std::int64_t count, std::int64_t total) {
  std::uniform_int_distribution<std::int64_t> pos(0, total);
  std::vector<std::int64_t> v = {0, total};
  for (std::int64_t i = 0; i + 1 < count; ++i) v.push_back(pos(rng));
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<double> randomVector(std::mt19937_64& rng, std::size_t n) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

TEST(CpPiece, MemorySummaryLayoutIsMThenE) {
  const cp::SummaryLayout l = memorySummaryLayout(5, 3, 4, 6);
  ASSERT_EQ(l.states.size(), 1u);
  EXPECT_EQ(l.transOffset(0), 0u);
  EXPECT_EQ(l.transElements(0), 3u * 4u * 4u);
  EXPECT_EQ(l.extOffset(0), 3u * 4u * 4u);
  EXPECT_EQ(l.stateElements(0), 3u * 4u * 6u);
  EXPECT_EQ(l.slotElements(), 3u * 4u * (4u + 6u));
}

TEST(CpPiece, StartSourcesAndFinalWritesMatchThePlanFunctions) {
  const unsigned long long seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::int64_t heads = 2, K = 3, W = 2, X = heads * K * W;
  for (int trial = 0; trial < 200; ++trial) {
    const int G = std::uniform_int_distribution<int>(1, 8)(rng);
    const std::int64_t T = std::uniform_int_distribution<std::int64_t>(0, 60)(rng);
    const std::int64_t N = std::uniform_int_distribution<std::int64_t>(1, 6)(rng);
    const std::int64_t used = std::uniform_int_distribution<std::int64_t>(0, T)(rng);  // padding past it
    const std::vector<std::int64_t> cu = randomCuts(rng, N, used);
    const std::vector<std::int64_t> bounds = trial % 2 ? cp::equalRankBounds(T, G) : randomCuts(rng, G, T);
    const cp::Plan plan = cp::makePlan(cu, bounds);
    const cp::SummaryLayout layout = memorySummaryLayout(N, heads, K, W);
    const std::vector<double> gathered = randomVector(rng, std::size_t(G) * layout.slotElements());
    const std::vector<double> docInit = randomVector(rng, std::size_t(N * X));
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> viaPlan(std::size_t(N * X), nan), viaWrites(std::size_t(N * X), nan);
    std::vector<int> writes(std::size_t(N), 0);
    for (int r = 0; r < G; ++r) {
      SCOPED_TRACE("trial " + std::to_string(trial) + ", rank " + std::to_string(r));
      const cp::RankPlan& rp = plan.rank[std::size_t(r)];
      const std::size_t n = rp.fragments.size();
      std::vector<double> want(n * std::size_t(X)), local = randomVector(rng, n * std::size_t(X));
      cp::rankStartStates<double>(plan, r, layout, 0, gathered.data(), docInit.data(), want.data());
      const std::vector<PieceStart> starts = pieceStartSources(plan, r);
      ASSERT_EQ(starts.size(), n);
      for (std::size_t i = 0; i < n; ++i) {
        EXPECT_EQ(starts[i].doc, rp.fragments[i].seq);
        std::vector<double> got(docInit.begin() + starts[i].doc * X, docInit.begin() + (starts[i].doc + 1) * X);
        if (starts[i].source == PieceStart::Source::Fold) {
          EXPECT_TRUE(i == 0 && rp.continuesIn);
          for (int j : rp.foldFrom) {  // X = M_j X + E_j per head, naive
            const double* slot = gathered.data() + std::size_t(j) * layout.slotElements();
            std::vector<double> next(got.size());
            for (std::int64_t h = 0; h < heads; ++h)
              for (std::int64_t a = 0; a < K; ++a)
                for (std::int64_t c = 0; c < W; ++c) {
                  double acc = slot[layout.extOffset(0) + std::size_t((h * K + a) * W + c)];
                  for (std::int64_t b = 0; b < K; ++b)
                    acc += slot[std::size_t((h * K + a) * K + b)] * got[std::size_t((h * K + b) * W + c)];
                  next[std::size_t((h * K + a) * W + c)] = acc;
                }
            got = next;
          }
        } else {
          EXPECT_FALSE(i == 0 && rp.continuesIn) << "a continued fragment must be folded";
        }
        for (std::int64_t x = 0; x < X; ++x)
          EXPECT_NEAR(got[std::size_t(x)], want[i * std::size_t(X) + std::size_t(x)], 1e-12) << "fragment " << i;
      }
      cp::scatterFinalStates<double>(plan, r, layout.states[0], n ? local.data() : nullptr, docInit.data(),
                                     viaPlan.data());
      for (const PieceFinal& f : pieceFinalWrites(plan, r)) {
        ++writes[std::size_t(f.doc)];
        const double* src = f.local >= 0 ? local.data() + f.local * X : docInit.data() + f.doc * X;
        std::copy(src, src + X, viaWrites.begin() + f.doc * X);
      }
    }
    for (std::int64_t d = 0; d < N; ++d) EXPECT_EQ(writes[std::size_t(d)], 1) << "document " << d;
    for (std::size_t x = 0; x < viaPlan.size(); ++x) {
      ASSERT_FALSE(std::isnan(viaWrites[x])) << "row " << x / std::size_t(X) << " never written";
      EXPECT_EQ(viaWrites[x], viaPlan[x]);
    }
  }
}

TEST(CpPiece, BadRanksAreNamed) {
  const cp::Plan plan = cp::makePlan({0, 10}, cp::equalRankBounds(10, 2));
  for (int r : {-1, 2}) {
    try {
      pieceStartSources(plan, r);
      ADD_FAILURE() << "rank " << r << " accepted";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(r)), std::string::npos) << e.what();
    }
    EXPECT_THROW(pieceFinalWrites(plan, r), RuntimeError);
  }
}

}  // namespace
}  // namespace dgps
