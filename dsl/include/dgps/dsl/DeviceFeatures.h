// The spec's axes as the launch contract codes them (FeatureSet), the questions the contract asks of them, and the
// one axes -> FeatureSet mapping (axisFeatures; deviceFeatures for a Spec). Compile-time knowledge of the compiler:
// the launch contract (LaunchContract.h), the tile lowerings and emitters and the manifest writer read it; the device
// library and the runtime never do (a package's kernels.cu and manifest carry what it decided), except one question:
// whether a segment summary has a producer warpgroup (walkRebuildsKw), which the runtime's segment-length rule needs
// (runtime/lib/DefaultConfig.cpp, from the manifest's axes).
#pragma once

#include <optional>
#include <string>

#include "dgps/dsl/Diagnostic.h"
#include "dgps/dsl/Spec.h"

namespace dgps {
namespace launch {

/// The spec's axes (dsl Spec.h enums in this order; deviceFeatures) plus the compiler's write-key choice.
struct FeatureSet {
  int decay = 0;    ///< 0 none, 1 scalar (g [B,T,HV]), 2 diagonal (g [B,T,HV,K])
  int gain = 0;     ///< 0 gain 1, 1 beta [B,T,HV]
  int precond = 0;  ///< 0 none, 1 diagonal
  int side = 0;     ///< 0 key (ATK), 1 query (ATQ)
  int source = 0;   ///< 0 ema_sq_squash, 1 hypergrad_ogd
  int solve = 1;    ///< 0 linear (Hebbian), 1 delta
  int clamp = 0;    ///< hypergrad_ogd: 1 when the d update is clamped (clamp_min or clamp_max set)
  /// The walks' preconditioned operand, a tile-IR decision (docs/math.md §4.3): a key-side preconditioner's
  /// write key P⊙k̂ or a query-side one's read query P⊙q̂. 0 every walk that reads it rebuilds it from pst (a
  /// producer warpgroup); 1 chunk_local stores it (pwk, or inside opw with per-channel decay; the query in pwq)
  /// and every walk loads it; 2 (write key only, scalar decay) chunk_local stores it, the segment walks load it
  /// and state_output rebuilds it.
  int write_key = 0;
};

/// The write-key codes of FeatureSet::write_key.
constexpr int kWriteKeyRebuilt = 0, kWriteKeyStored = 1, kWriteKeyStoredSegments = 2;

/// OSDN's d-scan runs in its chunked form (docs/math.md §5.2 "Chunked form"): a fully parallel per-chunk
/// summary (role precond_summary) and a short pass over chunks (role precond_scan). A clamp is a projection,
/// not affine in d, so a clamped scan keeps the per-token warp scan (precond_scan alone).
constexpr bool hypergradChunked(const FeatureSet& f) {
  return f.precond == 1 && f.source == 1 && f.clamp == 0;
}

/// Which prepared operand tiles a spec needs (the workspace regions opq, opk, opw that chunk_local writes and the
/// walks stage in shared memory).
constexpr bool needOpQ(const FeatureSet& f) { return f.decay == 2; }
constexpr bool needOpK(const FeatureSet& f) { return f.solve == 1 && f.decay == 2; }
constexpr bool needOpW(const FeatureSet& f) { return f.decay == 2; }
/// The preconditioner's side: the walks need the preconditioned write key (ATK) or read query (ATQ), rebuilt
/// in shared memory or stored by chunk_local (FeatureSet::write_key; walkRebuildsKw, walkRebuildsQ).
constexpr bool rebuildsKw(const FeatureSet& f) { return f.precond == 1 && f.side == 0; }
constexpr bool rebuildsQ(const FeatureSet& f) { return f.precond == 1 && f.side == 1; }
/// state_output's k tile holds the raw key when no opk takes its place and something reads it: the delta
/// read key, the write key (no per-channel decay), or the preconditioner's input.
constexpr bool rawKInKTile(const FeatureSet& f) {
  return !needOpK(f) && (f.solve == 1 || !needOpW(f) || f.precond == 1);
}
/// chunk_local writes the preconditioned write key P⊙k̂ once (FeatureSet::write_key 1 or 2).
constexpr bool storesKw(const FeatureSet& f) { return rebuildsKw(f) && f.write_key != kWriteKeyRebuilt; }
/// A walk rebuilds the write key: a state_output walk (`segment` false) or a segment walk (segment_summary,
/// segment_state_output) of a key-side preconditioner whose FeatureSet::write_key does not give it the stored one.
constexpr bool walkRebuildsKw(const FeatureSet& f, bool segment) {
  return rebuildsKw(f) && !(f.write_key == kWriteKeyStored || (f.write_key == kWriteKeyStoredSegments && segment));
}
/// chunk_local writes the preconditioned query P⊙q̂ once into pwq (FeatureSet::write_key 1, a query-side
/// preconditioner with scalar or no decay) and the walks that write o (state_output, segment_state_output) load it.
constexpr bool needPwq(const FeatureSet& f) {
  return rebuildsQ(f) && !needOpQ(f) && f.write_key == kWriteKeyStored;
}
/// A walk that reads the query (one that writes o) rebuilds P⊙q̂ (a query-side preconditioner without pwq).
constexpr bool walkRebuildsQ(const FeatureSet& f) { return rebuildsQ(f) && !needPwq(f); }
/// A walk runs the producer warpgroup: it rebuilds the write key, or the query (a query-side preconditioner; the
/// segment summary reads no query and has its own rule, LaunchContract.h segmentRoleLaunch).
constexpr bool walkRebuilds(const FeatureSet& f, bool segment) {
  return walkRebuildsKw(f, segment) || walkRebuildsQ(f);
}
/// With opk in the k tile, a walk's rebuild reads the raw key from a tile of its own.
constexpr bool rawKOwnTile(const FeatureSet& f, bool segment = false) {
  return f.precond == 1 && needOpK(f) && walkRebuilds(f, segment);
}

}  // namespace launch

/// decay none/scalar/diagonal -> 0/1/2; gain scalar -> 1 else 0; precond diagonal -> 1; side query -> 1;
/// source hypergrad_ogd -> 1; solve delta -> 1, linear -> 0; clamp 1 for a hypergrad_ogd spec with clamp_min or
/// clamp_max (its d-scan stays per token). Explicit, so reordering a dsl enum cannot
/// shift the codes tile.launch_features and the launch contract read.
launch::FeatureSet deviceFeatures(const Spec& spec);

/// The same codes from the axes alone, as a package's manifest records them (runtime Package.h PackageFeatures:
/// no clamp, which only chooses kernels already printed; write_key stays 0 for the caller to set).
/// deviceFeatures(spec) is this plus the clamp.
launch::FeatureSet axisFeatures(DecayKind decay, GainKind gain, PrecondKind precond, PrecondSide side,
                                PrecondSource source, SolveKind solve);

/// What the tile kernels cannot run of a valid spec, as a Diagnostic (severity Error, at the spec key that asks
/// for it); nullopt when `dgpsc compile` can print every kernel the spec lists. The language, the chunk IR executor
/// and the float64 reference take such a spec (dgps-spec reference, dgpsc plan); dgpsc compile refuses it with
/// this diagnostic and dgpsc check prints it as a warning. Today: per-channel decay (decay.kind diagonal) with
/// several Householder steps per token, whose state walks would need the gated query on the step rows; and more
/// than kMaxDecodeHouseholderSteps steps with the decode kernel.
std::optional<Diagnostic> kernelsRefusal(const Spec& spec);

/// Why the decode kernel takes at most kMaxDecodeHouseholderSteps steps per token (kernelsRefusal's reason, and
/// LowerDecodeToTile's error for tile IR given to dgps-opt).
std::string decodeStepLimitReason();

}  // namespace dgps
