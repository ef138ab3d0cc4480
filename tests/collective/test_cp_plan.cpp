// The context-parallel plan (dgps/dsl/ContextParallelPlan.h) against a brute-force enumeration token by
// token: for random packed batches (empty documents, padding) and random rank ranges (empty ranks), every
// field of the plan is recomputed from "which document and which rank holds token t".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "dgps/dsl/ContextParallelPlan.h"

namespace dgps {
namespace {

std::vector<std::int64_t> randomCuts(std::mt19937_64& rng, std::int64_t count, std::int64_t total) {
  std::uniform_int_distribution<std::int64_t> pos(0, total);
  std::vector<std::int64_t> v = {0, total};
  for (std::int64_t i = 0; i + 1 < count; ++i) v.push_back(pos(rng));
  std::sort(v.begin(), v.end());
  return v;  // count+1 values from 0 to total (equal neighbours: empty pieces)
}

/// The plan recomputed from per-token ownership.
void checkAgainstBruteForce(const cp::Plan& plan, const std::vector<std::int64_t>& cu,
                            const std::vector<std::int64_t>& bounds) {
  const int G = static_cast<int>(bounds.size()) - 1;
  const std::int64_t N = static_cast<std::int64_t>(cu.size()) - 1, T = bounds.back();
  std::vector<std::int64_t> docOf(T, -1);
  std::vector<int> rankOf(T, -1);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t t = cu[n]; t < cu[n + 1]; ++t) docOf[t] = n;
  for (int r = 0; r < G; ++r)
    for (std::int64_t t = bounds[r]; t < bounds[r + 1]; ++t) rankOf[t] = r;

  ASSERT_EQ(plan.ranks, G);
  ASSERT_EQ(plan.numDocs, N);
  ASSERT_EQ(plan.rank.size(), static_cast<std::size_t>(G));
  for (int r = 0; r < G; ++r) {
    const cp::RankPlan& rp = plan.rank[r];
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(rp.begin, bounds[r]);
    EXPECT_EQ(rp.end, bounds[r + 1]);
    // Fragments: maximal runs of tokens of one document on this rank.
    std::vector<segment::Segment> frags;
    for (std::int64_t t = bounds[r]; t < bounds[r + 1]; ++t) {
      if (docOf[t] < 0) continue;
      if (!frags.empty() && frags.back().seq == docOf[t] && frags.back().end == t)
        ++frags.back().end;
      else
        frags.push_back({docOf[t], 0, t, t + 1});
    }
    ASSERT_EQ(rp.fragments.size(), frags.size());
    std::vector<std::int64_t> localCu = {0};
    for (std::size_t i = 0; i < frags.size(); ++i) {
      EXPECT_EQ(rp.fragments[i].seq, frags[i].seq);
      EXPECT_EQ(rp.fragments[i].begin, frags[i].begin);
      EXPECT_EQ(rp.fragments[i].end, frags[i].end);
      localCu.push_back(localCu.back() + frags[i].length());
    }
    EXPECT_EQ(rp.localCuSeqlens, localCu);
    // Continuation: the token just before / after the fragment belongs to the same document.
    const bool in = !frags.empty() && frags[0].begin > 0 && docOf[frags[0].begin - 1] == frags[0].seq;
    const bool out = !frags.empty() && frags.back().end < T && docOf[frags.back().end] == frags.back().seq;
    EXPECT_EQ(rp.continuesIn, in);
    EXPECT_EQ(rp.continuesOut, out);
    // Fold sources: every earlier rank holding a token of the first fragment's document, in rank order.
    std::vector<int> from;
    if (in) {
      std::set<int> holders;
      for (std::int64_t t = cu[frags[0].seq]; t < frags[0].begin; ++t) holders.insert(rankOf[t]);
      from.assign(holders.begin(), holders.end());
      for (int j : from) EXPECT_TRUE(plan.rank[j].continuesOut) << "source rank " << j << " must publish";
    }
    EXPECT_EQ(rp.foldFrom, from);
  }
  for (std::int64_t n = 0; n < N; ++n) {
    SCOPED_TRACE("document " + std::to_string(n));
    if (cu[n] < cu[n + 1]) {
      EXPECT_EQ(plan.initialStateRank[n], rankOf[cu[n]]);
      EXPECT_EQ(plan.finalStateRank[n], rankOf[cu[n + 1] - 1]);
    } else {
      const int owner = cu[n] < T ? rankOf[cu[n]] : G - 1;
      EXPECT_EQ(plan.initialStateRank[n], owner);
      EXPECT_EQ(plan.finalStateRank[n], owner);
    }
  }
  ASSERT_EQ(plan.crossingDoc.size(), static_cast<std::size_t>(G - 1));
  for (int b = 0; b + 1 < G; ++b) {
    const std::int64_t t = bounds[b + 1];
    const std::int64_t expected = t > 0 && t < T && docOf[t] >= 0 && docOf[t - 1] == docOf[t] ? docOf[t] : -1;
    EXPECT_EQ(plan.crossingDoc[b], expected) << "boundary " << b;
  }
}

TEST(ContextParallelPlan, MatchesBruteForceOnRandomBatches) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 400; ++trial) {
    const std::int64_t T = 1 + static_cast<std::int64_t>(rng() % 80);
    const std::int64_t used = static_cast<std::int64_t>(rng() % (T + 1));  // tokens past `used`: padding
    const std::int64_t N = 1 + static_cast<std::int64_t>(rng() % 7);
    const int G = 1 + static_cast<int>(rng() % 8);
    std::vector<std::int64_t> cu = randomCuts(rng, N, used);
    std::vector<std::int64_t> bounds = trial % 2 ? cp::equalRankBounds(T, G) : randomCuts(rng, G, T);
    SCOPED_TRACE("trial " + std::to_string(trial) + " T=" + std::to_string(T) + " G=" + std::to_string(G));
    checkAgainstBruteForce(cp::makePlan(cu, bounds), cu, bounds);
  }
}

