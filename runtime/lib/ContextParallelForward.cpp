// One rank's context-parallel forward (ContextParallelForward.h): phase 0 (preconditioned packages) summarises
// the rank's last fragment's accumulator, phase 1 folds the fragments' accumulator starts and summarises its
// memory state with the segment kernels from them, phase 2 folds the memory state's starts and runs the piece
// from both. Every fold is cp::continuedStartState on the host (foldContinuedStart), each state folded once.
#include "dgps/runtime/ContextParallelForward.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "dgps/dsl/SegmentScan.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Error.h"

namespace dgps {

namespace {

CUdeviceptr devptr(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p)); }

[[noreturn]] void invalid(const char* call, int rank, const std::string& what) {
  throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                     std::string(call) + " (rank " + std::to_string(rank) + "): " + what);
}

std::string dims(const std::vector<std::int64_t>& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

/// The piece's (HV, K, V) from its tensors: v [B, T, HV, V], k [B, T, H, K].
struct PieceDims {
  std::int64_t H = 0, HV = 0, K = 0, V = 0, T = 0;
  bool precondFullMap = false;  ///< the preconditioner round's map is K×K (ContextParallelSupport::precond_full_map)
  std::size_t stateBytes() const { return std::size_t(HV * K * V) * 4; }
  std::size_t precondBytes() const { return std::size_t(H * K) * 4; }
};

/// Which overloads a call is: with the preconditioner round (phase 0, PiecePrecond) or without.
enum class Round { Memory, WithPrecond };

/// Checks that `piece` is the plan's local batch of `rank` (as far as the host can tell without reading
/// cu_seqlens) and that the package has segment kernels.
PieceDims checkPiece(const char* call, const Package& package, const cp::Plan& plan, int rank,
                     const ForwardTensors& piece, Round round) {
  if (rank < 0 || rank >= plan.ranks)
    invalid(call, rank, "rank outside [0, G = " + std::to_string(plan.ranks) + ")");
  const ContextParallelSupport support = contextParallelSupport(package.manifest());
  if (!support.supported) invalid(call, rank, "package " + package.name() + " " + support.reason);
  if (support.precond_round && round == Round::Memory)
    invalid(call, rank, "package " + package.name() + " has a preconditioner state: its memory summaries need "
            "the preconditioner state folded across the ranks first (publishPiecePrecondSummary, its gather, then the "
            "overloads taking a PiecePrecond; ContextParallelForward.h)");
  if (!support.precond_round && round == Round::WithPrecond)
    invalid(call, rank, "package " + package.name() + " has no preconditioner state: no phase 0, and the "
            "overloads without a PiecePrecond");
  const cp::RankPlan& rp = plan.rank[std::size_t(rank)];
  if (piece.v.shape.size() != 4 || piece.k.shape.size() != 4)
    invalid(call, rank, "piece tensors 'k' and 'v' must be [B, T, H, K] and [B, T, HV, V], got k " +
            dims(piece.k.shape) + ", v " + dims(piece.v.shape));
  PieceDims d;
  d.T = piece.v.shape[1];
  d.HV = piece.v.shape[2];
  d.V = piece.v.shape[3];
  d.K = piece.k.shape[3];
  d.H = piece.k.shape[2];
  d.precondFullMap = support.precond_full_map;
  const std::int64_t T = rp.end - rp.begin;
  if (piece.v.shape[0] != 1 || d.T != T)
    invalid(call, rank, "piece 'v' has shape " + dims(piece.v.shape) + ", expected B = 1 and T = " +
            std::to_string(T) + " (the rank's tokens [" + std::to_string(rp.begin) + ", " + std::to_string(rp.end) + "))");
  const std::int64_t n = std::int64_t(rp.fragments.size());
  if (piece.cu_seqlens.given()) {
    if (piece.cu_seqlens.shape != std::vector<std::int64_t>{n + 1})
      invalid(call, rank, "piece 'cu_seqlens' has shape " + dims(piece.cu_seqlens.shape) + ", expected [" +
              std::to_string(n + 1) + "] (the plan's localCuSeqlens: the rank has " + std::to_string(n) + " fragments)");
  } else if (n != 1 || rp.fragments[0].length() != T) {
    invalid(call, rank, "piece has no 'cu_seqlens' but the rank's range is not one fragment (" + std::to_string(n) +
            " fragments over " + std::to_string(T) + " tokens); pass the plan's localCuSeqlens");
  }
  return d;
}

void requireState(const char* call, int rank, const char* name, const TensorView& t, std::int64_t rows,
                  const PieceDims& d, int device) {
  const std::vector<std::int64_t> shape{rows, d.HV, d.K, d.V};
  std::string why;
  if (!t.data)
    why = "is not given";
  else if (t.dtype != ScalarType::F32)
    why = std::string("has dtype ") + toString(t.dtype) + ", expected f32";
  else if (t.shape != shape)
    why = "has shape " + dims(t.shape) + ", expected " + dims(shape);
  else if (!t.isContiguous())
    why = "is strided, expected contiguous";
  else if (t.device != device)
    why = "is on device " + std::to_string(t.device) + ", expected " + std::to_string(device);
  if (!why.empty()) invalid(call, rank, std::string("PieceStates '") + name + "' " + why);
}

/// Copies state row `from` of `src` (or zeros when src is null) to row `to` of `dst`.
void copyRow(const void* src, std::int64_t from, void* dst, std::int64_t to, std::size_t bytes, CUstream stream) {
  const CudaDriver& d = cudaDriver();
  const CUdeviceptr out = devptr(dst) + std::size_t(to) * bytes;
  if (src)
    checkCuda(d.cuMemcpyDtoDAsync(out, devptr(src) + std::size_t(from) * bytes, bytes, stream),
              "cuMemcpyDtoDAsync (context-parallel state row)");
  else
    checkCuda(d.cuMemsetD32Async(out, 0, bytes / 4, stream), "cuMemsetD32Async (context-parallel state row)");
}

/// Row 0 of `localInitial` for a continued fragments[0] (plan.rank[rank].continuesIn): cp::continuedStartState of
/// `layout`'s state 0 over the foldFrom slots of `gathered` (G slots, device) and the document's row of
/// `docInitial` ([N, ·] device, or null = zero), in fp32 on the host. One fold for the memory state and the
/// preconditioner state alike. The host waits for `stream` twice: for the slots (the gather is on the stream),
/// and for the result's copy to leave its host buffer (`out` dies here, and a pageable synchronous copy may
/// return before its DMA ends).
void foldContinuedStart(const cp::Plan& plan, int rank, const cp::SummaryLayout& layout, const void* gathered,
                        const void* docInitial, void* localInitial, CUstream stream) {
  const CudaDriver& drv = cudaDriver();
  const cp::RankPlan& rp = plan.rank[std::size_t(rank)];
  const std::size_t slot = layout.slotElements(), X = layout.stateElements(0);
  // the G slots' host image; only the foldFrom slots are copied (and read), the rest stays uninitialised
  const std::unique_ptr<float[]> slots(new float[std::size_t(plan.ranks) * slot]);
  std::vector<float> init(docInitial ? X : 0), out(X);
  for (int j : rp.foldFrom)
    checkCuda(drv.cuMemcpyDtoHAsync(slots.get() + std::size_t(j) * slot, devptr(gathered) + std::size_t(j) * slot * 4,
                                    slot * 4, stream),
              "cuMemcpyDtoHAsync (context-parallel fold: gathered slot)");
  if (docInitial)
    checkCuda(drv.cuMemcpyDtoHAsync(init.data(), devptr(docInitial) + std::size_t(rp.fragments[0].seq) * X * 4, X * 4,
                                    stream),
              "cuMemcpyDtoHAsync (context-parallel fold: initial state)");
  checkCuda(drv.cuStreamSynchronize(stream), "cuStreamSynchronize (context-parallel fold: gathered slots)");
  cp::continuedStartState<float>(plan, rank, layout, 0, slots.get(), docInitial ? init.data() : nullptr, out.data());
  checkCuda(drv.cuMemcpyHtoDAsync(devptr(localInitial), out.data(), X * 4, stream),
            "cuMemcpyHtoDAsync (context-parallel fold)");
  checkCuda(drv.cuStreamSynchronize(stream), "cuStreamSynchronize (context-parallel fold)");
}

/// Fills `localInitial` [n, ·] (n = the rank's fragments) of the carried state `layout` describes: a fragment
/// starting its document gets its `docInitial` row (or zero; enqueued on `stream`), a continued fragments[0]
/// foldContinuedStart. The phases' one way of filling start states: the memory state's (phase 2) and the
/// preconditioner state's (phase 1).
void fillStartStates(const cp::Plan& plan, int rank, const cp::SummaryLayout& layout, const void* gathered,
                     const void* docInitial, void* localInitial, CUstream stream) {
  const std::size_t rowBytes = layout.stateElements(0) * 4;
  const std::vector<PieceStart> starts = pieceStartSources(plan, rank);
  for (std::size_t i = 0; i < starts.size(); ++i)
    if (starts[i].source == PieceStart::Source::DocInitial)
      copyRow(docInitial, starts[i].doc, localInitial, std::int64_t(i), rowBytes, stream);
  if (plan.rank[std::size_t(rank)].continuesIn)
    foldContinuedStart(plan, rank, layout, gathered, docInitial, localInitial, stream);
}

}  // namespace

