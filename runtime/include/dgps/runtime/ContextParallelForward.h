// One rank's context-parallel forward on its GPU (docs/context_parallel.md): the rank's piece of a packed
// batch is summarised by the package's segment kernels (Runtime::forwardSummary), the summaries are
// all-gathered (gatherSummaries, ContextParallel.h), the continued document's start state is folded from
// the earlier ranks' summaries, and the piece runs from its corrected start states through the ordinary
// forward (its initial-state path). The result equals the single-device forward up to rounding.
//
// Phases, because a gather completes only when every rank has called it (a LocalCollective's earlier
// callers return at once). Without a preconditioner (deltanet, gdn, kda, linear_attention, mamba2):
//
//   // every rank r, on its own device and stream:
//   publishPieceSummary(rt, pkg, plan, r, piece, send, opts);               // phase 1: its slot
//   gatherSummaries(coll, plan, layout, 4, send, recv, recvBytes, stream);  // the exchange
//   runPieceForward(rt, pkg, plan, r, piece, recv, states, opts);            // phase 2: o, final states
//
// With a preconditioner state (ema_sq_squash: pgdn, pkda, pdn, atq; unclamped hypergrad_ogd: osdn, osdn_apf)
// the memory summaries depend on the preconditioner state at the fragment's start (the write keys P ⊙ k̂,
// docs/math.md §8.3), so a preconditioner round comes first (contextParallelSupport(...).precond_round):
//
//   publishPiecePrecondSummary(rt, pkg, plan, r, piece, sendP, opts);        // phase 0: (Γ, Σ) or (M, e)
//   gatherSummaries(coll, plan, layoutP, 4, sendP, recvP, recvPBytes, stream);   // layoutP = precondSummaryLayout
//   precond.gathered = recvP;                                                 // + PiecePrecond's states
//   publishPieceSummary(rt, pkg, plan, r, piece, precond, send, opts);       // phase 1 from the folded A start
//   gatherSummaries(coll, plan, layout, 4, send, recv, recvBytes, stream);
//   runPieceForward(rt, pkg, plan, r, piece, recv, states, precond, opts);   // phase 2 from both folded starts
//
// With G processes each rank calls them in this order. With G simulated ranks in one process
// (LocalCollective) call each phase and its gather for every rank before the next phase of any rank:
// phase 0 and its gather for every rank, then phase 1 and its gather for every rank, then phase 2.
//
// Covered: the packages contextParallelSupport accepts (ContextParallelSupport.h): segment kernels and no
// preconditioner, an ema_sq_squash one or an unclamped hypergrad_ogd one. A clamped hypergrad_ogd
// preconditioner is refused by every phase with one error naming why.
//
// Cost: phase 0 is precond_summary and two precond_scan passes over the piece (K values per chunk step and key
// head; small next to a walk) and a gather of 2·H·K floats per rank — for hypergrad_ogd K + 1
// precond_scan passes (e from d = 0, then one per column of M) and a gather of H·K·(K + 1) floats; phase 1 is the preconditioner scan,
// chunk_local and one segment_summary walk over the piece (its E and its K×K M), about the piece's plain forward
// plus the M walk, and a gather of HV·K·(K + V) floats per rank; phase 2 is the piece's plain forward. The folds
// of the continued document run on the host in fp32 (cp::continuedStartState, the one definition of the fold):
// each state is folded once, on a rank that continues a document — the preconditioner in phase 1, the memory
// state in phase 2 — and each fold waits for the stream twice (to read the gathered slots, and for its result's
// copy to the device to leave the host buffer). So such a rank synchronises twice in phase 2 and, with the
// preconditioner round, twice in phase 1; another rank never. A phase that folds cannot be captured in a CUDA
// graph (a device fold is not written yet).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dgps/dsl/ContextParallelPlan.h"
#include "dgps/runtime/ContextParallelSupport.h"
#include "dgps/runtime/Runtime.h"

