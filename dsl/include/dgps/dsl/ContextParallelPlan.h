// The document bookkeeping of context parallelism (docs/context_parallel.md): a packed varlen batch of
// N documents (cu_seqlens, T tokens in all) is cut into G contiguous token ranges, one per rank. A
// document that crosses a rank boundary has one fragment on every rank it touches; the rank holding
// its first token starts it from the document's initial state, every later rank starts its fragment
// from the state the earlier fragments leave, which it gets by folding their all-gathered summaries
// (X ← M_j X + E_j, segment::foldSegments), and the rank holding its last token ends with the
// document's final state.
//
// Because the ranges are contiguous, only a rank's LAST fragment can continue on a later rank and only
// its FIRST fragment can continue one from an earlier rank. So every rank publishes at most one summary
// (that of its last fragment) and the all-gather exchanges one fixed-size slot per rank.
//
// Host code with no MLIR or CUDA dependency: shared by the float64 tests and the runtime's collective
// (dgps/runtime/ContextParallel.h). Errors are std::invalid_argument naming the bad value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dgps/dsl/SegmentScan.h"

namespace dgps::cp {

/// What one rank holds and does.
struct RankPlan {
  std::int64_t begin = 0;  ///< first token of the rank's range (packed index)
  std::int64_t end = 0;    ///< one past its last token; begin == end for an empty rank
  /// The rank's fragments, in token order: segment::Segment{doc, 0, begin, end}, never empty. Tokens of
  /// the range past cu_seqlens[N] (padding) belong to none.
  std::vector<segment::Segment> fragments;
  /// cu_seqlens of the rank's local varlen batch (token indices relative to `begin`):
  /// {0, len(fragments[0]), len(fragments[0]) + len(fragments[1]), ...}; {0} for a rank without fragments.
  std::vector<std::int64_t> localCuSeqlens;
  /// fragments[0] continues a document begun on an earlier rank: its start state is the fold of the
  /// summaries of `foldFrom` over the document's initial state.
  bool continuesIn = false;
  /// fragments.back() continues on a later rank: this rank publishes its summary (M, E) in its slot of
  /// the all-gather. Otherwise its slot is not read (contents unspecified).
  bool continuesOut = false;
  /// The ranks whose summaries fold, in this order, into the start state of fragments[0]: every earlier
  /// rank holding a fragment of the same document (each of them publishes it). Empty unless continuesIn.
  std::vector<int> foldFrom;
};

/// The whole context-parallel split; every rank computes the same plan from the same inputs.
struct Plan {
  int ranks = 0;                      ///< G
  std::int64_t numDocs = 0;           ///< N
  std::int64_t tokens = 0;            ///< T, the packed length (cu_seqlens[N] <= T)
  std::vector<std::int64_t> cuSeqlens;
  std::vector<RankPlan> rank;         ///< [G]
  /// [N]: the rank that starts document n from its initial state and the one that writes its final
  /// state. A document with no tokens is handled entirely by one rank (final = initial): the rank whose
  /// non-empty range contains token cu[n], or the last rank when cu[n] == T or no such rank exists.
  std::vector<int> initialStateRank;
  std::vector<int> finalStateRank;
  /// [G-1]: the document crossing the boundary between rank b and rank b+1 (a document with tokens on
  /// both sides of token rank[b].end), or -1.
  std::vector<std::int64_t> crossingDoc;
};

/// G contiguous ranges of ⌈T / G⌉ tokens (the last ones shorter or empty), the split of
/// segment::splitAcrossRanks: returns G+1 bounds {0, ..., T}. Throws when G < 1 or T < 0.
std::vector<std::int64_t> equalRankBounds(std::int64_t tokens, int ranks);

/// The plan for cu_seqlens (N+1 non-decreasing values from 0 to at most T) and rankBounds (G+1
/// non-decreasing token indices from 0 to T: rank r holds [rankBounds[r], rankBounds[r+1])). A dense
/// batch of one sequence is cu_seqlens = {0, T}. Throws std::invalid_argument on a malformed input.
Plan makePlan(const std::vector<std::int64_t>& cuSeqlens, const std::vector<std::int64_t>& rankBounds);

/// The layout of one rank's all-gather slot: for each carried state in order (the memory state S, then
/// the preconditioner state if any), its M then its E, in the layouts of SegmentScan.h for one segment:
///   M [heads, K, K] ([heads, K] when diagonal),   E [heads, K, width].
/// Each state is described by its segment::FoldShape (numSeqs = N). Element counts, not bytes: the
/// device exchanges fp32, the float64 tests double.
struct SummaryLayout {
  std::vector<segment::FoldShape> states;

  std::size_t transElements(std::size_t state) const;  ///< heads·K·K (heads·K when diagonal)
  std::size_t stateElements(std::size_t state) const;   ///< heads·K·width: one state of one document
  std::size_t transOffset(std::size_t state) const;     ///< where state's M starts in a slot
  std::size_t extOffset(std::size_t state) const;       ///< where state's E starts in a slot
  std::size_t slotElements() const;                     ///< one rank's slot; the gather holds G of them
};

/// The start state of `rank`'s continued fragments[0] (plan.rank[rank].continuesIn) for carried state
/// `state`: the fold
///   X = docInitRow (zero when null);  for j in foldFrom: X = M_j X + E_j   (segment::foldSegments)
/// of the gathered slots, gathered[j · slotElements() + ...] holding rank j's slot (only the foldFrom
/// slots are read). docInitRow and out are one state of the document, [heads, K, width]. The one
/// definition of the cross-rank fold: rankStartStates and the runtime's phases (memory state and
/// preconditioner state alike, dgps/runtime/ContextParallelForward.h) all call it. Throws
/// std::invalid_argument on a bad rank or state index, or a rank that does not continue a document.
template <typename Real>
void continuedStartState(const Plan& plan, int rank, const SummaryLayout& layout, std::size_t state,
                         const Real* gathered, const Real* docInitRow, Real* out);

/// The start states of `rank`'s fragments for carried state `state`: out[i] ([heads, K, width], i over
/// the rank's fragments) is the document's initial state (docInit[n], or zero when docInit is null) for
/// a fragment holding its document's first token, and for a continued fragments[0] continuedStartState
/// over docInit[n]. Throws on a bad rank or state index.
template <typename Real>
void rankStartStates(const Plan& plan, int rank, const SummaryLayout& layout, std::size_t state,
                     const Real* gathered, const Real* docInit, Real* out);

/// Copies `rank`'s final states into the documents' final states: docFinal[n] = localFinal[i] for each
/// fragment i holding document n's last token, and docFinal[n] = docInit[n] (or zero) for each empty
/// document assigned to the rank. Other documents' rows are not written. Layouts [·, heads, K, width];
/// localFinal may be null for a rank without fragments. Every rank calling it once writes every row.
template <typename Real>
void scatterFinalStates(const Plan& plan, int rank, const segment::FoldShape& shape, const Real* localFinal,
                        const Real* docInit, Real* docFinal);

}  // namespace dgps::cp