cp::SummaryLayout memorySummaryLayout(std::int64_t numDocs, std::int64_t headsV, std::int64_t keyDim,
                                      std::int64_t valueDim) {
  cp::SummaryLayout layout;
  segment::FoldShape s;
  s.numSeqs = numDocs;
  s.heads = headsV;
  s.K = keyDim;
  s.width = valueDim;
  layout.states.push_back(s);
  return layout;
}

std::vector<PieceStart> pieceStartSources(const cp::Plan& plan, int rank) {
  if (rank < 0 || rank >= plan.ranks)
    throw RuntimeError(RuntimeErrorCode::InvalidArgument, "pieceStartSources: rank " + std::to_string(rank) +
                                                              " outside [0, G = " + std::to_string(plan.ranks) + ")");
  const cp::RankPlan& rp = plan.rank[std::size_t(rank)];
  std::vector<PieceStart> out;
  for (std::size_t i = 0; i < rp.fragments.size(); ++i) {
    PieceStart s;
    s.doc = rp.fragments[i].seq;
    s.source = i == 0 && rp.continuesIn ? PieceStart::Source::Fold : PieceStart::Source::DocInitial;
    out.push_back(s);
  }
  return out;
}

std::vector<PieceFinal> pieceFinalWrites(const cp::Plan& plan, int rank) {
  if (rank < 0 || rank >= plan.ranks)
    throw RuntimeError(RuntimeErrorCode::InvalidArgument, "pieceFinalWrites: rank " + std::to_string(rank) +
                                                              " outside [0, G = " + std::to_string(plan.ranks) + ")");
  const cp::RankPlan& rp = plan.rank[std::size_t(rank)];
  std::vector<PieceFinal> out;
  for (std::size_t i = 0; i < rp.fragments.size(); ++i) {
    const std::int64_t n = rp.fragments[i].seq;
    if (plan.finalStateRank[std::size_t(n)] == rank && rp.fragments[i].end == plan.cuSeqlens[std::size_t(n) + 1])
      out.push_back({n, std::int64_t(i)});
  }
  for (std::int64_t n = 0; n < plan.numDocs; ++n)
    if (plan.cuSeqlens[std::size_t(n)] == plan.cuSeqlens[std::size_t(n) + 1] &&
        plan.finalStateRank[std::size_t(n)] == rank)
      out.push_back({n, -1});
  return out;
}