TEST(ContextParallelPlan, EqualBoundsAreTheSegmentScanSplit) {
  const std::vector<std::int64_t> cu = {0, 7, 40, 41, 90};
  for (int G : {1, 2, 3, 4, 8, 13}) {
    const cp::Plan plan = cp::makePlan(cu, cp::equalRankBounds(100, G));
    const auto pieces = segment::splitAcrossRanks(cu, 1, 100, G);
    for (int r = 0; r < G; ++r) {
      ASSERT_EQ(plan.rank[r].fragments.size(), pieces[r].size()) << "G=" << G << " rank " << r;
      for (std::size_t i = 0; i < pieces[r].size(); ++i) {
        EXPECT_EQ(plan.rank[r].fragments[i].begin, pieces[r][i].begin);
        EXPECT_EQ(plan.rank[r].fragments[i].end, pieces[r][i].end);
      }
    }
  }
}

TEST(ContextParallelPlan, ADocumentSpanningFourRanks) {
  // Documents: [0,3) on rank 0; [3,40) over ranks 0..3; [40,40) empty; padding [40,48).
  const cp::Plan plan = cp::makePlan({0, 3, 40, 40}, {0, 12, 24, 36, 48});
  EXPECT_FALSE(plan.rank[0].continuesIn);
  EXPECT_TRUE(plan.rank[0].continuesOut);
  EXPECT_EQ(plan.rank[3].foldFrom, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(plan.rank[3].localCuSeqlens, (std::vector<std::int64_t>{0, 4}));
  EXPECT_EQ(plan.crossingDoc, (std::vector<std::int64_t>{1, 1, 1}));
  EXPECT_EQ(plan.finalStateRank, (std::vector<int>{0, 3, 3}));
}

TEST(ContextParallelPlan, BadInputsAreNamed) {
  auto message = [](const std::vector<std::int64_t>& cu, const std::vector<std::int64_t>& bounds) {
    try {
      cp::makePlan(cu, bounds);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({0, 4}, {0}).find("expected G+1 >= 2 token indices starting at 0"), std::string::npos);
  EXPECT_NE(message({0, 4}, {1, 4}).find("starting at 0"), std::string::npos);
  EXPECT_NE(message({0, 4}, {0, 3, 2, 4}).find("decrease at index 2"), std::string::npos);
  EXPECT_NE(message({0, 5}, {0, 2, 4}).find("cu[N] <= T = 4"), std::string::npos);
  EXPECT_NE(message({0, 3, 2}, {0, 4}).find("decreases at index 2"), std::string::npos);
  EXPECT_THROW(cp::equalRankBounds(10, 0), std::invalid_argument);
  EXPECT_THROW(cp::equalRankBounds(-1, 2), std::invalid_argument);
}

TEST(ContextParallelPlan, SummaryLayoutPacksEachStatesTransitionThenEnd) {
  cp::SummaryLayout layout;
  layout.states = {segment::FoldShape{3, 4, 6, 5, false}, segment::FoldShape{3, 2, 6, 1, true}};
  EXPECT_EQ(layout.transElements(0), 4u * 6 * 6);
  EXPECT_EQ(layout.stateElements(0), 4u * 6 * 5);
  EXPECT_EQ(layout.extOffset(0), 4u * 6 * 6);
  EXPECT_EQ(layout.transOffset(1), 4u * 6 * 6 + 4 * 6 * 5);
  EXPECT_EQ(layout.transElements(1), 2u * 6);
  EXPECT_EQ(layout.extOffset(1), layout.transOffset(1) + 2 * 6);
  EXPECT_EQ(layout.slotElements(), layout.extOffset(1) + 2 * 6);
}

}  // namespace
}  // namespace dgps

