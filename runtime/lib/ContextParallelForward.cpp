// One rank's context-parallel forward (ContextParallelForward.h): phase 1 summarises the rank's last
// fragment with the segment kernels, phase 2 folds the continued fragment's start on the host and runs the
// piece from its corrected start states.
#include "dgps/runtime/ContextParallelForward.h"

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
  std::int64_t HV = 0, K = 0, V = 0, T = 0;
  std::size_t stateBytes() const { return std::size_t(HV * K * V) * 4; }
};

/// Checks that `piece` is the plan's local batch of `rank` (as far as the host can tell without reading
/// cu_seqlens) and that the package has segment kernels.
PieceDims checkPiece(const char* call, const Package& package, const cp::Plan& plan, int rank,
                     const ForwardTensors& piece) {
  if (rank < 0 || rank >= plan.ranks)
    invalid(call, rank, "rank outside [0, G = " + std::to_string(plan.ranks) + ")");
  if (package.manifest().launch.forward_segmented.empty())
    invalid(call, rank, "package " + package.name() + " has no segment kernels (launch.forward_segmented; a spec "
            "with several Householder steps per token has none)");
  if (package.manifest().features.precond != PrecondKind::None)
    invalid(call, rank, "package " + package.name() + " is preconditioned: a piece's summaries need the "
            "preconditioner's state at the piece's start, folded across the ranks first (docs/math.md §8.4), which the "
            "context-parallel forward does not do yet");
  const cp::RankPlan& rp = plan.rank[std::size_t(rank)];
  if (piece.v.shape.size() != 4 || piece.k.shape.size() != 4)
    invalid(call, rank, "piece tensors 'k' and 'v' must be [B, T, H, K] and [B, T, HV, V], got k " +
            dims(piece.k.shape) + ", v " + dims(piece.v.shape));
  PieceDims d;
  d.T = piece.v.shape[1];
  d.HV = piece.v.shape[2];
  d.V = piece.v.shape[3];
  d.K = piece.k.shape[3];
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

/// X = init (or 0); for j in foldFrom: X = M_j X + E_j, in fp32 on the host (segment::foldSegments); the
/// result goes to row 0 of local_initial. Synchronises `stream` to read the gathered slots.
void foldContinuedStart(const cp::Plan& plan, int rank, const PieceDims& d, const void* gathered,
                        const void* docInitial, void* localInitial, CUstream stream) {
  const CudaDriver& drv = cudaDriver();
  const cp::RankPlan& rp = plan.rank[std::size_t(rank)];
  const cp::SummaryLayout layout = memorySummaryLayout(plan.numDocs, d.HV, d.K, d.V);
  const std::size_t MT = layout.transElements(0), X = layout.stateElements(0);
  const std::int64_t doc = rp.fragments[0].seq;
  std::vector<segment::Segment> earlier;
  std::vector<float> trans(rp.foldFrom.size() * MT), ext(rp.foldFrom.size() * X), init(X, 0.0f), out(X);
  checkCuda(drv.cuStreamSynchronize(stream), "cuStreamSynchronize (context-parallel fold: gathered summaries)");
  for (std::size_t i = 0; i < rp.foldFrom.size(); ++i) {
    const int j = rp.foldFrom[i];
    const segment::Segment& f = plan.rank[std::size_t(j)].fragments.back();
    earlier.push_back({0, 0, f.begin, f.end});
    const CUdeviceptr slot = devptr(gathered) + std::size_t(j) * layout.slotElements() * 4;
    checkCuda(drv.cuMemcpyDtoH(trans.data() + i * MT, slot + layout.transOffset(0) * 4, MT * 4),
              "cuMemcpyDtoH (context-parallel fold: M)");
    checkCuda(drv.cuMemcpyDtoH(ext.data() + i * X, slot + layout.extOffset(0) * 4, X * 4),
              "cuMemcpyDtoH (context-parallel fold: E)");
  }
  if (docInitial)
    checkCuda(drv.cuMemcpyDtoH(init.data(), devptr(docInitial) + std::size_t(doc) * X * 4, X * 4),
              "cuMemcpyDtoH (context-parallel fold: initial state)");
  segment::FoldShape one = layout.states[0];
  one.numSeqs = 1;
  std::vector<float> starts(earlier.size() * X);
  segment::foldSegments<float>(earlier, one, trans.data(), ext.data(), init.data(), starts.data(), out.data());
  // on the stream, then wait: `out` dies here, and a pageable synchronous copy may return before its DMA ends
  checkCuda(drv.cuMemcpyHtoDAsync(devptr(localInitial), out.data(), X * 4, stream),
            "cuMemcpyHtoDAsync (context-parallel fold)");
  checkCuda(drv.cuStreamSynchronize(stream), "cuStreamSynchronize (context-parallel fold)");
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

void publishPieceSummary(Runtime& runtime, const Package& package, const cp::Plan& plan, int rank,
                         const ForwardTensors& piece, void* send, const LaunchOptions& options) {
  const char* call = "publishPieceSummary";
  const PieceDims d = checkPiece(call, package, plan, rank, piece);
  const cp::RankPlan& rp = plan.rank[std::size_t(rank)];
  if (!rp.continuesOut) return;
  if (!send) invalid(call, rank, "'send' is null; expected this rank's slot of device memory");
  const cp::SummaryLayout layout = memorySummaryLayout(plan.numDocs, d.HV, d.K, d.V);
  char* slot = static_cast<char*>(send);
  const TensorView trans(slot + layout.transOffset(0) * 4, ScalarType::F32, {d.HV, d.K, d.K}, piece.v.device);
  const TensorView ext(slot + layout.extOffset(0) * 4, ScalarType::F32, {d.HV, d.K, d.V}, piece.v.device);
  ForwardTensors t = piece;
  t.initial_state = TensorView();
  t.final_state = TensorView();
  LaunchOptions o = options;
  o.segment_chunks.reset();  // the summary chooses its own segment length; the option is phase 2's
  runtime.forwardSummary(package, t, std::int64_t(rp.fragments.size()) - 1, trans, ext, o);
}

void runPieceForward(Runtime& runtime, const Package& package, const cp::Plan& plan, int rank,
                     const ForwardTensors& piece, const void* gathered, const PieceStates& states,
                     const LaunchOptions& options) {
  const char* call = "runPieceForward";
  const PieceDims d = checkPiece(call, package, plan, rank, piece);
  const cp::RankPlan& rp = plan.rank[std::size_t(rank)];
  const std::int64_t n = std::int64_t(rp.fragments.size());
  const int device = piece.v.device;
  if (states.doc_initial.given()) requireState(call, rank, "doc_initial", states.doc_initial, plan.numDocs, d, device);
  if (states.doc_final.given()) requireState(call, rank, "doc_final", states.doc_final, plan.numDocs, d, device);
  if (n > 0) requireState(call, rank, "local_initial", states.local_initial, n, d, device);
  if (n > 0 && states.doc_final.given()) requireState(call, rank, "local_final", states.local_final, n, d, device);
  if (rp.continuesIn && !gathered) invalid(call, rank, "'gathered' is null but the rank continues a document");

  DeviceContextGuard guard(device);
  CUstream stream = static_cast<CUstream>(options.stream);
  const void* docInit = states.doc_initial.given() ? states.doc_initial.data : nullptr;
  if (n > 0) {
    // start states: documents' initial rows first (stream order), then the fold's row 0 (host, synchronous)
    const std::vector<PieceStart> starts = pieceStartSources(plan, rank);
    for (std::size_t i = 0; i < starts.size(); ++i)
      if (starts[i].source == PieceStart::Source::DocInitial)
        copyRow(docInit, starts[i].doc, states.local_initial.data, std::int64_t(i), d.stateBytes(), stream);
    if (rp.continuesIn) foldContinuedStart(plan, rank, d, gathered, docInit, states.local_initial.data, stream);
    ForwardTensors t = piece;
    t.initial_state = states.local_initial;
    t.final_state = states.doc_final.given() ? states.local_final : TensorView();
    runtime.forward(package, t, options);
  } else if (d.T > 0 && piece.o.given()) {
    // a range of padding only: its rows of o belong to no document and are zeros, as forward writes them
    checkCuda(cudaDriver().cuMemsetD8Async(devptr(piece.o.data), 0, piece.o.nbytes(), stream),
              "cuMemsetD8Async (context-parallel padding rows of o)");
  }
  if (!states.doc_final.given()) return;
  for (const PieceFinal& f : pieceFinalWrites(plan, rank)) {
    if (f.local >= 0)
      copyRow(states.local_final.data, f.local, states.doc_final.data, f.doc, d.stateBytes(), stream);
    else
      copyRow(docInit, f.doc, states.doc_final.data, f.doc, d.stateBytes(), stream);
  }
}

}  // namespace dgps
