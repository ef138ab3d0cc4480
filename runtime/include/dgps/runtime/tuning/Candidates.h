// Candidate generation and static pruning: the cartesian product of the manifest's tunables, minus
// every configuration that cannot run on this device for this shape, optionally cut to the top N of a
// cost model. Every dropped configuration keeps the reason it was dropped (logged by the tuner's
// final table: every rejected variant has a logged reason).
//
// Precision is not an axis here: it is a correctness constraint fixed in the ProblemKey (docs/math.md §7.5).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dgps/runtime/tuning/Fingerprint.h"
#include "dgps/runtime/tuning/ProblemKey.h"
#include "dgps/runtime/tuning/TileConfig.h"

namespace dgps::tuning {

/// The allowed values of each tunable axis, as listed in the package manifest for one kernel family.
struct Tunables {
  std::vector<int> chunk;
  std::vector<int> block_v;
  std::vector<int> warps;
  std::vector<int> stages;
};

/// Dynamic shared memory one thread block of `config` needs for `problem`, bytes; supplied by the
/// kernels' launch rules. A negative value means the launch rules refuse the pair outright.
using SmemEstimator = std::function<std::int64_t(const TileConfig&, const TuneProblem&)>;

/// Extra capability predicate of a specialised variant: nullopt when `config` can handle
/// `problem`, otherwise the reason it cannot (e.g. "wgmma variant needs K == 128").
using CapabilityCheck =
    std::function<std::optional<std::string>(const TileConfig&, const TuneProblem&)>;

/// Estimated run time of `config` (any unit; only the order matters). Lower is better.
using CostModel =
    std::function<double(const TileConfig&, const TuneProblem&, const DeviceFingerprint&)>;

struct PruneOptions {
  /// Forces the chunk length, e.g. when a backward pass must reuse the forward's saved A/h.
  std::optional<int> pinned_chunk;
  /// Shared-memory rule; when empty, no shared-memory check is made (the compile step still catches
  /// over-limit kernels, at higher cost).
  SmemEstimator smem_bytes;
  CapabilityCheck capability;
  /// Cost-model pre-filter: when set and keep_top > 0, only the keep_top cheapest survivors are kept
  /// (ties by simplerThan()).
  CostModel cost_model;
  int keep_top = 0;
};

struct PrunedCandidate {
  TileConfig config;
  std::string reason;  ///< e.g. "chunk 48 is not a power of two", "shared memory 240 KiB > opt-in limit 227 KiB"
};

struct CandidateSet {
  std::vector<TileConfig> kept;          ///< in simplicity order (simplerThan), duplicates removed.
  std::vector<PrunedCandidate> pruned;   ///< in generation order.
};

/// Static rules, in this order (the first that fails is the reason):
///   every value positive; chunk a power of two; chunk == pinned_chunk when pinned;
///   block_v a multiple of 16 in [16, 128]; V a positive multiple of 8 (launch_rules.h valueTile: block_v
///   need not divide V, the last value tile is masked); warps * 32 <= max_threads_per_block;
///   smem_bytes(config, problem) >= 0 and <= smem_per_block_optin; capability(config, problem) has no objection.
/// Then a block_v above V rounded up to 16, which runs as that clipped tile, is dropped when a kept
/// configuration already runs the same tile (e.g. V = 64: block_v 128 runs as 64).
/// Device limits of 0 in the fingerprint mean "unknown" and skip that check.
CandidateSet generateCandidates(const Tunables& tunables, const TuneProblem& problem,
                                const DeviceFingerprint& device, const PruneOptions& options);

/// The segment lengths (TileConfig::segment_chunks) the tuner tries beside a forward configuration `config`
/// on a package with the segmented state pass (docs/architecture.md, "Long sequences"). Empty for a short
/// problem: NT = ⌈T / chunk⌉ < segment::kMinSegmentedChunks (dsl/SegmentScan.h; T: rows per sequence — tokens, or
/// T·n_h with several Householder steps per token, as TuneJob passes it — or the packed total with varlen), where the plain pass is the only sensible choice. Otherwise
/// {0 (the plain pass), L/2, L, 2L} without repeats and without lengths >= NT (nothing to split), with L the
/// runtime's segment length for `config`: `ruleLength(config)` where given and in [1, NT) (TuneJob passes the
/// runtime's own rule, DefaultConfig.h autoSegmentChunks, which counts the summary's grid and two summaries per SM
/// where they pair, so the length a call without a record takes is always among those measured); else
/// segment::chooseSegmentChunks for work N · HV · ⌈V / BV⌉ on `smCount` SMs, one summary CTA per SM, taken also
/// where the rule itself would keep the plain pass: L = max(⌈NT / ⌈2 · smCount / work⌉⌉, 16). The rule was
/// measured on a few shapes; the tuner measures the neighbourhood on the shape at hand. smCount <= 0 counts as 132
/// (an H200).
using SegmentRuleLength = std::function<std::int64_t(const TileConfig&)>;
std::vector<int> segmentLengthCandidates(const TileConfig& config, const TuneProblem& problem, int smCount,
                                         const SegmentRuleLength& ruleLength = {});

/// `set` with every kept configuration repeated once per segmentLengthCandidates (those with an empty list
/// kept as they are, segment_chunks unset), in simplicity order; the pruned list is unchanged.
CandidateSet withSegmentLengths(const CandidateSet& set, const TuneProblem& problem, int smCount,
                                const SegmentRuleLength& ruleLength = {});

/// A deliberately simple ranking model for the pre-filter, good only for discarding clearly poor
/// tiles: waves of (sequence, value head, value tile) blocks, times the serial chunk steps of one
/// block's state pass, times each step's work (KKT chunk*chunk*K plus state update chunk*K*block_v),
/// divided by a throughput factor that grows sub-linearly with warps and stages. Resident blocks per
/// SM are limited by shared memory (when an estimator is given) and by registers (assuming 128 per
/// thread). Decode uses one token per block.
double simpleCostModel(const TileConfig& config, const TuneProblem& problem,
                       const DeviceFingerprint& device, const SmemEstimator& smem = nullptr);

}  // namespace dgps::tuning