cp::SummaryLayout precondSummaryLayout(std::int64_t numDocs, std::int64_t headsQK, std::int64_t keyDim,
                                       bool fullMap) {
  cp::SummaryLayout layout;
  segment::FoldShape s;
  s.numSeqs = numDocs;
  s.heads = headsQK;
  s.K = keyDim;
  s.width = 1;
  s.diagonal = !fullMap;
  layout.states.push_back(s);
  return layout;
}

std::vector<float> foldPrecondStart(const cp::Plan& plan, int rank, std::int64_t headsQK, std::int64_t keyDim,
                                    bool fullMap, const float* gathered, const float* docInitRow) {
  if (rank < 0 || rank >= plan.ranks || !plan.rank[std::size_t(rank)].continuesIn)
    throw std::invalid_argument("foldPrecondStart: rank " + std::to_string(rank) +
                                " does not continue a document from an earlier rank");
  const cp::SummaryLayout layout = precondSummaryLayout(plan.numDocs, headsQK, keyDim, fullMap);
  std::vector<float> out(layout.stateElements(0));
  cp::continuedStartState<float>(plan, rank, layout, 0, gathered, docInitRow, out.data());
  return out;
}

namespace {

void requirePrecond(const char* call, int rank, const char* name, const TensorView& t, std::int64_t rows,
                    const PieceDims& d, int device) {
  const std::vector<std::int64_t> shape{rows, d.H, d.K};
  std::string why;
  if (!t.data)
    why = "is not given";
  else if (t.dtype != ScalarType::F32)
    why = std::string("has dtype ") + toString(t.dtype) + ", expected f32";
  else if (t.shape != shape)
    why = "has shape " + dims(t.shape) + ", expected " + dims(shape) + " ([·, H, K])";
  else if (!t.isContiguous())
    why = "is strided, expected contiguous";
  else if (t.device != device)
    why = "is on device " + std::to_string(t.device) + ", expected " + std::to_string(device);
  if (!why.empty()) invalid(call, rank, std::string("PiecePrecond '") + name + "' " + why);
}

/// The checks phases 1 and 2 share for a PiecePrecond: its tensors; phase 1 (which folds) the gathered slots when
/// the rank continues a document, phase 2 (which writes the final states) the final tensors.
void checkPrecond(const char* call, const cp::Plan& plan, int rank, const PieceDims& d, const PiecePrecond& p,
                  int device, bool phase2) {
  const cp::RankPlan& rp = plan.rank[std::size_t(rank)];
  const std::int64_t n = std::int64_t(rp.fragments.size());
  if (p.doc_initial.given()) requirePrecond(call, rank, "doc_initial", p.doc_initial, plan.numDocs, d, device);
  if (phase2 && p.doc_final.given()) requirePrecond(call, rank, "doc_final", p.doc_final, plan.numDocs, d, device);
  if (n > 0) requirePrecond(call, rank, "local_initial", p.local_initial, n, d, device);
  // A plain forward without initial_precond_state starts hypergrad_ogd's d at the spec's init (often 1), which
  // the manifest does not carry; zero would silently differ from the single-GPU call.
  if (d.precondFullMap && !p.doc_initial.given())
    invalid(call, rank, "PiecePrecond 'doc_initial' is not given: a hypergrad_ogd preconditioner without an initial "
            "state starts from the spec's init, which the context-parallel forward cannot fill in; pass the "
            "documents' initial d [N, H, K] (e.g. filled with the spec's init)");
  if (phase2 && n > 0 && p.doc_final.given())
    requirePrecond(call, rank, "local_final", p.local_final, n, d, device);
  if (!phase2 && rp.continuesIn && !p.gathered)
    invalid(call, rank, "PiecePrecond 'gathered' is null but the rank continues a document (phase 0's gather)");
}

/// Phase 1's summary launch, with the piece's accumulator starts when given.
void publishMemory(Runtime& runtime, const Package& package, const cp::Plan& plan, int rank,
                   const ForwardTensors& piece, const PieceDims& d, const TensorView& precondStart, void* send,
                   const LaunchOptions& options) {
  const cp::RankPlan& rp = plan.rank[std::size_t(rank)];
  const cp::SummaryLayout layout = memorySummaryLayout(plan.numDocs, d.HV, d.K, d.V);
  char* slot = static_cast<char*>(send);
  const TensorView trans(slot + layout.transOffset(0) * 4, ScalarType::F32, {d.HV, d.K, d.K}, piece.v.device);
  const TensorView ext(slot + layout.extOffset(0) * 4, ScalarType::F32, {d.HV, d.K, d.V}, piece.v.device);
  ForwardTensors t = piece;
  t.initial_state = TensorView();
  t.final_state = TensorView();
  t.initial_precond_state = precondStart;
  t.final_precond_state = TensorView();
  LaunchOptions o = options;
  o.segment_chunks.reset();  // the summary chooses its own segment length; the option is phase 2's
  runtime.forwardSummary(package, t, std::int64_t(rp.fragments.size()) - 1, trans, ext, o);
}

/// Phase 2 for both rounds; `precond` is null without the preconditioner round.
void runPiece(const char* call, Runtime& runtime, const Package& package, const cp::Plan& plan, int rank,
              const ForwardTensors& piece, const void* gathered, const PieceStates& states, const PiecePrecond* precond,
              const PieceDims& d, const LaunchOptions& options) {
  const cp::RankPlan& rp = plan.rank[std::size_t(rank)];
  const std::int64_t n = std::int64_t(rp.fragments.size());
  const int device = piece.v.device;
  if (states.doc_initial.given()) requireState(call, rank, "doc_initial", states.doc_initial, plan.numDocs, d, device);
  if (states.doc_final.given()) requireState(call, rank, "doc_final", states.doc_final, plan.numDocs, d, device);
  if (n > 0) requireState(call, rank, "local_initial", states.local_initial, n, d, device);
  if (n > 0 && states.doc_final.given()) requireState(call, rank, "local_final", states.local_final, n, d, device);
  if (rp.continuesIn && !gathered) invalid(call, rank, "'gathered' is null but the rank continues a document");
  if (precond) checkPrecond(call, plan, rank, d, *precond, device, true);

  DeviceContextGuard guard(device);
  CUstream stream = static_cast<CUstream>(options.stream);
  const void* docInit = states.doc_initial.given() ? states.doc_initial.data : nullptr;
  const bool precondFinal = precond && precond->doc_final.given();
  if (n > 0) {
    // the memory state's starts; the preconditioner's are phase 1's (precond->local_initial, not folded again)
    fillStartStates(plan, rank, memorySummaryLayout(plan.numDocs, d.HV, d.K, d.V), gathered, docInit,
                    states.local_initial.data, stream);
    ForwardTensors t = piece;
    t.initial_state = states.local_initial;
    t.final_state = states.doc_final.given() ? states.local_final : TensorView();
    t.initial_precond_state = precond ? precond->local_initial : TensorView();
    t.final_precond_state = precondFinal ? precond->local_final : TensorView();
    runtime.forward(package, t, options);
  } else if (d.T > 0 && piece.o.given()) {
    // a range of padding only: its rows of o belong to no document and are zeros, as forward writes them
    checkCuda(cudaDriver().cuMemsetD8Async(devptr(piece.o.data), 0, piece.o.nbytes(), stream),
              "cuMemsetD8Async (context-parallel padding rows of o)");
  }
  if (!states.doc_final.given() && !precondFinal) return;
  const void* precondInit = precond && precond->doc_initial.given() ? precond->doc_initial.data : nullptr;
  for (const PieceFinal& f : pieceFinalWrites(plan, rank)) {
    if (states.doc_final.given()) {
      if (f.local >= 0)
        copyRow(states.local_final.data, f.local, states.doc_final.data, f.doc, d.stateBytes(), stream);
      else
        copyRow(docInit, f.doc, states.doc_final.data, f.doc, d.stateBytes(), stream);
    }
    if (precondFinal) {
      if (f.local >= 0)
        copyRow(precond->local_final.data, f.local, precond->doc_final.data, f.doc, d.precondBytes(), stream);
      else
        copyRow(precondInit, f.doc, precond->doc_final.data, f.doc, d.precondBytes(), stream);
    }
  }
}

}  // namespace