namespace dgps {

/// The all-gather slot of a package's memory state: one carried state (S, no preconditioner), M [HV, K, K]
/// then E [HV, K, V], fp32 (cp::SummaryLayout with FoldShape{numDocs, HV, K, V}).
cp::SummaryLayout memorySummaryLayout(std::int64_t numDocs, std::int64_t headsV, std::int64_t keyDim,
                                      std::int64_t valueDim);

/// The all-gather slot of the preconditioner state: one carried state per key head (cp::SummaryLayout with
/// FoldShape{numDocs, H, K, 1}), fp32. ema_sq_squash (fullMap false): its diagonal M (Γ) [H, K] then its E (Σ)
/// [H, K]. Unclamped hypergrad_ogd (fullMap true, ContextParallelSupport::precond_full_map): M [H, K, K]
/// (row-major, d_end[i] = Σ_j M[i][j] d_start[j] + e[i]) then e [H, K].
cp::SummaryLayout precondSummaryLayout(std::int64_t numDocs, std::int64_t headsQK, std::int64_t keyDim,
                                       bool fullMap);

/// The preconditioner's documents' states and the rank's scratch for phases 1 and 2 (all fp32 device memory on
/// the piece's device; [·, H, K]). Only for a package with the preconditioner round.
struct PiecePrecond {
  /// G slots of precondSummaryLayout, device: phase 0's gather. Needed when the rank continues a document.
  const void* gathered = nullptr;
  TensorView doc_initial;    ///< [N, H, K] the documents' initial states; not given = zero (ema_sq_squash only:
                             ///< hypergrad_ogd requires it, since its default is the spec's init)
  TensorView doc_final;      ///< [N, H, K] out (phase 2), optional: the rows of the documents this rank finishes
  TensorView local_initial;  ///< [n, H, K] (n = the rank's fragments): the fragments' starts, filled by phase 1 and
                             ///< read by phase 2 (the same tensor, unchanged between them)
  TensorView local_final;    ///< [n, H, K] scratch, needed when doc_final is given and n > 0
};

/// Phase 0 for `rank` (packages with the preconditioner round only): when plan.rank[rank].continuesOut, the
/// summary of its last fragment's preconditioner state, Γ then Σ (ema_sq_squash) or M then e (hypergrad_ogd;
/// Runtime::forwardPrecondSummary), into `send`, this rank's slot (precondSummaryLayout of the piece's H, K and
/// the package's map; fp32 device memory, slotElements() floats), enqueued
/// on options.stream; otherwise nothing. `piece` as for publishPieceSummary; its states are ignored.
/// Throws RuntimeError{InvalidArgument} as publishPieceSummary, and for a package without the preconditioner
/// round; then as Runtime::forwardPrecondSummary.
void publishPiecePrecondSummary(Runtime& runtime, const Package& package, const cp::Plan& plan, int rank,
                                const ForwardTensors& piece, void* send, const LaunchOptions& options = {});

/// Phase 1 for `rank` (packages without a preconditioner): when plan.rank[rank].continuesOut, the summary of
/// its last fragment (local sequence fragments.size() − 1) into `send`, this rank's slot (memorySummaryLayout
/// of the piece's HV, K, V; fp32 device memory, layout.slotElements() floats), enqueued on options.stream;
/// otherwise nothing (the slot is not read). `piece` is the rank's local batch as a forward call: its tokens [begin, end) of the packed
/// inputs (B = 1, T = end − begin) with cu_seqlens holding plan.rank[rank].localCuSeqlens on the device (or,
/// for a rank with exactly one fragment covering its whole range, no cu_seqlens); its initial_state and
/// final_state are ignored, and so is options.segment_chunks (the summary walks each fragment as one segment;
/// the option applies to phase 2's forward). The values of cu_seqlens are not read on the host (no
/// synchronisation).
/// Throws RuntimeError{InvalidArgument} naming what was wrong: a rank outside [0, G), a piece whose T or N
/// disagrees with the plan, a package contextParallelSupport refuses (named with its reason), a package with
/// the preconditioner round (it needs the overload below); then as Runtime::forwardSummary.
void publishPieceSummary(Runtime& runtime, const Package& package, const cp::Plan& plan, int rank,
                         const ForwardTensors& piece, void* send, const LaunchOptions& options = {});
/// Phase 1 with the preconditioner round: on every rank with fragments (whether it publishes or not), the
/// fragments' accumulator starts into precond.local_initial (a fragment starting its document: its doc_initial
/// row or zero; a continued fragments[0]: cp::continuedStartState of the foldFrom slots of precond.gathered over
/// its doc_initial row, on the host: the stream is synchronised twice); then, when continuesOut, the memory
/// summary as above with them as the piece's initial_precond_state. Phase 2 runs from these starts, so call it
/// with the same precond.local_initial. A package without the preconditioner round takes the overload above.
/// Throws as above, and for a PiecePrecond tensor of the wrong shape, dtype or device, or a null
/// precond.gathered on a rank that continues a document.
void publishPieceSummary(Runtime& runtime, const Package& package, const cp::Plan& plan, int rank,
                         const ForwardTensors& piece, const PiecePrecond& precond, void* send,
                         const LaunchOptions& options = {});

/// The documents' states of phase 2 and the rank's scratch (all fp32 device memory on the piece's device).
struct PieceStates {
  TensorView doc_initial;  ///< [N, HV, K, V] the documents' initial states; not given = zero
  TensorView doc_final;    ///< [N, HV, K, V] out, optional: the rows of the documents this rank finishes
  TensorView local_initial;  ///< [n, HV, K, V] scratch, n = the rank's fragments (not needed when n = 0)
  TensorView local_final;    ///< [n, HV, K, V] scratch, needed when doc_final is given and n > 0
};

/// Phase 2 for `rank`, after the gather: fills local_initial (each fragment starting a document gets its
/// doc_initial row or zero; a continued fragments[0] gets X = doc_initial[n] (or 0); for j in foldFrom:
/// X = M_j X + E_j, cp::continuedStartState over the gathered slots in `gathered`, G slots of
/// memorySummaryLayout, device), runs the piece's forward from it (piece.o receives the rank's rows of o; a
/// rank whose range holds only padding gets its o rows zeroed), and writes doc_final's rows of the documents
/// whose last token the rank holds, and of the empty documents the plan assigns it (plan.finalStateRank;
/// their initial state). All on options.stream; when fragments[0] continues a document the host waits for
/// that stream twice (before the fold, to read the slots, and after it, for the start's copy to the device).
/// Throws RuntimeError{InvalidArgument} as publishPieceSummary, and for a PieceStates tensor of the wrong
/// shape, dtype or device; then as Runtime::forward.
void runPieceForward(Runtime& runtime, const Package& package, const cp::Plan& plan, int rank,
                     const ForwardTensors& piece, const void* gathered, const PieceStates& states,
                     const LaunchOptions& options = {});
/// Phase 2 with the preconditioner round: the piece runs from both start states, the memory state's folded here
/// and the accumulator's that phase 1 left in precond.local_initial (not folded again: precond.gathered is not
/// read); precond.local_final receives the fragments' end accumulators and precond.doc_final the rows of the
/// documents the rank finishes (the same rows as doc_final). Throws as above and as phase 1 with a PiecePrecond
/// (precond.gathered may be null).
void runPieceForward(Runtime& runtime, const Package& package, const cp::Plan& plan, int rank,
                     const ForwardTensors& piece, const void* gathered, const PieceStates& states,
                     const PiecePrecond& precond, const LaunchOptions& options = {});

/// The host part of the preconditioner fold: the preconditioner start [H, K] of `rank`'s continued fragments[0]
/// (plan.rank[rank].continuesIn; throws std::invalid_argument otherwise),
///   A = docInitRow (null = zero);  for j in foldFrom: A = Γ_j ⊙ A + Σ_j      (fullMap false: diagonal M)
///   d = docInitRow (null = zero);  for j in foldFrom: d = M_j d + e_j        (fullMap true: M_j K×K per head)
/// over `gathered`, G slots of precondSummaryLayout(·, headsQK, keyDim, fullMap) in host fp32 (only the foldFrom
/// slots are read): cp::continuedStartState with that layout, the fold phase 1 runs. Testable without a GPU.
std::vector<float> foldPrecondStart(const cp::Plan& plan, int rank, std::int64_t headsQK, std::int64_t keyDim,
                                    bool fullMap, const float* gathered, const float* docInitRow);

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
