// Segments, context-parallel pieces, the fold order and the segment-length rule (SegmentScan.h).
#include "dgps/dsl/SegmentScan.h"

#include <cmath>

namespace dgps::segment {

namespace {

std::string segmentText(const Segment& s) {
  return "segment (sequence " + std::to_string(s.seq) + ", tokens [" + std::to_string(s.begin) + ", " +
         std::to_string(s.end) + "))";
}

}  // namespace

std::vector<Segment> sequencesOf(const std::vector<std::int64_t>& cu, std::int64_t batch, std::int64_t seqLen) {
  std::vector<Segment> seqs;
  if (cu.empty()) {
    if (batch < 0 || seqLen < 0) throw std::invalid_argument("sequencesOf: expected B >= 0 and T >= 0");
    for (std::int64_t b = 0; b < batch; ++b) seqs.push_back({b, b, 0, seqLen});
    return seqs;
  }
  if (cu.size() < 2 || cu.front() != 0 || cu.back() > seqLen)
    throw std::invalid_argument("cu_seqlens: expected [0, ..., cu[N]] with N >= 1 and cu[N] <= T = " +
                                std::to_string(seqLen));
  for (std::size_t n = 0; n + 1 < cu.size(); ++n) {
    if (cu[n + 1] < cu[n])
      throw std::invalid_argument("cu_seqlens: decreases at index " + std::to_string(n + 1));
    seqs.push_back({static_cast<std::int64_t>(n), 0, cu[n], cu[n + 1]});
  }
  return seqs;
}

std::vector<Segment> splitSequences(const std::vector<std::int64_t>& cu, std::int64_t batch, std::int64_t seqLen,
                                    std::int64_t segmentTokens) {
  if (segmentTokens < 1)
    throw std::invalid_argument("segment length: expected >= 1 token, got " + std::to_string(segmentTokens));
  std::vector<Segment> out;
  for (const Segment& s : sequencesOf(cu, batch, seqLen))
    for (std::int64_t t = s.begin; t < s.end; t += segmentTokens)
      out.push_back({s.seq, s.row, t, std::min(s.end, t + segmentTokens)});
  return out;
}

std::vector<std::vector<Segment>> splitAcrossRanks(const std::vector<std::int64_t>& cu, std::int64_t batch,
                                                   std::int64_t seqLen, std::int64_t ranks) {
  if (ranks < 1) throw std::invalid_argument("ranks: expected >= 1, got " + std::to_string(ranks));
  const std::int64_t piece = (seqLen + ranks - 1) / ranks;
  std::vector<std::vector<Segment>> out(static_cast<std::size_t>(ranks));
  for (const Segment& s : sequencesOf(cu, batch, seqLen))
    for (std::int64_t r = 0; r < ranks; ++r) {
      const std::int64_t lo = std::max(s.begin, r * piece), hi = std::min(s.end, (r + 1) * piece);
      if (lo < hi) out[static_cast<std::size_t>(r)].push_back({s.seq, s.row, lo, hi});
    }
  return out;
}

std::vector<std::size_t> foldOrder(const std::vector<Segment>& segments, std::int64_t numSeqs) {
  std::vector<std::size_t> order(segments.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Segment& s = segments[i];
    if (s.seq < 0 || s.seq >= numSeqs)
      throw std::invalid_argument(segmentText(s) + ": sequence outside [0, " + std::to_string(numSeqs) + ")");
    if (s.end <= s.begin) throw std::invalid_argument(segmentText(s) + ": empty");
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const Segment &x = segments[a], &y = segments[b];
    return x.seq != y.seq ? x.seq < y.seq : x.begin < y.begin;
  });
  for (std::size_t i = 1; i < order.size(); ++i) {
    const Segment &prev = segments[order[i - 1]], &cur = segments[order[i]];
    if (prev.seq == cur.seq && prev.end != cur.begin)
      throw std::invalid_argument(segmentText(cur) + ": does not start where " + segmentText(prev) +
                                  " ends (segments of a sequence must tile it without overlap or gap)");
  }
  return order;
}

namespace {

/// Whole waves needed to run `ctas` CTAs on `slots` resident slots.
double waves(std::int64_t ctas, std::int64_t slots) { return static_cast<double>((ctas + slots - 1) / slots); }

}  // namespace

std::int64_t chooseSegmentChunks(const SegmentRuleInputs& in) {
  const std::int64_t nt = std::max<std::int64_t>(1, in.chunksPerSeq);
  if (in.parallelWork < 1 || in.smCount < 1 || nt < kMinSegmentedChunks) return nt;
  const std::int64_t slots = in.smCount * std::max<std::int64_t>(1, in.ctasPerSm);
  const std::int64_t summary = in.summaryWork > 0 ? in.summaryWork : 2 * in.parallelWork;
  // the summary's chunk steps for x CTAs: as the walk's, or, where two may share an SM and x outgrows one per
  // slot, waves of two per SM at kSummaryShareCost each (up to one per slot, the SMs take one each)
  const auto summarySteps = [&](std::int64_t x) {
    if (in.summaryCtasPerSm > 1 && x > slots)
      return kSummaryStepCost * kSummaryShareCost * waves(x, in.smCount * in.summaryCtasPerSm);
    return kSummaryStepCost * waves(x, slots);
  };
  const double plain = static_cast<double>(nt) * waves(in.parallelWork, slots);
  double best = plain * (1.0 - kSegmentMinGain);
  std::int64_t bestL = nt;
  for (std::int64_t s = 2; s <= nt / kMinSegmentChunks; ++s) {
    const std::int64_t L = (nt + s - 1) / s;
    const std::int64_t segments = (nt + L - 1) / L;  // S rounded to what L = ⌈NT / S⌉ really cuts
    const double cost = static_cast<double>(L) * (summarySteps(segments * summary) +
                                                  waves(segments * in.parallelWork, slots)) +
                        kFoldStepCost * static_cast<double>(segments);
    if (cost < best) best = cost, bestL = L;
  }
  return bestL;
}

}  // namespace dgps::segment
