// The configuration a forward call uses when nobody tuned it: the package's default, with fewer value
// columns per state_output CTA when the call has too few (sequence, value head) pairs to fill the GPU, and
// shorter chunks when it has enough.
#pragma once

#include <cstdint>

#include "dgps/runtime/Package.h"
#include "dgps/runtime/TileConfig.h"
#include "dgps/runtime/Validation.h"

namespace dgps {

/// state_output runs one CTA per (sequence, value head, block_v columns) and walks its sequence's chunks
/// one after another, so a call with few sequences and heads leaves SMs idle (B=1, H=16 at block_v 128:
/// 16 CTAs on a 132-SM H200). While fewer than half the SMs would get a CTA, halve block_v, down to 64
/// (the warpgroup-MMA minimum) and only to values the package's tunables allow. Measured on H200, GDN
/// B=1 T=32768: block_v 128 2.81 ms, 64 2.17 ms (docs/performance.md). When at least 7/8 of the SMs get a
/// CTA and the package allows chunk 32, the chunk is 32 (faster once the GPU is full; docs/performance.md,
/// run 5). `sm_count` <= 0 (unknown) and empty problems keep the manifest default.
TileConfig shapeDefaultConfig(const Manifest& manifest, std::int64_t sequences, std::int64_t heads_v,
                              std::int64_t value_dim, int sm_count);

/// What the forward defaults read off a call.
struct ForwardDefaultInputs {
  std::int64_t sequences = 0, heads_v = 0, key_dim = 0, value_dim = 0;
  std::int64_t rows = 0;  ///< the kernels' token rows per sequence (ForwardProblem::rows(): T · steps per token)
  bool segmented = false;  ///< the package has the segmented state pass (manifest launch.forward_segmented)
  int sm_count = 0;        ///< the device's SMs; <= 0: unknown
  /// The state pass the caller forced (LaunchOptions::segment_chunks, DGPS_SEGMENT_CHUNKS): -1 none, the runtime
  /// chooses (autoSegmentChunks); 0 the plain sequential pass; L >= 1 segments of L chunks.
  std::int64_t forced_segment_chunks = -1;
  /// Two segment-summary CTAs may share an SM (summaryPairsEnabled, Runtime.h), and the package's summary has a
  /// producer warpgroup (which keeps it at one), and the inputs are fp16 (one as well): with the config's chunk and
  /// stages they give the summary's CTAs per SM (launch_rules.h segmentSummaryCtasPerSm) that the segment-length rule
  /// counts.
  bool summary_pairs = false;
  bool summary_producers = false;
  bool f16 = false;
};

/// Whether `package`'s segment summary runs a producer warpgroup (it then stays at one CTA per SM): the launch
/// contract's question (DeviceFeatures.h walkRebuildsKw) over the manifest's features (preconditioner, side, write
/// key); spec.yaml is not read.
bool summaryHasProducers(const Package& package);

/// The inputs of a validated forward call on a device with `sm_count` SMs.
ForwardDefaultInputs forwardDefaultInputs(const Package& package, const ForwardProblem& problem, int sm_count);

/// The segment length (in chunks) the runtime chooses by itself for `config`: dsl/SegmentScan.h
/// chooseSegmentChunks over the call's walk and summary CTAs, or 0 for the plain state pass (no segmented
/// pass, an unknown device, or a sequence the rule does not split).
std::int64_t autoSegmentChunks(const ForwardDefaultInputs& in, const TileConfig& config);

/// The configuration a forward call uses when nobody tuned it. The value-tile halving of shapeDefaultConfig
/// exists to give a plain walk enough CTAs; when the segmented state pass splits the call at the manifest
/// default's full width, its segments fill the GPU instead, so the width stays and the chunk is 32 where the
/// package allows it (as for a full GPU). Measured on the H200 at B = 1, T = 32768, H = 16, K = V = 128
/// (docs/performance.md, run 14): gdn 0.864 ms at C32 BV128 against 1.229 at the halved C64 BV64, pgdn 1.23
/// against 1.705, kda 1.40 (C64 BV128) against 1.86. Otherwise (no segmented pass, a sequence too short to split,
/// or a plain pass the caller forced) shapeDefaultConfig. A forced L >= 1 counts as a split when it cuts the
/// sequence (L < ⌈rows / chunk⌉ at the full width's chunk).
TileConfig forwardDefaultConfig(const Manifest& manifest, const ForwardDefaultInputs& in);

}  // namespace dgps