void publishPiecePrecondSummary(Runtime& runtime, const Package& package, const cp::Plan& plan, int rank,
                                const ForwardTensors& piece, void* send, const LaunchOptions& options) {
  const char* call = "publishPiecePrecondSummary";
  const PieceDims d = checkPiece(call, package, plan, rank, piece, Round::WithPrecond);
  const cp::RankPlan& rp = plan.rank[std::size_t(rank)];
  if (!rp.continuesOut) return;
  if (!send) invalid(call, rank, "'send' is null; expected this rank's slot of device memory");
  const cp::SummaryLayout layout = precondSummaryLayout(plan.numDocs, d.H, d.K, d.precondFullMap);
  char* slot = static_cast<char*>(send);
  // the map's matrix part: Γ [H, K] (per channel) or M [H, K, K]; then its affine part Σ or e [H, K]
  const std::vector<std::int64_t> transShape =
      d.precondFullMap ? std::vector<std::int64_t>{d.H, d.K, d.K} : std::vector<std::int64_t>{d.H, d.K};
  const TensorView gamma(slot + layout.transOffset(0) * 4, ScalarType::F32, transShape, piece.v.device);
  const TensorView sigma(slot + layout.extOffset(0) * 4, ScalarType::F32, {d.H, d.K}, piece.v.device);
  ForwardTensors t = piece;
  t.initial_state = TensorView();
  t.final_state = TensorView();
  t.initial_precond_state = TensorView();
  t.final_precond_state = TensorView();
  LaunchOptions o = options;
  o.segment_chunks.reset();  // the preconditioner summary runs the plain scan; the option is phase 2's
  runtime.forwardPrecondSummary(package, t, std::int64_t(rp.fragments.size()) - 1, gamma, sigma, o);
}

