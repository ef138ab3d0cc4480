// The one rule of which packages run context-parallel (ContextParallelSupport.h).
#include "dgps/runtime/ContextParallelSupport.h"

#include <algorithm>

namespace dgps {

namespace {

bool hasRole(const std::vector<KernelLaunchRule>& kernels, const char* role) {
  return std::any_of(kernels.begin(), kernels.end(), [&](const KernelLaunchRule& k) { return k.role == role; });
}

}  // namespace

ContextParallelSupport contextParallelSupport(const Manifest& m) {
  ContextParallelSupport s;
  const std::vector<KernelLaunchRule>& seg = m.launch.forward_segmented;
  if (!m.has_forward || !hasRole(seg, "chunk_local") || !hasRole(seg, "segment_summary")) {
    s.reason = "has no segment kernels (launch.forward_segmented with chunk_local and segment_summary), which "
               "summarise a rank's piece; recompile it with dgpsc compile";
    return s;
  }
  // its segment kernels run over the step rows, but a piece's bookkeeping (cp::Plan, the tests' slicing) counts one
  // row of k, v and beta per token
  if (m.features.steps > 1) {
    s.reason = "runs " + std::to_string(m.features.steps) +
               " Householder steps per token (solve.steps): context parallelism does not split a piece's k, v and "
               "beta rows by steps yet (the one-GPU forward, sequence-parallel over segments, does)";
    return s;
  }
  // a rank's piece is a varlen batch of its fragments, a continued one starting from its folded state
  if (!m.io.varlen || !m.io.initial_state) {
    s.reason = "takes no cu_seqlens or no initial_state (io.varlen, io.initial_state), which a rank's piece needs: "
               "its fragments as a varlen batch, a continued one started from the folded state";
    return s;
  }
  if (m.features.precond == PrecondKind::None) {
    s.supported = true;
    return s;
  }
  // the clamped d-scan is token by token (no precond_summary role); the unclamped one is chunked and affine
  if (m.features.precond_source == PrecondSource::HypergradOgd && !hasRole(m.launch.forward, "precond_summary")) {
    s.reason = "has a clamped hypergrad_ogd preconditioner: the clamp is a projection, so the d-scan over a "
               "piece has no affine summary to fold across ranks (docs/math.md §8.3)";
    return s;
  }
  if (!m.io.initial_precond_state) {
    s.reason = "takes no initial_precond_state (io.initial_precond_state), which a continued fragment's folded "
               "accumulator start needs";
    return s;
  }
  if (!hasRole(seg, "precond_summary") || !hasRole(seg, "precond_scan")) {
    s.reason = "is preconditioned but its launch.forward_segmented lacks precond_summary or precond_scan";
    return s;
  }
  s.supported = true;
  s.precond_round = true;
  s.precond_full_map = m.features.precond_source == PrecondSource::HypergradOgd;
  return s;
}

}  // namespace dgps
