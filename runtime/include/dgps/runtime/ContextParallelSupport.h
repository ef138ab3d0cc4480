// Which packages the context-parallel forward accepts, and why not (docs/context_parallel.md). The one rule
// behind Runtime::forwardSummary, Runtime::forwardPrecondSummary, the phases of ContextParallelForward.h and
// the Python binding's info["context_parallel"].
#pragma once

#include <string>

#include "dgps/runtime/Package.h"

namespace dgps {

/// The decision for one manifest.
struct ContextParallelSupport {
  bool supported = false;
  /// The package carries a preconditioner state (ema_sq_squash accumulator A or unclamped hypergrad_ogd d,
  /// [N, H, K]), so the ranks run the preconditioner round first: phase 0 (publishPiecePrecondSummary) and its
  /// gather (docs/math.md §8.4).
  bool precond_round = false;
  /// The round's map is K×K per key head (hypergrad_ogd: d_end = M d_start + e) rather than per channel
  /// (ema_sq_squash: A_end = Γ ⊙ A_start + Σ); it picks the slot layout (precondSummaryLayout).
  bool precond_full_map = false;
  /// Empty when supported; otherwise why not, as a clause to follow "package <name> " (e.g. "has no segment
  /// kernels (...)").
  std::string reason;
};

/// Supported: a forward with the segmented state pass (launch.forward_segmented: chunk_local then
/// segment_summary, preceded by precond_summary and precond_scan for a preconditioner) and either no
/// preconditioner, an ema_sq_squash one (pgdn, pkda, pdn, atq: its piece summary is per channel
/// A_end = Γ A_start + Σ) or an unclamped hypergrad_ogd one (osdn, osdn_apf: d_end = M d_start + e, M K×K).
/// Refused: no segment kernels (a package compiled before they existed); several Householder steps per token
/// (features.steps > 1: a piece's k, v and beta rows are not split by steps); a clamped hypergrad_ogd preconditioner (the
/// clamp is a projection: its d-scan has no affine summary); no io.varlen or io.initial_state (or
/// io.initial_precond_state with a preconditioner), which a rank's piece needs. Pure: reads the manifest only.
ContextParallelSupport contextParallelSupport(const Manifest& manifest);

}  // namespace dgps
