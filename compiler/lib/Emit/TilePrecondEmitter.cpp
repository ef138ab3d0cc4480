// The emitter of the roles over chunk summaries (TileEmitter.h emitTilePrecondKernel): a precond_summary or
// precond_scan tile function -> CUDA calling runtime/device/dgps/tile, with the launch contract's symbol,
// ForwardArgs, launch geometry (LaunchContract.h forwardGeometry) and workspace layout (the package's tile.workspace,
// printed once in kernels.cu).
//
// precond_summary (grid chunk_key_head): the one 16-bit [C, K] row tile at shared offset 0 (pitch
// bf16Pitch(KP)), up to four [C] vectors in the columns of the [C][4] f32 record after it (the role's
// shared memory, C·bf16Pitch(KP)·2 + C·16 bytes). Consecutive row-local ops (per-row scalar loads, fills,
// row_exp) are printed as one loop over the chunk's rows, so their global loads are issued together; the
// first barrier after the cp.async row load also waits for it.
// precond_scan (grid sequence_key_head): one tile.chunk_affine_scan per (sequence, key head), no shared memory.
// OSDN's chunked hypergradient d-scan has its own layouts: its precond_summary places the key rows, β and the
// retention where tile::FeedbackSummaryTiles has them (tile/feedback_scan_layout.h feedbackSummarySmem) and calls
// tile::feedback_chunk_summary; its precond_scan is one tile::feedback_chunk_pass (feedbackPassSmem). A clamped
// d-scan has only a precond_scan: one tile::feedback_token_scan per warp (grid sequence_key_head_warp).
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "dgps/Dialect/Tile/IR/LaunchFeatures.h"
#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/Dialect/Tile/IR/Workspace.h"
#include "dgps/Emit/Package.h"
#include "dgps/Emit/TileEmitter.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace dgps::tile;

namespace dgps {
namespace {

/// [C] vectors: the columns of the role's [C][4] record.
constexpr int kVectorColumns = 4;

bool isVec(Type t) { return cast<TileType>(t).getRank() == 1; }

class SummaryEmitter {
 public:
  /// The kernel has declared the RowCopy `rc` (its layout's `bar`): the key rows go by a tensor copy where the
  /// runtime encoded the map (tile/chunk_rows.cuh RowCopy), else by cp.async.
  explicit SummaryEmitter(std::ostringstream& os) : os_(os) {}

  LogicalResult block(Block& body) {
    // OSDN's summary: its operands live in the hypergrad layout's named parts
    for (auto hg : body.getOps<HypergradChunkSummaryOp>()) {
      hypergrad_ = true;
      fixed_[hg.getBeta().getAsOpaquePointer()] = "hs.beta()";
      fixed_[hg.getRetention().getAsOpaquePointer()] = "hs.logret()";
    }
    // The scan's three per-row coefficients take adjacent columns 0, 1, 2 of the record, so channel_scan_total
    // reads them with one vector load per row (the hand-written role, deleted since, did the same); other [C] vectors follow.
    for (auto scan : body.getOps<ChannelScanTotalOp>())
      for (Value v : {scan.getA(), scan.getB(), scan.getR()})
        if (!column_.count(v.getAsOpaquePointer())) column_[v.getAsOpaquePointer()] = nextColumn_++;
    for (Operation& op : body)
      if (failed(emit(op))) return failure();
    flushRows();
    return success();
  }

 private:
  std::string name(Value v) {
    auto it = names_.find(v.getAsOpaquePointer());
    if (it != names_.end()) return it->second;
    std::string n = "t" + std::to_string(names_.size());
    names_[v.getAsOpaquePointer()] = n;
    return n;
  }

