// The context-parallel plan: rank ranges, fragments, who folds what (ContextParallelPlan.h).
#include "dgps/dsl/ContextParallelPlan.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace dgps::cp {

namespace {

std::string listText(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size() && i < 12; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() > 12 ? ", ...]" : "]");
}

void checkBounds(const std::vector<std::int64_t>& bounds) {
  if (bounds.size() < 2 || bounds.front() != 0)
    throw std::invalid_argument("context parallel rank bounds " + listText(bounds) +
                                ": expected G+1 >= 2 token indices starting at 0");
  if (bounds.size() - 1 > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::invalid_argument("context parallel rank bounds: too many ranks");
  for (std::size_t r = 1; r < bounds.size(); ++r)
    if (bounds[r] < bounds[r - 1])
      throw std::invalid_argument("context parallel rank bounds " + listText(bounds) + ": decrease at index " +
                                  std::to_string(r) + " (expected non-decreasing)");
}

/// The rank of an empty document at token t: the first non-empty range containing t, else the last rank.
int ownerOfEmptyDocument(const std::vector<std::int64_t>& bounds, std::int64_t t) {
  const int G = static_cast<int>(bounds.size()) - 1;
  for (int r = 0; r < G; ++r)
    if (bounds[r] <= t && t < bounds[r + 1]) return r;
  return G - 1;
}

void checkRank(const Plan& plan, int rank) {
  if (rank < 0 || rank >= plan.ranks)
    throw std::invalid_argument("context parallel: rank " + std::to_string(rank) + " outside [0, " +
                                std::to_string(plan.ranks) + ")");
}

void checkRankAndState(const Plan& plan, int rank, const SummaryLayout& layout, std::size_t state) {
  checkRank(plan, rank);
  if (state >= layout.states.size())
    throw std::invalid_argument("context parallel: carried state " + std::to_string(state) + " outside [0, " +
                                std::to_string(layout.states.size()) + ")");
}

}  // namespace

std::vector<std::int64_t> equalRankBounds(std::int64_t tokens, int ranks) {
  if (ranks < 1) throw std::invalid_argument("context parallel ranks: expected >= 1, got " + std::to_string(ranks));
  if (tokens < 0) throw std::invalid_argument("context parallel tokens: expected >= 0, got " + std::to_string(tokens));
  const std::int64_t piece = (tokens + ranks - 1) / ranks;  // the split of segment::splitAcrossRanks
  std::vector<std::int64_t> bounds(static_cast<std::size_t>(ranks) + 1);
  for (int r = 0; r <= ranks; ++r) bounds[r] = std::min(tokens, r * piece);
  return bounds;
}

Plan makePlan(const std::vector<std::int64_t>& cuSeqlens, const std::vector<std::int64_t>& rankBounds) {
  checkBounds(rankBounds);
  Plan plan;
  plan.ranks = static_cast<int>(rankBounds.size()) - 1;
  plan.tokens = rankBounds.back();
  // sequencesOf checks cu_seqlens (starts at 0, non-decreasing, cu[N] <= T).
  const std::vector<segment::Segment> docs = segment::sequencesOf(cuSeqlens, 1, plan.tokens);
  plan.numDocs = static_cast<std::int64_t>(docs.size());
  plan.cuSeqlens = cuSeqlens;
  plan.rank.resize(static_cast<std::size_t>(plan.ranks));
  plan.initialStateRank.assign(docs.size(), -1);
  plan.finalStateRank.assign(docs.size(), -1);
  plan.crossingDoc.assign(static_cast<std::size_t>(plan.ranks - 1), -1);

  for (int r = 0; r < plan.ranks; ++r) {
    RankPlan& rp = plan.rank[r];
    rp.begin = rankBounds[r];
    rp.end = rankBounds[r + 1];
    rp.localCuSeqlens = {0};
    for (const segment::Segment& d : docs) {
      const std::int64_t lo = std::max(d.begin, rp.begin), hi = std::min(d.end, rp.end);
      if (lo >= hi) continue;
      rp.fragments.push_back({d.seq, 0, lo, hi});
      rp.localCuSeqlens.push_back(rp.localCuSeqlens.back() + hi - lo);
    }
    if (rp.fragments.empty()) continue;
    const segment::Segment &first = rp.fragments.front(), &last = rp.fragments.back();
    rp.continuesIn = first.begin > docs[first.seq].begin;
    rp.continuesOut = last.end < docs[last.seq].end;
    if (rp.continuesIn)  // every earlier holder of the document holds it as its last, continued fragment
      for (int j = 0; j < r; ++j)
        if (!plan.rank[j].fragments.empty() && plan.rank[j].fragments.back().seq == first.seq &&
            plan.rank[j].continuesOut)
          rp.foldFrom.push_back(j);
    for (const segment::Segment& f : rp.fragments) {
      if (f.begin == docs[f.seq].begin) plan.initialStateRank[f.seq] = r;
      if (f.end == docs[f.seq].end) plan.finalStateRank[f.seq] = r;
    }
  }
  for (const segment::Segment& d : docs)
    if (d.begin == d.end)
      plan.initialStateRank[d.seq] = plan.finalStateRank[d.seq] = ownerOfEmptyDocument(rankBounds, d.begin);
  for (int b = 0; b + 1 < plan.ranks; ++b) {
    const std::int64_t t = rankBounds[b + 1];
    for (const segment::Segment& d : docs)
      if (d.begin < t && t < d.end) plan.crossingDoc[b] = d.seq;
  }
  return plan;
}