namespace dgps {
namespace {

/// rankStartStates in fp32 (the device's precision) against a direct float64 fold X ← M_j X + E_j over
/// the earlier ranks' slots, for a document spanning four ranks, two carried states (full and diagonal M).
TEST(ContextParallelPlan, StartStatesAreTheFoldOfEarlierSlots) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  const cp::Plan plan = cp::makePlan({0, 3, 40, 44}, {0, 12, 24, 36, 48});  // doc 1 over ranks 0..3
  const std::int64_t N = 3, H = 2, K = 4, W = 3;
  cp::SummaryLayout layout{{segment::FoldShape{N, H, K, W, false}, segment::FoldShape{N, H, K, 1, true}}};
  const int G = plan.ranks;
  std::vector<float> gathered(G * layout.slotElements());
  for (auto& x : gathered) x = static_cast<float>(0.4 * nd(rng));
  for (std::size_t state = 0; state < 2; ++state) {
    const std::size_t X = layout.stateElements(state);
    std::vector<float> init(N * X);
    for (auto& x : init) x = static_cast<float>(nd(rng));
    const std::int64_t width = layout.states[state].width;
    const bool diagonal = layout.states[state].diagonal;
    for (int r = 0; r < G; ++r) {
      const std::size_t frags = plan.rank[r].fragments.size();
      std::vector<float> out(frags * X, std::numeric_limits<float>::quiet_NaN());
      cp::rankStartStates<float>(plan, r, layout, state, gathered.data(), init.data(), out.data());
      for (std::size_t i = 0; i < frags; ++i) {
        const std::int64_t n = plan.rank[r].fragments[i].seq;
        std::vector<double> h(init.begin() + n * X, init.begin() + (n + 1) * X);
        if (i == 0 && plan.rank[r].continuesIn)
          for (int j = 0; j < r; ++j) {  // doc 1 is the last fragment of every earlier rank
            const float* slot = gathered.data() + j * layout.slotElements();
            const float* M = slot + layout.transOffset(state);
            const float* E = slot + layout.extOffset(state);
            std::vector<double> next(X);
            for (std::int64_t hd = 0; hd < H; ++hd)
              for (std::int64_t a = 0; a < K; ++a)
                for (std::int64_t c = 0; c < width; ++c) {
                  double acc = E[(hd * K + a) * width + c];
                  for (std::int64_t b = 0; b < K; ++b) {
                    const double m = diagonal ? (a == b ? M[hd * K + a] : 0.0) : M[(hd * K + a) * K + b];
                    acc += m * h[(hd * K + b) * width + c];
                  }
                  next[(hd * K + a) * width + c] = acc;
                }
            h = next;
          }
        for (std::size_t x = 0; x < X; ++x)
          EXPECT_NEAR(out[i * X + x], h[x], 1e-5 * std::max(1.0, std::fabs(h[x])))
              << "state " << state << " rank " << r << " fragment " << i;
      }
    }
  }
  std::vector<float> out(16);
  EXPECT_THROW(cp::rankStartStates<float>(plan, 4, layout, 0, gathered.data(), nullptr, out.data()),
               std::invalid_argument);
  EXPECT_THROW(cp::rankStartStates<float>(plan, 0, layout, 2, gathered.data(), nullptr, out.data()),
               std::invalid_argument);
}

}  // namespace
}  // namespace dgps
