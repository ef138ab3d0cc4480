// One rank's context-parallel forward on its GPU (docs/context_parallel.md): the rank's piece of a packed
// batch is summarised by the package's segment kernels (Runtime::forwardSummary), the summaries are
// all-gathered (gatherSummaries, ContextParallel.h), the continued document's start state is folded from
// the earlier ranks' summaries, and the piece runs from its corrected start states through the ordinary
// forward (its initial-state path). The result equals the single-device forward up to rounding.
//
// Two phases, because a gather completes only when every rank has called it (a LocalCollective's earlier
// callers return at once):
//
//   // every rank r, on its own device and stream:
//   publishPieceSummary(rt, pkg, plan, r, piece, send, opts);               // phase 1: its slot
//   gatherSummaries(coll, plan, layout, 4, send, recv, recvBytes, stream);  // the exchange
//   runPieceForward(rt, pkg, plan, r, piece, recv, states, opts);            // phase 2: o, final states
//
// With G processes each rank calls the three in a row. With G simulated ranks in one process
// (LocalCollective) call phase 1 and the gather for every rank, then phase 2 for every rank.
//
// Covered: packages with launch.forward_segmented and no preconditioner (deltanet, gdn, kda, linear_attention,
// mamba2). The preconditioned specs (PGDN, PKDA, OSDN) need two rounds (their preconditioner state folded across
// ranks first, which is not done; their segment kernels serve one GPU): both calls refuse them.
//
// Cost: phase 1 is chunk_local and one segment_summary walk over the piece (its E and its K×K M), about the
// piece's plain forward plus the M walk; phase 2 is the piece's plain forward. The fold of the continued
// document runs on the host in fp32 (segment::foldSegments): phase 2 synchronises the stream once to read
// the gathered slots it needs (a device fold is not written yet), so phase 2 cannot be captured in a CUDA graph.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dgps/dsl/ContextParallelPlan.h"
#include "dgps/runtime/Runtime.h"

namespace dgps {

/// The all-gather slot of a package's memory state: one carried state (S, no preconditioner), M [HV, K, K]
/// then E [HV, K, V], fp32 (cp::SummaryLayout with FoldShape{numDocs, HV, K, V}).
cp::SummaryLayout memorySummaryLayout(std::int64_t numDocs, std::int64_t headsV, std::int64_t keyDim,
                                      std::int64_t valueDim);

/// Phase 1 for `rank`: when plan.rank[rank].continuesOut, the summary of its last fragment (local sequence
/// fragments.size() − 1) into `send`, this rank's slot (memorySummaryLayout of the piece's HV, K, V; fp32
/// device memory, layout.slotElements() floats), enqueued on options.stream; otherwise nothing (the slot is
/// not read). `piece` is the rank's local batch as a forward call: its tokens [begin, end) of the packed
/// inputs (B = 1, T = end − begin) with cu_seqlens holding plan.rank[rank].localCuSeqlens on the device (or,
/// for a rank with exactly one fragment covering its whole range, no cu_seqlens); its initial_state and
/// final_state are ignored, and so is options.segment_chunks (the summary walks each fragment as one segment;
/// the option applies to phase 2's forward). The values of cu_seqlens are not read on the host (no
/// synchronisation).
/// Throws RuntimeError{InvalidArgument} naming what was wrong: a rank outside [0, G), a piece whose T or N
/// disagrees with the plan, a package without segment kernels; then as Runtime::forwardSummary.
void publishPieceSummary(Runtime& runtime, const Package& package, const cp::Plan& plan, int rank,
                         const ForwardTensors& piece, void* send, const LaunchOptions& options = {});

/// The documents' states of phase 2 and the rank's scratch (all fp32 device memory on the piece's device).
struct PieceStates {
  TensorView doc_initial;  ///< [N, HV, K, V] the documents' initial states; not given = zero
  TensorView doc_final;    ///< [N, HV, K, V] out, optional: the rows of the documents this rank finishes
  TensorView local_initial;  ///< [n, HV, K, V] scratch, n = the rank's fragments (not needed when n = 0)
  TensorView local_final;    ///< [n, HV, K, V] scratch, needed when doc_final is given and n > 0
};

/// Phase 2 for `rank`, after the gather: fills local_initial (each fragment starting a document gets its
/// doc_initial row or zero; a continued fragments[0] gets X = doc_initial[n] (or 0); for j in foldFrom:
/// X = M_j X + E_j, over the gathered slots in `gathered`, G slots of memorySummaryLayout, device), runs the
/// piece's forward from it (piece.o receives the rank's rows of o; a rank whose range holds only padding
/// gets its o rows zeroed), and writes doc_final's rows of the documents whose last token the rank holds,
/// and of the empty documents the plan assigns it (plan.finalStateRank; their initial state). All on
/// options.stream; the host waits for that stream once, before the fold, when fragments[0] continues a
/// document. Throws RuntimeError{InvalidArgument} as publishPieceSummary, and for a PieceStates tensor of
/// the wrong shape, dtype or device; then as Runtime::forward.
void runPieceForward(Runtime& runtime, const Package& package, const cp::Plan& plan, int rank,
                     const ForwardTensors& piece, const void* gathered, const PieceStates& states,
                     const LaunchOptions& options = {});

/// Where one local start state of phase 2 comes from (host bookkeeping, testable without a GPU).
struct PieceStart {
  enum class Source { DocInitial, Fold };
  Source source = Source::DocInitial;
  std::int64_t doc = 0;  ///< the fragment's document
};
/// One entry per fragment of `rank`, in order: Fold for a continued fragments[0], DocInitial otherwise.
std::vector<PieceStart> pieceStartSources(const cp::Plan& plan, int rank);

/// One row of doc_final that `rank` writes: local_final[local], or doc_initial[doc] when local = -1 (an empty
/// document the plan assigns to the rank). The same rows as cp::scatterFinalStates.
struct PieceFinal {
  std::int64_t doc = 0;
  std::int64_t local = -1;
};
std::vector<PieceFinal> pieceFinalWrites(const cp::Plan& plan, int rank);

}  // namespace dgps