std::size_t SummaryLayout::transElements(std::size_t s) const {
  const segment::FoldShape& f = states.at(s);
  return static_cast<std::size_t>(f.heads * f.K * (f.diagonal ? 1 : f.K));
}

std::size_t SummaryLayout::stateElements(std::size_t s) const {
  const segment::FoldShape& f = states.at(s);
  return static_cast<std::size_t>(f.heads * f.K * f.width);
}

std::size_t SummaryLayout::transOffset(std::size_t s) const {
  std::size_t offset = 0;
  for (std::size_t i = 0; i < s; ++i) offset += transElements(i) + stateElements(i);
  return offset;
}

std::size_t SummaryLayout::extOffset(std::size_t s) const { return transOffset(s) + transElements(s); }

std::size_t SummaryLayout::slotElements() const { return transOffset(states.size()); }

template <typename Real>
void continuedStartState(const Plan& plan, int rank, const SummaryLayout& layout, std::size_t state,
                         const Real* gathered, const Real* docInitRow, Real* out) {
  checkRankAndState(plan, rank, layout, state);
  const RankPlan& rp = plan.rank[rank];
  if (!rp.continuesIn)
    throw std::invalid_argument("continuedStartState: rank " + std::to_string(rank) +
                                " does not continue a document from an earlier rank (its first fragment starts "
                                "from the document's initial state)");
  const std::size_t X = layout.stateElements(state), MT = layout.transElements(state);
  // The earlier fragments of the document as one sequence (index 0) of consecutive segments, their
  // summaries copied out of the gathered slots; foldSegments' final state is this fragment's start.
  std::vector<segment::Segment> earlier;
  std::vector<Real> trans, ext;
  for (int j : rp.foldFrom) {
    const segment::Segment& f = plan.rank[j].fragments.back();
    earlier.push_back({0, 0, f.begin, f.end});
    const Real* slot = gathered + static_cast<std::size_t>(j) * layout.slotElements();
    trans.insert(trans.end(), slot + layout.transOffset(state), slot + layout.transOffset(state) + MT);
    ext.insert(ext.end(), slot + layout.extOffset(state), slot + layout.extOffset(state) + X);
  }
  segment::FoldShape one = layout.states[state];
  one.numSeqs = 1;
  std::vector<Real> starts(earlier.size() * X);
  segment::foldSegments<Real>(earlier, one, trans.data(), ext.data(), docInitRow, starts.data(), out);
}

template <typename Real>
void rankStartStates(const Plan& plan, int rank, const SummaryLayout& layout, std::size_t state,
                     const Real* gathered, const Real* docInit, Real* out) {
  checkRankAndState(plan, rank, layout, state);
  const RankPlan& rp = plan.rank[rank];
  const std::size_t X = layout.stateElements(state);
  for (std::size_t i = 0; i < rp.fragments.size(); ++i) {
    const std::int64_t n = rp.fragments[i].seq;
    Real* dst = out + i * X;
    if (i == 0 && rp.continuesIn)
      continuedStartState<Real>(plan, rank, layout, state, gathered, docInit ? docInit + n * X : nullptr, dst);
    else
      for (std::size_t x = 0; x < X; ++x) dst[x] = docInit ? docInit[n * X + x] : Real(0);
  }
}

template <typename Real>
void scatterFinalStates(const Plan& plan, int rank, const segment::FoldShape& shape, const Real* localFinal,
                        const Real* docInit, Real* docFinal) {
  checkRank(plan, rank);
  const std::size_t X = static_cast<std::size_t>(shape.heads * shape.K * shape.width);
  const RankPlan& rp = plan.rank[rank];
  for (std::size_t i = 0; i < rp.fragments.size(); ++i) {
    const std::int64_t n = rp.fragments[i].seq;
    if (plan.finalStateRank[n] == rank && rp.fragments[i].end == plan.cuSeqlens[n + 1])
      std::copy(localFinal + i * X, localFinal + (i + 1) * X, docFinal + n * X);
  }
  for (std::int64_t n = 0; n < plan.numDocs; ++n)
    if (plan.cuSeqlens[n] == plan.cuSeqlens[n + 1] && plan.finalStateRank[n] == rank)
      for (std::size_t x = 0; x < X; ++x) docFinal[n * X + x] = docInit ? docInit[n * X + x] : Real(0);
}

template void continuedStartState<float>(const Plan&, int, const SummaryLayout&, std::size_t, const float*,
                                         const float*, float*);
template void continuedStartState<double>(const Plan&, int, const SummaryLayout&, std::size_t, const double*,
                                          const double*, double*);
template void rankStartStates<float>(const Plan&, int, const SummaryLayout&, std::size_t, const float*,
                                     const float*, float*);
template void rankStartStates<double>(const Plan&, int, const SummaryLayout&, std::size_t, const double*,
                                      const double*, double*);
template void scatterFinalStates<float>(const Plan&, int, const segment::FoldShape&, const float*, const float*,
                                        float*);
template void scatterFinalStates<double>(const Plan&, int, const segment::FoldShape&, const double*,
                                         const double*, double*);

}  // namespace dgps::cp
