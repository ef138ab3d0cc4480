// The bookkeeping of the sequence-parallel state pass (dsl SegmentScan.h, docs/math.md §8), checked
// against the float64 token-by-token reference:
//  - the unit itself: segments, rank pieces, the fold order and its errors, the fold against a direct
//    product, the segment-length rule;
//  - context parallelism (G ∈ {2, 4, 8} simulated ranks): each rank runs only its contiguous piece of a
//    packed varlen batch (documents cross piece boundaries), computes its summaries from zero / the
//    identity, the summaries are "all-gathered" by copying, folded, and each rank reruns its piece from
//    the folded start states. Outputs and final states equal the single-device reference.
#include <algorithm>
#include <array>
#include <limits>

#include "TestUtil.h"
#include "dgps/dsl/SegmentScan.h"

namespace dgps::test {
namespace {

using segment::FoldShape;
using segment::Segment;

constexpr double kTolerance = 1e-9;

// ---- the unit ----------------------------------------------------------------------------------

TEST(SegmentScan, SplitSequencesNeverCrossesADocument) {
  const std::vector<std::int64_t> cu = {0, 3, 20, 20, 29};
  std::vector<Segment> s = segment::splitSequences(cu, 1, 32, 8);
  // 3 → [0,3); 17 → [3,11) [11,19) [19,20); 0 → none; 9 → [20,28) [28,29)
  const std::vector<std::array<std::int64_t, 3>> expected = {{0, 0, 3},   {1, 3, 11},  {1, 11, 19},
                                                            {1, 19, 20}, {3, 20, 28}, {3, 28, 29}};
  ASSERT_EQ(s.size(), expected.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].seq, expected[i][0]);
    EXPECT_EQ(s[i].begin, expected[i][1]);
    EXPECT_EQ(s[i].end, expected[i][2]);
  }
  EXPECT_THROW(segment::splitSequences(cu, 1, 32, 0), std::invalid_argument);
  EXPECT_THROW(segment::splitSequences({0, 5, 4}, 1, 8, 2), std::invalid_argument);
  EXPECT_THROW(segment::splitSequences({0, 9}, 1, 8, 2), std::invalid_argument);
}

TEST(SegmentScan, RankPiecesTileEveryDocument) {
  const std::vector<std::int64_t> cu = {0, 7, 40, 41, 90};  // T = 100: rows 90..99 are padding
  for (std::int64_t G : {1, 2, 3, 4, 8, 13}) {
    auto pieces = segment::splitAcrossRanks(cu, 1, 100, G);
    ASSERT_EQ(pieces.size(), static_cast<std::size_t>(G));
    std::vector<Segment> all;
    const std::int64_t piece = (100 + G - 1) / G;
    for (std::int64_t r = 0; r < G; ++r)
      for (const Segment& s : pieces[r]) {
        EXPECT_GE(s.begin, r * piece);
        EXPECT_LE(s.end, (r + 1) * piece);
        all.push_back(s);
      }
    std::vector<std::size_t> order = segment::foldOrder(all, 4);  // throws on a gap or an overlap
    std::vector<std::int64_t> covered(4, 0);
    for (std::size_t i : order) covered[all[i].seq] += all[i].length();
    for (std::int64_t n = 0; n < 4; ++n) EXPECT_EQ(covered[n], cu[n + 1] - cu[n]) << "G=" << G << " n=" << n;
  }
  EXPECT_THROW(segment::splitAcrossRanks(cu, 1, 100, 0), std::invalid_argument);
}

