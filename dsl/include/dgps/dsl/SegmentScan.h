// The bookkeeping of a sequence-parallel state pass (docs/math.md §8): how sequences are cut into
// segments, how context-parallel ranks cut a packed batch into pieces, the fold of segment summaries
// into every segment's start state, and the rule that picks the segment length. Host code with no
// MLIR or CUDA dependency, shared by the float64 chunk-IR executor (compiler/lib/Executor), the tests
// and, later, the runtime's launcher of the segmented roles.
//
// A recurrence whose every step is affine in its state, X_t = A_t X_{t−1} + B_t, has over a run of
// tokens X_end = M X_start + E with M = Π A_t (later tokens on the left) and E the run's end state from
// a zero start. Both are computed per segment in parallel; the fold below then gives each segment its
// true start state. For the memory state S: X is K×V, M is K×K. For the ema_sq_squash accumulator: X is
// a K-vector and M diagonal. For the hypergrad_ogd d (without clamp): X is a K-vector and M is K×K.
//
// Layouts (row-major, `S` = number of segments, `heads` = HV for S or H for a preconditioner state,
// `width` = V for S and 1 for a preconditioner state):
//   trans  [S, heads, K, K]       M of each segment (diagonal transition: [S, heads, K])
//   ext    [S, heads, K, width]   E of each segment
//   init   [N, heads, K, width]   the sequences' initial states (nullptr: zero)
//   start  [S, heads, K, width]   out: the state entering each segment
//   final  [N, heads, K, width]   out: the state after each sequence (its init when it has no segment)
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace dgps::segment {

/// A contiguous run of tokens of one sequence: token rows [begin, end) of batch row `row` (always 0
/// for a packed varlen batch), belonging to sequence `seq` (0 ≤ seq < N).
struct Segment {
  std::int64_t seq = 0;
  std::int64_t row = 0;
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t length() const { return end - begin; }
};

/// The sequences of a batch: cu_seqlens (B = 1, packed) when non-empty, else `batch` rows of `seqLen`
/// tokens. Returns (row, begin, end) per sequence. Throws std::invalid_argument on a cu_seqlens that is
/// not a non-decreasing split of [0, seqLen] starting at 0.
std::vector<Segment> sequencesOf(const std::vector<std::int64_t>& cuSeqlens, std::int64_t batch,
                                 std::int64_t seqLen);

/// Cuts every sequence into segments of `segmentTokens` tokens from its start (its last segment may be
/// shorter; an empty sequence has none). Segments never cross a sequence boundary. In sequence order,
/// then token order. Throws std::invalid_argument when segmentTokens < 1.
std::vector<Segment> splitSequences(const std::vector<std::int64_t>& cuSeqlens, std::int64_t batch,
                                    std::int64_t seqLen, std::int64_t segmentTokens);

/// Context parallelism over `ranks` devices: each batch row's tokens [0, seqLen) are cut into `ranks`
/// contiguous pieces of ⌈seqLen / ranks⌉ tokens (the last ones may be shorter or empty); rank r holds
/// piece r of every row. Returns, per rank, its fragments: the intersection of each sequence with its
/// piece, in token order. A sequence crossing a piece boundary has one fragment on each rank it touches.
/// Padding rows past cu[N] belong to no fragment. Throws std::invalid_argument when ranks < 1.
std::vector<std::vector<Segment>> splitAcrossRanks(const std::vector<std::int64_t>& cuSeqlens,
                                                   std::int64_t batch, std::int64_t seqLen, std::int64_t ranks);

/// The order in which `segments` are folded: indices sorted by (seq, begin). Throws
/// std::invalid_argument (naming the segment) if a segment is empty, names a sequence outside [0, N),
/// or the segments of a sequence overlap or leave a gap between them.
std::vector<std::size_t> foldOrder(const std::vector<Segment>& segments, std::int64_t numSeqs);

/// Shapes of one fold (see the header comment for the layouts).
struct FoldShape {
  std::int64_t numSeqs = 0;       ///< N
  std::int64_t heads = 0;         ///< HV (memory state) or H (preconditioner state)
  std::int64_t K = 0;             ///< rows of the state
  std::int64_t width = 0;         ///< columns of the state: V, or 1 for a vector state
  bool diagonal = false;          ///< trans holds only the diagonal of each M ([S, heads, K])
};

/// The sequential fold over segments, per sequence n and head h, in token order:
///   X = init[n] (or 0);  for each segment s of n: start[s] = X;  X = M_s X + E_s;  final[n] = X.
/// Real is float (the device's fp32 fold) or double (the executor). 2K²·width FLOPs per segment and
/// head (K·width with a diagonal M). Throws std::invalid_argument as foldOrder does, or on a bad shape.
template <typename Real>
void foldSegments(const std::vector<Segment>& segments, const FoldShape& shape, const Real* trans, const Real* ext,
                  const Real* init, Real* start, Real* final) {
  if (shape.numSeqs < 0 || shape.heads < 1 || shape.K < 1 || shape.width < 1)
    throw std::invalid_argument("foldSegments: expected N >= 0, heads >= 1, K >= 1, width >= 1");
  const std::vector<std::size_t> order = foldOrder(segments, shape.numSeqs);
  const std::int64_t H = shape.heads, K = shape.K, W = shape.width, KW = K * W;
  const std::int64_t transSize = shape.diagonal ? K : K * K;
  std::vector<Real> X(static_cast<std::size_t>(KW)), next(X.size());
  std::vector<bool> touched(static_cast<std::size_t>(shape.numSeqs), false);
  std::size_t i = 0;
  while (i < order.size()) {
    const std::int64_t n = segments[order[i]].seq;
    touched[static_cast<std::size_t>(n)] = true;
    std::size_t j = i;
    for (std::int64_t h = 0; h < H; ++h) {
      for (std::int64_t x = 0; x < KW; ++x) X[x] = init ? init[(n * H + h) * KW + x] : Real(0);
      for (j = i; j < order.size() && segments[order[j]].seq == n; ++j) {
        const std::int64_t s = static_cast<std::int64_t>(order[j]);
        std::copy(X.begin(), X.end(), start + (s * H + h) * KW);
        const Real* M = trans + (s * H + h) * transSize;
        const Real* E = ext + (s * H + h) * KW;
        for (std::int64_t r = 0; r < K; ++r)
          for (std::int64_t c = 0; c < W; ++c) {
            Real acc = E[r * W + c];
            if (shape.diagonal)
              acc += M[r] * X[r * W + c];
            else
              for (std::int64_t m = 0; m < K; ++m) acc += M[r * K + m] * X[m * W + c];
            next[r * W + c] = acc;
          }
        X.swap(next);
      }
      std::copy(X.begin(), X.end(), final + (n * H + h) * KW);
    }
    i = j;
  }
  for (std::int64_t n = 0; n < shape.numSeqs; ++n)
    if (!touched[static_cast<std::size_t>(n)])
      for (std::int64_t x = 0; x < H * KW; ++x) final[n * H * KW + x] = init ? init[n * H * KW + x] : Real(0);
}

/// What the segment-length rule needs to know about a launch.
struct SegmentRuleInputs {
  std::int64_t chunksPerSeq = 0;     ///< NT of the longest sequence (⌈T / C⌉)
  std::int64_t parallelWork = 0;     ///< CTAs of one sequential walk: N · HV · ⌈V / BV⌉
  std::int64_t summaryWork = 0;      ///< CTAs of one segment's summaries: N · HV · (⌈V / BV⌉ + ⌈K / BV⌉)
                                     ///< (the E walk's value tiles and the M walk's K-column tiles); 0: 2 · parallelWork
  std::int64_t smCount = 132;        ///< streaming multiprocessors (H200: 132)
  std::int64_t ctasPerSm = 1;        ///< walk CTAs resident per SM (shared memory bound: 1 at the default tiles)
  /// segment-summary CTAs resident per SM (runtime/device launch_rules.h segmentSummaryCtasPerSm): 2 where two
  /// summaries share an SM, each step then costing kSummaryShareCost of a step alone; 1: as the walks (ctasPerSm)
  std::int64_t summaryCtasPerSm = 1;
  std::int64_t K = 128, C = 64;
};

/// The segment length in chunks L (1 ≤ L ≤ chunksPerSeq; chunksPerSeq means "do not split"), from a cost
/// model in units of one chunk step of the plain walk (the walk's time is its waves × its chunks, because each
/// CTA walks its chunks one after another):
///   plain:          NT · waves(parallelWork)
///   S segments:     L · (a · waves(S · summaryWork) + waves(S · parallelWork)) + f · S,   L = ⌈NT / S⌉
/// with waves(x) = ⌈x / (smCount · ctasPerSm)⌉, a = kSummaryStepCost (a summary step writes no output) and
/// f = kFoldStepCost (one segment of the fold). Where two summaries may share an SM (summaryCtasPerSm = 2) and the
/// summary has more CTAs than slots, its term is a · kSummaryShareCost · ⌈x / (2 · smCount)⌉ instead. The S with the least cost wins if it beats the plain walk by
/// kSegmentMinGain; segments are at least kMinSegmentChunks long. Fitted on the H200 (docs/performance.md,
/// run 8) at B = 1, T = 32768, H = 16, K = V = 128, 64-column value tiles: the model puts L = 16 / 32 / 57 / 64 at
/// 1.43 / 1.33 / 1.53 / 1.29 ms against 1.427 / 1.330 / 1.489 / 1.286 measured — a segment count that leaves a
/// partial last wave (L = 57: 9 segments, 576 summary CTAs on 132 SMs) costs a whole extra walk of L chunks.
std::int64_t chooseSegmentChunks(const SegmentRuleInputs& in);

/// Model constants of chooseSegmentChunks (chunk steps of the plain walk).
constexpr double kSummaryStepCost = 0.58;  ///< one chunk of a segment's E or M walk (no o, no token record)
constexpr double kFoldStepCost = 1.5;      ///< one segment of the fold (h ← M h + E for the whole state)
/// A summary step with a second summary CTA on its SM, against one alone: two CTAs finish in 1.6 steps what one
/// finishes in 2. Measured on the H200 at B = 1, T = 32768, H = 16, K = V = 128, C = 32, BV = 128 (256 summary CTAs
/// on 132 SMs): segment_summary took 338 us as two waves of one CTA per SM and 273 us as one wave of two
/// (273 / 338 · 2 = 1.62; docs/performance.md, run 23).
constexpr double kSummaryShareCost = 1.6;
constexpr double kSegmentMinGain = 0.10;   ///< split only when the model saves at least this fraction
constexpr std::int64_t kMinSegmentChunks = 16;  ///< shortest segment worth its fold step

/// Sequences shorter than this many chunks keep the plain state pass (chooseSegmentChunks): below it the
/// chunk-local kernel dominates the forward and no split has been measured to gain.
constexpr std::int64_t kMinSegmentedChunks = 128;

}  // namespace dgps::segment
