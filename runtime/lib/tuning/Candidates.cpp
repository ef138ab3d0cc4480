#include "dgps/runtime/tuning/Candidates.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <numeric>

#include "dgps/device/launch_rules.h"
#include "dgps/dsl/SegmentScan.h"

namespace dgps::tuning {
namespace {

bool isPowerOfTwo(int x) { return x > 0 && (x & (x - 1)) == 0; }

std::string kib(std::int64_t bytes) {
  const double k = static_cast<double>(bytes) / 1024.0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f KiB", k);
  return buf;
}

/// The first static rule `c` breaks, or "" when it passes them all.
std::string staticRejection(const TileConfig& c, const TuneProblem& problem,
                            const DeviceFingerprint& dev, const PruneOptions& opt) {
  const launch::ProblemShape& shape = problem.shape;
  if (c.chunk <= 0 || c.block_v <= 0 || c.warps <= 0 || c.stages <= 0)
    return "non-positive tunable value";
  if (!isPowerOfTwo(c.chunk)) return "chunk " + std::to_string(c.chunk) + " is not a power of two";
  if (opt.pinned_chunk && c.chunk != *opt.pinned_chunk)
    return "chunk " + std::to_string(c.chunk) + " != pinned chunk " +
           std::to_string(*opt.pinned_chunk) + " (shared with the backward pass)";
  // The kernels' value tiling (launch_rules.h valueTile): any compilable block_v runs any V that is a
  // multiple of 8, the last tile masked; block_v > V is clipped (deduplicated in generateCandidates).
  if (!launch::blockVCompiles(c.block_v))
    return "block_v " + std::to_string(c.block_v) +
           " is not a multiple of 16 in [16, 128] (one consumer warp per 16 value columns)";
  if (shape.V <= 0 || shape.V % 8 != 0)
    return "V " + std::to_string(shape.V) + " is not a positive multiple of 8 (the kernels move 16-byte rows)";
  if (dev.max_threads_per_block > 0 && c.warps * 32 > dev.max_threads_per_block)
    return std::to_string(c.warps * 32) + " threads > max threads per block " +
           std::to_string(dev.max_threads_per_block);
  if (opt.smem_bytes) {
    const std::int64_t smem = opt.smem_bytes(c, problem);
    if (smem < 0) return "launch rules refuse this tile for the shape";
    if (dev.smem_per_block_optin > 0 && smem > dev.smem_per_block_optin)
      return "shared memory " + kib(smem) + " > opt-in limit per block " +
             kib(dev.smem_per_block_optin);
  }
  if (opt.capability) {
    if (auto why = opt.capability(c, problem)) return "variant cannot handle the shape: " + *why;
  }
  return {};
}

}  // namespace

std::vector<int> segmentLengthCandidates(const TileConfig& config, const TuneProblem& problem, int smCount,
                                         const SegmentRuleLength& ruleLength) {
  const launch::ProblemShape& s = problem.shape;
  if (problem.kind != KernelFamily::Forward || config.chunk <= 0 || s.T <= 0) return {};
  const std::int64_t NT = (s.T + config.chunk - 1) / config.chunk;
  if (NT < segment::kMinSegmentedChunks) return {};
  const std::int64_t BV = launch::valueTile(int(s.V), config.block_v);
  const std::int64_t work = std::max<std::int64_t>(1, s.N * s.HV * ((s.V + BV - 1) / std::max<std::int64_t>(BV, 1)));
  segment::SegmentRuleInputs rule;
  rule.chunksPerSeq = NT;
  rule.parallelWork = work;
  rule.smCount = smCount > 0 ? smCount : 132;
  rule.K = s.K;
  rule.C = config.chunk;
  std::int64_t L = segment::chooseSegmentChunks(rule);
  if (ruleLength) {
    const std::int64_t runtimes = ruleLength(config);
    if (runtimes >= 1 && runtimes < NT) L = runtimes;
  }
  if (L >= NT) {
    // the rule keeps the plain pass here (the GPU looks full enough); take its length formula anyway
    const std::int64_t segments = (2 * rule.smCount + work - 1) / work;
    L = std::max<std::int64_t>((NT + segments - 1) / segments, 16);
  }
  std::vector<int> out{0};
  for (std::int64_t x : {L / 2, L, 2 * L})
    if (x >= 1 && x < NT && std::find(out.begin(), out.end(), int(x)) == out.end()) out.push_back(int(x));
  return out.size() > 1 ? out : std::vector<int>{};
}

CandidateSet withSegmentLengths(const CandidateSet& set, const TuneProblem& problem, int smCount,
                                const SegmentRuleLength& ruleLength) {
  CandidateSet out;
  out.pruned = set.pruned;
  for (const TileConfig& c : set.kept) {
    const std::vector<int> lengths = segmentLengthCandidates(c, problem, smCount, ruleLength);
    if (lengths.empty()) out.kept.push_back(c);
    for (int L : lengths) {
      TileConfig withL = c;
      withL.segment_chunks = L;
      out.kept.push_back(withL);
    }
  }
  std::stable_sort(out.kept.begin(), out.kept.end(), simplerThan);
  return out;
}

CandidateSet generateCandidates(const Tunables& t, const TuneProblem& problem,
                                const DeviceFingerprint& dev, const PruneOptions& opt) {
  const launch::ProblemShape& shape = problem.shape;
  CandidateSet set;
  std::vector<TileConfig> seen;
  std::vector<std::pair<TileConfig, TileConfig>> runsAs;  // kept config, with the value tile it really covers
  for (int chunk : t.chunk)
    for (int bv : t.block_v)
      for (int warps : t.warps)
        for (int stages : t.stages) {
          const TileConfig c{chunk, bv, warps, stages};
          if (std::find(seen.begin(), seen.end(), c) != seen.end()) continue;  // manifest repeats
          seen.push_back(c);
          if (std::string why = staticRejection(c, problem, dev, opt); !why.empty()) {
            set.pruned.push_back({c, std::move(why)});
            continue;
          }
          // block_v beyond V rounded up to 16 compiles to the same kernel as the clipped tile: time it once.
          TileConfig effective = c;
          effective.block_v = launch::valueTile(int(shape.V), c.block_v);
          auto same = std::find_if(runsAs.begin(), runsAs.end(),
                                   [&](const auto& k) { return k.second == effective; });
          if (same != runsAs.end()) {
            set.pruned.push_back({c, "block_v " + std::to_string(c.block_v) + " runs as block_v " +
                                         std::to_string(effective.block_v) + " for V " + std::to_string(shape.V) +
                                         " (clipped to V rounded up to 16): same kernel as " + toString(same->first)});
            continue;
          }
          runsAs.push_back({c, effective});
          set.kept.push_back(c);
        }
  std::sort(set.kept.begin(), set.kept.end(), simplerThan);

  if (opt.cost_model && opt.keep_top > 0 &&
      set.kept.size() > static_cast<std::size_t>(opt.keep_top)) {
    std::vector<std::pair<double, TileConfig>> ranked;
    for (const TileConfig& c : set.kept) {
      double cost = opt.cost_model(c, problem, dev);
      if (!std::isfinite(cost)) cost = HUGE_VAL;
      ranked.push_back({cost, c});
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    set.kept.clear();
    for (std::size_t i = 0; i < ranked.size(); ++i) {
      if (i < static_cast<std::size_t>(opt.keep_top)) {
        set.kept.push_back(ranked[i].second);
      } else {
        set.pruned.push_back({ranked[i].second, "cost model rank " + std::to_string(i + 1) +
                                                    " outside the top " +
                                                    std::to_string(opt.keep_top)});
      }
    }
    std::sort(set.kept.begin(), set.kept.end(), simplerThan);
  }
  return set;
}

double simpleCostModel(const TileConfig& c, const TuneProblem& problem,
                       const DeviceFingerprint& dev, const SmemEstimator& smem) {
  const launch::ProblemShape& shape = problem.shape;
  const double seqs = static_cast<double>(std::max<long long>(1, shape.N));
  const double vTiles = std::ceil(static_cast<double>(std::max<long long>(1, shape.V)) / std::max(1, c.block_v));
  const double blocks = seqs * static_cast<double>(std::max<long long>(1, shape.HV)) * vTiles;

  // Resident blocks per SM: registers (assume 128 per thread) and shared memory, at least 1.
  double perSm = 16;
  if (dev.regs_per_sm > 0) perSm = std::min(perSm, std::floor(dev.regs_per_sm / (128.0 * c.warps * 32)));
  if (smem && dev.smem_per_sm > 0) {
    const std::int64_t bytes = smem(c, problem);
    if (bytes > 0) perSm = std::min(perSm, std::floor(static_cast<double>(dev.smem_per_sm) / bytes));
  }
  perSm = std::max(1.0, perSm);
  const double sms = std::max(1, dev.sm_count);
  const double waves = std::ceil(blocks / (sms * perSm));

  const double K = static_cast<double>(std::max<long long>(1, shape.K));
  double steps, stepWork;
  if (problem.kind == KernelFamily::Decode) {
    steps = 1;
    stepWork = K * c.block_v;
  } else {
    // launch::ProblemShape's T is per sequence dense, the packed total varlen (as chunkSlots reads it).
    const double T = static_cast<double>(shape.T);
    const double tokensPerSeq = std::max(1.0, shape.varlen ? T / seqs : T);
    steps = std::ceil(tokensPerSeq / c.chunk);
    stepWork = static_cast<double>(c.chunk) * c.chunk * K + static_cast<double>(c.chunk) * K * c.block_v;
  }
  const double throughput = std::sqrt(static_cast<double>(c.warps)) * (1.0 + 0.15 * (c.stages - 1));
  return waves * steps * stepWork / throughput;
}

}  // namespace dgps::tuning