TEST(SegmentScan, FoldOrderNamesTheBadSegment) {
  auto message = [](const std::vector<Segment>& s, std::int64_t n) {
    try {
      segment::foldOrder(s, n);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message({{0, 0, 0, 4}, {0, 0, 5, 8}}, 1).find("tokens [5, 8)"), std::string::npos);  // gap
  EXPECT_NE(message({{0, 0, 0, 4}, {0, 0, 3, 8}}, 1).find("tokens [3, 8)"), std::string::npos);  // overlap
  EXPECT_NE(message({{2, 0, 0, 4}}, 2).find("sequence outside [0, 2)"), std::string::npos);
  EXPECT_NE(message({{0, 0, 4, 4}}, 1).find("empty"), std::string::npos);
}

/// The fold against the direct computation X ← M X + E segment by segment, with segments given out of
/// order, a sequence without segments and a diagonal variant.
TEST(SegmentScan, FoldEqualsTheDirectProduct) {
  DGPS_SEEDED(seed);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  const std::int64_t N = 3, H = 2, K = 5, W = 4;
  // Sequence 1 has no tokens; sequence 2's segments are listed before sequence 0's, and reversed.
  const std::vector<Segment> segs = {{2, 0, 30, 41}, {2, 0, 20, 30}, {0, 0, 0, 7}, {0, 0, 7, 9}, {0, 0, 9, 20}};
  const std::int64_t S = static_cast<std::int64_t>(segs.size());
  for (bool diagonal : {false, true}) {
    const std::int64_t msize = diagonal ? K : K * K;
    std::vector<double> M(S * H * msize), E(S * H * K * W), init(N * H * K * W);
    for (auto& x : M) x = 0.5 * nd(rng);
    for (auto& x : E) x = nd(rng);
    for (auto& x : init) x = nd(rng);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> start(S * H * K * W, nan), fin(N * H * K * W, nan);  // poisoned
    segment::foldSegments<double>(segs, FoldShape{N, H, K, W, diagonal}, M.data(), E.data(), init.data(),
                                  start.data(), fin.data());
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t h = 0; h < H; ++h) {
        std::vector<double> X(init.begin() + (n * H + h) * K * W, init.begin() + (n * H + h + 1) * K * W);
        // token order of sequence n
        std::vector<std::int64_t> mine;
        for (std::int64_t s = 0; s < S; ++s)
          if (segs[s].seq == n) mine.push_back(s);
        std::sort(mine.begin(), mine.end(), [&](auto a, auto b) { return segs[a].begin < segs[b].begin; });
        for (std::int64_t s : mine) {
          for (std::int64_t x = 0; x < K * W; ++x)
            EXPECT_NEAR(start[(s * H + h) * K * W + x], X[x], 1e-12) << "segment " << s;
          std::vector<double> Y(K * W);
          for (std::int64_t r = 0; r < K; ++r)
            for (std::int64_t c = 0; c < W; ++c) {
              double acc = E[((s * H + h) * K + r) * W + c];
              for (std::int64_t m = 0; m < K; ++m) {
                const double mrm =
                    diagonal ? (m == r ? M[(s * H + h) * K + r] : 0.0) : M[(s * H + h) * K * K + r * K + m];
                acc += mrm * X[m * W + c];
              }
              Y[r * W + c] = acc;
            }
          X = Y;
        }
        for (std::int64_t x = 0; x < K * W; ++x) EXPECT_NEAR(fin[(n * H + h) * K * W + x], X[x], 1e-12) << "seq " << n;
      }
  }
}