  /// Storage for a new shared tile; fails when the role's layout has no room left.
  LogicalResult place(Operation* op, Value v) {
    const std::string n = name(v);
    if (hypergrad_) return placeHypergrad(op, v, n);
    if (isVec(v.getType())) {
      auto it = column_.find(v.getAsOpaquePointer());
      const int col = it != column_.end() ? it->second : nextColumn_++;
      if (col >= kVectorColumns)
        return op->emitOpError() << "needs more than " << kVectorColumns << " [C] vectors (the [C][4] record's columns)";
      os_ << "  const t::RowVec " << n << "{sVec + " << col << ", " << kVectorColumns << "};\n";
      return success();
    }
    if (rowsUsed_) return op->emitOpError("needs a second [C, K] row tile (the layout has one)");
    rowsUsed_ = true;
    os_ << "  uint16_t* const " << n << " = dev::smem_at<uint16_t>(sm, L.key);\n";
    return success();
  }

  /// In OSDN's layout: the one row tile is the key part, the [C] vectors the β and retention parts.
  LogicalResult placeHypergrad(Operation* op, Value v, const std::string& n) {
    if (isVec(v.getType())) {
      auto it = fixed_.find(v.getAsOpaquePointer());
      if (it == fixed_.end())
        return op->emitOpError("is a [C] vector that tile.hypergrad_chunk_summary does not read (its layout holds "
                               "only β and the retention)");
      os_ << "  const t::RowVec " << n << " = " << it->second << ";\n";
      return success();
    }
    if (rowsUsed_) return op->emitOpError("needs a second [C, K] row tile (the layout has one)");
    rowsUsed_ = true;
    os_ << "  uint16_t* const " << n << " = hs.key;\n";
    return success();
  }

  void row(const std::string& stmt) { rowBody_.push_back(stmt); }
  void flushRows() {
    if (rowBody_.empty()) return;
    os_ << "  for (int i = dev::tid(); i < C; i += dev::nthreads()) {\n";
    for (const std::string& b : rowBody_) os_ << "    " << b << "\n";
    os_ << "  }\n";
    rowBody_.clear();
  }

  LogicalResult chunkRows(ChunkRowsOp op) {
    static const std::map<std::string, bool> fields = {
        {"k", true}, {"precond_g", false}, {"precond_beta", false}, {"beta", false}};
    auto it = fields.find(op.getName().str());
    if (it == fields.end())
      return op.emitOpError() << "'" << op.getName() << "' is not a row tensor precond_summary reads (\"k\", "
                              << "\"precond_g\", \"precond_beta\", \"beta\")";
    const bool vec = isVec(op.getType());
    if (it->second == vec)
      return op.emitOpError() << "'" << op.getName() << "' must be loaded as " << (vec ? "[C, K] rows" : "a [C] vector");
    // β is a value-head tensor: the grid has one CTA per key head, which reads its first value head's β
    const HeadOf want = op.getName() == "beta" ? HeadOf::value_head : HeadOf::key_head;
    if (op.getHead() != want)
      return op.emitOpError() << "precond_summary reads '" << op.getName() << "' at the "
                              << stringifyHeadOf(want) << " (got " << stringifyHeadOf(op.getHead()) << ")";
    if (failed(place(op, op.getResult()))) return failure();
    const std::string n = name(op.getResult());
    if (vec) {
      row("t::load_row_scalars(" + n + ", a." + op.getName().str() + ", at, " +
          (want == HeadOf::value_head ? "a.heads_v, h * (a.heads_v / H)" : "H, h") + ", i);");
      return success();
    }
    rowsValue_ = op.getResult();
    if (op.getName() != "k")
      return op.emitOpError("precond_summary's [C, K] rows are the key (its tensor map is a.k_rows)");
    os_ << "  t::load_rows16<C, KP>(rc, a.k_rows, " << n << ", PQ, a.k, at, H, h, K);\n";
    pendingLoads_ = true;
    return success();
  }

  static bool isRowLocal(Operation& op) {
    if (auto r = dyn_cast<ChunkRowsOp>(op)) return isVec(r.getType());
    return isa<ChunkFillOp, RowExpOp>(op);
  }