void publishPieceSummary(Runtime& runtime, const Package& package, const cp::Plan& plan, int rank,
                         const ForwardTensors& piece, void* send, const LaunchOptions& options) {
  const char* call = "publishPieceSummary";
  const PieceDims d = checkPiece(call, package, plan, rank, piece, Round::Memory);
  if (!plan.rank[std::size_t(rank)].continuesOut) return;
  if (!send) invalid(call, rank, "'send' is null; expected this rank's slot of device memory");
  publishMemory(runtime, package, plan, rank, piece, d, TensorView(), send, options);
}

void publishPieceSummary(Runtime& runtime, const Package& package, const cp::Plan& plan, int rank,
                         const ForwardTensors& piece, const PiecePrecond& precond, void* send,
                         const LaunchOptions& options) {
  const char* call = "publishPieceSummary";
  const PieceDims d = checkPiece(call, package, plan, rank, piece, Round::WithPrecond);
  const cp::RankPlan& rp = plan.rank[std::size_t(rank)];
  if (rp.continuesOut && !send) invalid(call, rank, "'send' is null; expected this rank's slot of device memory");
  if (rp.fragments.empty()) return;
  checkPrecond(call, plan, rank, d, precond, piece.v.device, false);
  DeviceContextGuard guard(piece.v.device);
  // every rank with fragments, also one that does not publish: phase 2 runs from these starts
  fillStartStates(plan, rank, precondSummaryLayout(plan.numDocs, d.H, d.K, d.precondFullMap), precond.gathered,
                  precond.doc_initial.given() ? precond.doc_initial.data : nullptr, precond.local_initial.data,
                  static_cast<CUstream>(options.stream));
  if (rp.continuesOut) publishMemory(runtime, package, plan, rank, piece, d, precond.local_initial, send, options);
}

void runPieceForward(Runtime& runtime, const Package& package, const cp::Plan& plan, int rank,
                     const ForwardTensors& piece, const void* gathered, const PieceStates& states,
                     const LaunchOptions& options) {
  const char* call = "runPieceForward";
  const PieceDims d = checkPiece(call, package, plan, rank, piece, Round::Memory);
  runPiece(call, runtime, package, plan, rank, piece, gathered, states, nullptr, d, options);
}

void runPieceForward(Runtime& runtime, const Package& package, const cp::Plan& plan, int rank,
                     const ForwardTensors& piece, const void* gathered, const PieceStates& states,
                     const PiecePrecond& precond, const LaunchOptions& options) {
  const char* call = "runPieceForward";
  const PieceDims d = checkPiece(call, package, plan, rank, piece, Round::WithPrecond);
  runPiece(call, runtime, package, plan, rank, piece, gathered, states, &precond, d, options);
}

}  // namespace dgps