TEST(SegmentScan, SegmentLengthRule) {
  segment::SegmentRuleInputs in;
  in.chunksPerSeq = 512, in.K = 128, in.C = 64, in.smCount = 132;
  in.parallelWork = 132;  // the walk already fills the GPU: every split needs more waves, no split
  EXPECT_EQ(segment::chooseSegmentChunks(in), 512);
  // B = 1, HV = 16, two 64-column value tiles at T = 32768 (measured on the H200: L = 64 1.286 ms, L = 57
  // 1.489 ms). 4 segments: 256 summary CTAs = 2 waves, 128 walk CTAs = 1 wave: 128 · (0.58 · 2 + 1) + 1.5 · 4
  // = 282.5 chunk steps; 8 segments: 64 · (0.58 · 4 + 2) + 12 = 288.5; 9 segments (L = 57): 57 · (0.58 · 5 + 3)
  // + 13.5 = 349.8; the plain walk 512.
  in.parallelWork = 32;
  EXPECT_EQ(segment::chooseSegmentChunks(in), 128);
  // 128-column value tiles: 8 segments of 64 (256 summary CTAs, 128 walk CTAs: 64 · 2.16 + 12 = 150.2) beat 4 of
  // 128 (128 · 1.58 + 6 = 208.2) and 16 of 32 (32 · (0.58 · 4 + 2) + 24 = 162.2).
  in.parallelWork = 16;
  EXPECT_EQ(segment::chooseSegmentChunks(in), 64);
  // The summaries' own CTA count decides the waves: at 34 summary CTAs per segment, 8 segments need 272 (3
  // waves: 64 · (0.58 · 3 + 1) + 12 = 187.4) and 7 segments of 74 chunks need 238 (2 waves: 74 · 2.16 + 10.5 =
  // 170.3).
  in.summaryWork = 34;
  EXPECT_EQ(segment::chooseSegmentChunks(in), 74);
  in.summaryWork = 0;
  // Two resident CTAs per SM double the slots: 16 segments of 32 (512 summary CTAs = 2 waves, 256 walk CTAs =
  // 1 wave: 32 · 2.16 + 24 = 93.1) beat 8 of 64 (64 · 1.58 + 12 = 113.1).
  in.ctasPerSm = 2;
  EXPECT_EQ(segment::chooseSegmentChunks(in), 32);
  in.ctasPerSm = 1;
  // Two summaries per SM (summaryCtasPerSm = 2): 8 segments of 64 take one shared summary wave (256 CTAs on 264
  // slots: 64 · (0.58 · 1.6 + 1) + 12 = 135.4) where they took two single ones (150.2). The length stays: 4
  // segments of 128 (128 CTAs, one per SM, no sharing: 128 · 1.58 + 6 = 208.2) and 16 of 32 (32 · (0.58 · 1.6 · 2
  // + 2) + 24 = 147.4) lose either way.
  in.summaryCtasPerSm = 2;
  EXPECT_EQ(segment::chooseSegmentChunks(in), 64);
  // 56 walk CTAs, 112 summary CTAs per segment at NT = 1024: with one summary per SM no split beats the plain walk
  // by 10% (1024 → at best 0.9 · 1024 = 921.6); with two, 7 segments of 147 do: 784 summary CTAs in 3 shared waves,
  // 392 walk CTAs in 3: 147 · (0.58 · 1.6 · 3 + 3) + 10.5 = 860.7.
  in.chunksPerSeq = 1024, in.parallelWork = 56, in.summaryWork = 112;
  EXPECT_EQ(segment::chooseSegmentChunks(in), 147);
  in.summaryCtasPerSm = 1;
  EXPECT_EQ(segment::chooseSegmentChunks(in), 1024);
  in.chunksPerSeq = 512, in.parallelWork = 16, in.summaryWork = 0;
  // One (sequence, value tile): many short segments, but none under kMinSegmentChunks.
  in.parallelWork = 1;
  EXPECT_GE(segment::chooseSegmentChunks(in), segment::kMinSegmentChunks);
  EXPECT_LT(segment::chooseSegmentChunks(in), 32);
  in.chunksPerSeq = segment::kMinSegmentedChunks - 1;  // too short: the chunk-local kernel dominates
  EXPECT_EQ(segment::chooseSegmentChunks(in), segment::kMinSegmentedChunks - 1);
  // B = 8, T = 4096 at C = 32 (NT = 128, 128 walk CTAs): two segments would take 2 waves of summaries of 64
  // chunks plus 2 walk waves: 64 · (0.58 · 4 + 2) + 3 = 279.5 > 128 (measured: a 2-segment split was 2x slower).
  in.chunksPerSeq = 128, in.parallelWork = 128;
  EXPECT_EQ(segment::chooseSegmentChunks(in), 128);
  in.chunksPerSeq = 0;
  EXPECT_EQ(segment::chooseSegmentChunks(in), 1);
}

// ---- context parallelism across simulated ranks -----------------------------------------------

/// Rows [begin, end) of a [1, T, ...] tensor.
Tensor rows(const Tensor& x, std::int64_t begin, std::int64_t end) { return sliceT(x, begin, end); }