  LogicalResult emit(Operation& op) {
    // the asynchronous row load may sit inside the open row loop's run; anything else closes it
    const bool asyncRows = isa<ChunkRowsOp>(op) && !isVec(op.getResult(0).getType());
    if (!isRowLocal(op) && !asyncRows) flushRows();
    return llvm::TypeSwitch<Operation*, LogicalResult>(&op)
        .Case<ChunkRowsOp>([&](auto o) { return chunkRows(o); })
        .Case<ChunkFillOp>([&](ChunkFillOp o) -> LogicalResult {
          if (failed(place(o, o.getResult()))) return failure();
          row("t::fill_rows(" + name(o.getResult()) + ", " + cudaFloatLiteral(o.getValue().convertToDouble()) + ", " +
              cudaFloatLiteral(o.getPad().convertToDouble()) + ", at, i);");
          return success();
        })
        .Case<RowExpOp>([&](RowExpOp o) -> LogicalResult {
          if (failed(place(o, o.getResult()))) return failure();
          row("t::exp_rows(" + name(o.getResult()) + ", " + name(o.getX()) + ", " +
              cudaFloatLiteral(o.getPad().convertToDouble()) + ", at, i);");
          return success();
        })
        .Case<BarrierOp>([&](auto) {
          os_ << (!pendingLoads_ ? "  dev::sync_threads();\n" : "  t::wait_rows(rc);\n");
          pendingLoads_ = false;
          return success();
        })
        .Case<RowRsqrtNormOp>([&](RowRsqrtNormOp o) -> LogicalResult {
          if (o.getRows().size() != 1) return o.emitOpError("precond_summary normalises one row tile");
          if (failed(place(o, o.getResult(0)))) return failure();
          os_ << "  t::row_rsqrt_norm<C, KP, Codec>(" << name(o.getResult(0)) << ", " << name(o.getRows()[0])
              << ", t::RowVec{nullptr, 0}, nullptr, PQ, " << cudaFloatLiteral(o.getEps().convertToDouble())
              << ", at.Lr);\n";
          return success();
        })
        .Case<ChannelScanTotalOp>([&](ChannelScanTotalOp o) {
          os_ << "  t::channel_scan_total<K, Codec>(reinterpret_cast<float*>(ws + W.psum) + (slot * H + h) * K, "
              << name(o.getX()) << ", PQ, " << name(o.getA()) << ", " << name(o.getB()) << ", " << name(o.getR())
              << ", at.Lr);\n";
          return success();
        })
        .Case<HypergradChunkSummaryOp>([&](HypergradChunkSummaryOp o) -> LogicalResult {
          if (!rowsUsed_ || o.getX() != rowsValue_)
            return o.emitOpError("reads the role's [C, K] key rows (a tile.chunk_rows of this function)");
          const std::optional<APFloat> eps = o.getL2Eps();
          os_ << "  t::feedback_chunk_summary<C, K, KP, dgps::cfg::WARPS, Codec>(hs, reinterpret_cast<float*>(ws + W."
              << o.getTri().str() << ") + (slot * H + h) * dgps::tile::feedbackTriFloats(C),\n"
              << "      reinterpret_cast<float*>(ws + W." << o.getVec().str()
              << ") + (slot * H + h) * dgps::tile::feedbackVecFloats(C), "
              << cudaFloatLiteral(o.getEta().convertToDouble()) << ", " << (eps ? "true" : "false") << ", "
              << cudaFloatLiteral(eps ? eps->convertToDouble() : 0.0) << ", at.Lr);\n";
          return success();
        })
        .Case<StoreSumExpOp>([&](StoreSumExpOp o) {
          os_ << "  t::store_sum_exp<C>(reinterpret_cast<float*>(ws + W.pgam) + slot * H + h, " << name(o.getX())
              << ");\n";
          return success();
        })
        .Case<func::ReturnOp>([&](auto) { return success(); })
        .Default([&](Operation* o) { return o->emitOpError("has no precond_summary tile emitter"); });
  }

  std::ostringstream& os_;
  std::map<const void*, std::string> names_;
  std::vector<std::string> rowBody_;
  std::map<const void*, int> column_;  ///< the record column of each [C] vector placed ahead (the scan's a, b, r)
  std::map<const void*, std::string> fixed_;  ///< OSDN's layout: the part of each [C] vector its summary reads
  Value rowsValue_;                            ///< the one [C, K] row tile
  bool hypergrad_ = false;                     ///< the function holds tile.hypergrad_chunk_summary
  int nextColumn_ = 0;
  bool rowsUsed_ = false, pendingLoads_ = false;
};

/// `f`: the function's tile.launch_features, which fix the workspace layout (a clamped hypergrad_ogd scan's has
/// no chunk summaries).
/// `mapped`: the kernel reads tensor maps of ForwardArgs, which must then stay in parameter space.
void prologue(std::ostringstream& os, func::FuncOp fn, const std::string& symbol, StringRef what,
              const launch::FeatureSet& f, bool mapped = false) {
  os << "extern \"C\" __global__ void " << symbol << "(" << (mapped ? "DGPS_GRID_CONST " : "")
     << "dgps::ForwardArgs a) {\n";
  os << "  // Generated from tile IR (" << fn.getSymName().str() << ", " << what.str() << ").\n";
  os << "  namespace t = dgps::tile;\n  namespace dev = dgps::dev;\n";
  os << "  constexpr int C = dgps::cfg::C, K = dgps::cfg::K;\n";
  (void)f;  // the workspace layout is the package's (tile.workspace), printed once in kernels.cu
  os << workspaceOfCuda();
  os << "  unsigned char* const ws = static_cast<unsigned char*>(a.workspace);\n";
  os << "  const int64_t H = a.heads_qk;\n";
}

FailureOr<std::string> emitSummary(func::FuncOp fn, const std::string& symbol, const launch::FeatureSet& f) {
  std::ostringstream os;
  const bool hypergrad = !fn.getBody().front().getOps<HypergradChunkSummaryOp>().empty();
  prologue(os, fn, symbol, "grid chunk_key_head: one CTA per chunk slot and key head", f, true);
  os << "  using Codec = dgps::dev::Act<dgps::cfg::kInputF16>;\n";
  os << "  constexpr int KP = dgps::cfg::KP, PQ = dgps::launch::bf16Pitch(KP);\n";
  os << "  const int64_t slot = dev::udiv(dev::block_x(), a.div_heads_qk), h = dev::block_x() - slot * H;\n";
  os << "  int64_t n = 0, c = 0;\n  dev::Seq sq;\n";
  os << "  if (!dev::slot_to_chunk(a, slot, n, c, sq)) return;\n";
  os << "  t::ChunkAt at;\n  at.t0 = sq.bos + c * C;\n  at.Lr = (int)dev::lmin(C, sq.len - c * C);\n";
  os << "  unsigned char* const sm = dev::dyn_smem();\n";
  if (!hypergrad) {
    // the launch contract's layout (printed above): the key tile, the [C][4] per-row record, the copy's mbarrier
    os << "  constexpr dgps_package::PrecondSummarySmem L = dgps_package::precond_summary_smem();\n";
    os << "  float* const sVec = dev::smem_at<float>(sm, L.rec);\n";
    os << "  const t::RowCopy rc = t::row_copy<C>(a, at, dev::smem_at<uint64_t>(sm, L.bar), 32);\n";
  } else {
    os << "  const t::FeedbackSummaryTiles<C, K> hs(sm);  // tile/feedback_scan_layout.h feedbackSummarySmem\n";
    os << "  const t::RowCopy rc = t::row_copy<C>(a, at, hs.bar, 32);\n";
  }
  SummaryEmitter e(os);
  if (failed(e.block(fn.getBody().front()))) return failure();
  os << "}\n";
  return os.str();
}

/// OSDN's pass: one tile::feedback_chunk_pass per (sequence, key head), its operands at the sequence's first
/// chunk slot.
FailureOr<std::string> emitHypergradScan(func::FuncOp fn, HypergradChunkPassOp p, const std::string& symbol,
                                         const launch::FeatureSet& f) {
  std::ostringstream os;
  prologue(os, fn, symbol, "grid sequence_key_head: one CTA per sequence and key head", f);
  os << "  using Codec = dgps::dev::Act<dgps::cfg::kInputF16>;\n";
  os << "  constexpr int KP = dgps::cfg::KP;\n";
  os << "  const int64_t n = dev::block_x() / H, h = dev::block_x() - n * H;\n";
  os << "  const dev::Seq sq = dev::seq_of(a, n);\n";
  os << "  const int64_t s0 = dev::first_slot(a, n, sq.bos), ph = (n * H + h) * K;\n";
  os << "  t::FeedbackPassIo io;\n";
  os << "  io.key = static_cast<const uint16_t*>(a." << p.getKey().str() << ") + (sq.bos * H + h) * K;\n";
  os << "  io.key_stride = H * K;\n";
  os << "  io.tri = reinterpret_cast<const float*>(ws + W." << p.getTri().str()
     << ") + (s0 * H + h) * dgps::tile::feedbackTriFloats(C);\n";
  os << "  io.vec = reinterpret_cast<const float*>(ws + W." << p.getVec().str()
     << ") + (s0 * H + h) * dgps::tile::feedbackVecFloats(C);\n";
  os << "  io.starts = reinterpret_cast<float*>(ws + W." << p.getStarts().str() << ") + (s0 * H + h) * K;\n";
  os << "  io.coef = reinterpret_cast<float*>(ws + W." << p.getCoef().str() << ") + (s0 * H + h) * C;\n";
  os << "  io.slot_stride = H;\n";
  os << "  t::feedback_chunk_pass<C, K, KP, Codec>(dev::dyn_smem(), io, sq.len,\n";
  os << "      a." << p.getStart().str() << " != nullptr ? a." << p.getStart().str() << " + ph : nullptr, "
     << cudaFloatLiteral(p.getAbsent().convertToDouble()) << ",\n";
  if (p.getFinal())
    os << "      a." << p.getFinal()->str() << " != nullptr ? a." << p.getFinal()->str() << " + ph : nullptr);\n";
  else
    os << "      nullptr);\n";
  os << "}\n";
  return os.str();
}

/// OSDN's clamped d-scan: one tile::feedback_token_scan per warp, four (sequence, key head) pairs per CTA (the
/// launch contract's clamped precond_scan geometry, LaunchContract.h forwardGeometry), each warp on its own 32 shared key rows.
FailureOr<std::string> emitTokenScan(func::FuncOp fn, HypergradTokenScanOp o, const std::string& symbol,
                                     const launch::FeatureSet& f) {
  std::ostringstream os;
  prologue(os, fn, symbol, "grid sequence_key_head_warp: one warp per sequence and key head, 4 per CTA", f);
  os << "  using Codec = dgps::dev::Act<dgps::cfg::kInputF16>;\n";
  os << "  constexpr int KP = dgps::cfg::KP, PQ = dgps::launch::bf16Pitch(KP);\n";
  os << "  const int64_t pair = dev::block_x() * 4 + dev::warp();\n";
  os << "  if (pair >= a.num_seqs * H) return;  // whole warp leaves together; no CTA barriers below\n";
  os << "  const int64_t n = pair / H, h = pair - n * H;\n";
  os << "  const dev::Seq sq = dev::seq_of(a, n);\n";
  os << "  const int64_t s0 = dev::first_slot(a, n, sq.bos), ph = (n * H + h) * K;\n";
  os << "  t::FeedbackTokenIo io;\n";
  os << "  io.key = static_cast<const uint16_t*>(a." << o.getKey().str() << ") + (sq.bos * H + h) * K;\n";
  os << "  io.key_stride = H * K;\n";
  if (o.getGain()) {  // β is a value-head tensor: the key head's first value head
    os << "  io.beta = a." << o.getGain()->str() << " + sq.bos * a.heads_v + h * (a.heads_v / H);\n";
    os << "  io.beta_stride = a.heads_v;\n";
  }
  if (o.getRetention()) {
    os << "  io.retention = a." << o.getRetention()->str() << " + sq.bos * H + h;\n";
    os << "  io.retention_stride = H;\n";
  }
  os << "  io.starts = reinterpret_cast<float*>(ws + W." << o.getStarts().str() << ") + (s0 * H + h) * K;\n";
  os << "  io.coef = reinterpret_cast<float*>(ws + W." << o.getCoef().str() << ") + (s0 * H + h) * C;\n";
  os << "  io.slot_stride = H;\n";
  os << "  t::FeedbackStep st;\n";
  os << "  st.eta = " << cudaFloatLiteral(o.getEta().convertToDouble()) << ";\n";
  if (o.getL2Eps())
    os << "  st.l2norm = true;\n  st.eps = " << cudaFloatLiteral(o.getL2Eps()->convertToDouble()) << ";\n";
  if (o.getClampMin())
    os << "  st.has_min = true;\n  st.lo = " << cudaFloatLiteral(o.getClampMin()->convertToDouble()) << ";\n";
  if (o.getClampMax())
    os << "  st.has_max = true;\n  st.hi = " << cudaFloatLiteral(o.getClampMax()->convertToDouble()) << ";\n";
  // the launch contract's layout (printed above): 32 key rows per warp in the "rows" region
  os << "  constexpr dgps_package::PrecondScanSmem L = dgps_package::precond_scan_smem();\n";
  os << "  t::feedback_token_scan<C, K, KP, Codec>(dev::smem_at<uint16_t>(dev::dyn_smem(), L.rows + (int64_t)dev::warp() "
        "* 32 * PQ * 2),\n";
  os << "      io, st, sq.len, a." << o.getStart().str() << " != nullptr ? a." << o.getStart().str()
     << " + ph : nullptr, " << cudaFloatLiteral(o.getAbsent().convertToDouble()) << ",\n";
  if (o.getFinal())
    os << "      a." << o.getFinal()->str() << " != nullptr ? a." << o.getFinal()->str() << " + ph : nullptr);\n";
  else
    os << "      nullptr);\n";
  os << "}\n";
  return os.str();
}

FailureOr<std::string> emitScan(func::FuncOp fn, const std::string& symbol, const launch::FeatureSet& f) {
  SmallVector<HypergradChunkPassOp> passes;
  SmallVector<ChunkAffineScanOp> scans;
  for (Operation& op : fn.getBody().front()) {
    if (auto s = dyn_cast<ChunkAffineScanOp>(op)) {
      scans.push_back(s);
      continue;
    }
    if (auto p = dyn_cast<HypergradChunkPassOp>(op)) {
      passes.push_back(p);
      continue;
    }
    if (!isa<func::ReturnOp>(op)) return op.emitOpError("has no precond_scan tile emitter");
  }
  if (scans.size() + passes.size() != 1)
    return fn.emitOpError(
        "a precond_scan tile function holds exactly one tile.chunk_affine_scan or tile.hypergrad_chunk_pass");
  if (!passes.empty()) return emitHypergradScan(fn, passes.front(), symbol, f);
  ChunkAffineScanOp s = scans.front();
  if (s.getAbsent().convertToDouble() != 0.0)
    return s.emitOpError("the device reads an absent start state as 0 (absent must be 0)");
  std::ostringstream os;
  prologue(os, fn, symbol, "grid sequence_key_head: one CTA per sequence and key head", f);
  os << "  const int64_t n = dev::block_x() / H, h = dev::block_x() - n * H;\n";
  os << "  const dev::Seq sq = dev::seq_of(a, n);\n";
  os << "  const int64_t s0 = dev::first_slot(a, n, sq.bos), nch = (sq.len + C - 1) / C;\n";
  os << "  const int64_t ph = (n * H + h) * K;\n";
  os << "  t::chunk_affine_scan<K>(reinterpret_cast<float*>(ws + W." << s.getStarts().str() << ") + (s0 * H + h) * K,\n";
  os << "                          reinterpret_cast<const float*>(ws + W." << s.getDecay().str() << ") + s0 * H + h,\n";
  os << "                          reinterpret_cast<const float*>(ws + W." << s.getStep().str()
     << ") + (s0 * H + h) * K, H * K, H, nch,\n";
  os << "                          a." << s.getStart().str() << " != nullptr ? a." << s.getStart().str()
     << " + ph : nullptr,\n";
  if (s.getFinal())
    os << "                          a." << s.getFinal()->str() << " != nullptr ? a." << s.getFinal()->str()
       << " + ph : nullptr);\n";
  else
    os << "                          nullptr);\n";
  os << "}\n";
  return os.str();
}

}  // namespace

FailureOr<std::string> emitTilePrecondKernel(func::FuncOp fn, const std::string& symbol) {
  auto role = fn->getAttrOfType<StringAttr>(kRoleAttr);
  auto grid = fn->getAttrOfType<StringAttr>(kGridAttr);
  const bool summary = role && role.getValue() == "precond_summary";
  const bool scan = role && role.getValue() == "precond_scan";
  // the clamped d-scan (one tile.hypergrad_token_scan) runs a warp per (sequence, key head)
  SmallVector<HypergradTokenScanOp> tokenScans;
  if (scan) llvm::append_range(tokenScans, fn.getBody().front().getOps<HypergradTokenScanOp>());
  const Grid want = summary ? Grid::chunk_key_head
                    : tokenScans.empty() ? Grid::sequence_key_head
                                         : Grid::sequence_key_head_warp;
  if ((!summary && !scan) || !grid || grid.getValue() != stringifyGrid(want))
    return fn.emitOpError() << "is not a precond_summary / precond_scan tile function (needs " << kRoleAttr
                            << " = \"precond_summary\" with " << kGridAttr << " = \"chunk_key_head\", or "
                            << "\"precond_scan\" with \"sequence_key_head\" (\"sequence_key_head_warp\" for a "
                            << "tile.hypergrad_token_scan), and " << kLaunchFeaturesAttr << ")";
  FailureOr<launch::FeatureSet> feat = launchFeaturesOf(fn);
  if (failed(feat)) return failure();
  // The workspace layout has the chunked d-scan's regions exactly when the features say it is unclamped
  // (DeviceFeatures.h hypergradChunked), so the scan's form and the clamp must agree.
  if (feat->source == 1 && (feat->clamp == 1) != !tokenScans.empty()) {
    const char* form = feat->clamp == 1 ? "clamped (a token scan, no chunk summaries)" : "unclamped (chunked)";
    return fn.emitOpError() << "has " << (tokenScans.empty() ? "no" : "a") << " tile.hypergrad_token_scan but "
                            << kLaunchFeaturesAttr << " says the hypergrad_ogd scan is " << form;
  }
  if (!tokenScans.empty()) {
    for (Operation& op : fn.getBody().front())
      if (!isa<HypergradTokenScanOp, func::ReturnOp>(op)) return op.emitOpError("has no precond_scan tile emitter");
    if (tokenScans.size() != 1)
      return fn.emitOpError("a token-scan precond_scan holds exactly one tile.hypergrad_token_scan");
    return emitTokenScan(fn, tokenScans.front(), symbol, *feat);
  }
  return summary ? emitSummary(fn, symbol, *feat) : emitScan(fn, symbol, *feat);
}

}  // namespace dgps