/// [N_local, heads, K, W] from the given per-fragment blocks (each heads·K·W values).
Tensor stack(const std::vector<const double*>& blocks, std::vector<std::int64_t> inner) {
  std::int64_t size = 1;
  for (std::int64_t d : inner) size *= d;
  std::vector<double> data;
  for (const double* b : blocks) data.insert(data.end(), b, b + size);
  inner.insert(inner.begin(), static_cast<std::int64_t>(blocks.size()));
  return Tensor::fromDoubles(ScalarType::F64, inner, data);
}

/// One rank: its piece of the token buffer and its fragments (global indices into the gathered list).
struct Rank {
  std::int64_t begin = 0, end = 0;
  std::vector<std::size_t> frags;
};

class ContextParallel : public ::testing::TestWithParam<Spec> {};

TEST_P(ContextParallel, GatheredSummariesFoldToTheSingleDeviceResult) {
  const Spec spec = GetParam();
  const bool precond = hasPrecond(spec);
  const std::int64_t H = 2, HV = H * spec.gva_ratio, K = 6, V = 5, T = 120;
  // A packed batch: 9, 60 (the long document), 1, 0 and 35 tokens; rows 105..119 are padding.
  const std::vector<std::int64_t> cu = {0, 9, 69, 70, 70, 105};
  const std::int64_t N = static_cast<std::int64_t>(cu.size()) - 1;
  DGPS_SEEDED(seed);
  const ReferenceInputs full = inputs64(spec, shapeOf(1, T, H, HV, K, V, cu), seed);
  const ReferenceOutputs expected = runReference(spec, full);

  for (std::int64_t G : {2, 4, 8}) {
    SCOPED_TRACE("G=" + std::to_string(G));
    // The fragments of all ranks, in rank order: the "all-gathered" list every rank holds.
    std::vector<Segment> frags;
    std::vector<Rank> ranks;
    const std::int64_t piece = (T + G - 1) / G;
    auto pieces = segment::splitAcrossRanks(cu, 1, T, G);
    for (std::int64_t r = 0; r < G; ++r) {
      Rank rank{r * piece, std::min(T, (r + 1) * piece), {}};
      for (const Segment& s : pieces[r]) {
        rank.frags.push_back(frags.size());
        frags.push_back(s);
      }
      ranks.push_back(rank);
    }
    const std::int64_t S = static_cast<std::int64_t>(frags.size());
    bool crosses = false;
    for (std::int64_t s = 1; s < S; ++s) crosses |= frags[s].seq == frags[s - 1].seq;
    ASSERT_TRUE(crosses) << "the test needs a document that crosses a piece boundary";

    // Rank r runs only its piece: a varlen batch of its fragments with the given start states.
    auto runRank = [&](const Rank& rank, const Tensor* state, const Tensor* pstate, bool zeroValues) {
      ReferenceInputs in;
      for (const auto& [name, t] : full) {
        if (name == "cu_seqlens" || name == "initial_state" || name == "initial_precond_state") continue;
        in[name] = name == "precond_center" ? t : rows(t, rank.begin, rank.end);
      }
      if (zeroValues) in["v"] = Tensor::fromDoubles(ScalarType::F64, in["v"].shape(),
                                                    std::vector<double>(in["v"].numel(), 0.0));
      std::vector<std::int64_t> local = {0};
      for (std::size_t f : rank.frags) local.push_back(local.back() + frags[f].length());
      in["cu_seqlens"] = Tensor::fromDoubles(ScalarType::I64, {static_cast<std::int64_t>(local.size())},
                                             std::vector<double>(local.begin(), local.end()));
      if (state) in["initial_state"] = *state;
      if (pstate) in["initial_precond_state"] = *pstate;
      return runReference(spec, in);
    };
    auto blocksOf = [](const Tensor& t, std::int64_t count, std::int64_t size) {
      std::vector<double> d = t.toDoubles();
      std::vector<std::vector<double>> out;
      for (std::int64_t i = 0; i < count; ++i) out.emplace_back(d.begin() + i * size, d.begin() + (i + 1) * size);
      return out;
    };
    const double nan = std::numeric_limits<double>::quiet_NaN();

    // 1. The preconditioner state first: its summaries need no other state. Per fragment, the scan is affine
    //    in its start p: p_end = M p + E, E from p = 0, M's columns from the unit vectors (diagonal for the
    //    accumulator: one run from p = 1).
    std::vector<double> pStart(S * H * K, nan), pFinal(N * H * K, nan);
    if (precond) {
      const bool diagonal = usesSquash(spec);
      const std::int64_t msize = diagonal ? K : K * K;
      std::vector<double> pM(S * H * msize, nan), pE(S * H * K, nan);  // the gathered buffers, poisoned
      for (const Rank& rank : ranks) {
        if (rank.frags.empty()) continue;
        const std::int64_t n = static_cast<std::int64_t>(rank.frags.size());
        auto fill = [&](double v) {
          return Tensor::fromDoubles(ScalarType::F64, {n, H, K}, std::vector<double>(n * H * K, v));
        };
        Tensor zero = fill(0.0);
        auto E = blocksOf(runRank(rank, nullptr, &zero, false).final_precond_state, n, H * K);
        std::vector<std::vector<double>> cols;  // cols[j]: p_end from the unit vector e_j (or from 1)
        for (std::int64_t j = 0; j < (diagonal ? 1 : K); ++j) {
          std::vector<double> unit(n * H * K, diagonal ? 1.0 : 0.0);
          if (!diagonal)
            for (std::int64_t x = 0; x < n * H; ++x) unit[x * K + j] = 1.0;
          Tensor u = Tensor::fromDoubles(ScalarType::F64, {n, H, K}, unit);
          cols.push_back(runRank(rank, nullptr, &u, false).final_precond_state.toDoubles());
        }
        for (std::int64_t i = 0; i < n; ++i) {  // "all-gather": copy into the global slots
          const std::size_t s = rank.frags[i];
          for (std::int64_t h = 0; h < H; ++h)
            for (std::int64_t r = 0; r < K; ++r) {
              const double e = E[i][h * K + r];
              pE[(s * H + h) * K + r] = e;
              if (diagonal) {
                pM[(s * H + h) * K + r] = cols[0][(i * H + h) * K + r] - e;
              } else {
                for (std::int64_t j = 0; j < K; ++j)
                  pM[((s * H + h) * K + r) * K + j] = cols[j][(i * H + h) * K + r] - e;
              }
            }
        }
      }
      std::vector<double> init = full.at("initial_precond_state").toDoubles();
      segment::foldSegments<double>(frags, FoldShape{N, H, K, 1, diagonal}, pM.data(), pE.data(), init.data(),
                                    pStart.data(), pFinal.data());
      EXPECT_LE(maxAbsDiff(Tensor::fromDoubles(ScalarType::F64, {N, H, K}, pFinal), expected.final_precond_state),
                kTolerance * std::max(1.0, maxAbs(expected.final_precond_state)));
    }
    auto precondOf = [&](const Rank& rank) {
      std::vector<const double*> b;
      for (std::size_t f : rank.frags) b.push_back(&pStart[f * H * K]);
      return stack(b, {H, K});
    };

    // 2. The memory state: E from S = 0, M from S = the identity's column blocks with v = 0 (M acts on the
    //    K rows; block j holds columns [jV, jV + V) of I_K, zero-padded).
    std::vector<double> M(S * HV * K * K, nan), E(S * HV * K * V, nan);
    for (const Rank& rank : ranks) {
      if (rank.frags.empty()) continue;
      const std::int64_t n = static_cast<std::int64_t>(rank.frags.size());
      Tensor p = precondOf(rank);
      Tensor zero = Tensor::fromDoubles(ScalarType::F64, {n, HV, K, V}, std::vector<double>(n * HV * K * V, 0.0));
      auto e = blocksOf(runRank(rank, &zero, precond ? &p : nullptr, false).final_state, n, HV * K * V);
      for (std::int64_t j0 = 0; j0 < K; j0 += V) {
        std::vector<double> eye(n * HV * K * V, 0.0);
        for (std::int64_t x = 0; x < n * HV; ++x)
          for (std::int64_t c = 0; c < V && j0 + c < K; ++c) eye[(x * K + j0 + c) * V + c] = 1.0;
        Tensor I = Tensor::fromDoubles(ScalarType::F64, {n, HV, K, V}, eye);
        auto m = blocksOf(runRank(rank, &I, precond ? &p : nullptr, true).final_state, n, HV * K * V);
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t hv = 0; hv < HV; ++hv)
            for (std::int64_t r = 0; r < K; ++r)
              for (std::int64_t c = 0; c < V && j0 + c < K; ++c)
                M[((rank.frags[i] * HV + hv) * K + r) * K + j0 + c] = m[i][(hv * K + r) * V + c];
      }
      for (std::int64_t i = 0; i < n; ++i)
        std::copy(e[i].begin(), e[i].end(), E.begin() + rank.frags[i] * HV * K * V);
    }
    std::vector<double> start(S * HV * K * V, nan), fin(N * HV * K * V, nan);
    std::vector<double> init = full.at("initial_state").toDoubles();
    segment::foldSegments<double>(frags, FoldShape{N, HV, K, V, false}, M.data(), E.data(), init.data(),
                                  start.data(), fin.data());
    EXPECT_LE(maxAbsDiff(Tensor::fromDoubles(ScalarType::F64, {N, HV, K, V}, fin), expected.final_state),
              kTolerance * std::max(1.0, maxAbs(expected.final_state)));

    // 3. Every rank reruns its piece from the folded start states; the pieces of o are concatenated.
    std::vector<double> o(T * HV * V, nan), ref = expected.o.toDoubles();
    for (const Rank& rank : ranks) {
      if (rank.frags.empty()) {  // only padding rows: o is 0 there
        for (std::int64_t x = rank.begin * HV * V; x < rank.end * HV * V; ++x) o[x] = 0.0;
        continue;
      }
      std::vector<const double*> b;
      for (std::size_t f : rank.frags) b.push_back(&start[f * HV * K * V]);
      Tensor s0 = stack(b, {HV, K, V}), p = precondOf(rank);
      ReferenceOutputs out = runRank(rank, &s0, precond ? &p : nullptr, false);
      std::vector<double> po = out.o.toDoubles();
      std::copy(po.begin(), po.end(), o.begin() + rank.begin * HV * V);
      // The rank holding a document's last fragment ends with its final state.
      std::vector<double> pf = out.final_state.toDoubles();
      for (std::size_t i = 0; i < rank.frags.size(); ++i) {
        const Segment& f = frags[rank.frags[i]];
        if (f.end != cu[f.seq + 1]) continue;
        for (std::int64_t x = 0; x < HV * K * V; ++x)
          EXPECT_NEAR(pf[i * HV * K * V + x], fin[f.seq * HV * K * V + x],
                      kTolerance * std::max(1.0, maxAbs(expected.final_state)));
      }
    }
    EXPECT_LE(maxAbsDiff(Tensor::fromDoubles(ScalarType::F64, {1, T, HV, V}, o), expected.o),
              kTolerance * std::max(1.0, maxAbs(expected.o)));
  }
}

/// Every spec whose state updates are affine in the carried states (all but a clamped hypergradient d).
std::vector<Spec> affineSpecs() {
  std::vector<Spec> out;
  for (Spec s : allSpecs()) {
    if (s.precond.hypergrad.clamp_min || s.precond.hypergrad.clamp_max) continue;
    s.varlen = s.initial_state = s.final_state = true;
    s.initial_precond_state = s.final_precond_state = hasPrecond(s);
    if (usesHypergrad(s))  // allSpecs has two OSDN variants under one name
      s.name += std::string(s.precond.hypergrad.timing == WriteTiming::Post ? "_post" : "_pre") +
                (s.precond.hypergrad.has_retention ? "_apf" : "");
    out.push_back(s);
    if (!usesHypergrad(s)) {  // and with grouped value heads
      s.gva_ratio = 2;
      s.name += "_gva2";
      out.push_back(s);
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Specs, ContextParallel, ::testing::ValuesIn(affineSpecs()),
                         [](const ::testing::TestParamInfo<Spec>& info) { return info.param.name; });

}  // namespace
}  // namespace dgps::test
