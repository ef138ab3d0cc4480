// The chunk-role tile emitter (TileEmitter.h emitTileChunkKernel): a chunk_local tile function -> CUDA calling
// runtime/device/dgps/tile. Shared tiles are placed in the role's shared-memory layout (LaunchContract.h
// chunkLocalLayout, printed as dgps_package::chunk_local_smem()): 16-bit [C, K] rows in the q, k slots in order of loading, the f32 [C, K] gate in G, [C, C]
// blocks in A, [C] vectors in the columns of the token area (TileVectorColumns.h: vectors read together at one
// row share an 8-byte pair of columns). In-place ops reuse their operand's name.
//
// Two fusions, decided here so that the tile ops stay one idea each (docs/architecture.md, "Tile IR"):
//  - Row-local ops (each writes row i of a [C] vector from row i of its operands: per-row scalar loads, fills,
//    row_exp, row_mul, the token record) that follow each other are printed as ONE loop over the CTA's rows.
//    The per-row global loads of a chunk are then issued together and their latencies overlap, and a value
//    passed between them stays in the same thread. Ops that touch no [C] vector (the asynchronous row-tile
//    loads, uniform scalars) may sit between them; anything else, or a token record whose gate the open loop
//    writes (it reads row C − 1), closes the loop.
//  - Consecutive store_gated_rows over the same gate become one pass (gated_rows.cuh): the gate is read and
//    each power of two taken once per element for all outputs.
//  - Consecutive encode_bf16 (fp16 inputs) share one barrier, printed only when other threads read the rows
//    since the last barrier.
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dgps/Dialect/Tile/IR/LaunchFeatures.h"
#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/Dialect/Tile/IR/Workspace.h"
#include "dgps/Emit/Package.h"
#include "dgps/Emit/TileEmitter.h"
#include "llvm/ADT/TypeSwitch.h"
#include "ScanReadoutFunctor.h"
#include "TileVectorColumns.h"

using namespace mlir;
using namespace dgps::tile;

namespace dgps {
namespace {

/// A ForwardArgs tensor a chunk_local load may read: 16-bit input rows or f32.
struct Field {
  bool act;
};
const std::map<std::string, Field>& forwardFields() {
  static const std::map<std::string, Field> f = {{"q", {true}},    {"k", {true}},         {"g", {false}},
                                                 {"beta", {false}}, {"precond_g", {false}}, {"precond_beta", {false}}};
  return f;
}

bool isVec(Type t) { return cast<TileType>(t).getRank() == 1; }
bool is16(Type t) { return !cast<TileType>(t).getElementType().isF32(); }

class ChunkEmitter {
 public:
  /// `features`: the function's tile.launch_features, which decide which slots the layout (LaunchContract.h chunkLocalLayout) has.
  ChunkEmitter(std::ostringstream& os, const launch::FeatureSet& features)
      : os_(os), diagonalGate_(features.decay == 2), precond_(features.precond == 1), keySide_(features.side == 0) {}

  /// Whether `body` loads q or k rows that a tensor copy can carry (16-bit, key head, no row map): then the
  /// kernel declares the RowCopy `rc` (tile/chunk_rows.cuh) before the body.
  static bool copiesRows(Block& body) {
    for (Operation& op : body)
      if (auto r = dyn_cast<ChunkRowsOp>(op))
        if ((r.getName() == "q" || r.getName() == "k") && r.getHead() == HeadOf::key_head && !r.getRowSteps() &&
            !isVec(r.getType()) && is16(cast<TileType>(r.getType())))
          return true;
    return false;
  }

  LogicalResult block(Block& body) {
    rowCopyOpen_ = copiesRows(body);
    if (rowCopyOpen_) os_ << "  const t::RowCopy rc = t::row_copy<C>(a, at, dev::smem_at<uint64_t>(sm, L.bar));\n";
    columns_ = planVectorColumns(body);
    for (Operation& op : body)
      if (failed(emit(op))) return failure();
    flushEncodes();
    flushGated();
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
  void alias(Value result, Value operand) { names_[result.getAsOpaquePointer()] = name(operand); }

  /// Storage for a new shared tile; fails when the role's layout has no room left.
  LogicalResult place(Operation* op, Value v) {
    auto t = cast<TileType>(v.getType());
    const std::string n = name(v);
    if (t.getRank() == 1) {
      if (t.getDims()[0] == Extent::K) {
        if (!precond_) return op->emitOpError("needs a [K] vector, which the layout has only with a preconditioner");
        if (pstateUsed_) return op->emitOpError("needs a second [K] vector (the layout has one, pstate)");
        pstateUsed_ = true;
        os_ << "  float* const " << n << " = dev::smem_at<float>(sm, L.pstate);\n";
        return success();
      }
      // the span scratch of the gated products follows the columns at C·10
      auto planned = columns_.find(v.getAsOpaquePointer());
      if (planned == columns_.end())
        return op->emitOpError() << "needs more than " << kTokenVectorColumns
                                 << " [C] vectors (the token area's columns)";
      const int col = planned->second;
      if (col < 8)
        os_ << "  const t::RowVec " << n << "{sVec + " << col << ", 8};\n";
      else
        os_ << "  const t::RowVec " << n << "{sVec + C * 8 + " << col - 8 << ", 2};\n";
      return success();
    }
    if (t.getDims()[1] == Extent::C) {
      if (blockUsed_) return op->emitOpError("needs a second [C, C] block (the layout has one, A)");
      blockUsed_ = true;
      os_ << "  float* const " << n << " = dev::smem_at<float>(sm, L.A);\n";
      return success();
    }
    if (!is16(t)) {
      if (!diagonalGate_)
        return op->emitOpError("needs an f32 [C, K] tile, which the layout has only for a per-channel gate");
      if (gateUsed_) return op->emitOpError("needs a second f32 [C, K] tile (the layout has one, G)");
      gateUsed_ = true;
      os_ << "  float* const " << n << " = dev::smem_at<float>(sm, L.G);\n";
      return success();
    }
    static const char* const slots[] = {"L.q", "L.k", "L.kw"};
    if (rowsUsed_ == 3) return op->emitOpError("needs a fourth 16-bit [C, K] tile (the layout has q, k and kw)");
    if (rowsUsed_ == 2 && !(precond_ && keySide_))
      return op->emitOpError("needs a third 16-bit [C, K] tile, which the layout has only for a key-side preconditioner");
    os_ << "  uint16_t* const " << n << " = dev::smem_at<uint16_t>(sm, " << slots[rowsUsed_++] << ");\n";
    return success();
  }

  /// The CTA's slice of a workspace region (tile.workspace: W is the kernels.cu layout printed from it).
  static std::string region(StringRef r) {
    if (r == "tok") return "reinterpret_cast<float*>(ws + W.tok) + sh * (C + 1) * 8";
    if (r == "pdec") return "reinterpret_cast<float*>(ws + W.pdec) + sh * K";
    // the bf16 operand rows (opq, opk, opw, pwk, pwq) at pitch KP (launch_rules.h workspaceRowPitch)
    const std::string per = (r == "aqk" || r == "tb") ? "C * C" : "C * KP";
    return "reinterpret_cast<uint16_t*>(ws + W." + r.str() + ") + sh * " + per;
  }

  LogicalResult chunkRows(ChunkRowsOp op) {
    auto it = forwardFields().find(op.getName().str());
    TileType t = cast<TileType>(op.getType());
    if (it == forwardFields().end())
      return op.emitOpError() << "'" << op.getName() << "' is not a row tensor of the forward arguments (abi.h ForwardArgs)";
    if (it->second.act != is16(t))
      return op.emitOpError() << "'" << op.getName() << "' holds " << (it->second.act ? "the 16-bit input dtype" : "f32");
    if (failed(place(op, op.getResult()))) return failure();
    const bool key = op.getHead() == HeadOf::key_head;
    const std::string heads = key ? "H" : "HV", head = key ? "h" : "hv", n = name(op.getResult());
    if (op.getRowSteps()) return chunkRowsMapped(op, n, heads, head);
    if (isVec(t)) {
      row(op.getResult(), "t::load_row_scalars(" + n + ", a." + op.getName().str() + ", at, " + heads + ", " + head +
                              ", i);");
      return success();
    }
    const bool copied = rowCopyOpen_ && key && (op.getName() == "q" || op.getName() == "k");
    if (is16(t) && copied)  // by a tensor copy where the runtime encoded the map (tile/chunk_rows.cuh RowCopy)
      os_ << "  t::load_rows16<C, KP>(rc, a." << op.getName().str() << "_rows, " << n << ", PQ, a."
          << op.getName().str() << ", at, " << heads << ", " << head << ", K);\n";
    else if (is16(t))
      os_ << "  t::load_rows16<C, KP>(" << n << ", PQ, a." << op.getName().str() << ", at, " << heads << ", " << head
          << ", K);\n";
    else if (rowCopyOpen_ && !key && op.getName() == "g")  // the gates' map (chunk_rows.cuh load_rows32 with rc)
      os_ << "  t::load_rows32<C, KP>(rc, a, " << n << ", PG, a.g, at, " << heads << ", " << head << ", K);\n";
    else
      os_ << "  t::load_rows32<C, KP>(" << n << ", PG, a." << op.getName().str() << ", at, " << heads << ", " << head
          << ", K);\n";
    pendingLoads_ = true;
    return success();
  }

  /// A per-token tensor on the step axis (tile.chunk_rows with a row map, row_map.cuh): token row r / n on
  /// the rows r of the map's phase, 0 elsewhere.
  LogicalResult chunkRowsMapped(ChunkRowsOp op, const std::string& n, const std::string& heads,
                                const std::string& head) {
    TileType t = cast<TileType>(op.getType());
    const std::string map = "t::RowMap{" + std::to_string(*op.getRowSteps()) + ", " +
                            std::to_string(*op.getRowPhase()) + "}";
    if (isVec(t)) {
      row(op.getResult(), "t::load_row_scalars_mapped(" + n + ", a." + op.getName().str() + ", at, " + heads + ", " +
                              head + ", " + map + ", 0.f, i);");
      return success();
    }
    if (!is16(t)) return op.emitOpError("has a row map, which the emitter prints for 16-bit rows and [C] vectors");
    os_ << "  t::load_rows16_mapped<C, KP>(" << n << ", PQ, a." << op.getName().str() << ", at, " << heads << ", "
        << head << ", K, " << map << ");\n";
    pendingLoads_ = true;
    return success();
  }

  LogicalResult rowNorm(RowRsqrtNormOp op) {
    for (Value r : op.getResults())
      if (failed(place(op, r))) return failure();
    const bool two = op.getRows().size() == 2;
    os_ << "  t::row_rsqrt_norm<C, KP, Codec>(" << name(op.getResult(0)) << ", " << name(op.getRows()[0]) << ", "
        << (two ? name(op.getResult(1)) : "t::RowVec{nullptr, 0}") << ", "
        << (two ? name(op.getRows()[1]) : "nullptr") << ", PQ, " << cudaFloatLiteral(op.getEps().convertToDouble())
        << ", at.Lr);\n";
    return success();
  }

  LogicalResult cumsum(CumsumOp op) {
    alias(op.getResult(), op.getX());
    const std::string s = cudaFloatLiteral(op.getScale().convertToDouble());
    if (isVec(op.getType()))
      os_ << "  t::cumsum_rows<C>(" << name(op.getX()) << ", " << s << ");\n";
    else
      os_ << "  t::cumsum_columns<C, KP>(" << name(op.getX()) << ", PG, " << s << ");\n";
    return success();
  }

  LogicalResult tokenRecord(StoreTokenRecordOp op) {
    if (op.getFields().size() != 0 && op.getFields().size() != 2)
      return op.emitOpError("has no emitter for other than 0 or 2 fields");
    const std::string out = region(op.getInto()), gate = op.getGate() ? "&" + name(op.getGate()) : "nullptr";
    const bool fields = op.getFields().size() == 2;
    row(Value(), "t::store_token_record<C>(" + out + ", " + name(op.getA()) + ", " + name(op.getB()) + ", " +
                     name(op.getC()) + ", " + gate + ", " + name(op.getS()) + ", " +
                     (fields ? "&" + name(op.getFields()[0]) : "nullptr") + ", " +
                     (fields ? "&" + name(op.getFields()[1]) : "nullptr") + ", i);");
    rowAfter_.push_back("t::store_token_record_last<C>(" + out + ", " + gate + ");");
    return success();
  }

  /// Adds one row-local statement (of row i) to the open row loop; `def` is the [C] vector it writes, if any.
  void row(Value def, const std::string& stmt) {
    rowBody_.push_back(stmt);
    if (def) rowDefined_.insert(def.getAsOpaquePointer());
  }

  /// Prints the open row loop, if any.
  void flushRows() {
    if (rowBody_.empty()) return;
    os_ << "  for (int i = dev::tid(); i < C; i += dev::nthreads()) {\n";
    for (const std::string& b : rowBody_) os_ << "    " << b << "\n";
    os_ << "  }\n";
    for (const std::string& a : rowAfter_) os_ << "  " << a << "\n";
    rowBody_.clear();
    rowAfter_.clear();
    rowDefined_.clear();
  }

  /// The codec of 16-bit rows `x`: bf16 once a channel scan wrote them (a new tile), else the input dtype's.
  static const char* codecOf(Value x) { return x.getDefiningOp<ChannelScanOp>() ? "dev::Act<false>" : "Codec"; }

  /// Adds one output to the open gated-rows pass (a new pass when the gate or the rows' codec differs: a stored
  /// write key, bf16, beside the input-dtype q and k).
  void gatedRows(StoreGatedRowsOp op) {
    if (!gated_.empty() && (gatedGate_ != op.getGate() || gatedCodec_ != codecOf(op.getX()))) flushGated();
    gatedGate_ = op.getGate();
    gatedCodec_ = codecOf(op.getX());
    gated_.push_back({region(op.getInto()), name(op.getX()), op.getReverse()});
  }

  /// Prints the open gated-rows pass, if any.
  void flushGated() {
    if (gated_.empty()) return;
    std::string flags, ys, xs;
    for (const GatedOut& g : gated_) {
      flags += g.reverse ? ", true" : ", false";
      ys += (ys.empty() ? "" : ", ") + g.y;
      xs += (xs.empty() ? "" : ", ") + g.x;
    }
    const std::string n = std::to_string(gated_.size());
    os_ << "  {\n    uint16_t* const gy[" << n << "] = {" << ys << "};\n    const uint16_t* const gx[" << n
        << "] = {" << xs << "};\n    t::store_gated_rows<C, K, " << gatedCodec_ << flags << ">(gy, gx, PQ, "
        << name(gatedGate_)
        << ", PG);\n  }\n";
    gated_.clear();
  }

  /// Row-local ops: printed into the open row loop.
  static bool isRowLocal(Operation& op) {
    if (auto r = dyn_cast<ChunkRowsOp>(op)) return isVec(r.getType());
    if (auto w = dyn_cast<WorkspaceRowsOp>(op)) return w.getRegion() != "pst";
    return isa<ChunkFillOp, RowExpOp, RowMulOp, StoreTokenRecordOp>(op);
  }
  /// Ops that touch no [C] vector: the open row loop may be printed after them.
  static bool touchesNoVector(Operation& op) {
    if (auto r = dyn_cast<ChunkRowsOp>(op)) return !isVec(r.getType());
    if (auto w = dyn_cast<WorkspaceRowsOp>(op)) return w.getRegion() == "pst";
    return isa<LoadScalarOp>(op);
  }

  LogicalResult workspaceRows(WorkspaceRowsOp op) {
    if (failed(place(op, op.getResult()))) return failure();
    const std::string n = name(op.getResult());
    if (op.getRegion() == "pst") {
      os_ << "  t::load_vec32<KP>(" << n << ", reinterpret_cast<const float*>(ws + W.pst) + (slot * H + h) * K, K);\n";
      pendingLoads_ = true;
    } else {
      row(op.getResult(), "t::load_row_slice(" + n +
                              ", reinterpret_cast<const float*>(ws + W.pcoef) + (slot * H + h) * C, at, i);");
    }
    return success();
  }

  LogicalResult channelScan(ChannelScanOp op) {
    const bool inPlace = op.getTarget() != op.getX();
    if (inPlace)
      alias(op.getResult(), op.getTarget());
    else if (failed(place(op, op.getResult())))
      return failure();
    ScanReadoutSpec r;
    r.kind = op.getReadout();
    if (op.getBase()) r.base = op.getBase()->convertToDouble();
    if (op.getEps()) r.eps = op.getEps()->convertToDouble();
    if (op.getCenter()) r.center = name(op.getCenter());
    if (op.getMin()) r.min = op.getMin()->convertToDouble();
    if (op.getMax()) r.max = op.getMax()->convertToDouble();
    os_ << "  {\n";
    printScanReadout(os_, "    ", r, "ro");
    os_ << "    t::channel_scan_apply<C, K, KP, Codec>(" << (inPlace ? "nullptr" : name(op.getResult())) << ", "
        << name(op.getStart()) << ", " << name(op.getA()) << ", " << name(op.getB()) << ", " << name(op.getX())
        << ", " << name(op.getTarget()) << ", PQ, at.Lr, ro);\n";
    os_ << "  }\n";
    return success();
  }

  LogicalResult lowerProducts(LowerProductsOp op) {
    const size_t np = op.getRows().size();
    if (op.getNumResults() == 1 && failed(place(op, op.getResult(0)))) return failure();
    const std::string id = std::to_string(products_++);
    auto list = [&](auto values, auto fn) {
      std::string s;
      for (Value v : values) s += (s.empty() ? "" : ", ") + fn(v);
      return s;
    };
    Value g = op.getGate();
    const bool channelGate = g && !isVec(g.getType());
    // a per-channel gate scales the row tiles in place (the verifier checks they are dead afterwards)
    os_ << "  {\n    " << (channelGate ? "" : "const ") << "uint16_t* const rows" << id << "[" << np << "] = {"
        << list(op.getRows(), [&](Value v) { return name(v); }) << "};\n";
    os_ << "    const t::RowFactor fa" << id << "[" << np << "] = {" << list(op.getRowA(), [&](Value v) {
      return v.getType().isF32() ? "t::RowFactor{nullptr, 0, " + name(v) + "}"
                                 : "t::RowFactor{" + name(v) + ".p, " + name(v) + ".stride, 0.f}";
    }) << "};\n";
    os_ << "    const t::RowVec fb" << id << "[" << np << "] = {" << list(op.getRowB(), [&](Value v) { return name(v); })
        << "};\n";
    const std::string out = op.getNumResults() ? name(op.getResult(0)) : "nullptr";
    const std::string common = "rows" + id + ", fa" + id + ", fb" + id + ", " + name(op.getCols()) + ", " +
                               name(op.getCol()) + ", ";
    if (channelGate) {
      // Columns that are also a row operand (the key of a delta rule without a write key) are gated into the
      // layout's column copy, else in place; the layout reserves the copy from the same features.
      const bool colsAreRows = llvm::is_contained(op.getRows(), op.getCols());
      if (colsAreRows)
        os_ << "    static_assert(L.kcol >= 0, \"the chunk_local layout has no gated column copy for a key that is also a "
               "row operand\");\n";
      // the layout says which overlays hold (tile/lower_product_gated.cuh): KKT over the operand tiles, the
      // column copy over the gates
      os_ << "    t::lower_products_channel_gated<C, K, KP, PQ, NW, " << np << ", L.A == L.q, L.kcol == L.G>("
          << common << name(g) << ", PG, "
          << (colsAreRows ? "dev::smem_at<uint16_t>(sm, L.kcol)" : "nullptr")
          << ", dev::smem_at<uint16_t>(sm, L.mul), sVec + C * 10, " << out << ", PA, " << region(op.getInto())
          << ");\n";
    } else {
      os_ << "    t::lower_products<C, KP, PQ, NW, " << np << ", " << (g ? "true" : "false") << ">(" << common
          << (g ? name(g) : "t::RowVec{nullptr, 0}") << ", " << out << ", PA, " << region(op.getInto()) << ");\n";
    }
    os_ << "  }\n";
    return success();
  }

  /// Prints the open run of bf16 re-encodings (fp16 inputs only) behind one barrier, if any. encode_bf16 gives
  /// channel d to the thread that channel_scan gives it, so only other readers of the rows since the last
  /// barrier (otherThreadsReadRows_) need the barrier.
  void flushEncodes() {
    if (encodes_.empty()) return;
    os_ << "  if (dgps::cfg::kInputF16) {\n";
    if (otherThreadsReadRows_) os_ << "    dev::sync_threads();  // other threads' readers of the input-dtype rows\n";
    for (const std::string& x : encodes_) os_ << "    t::encode_bf16<C, KP, true>(" << x << ", PQ);\n";
    os_ << "  }\n";
    encodes_.clear();
  }

  /// Whether `op` may leave a 16-bit row tile read (or written) by threads other than the one that
  /// encode_bf16 gives its channel: everything except the ops listed.
  static bool readsRowsAcrossThreads(Operation& op) {
    return !isa<BarrierOp, LoadScalarOp, CumsumOp, ChannelScanOp, StoreTokenRecordOp, StoreLastExp2Op,
                WorkspaceRowsOp, EncodeBf16Op, ChunkFillOp, RowExpOp, RowMulOp, func::ReturnOp>(op) &&
           !(isa<ChunkRowsOp>(op) && isVec(op.getResult(0).getType()));
  }

  LogicalResult emit(Operation& op) {
    if (!isa<EncodeBf16Op>(op)) flushEncodes();
    if (isa<BarrierOp>(op))
      otherThreadsReadRows_ = false;
    else if (readsRowsAcrossThreads(op))
      otherThreadsReadRows_ = true;
    if (!isa<StoreGatedRowsOp>(op)) flushGated();
    if (!isRowLocal(op) && !touchesNoVector(op)) flushRows();
    if (auto r = dyn_cast<StoreTokenRecordOp>(op))
      if (r.getGate() && rowDefined_.count(r.getGate().getAsOpaquePointer())) flushRows();  // it reads row C − 1
    return llvm::TypeSwitch<Operation*, LogicalResult>(&op)
        .Case<ChunkRowsOp>([&](auto o) { return chunkRows(o); })
        .Case<ChunkFillOp>([&](ChunkFillOp o) {
          if (failed(place(o, o.getResult()))) return failure();
          row(o.getResult(), "t::fill_rows(" + name(o.getResult()) + ", " +
                                 cudaFloatLiteral(o.getValue().convertToDouble()) + ", " +
                                 cudaFloatLiteral(o.getPad().convertToDouble()) + ", at, i);");
          return success();
        })
        .Case<BarrierOp>([&](auto) {
          // the first barrier after cp.async row loads also waits for them
          os_ << (pendingLoads_ ? (rowCopyOpen_ ? "  t::wait_rows(rc);\n" : "  t::wait_rows();\n")
                                : "  dev::sync_threads();\n");
          if (pendingLoads_) rowCopyOpen_ = false;  // rc's one phase is spent: later loads go by cp.async
          pendingLoads_ = false;
          return success();
        })
        .Case<RowRsqrtNormOp>([&](auto o) { return rowNorm(o); })
        .Case<CumsumOp>([&](auto o) { return cumsum(o); })
        .Case<LoadScalarOp>([&](LoadScalarOp o) -> LogicalResult {
          if (o.getIndex() == Index::none && o.getName() == "scale") {
            os_ << "  const float " << name(o) << " = a.scale;\n";
            return success();
          }
          if (o.getIndex() == Index::h && o.getName() == "precond_center") {
            const std::string absent = cudaFloatLiteral(o.getAbsent() ? o.getAbsent()->convertToDouble() : 0.0);
            os_ << "  const float " << name(o) << " = a.precond_center != nullptr ? a.precond_center[h] : " << absent
                << ";\n";
            return success();
          }
          return o.emitOpError("chunk_local reads only the scalars \"scale\" (argument) and \"precond_center\" at h");
        })
        .Case<WorkspaceRowsOp>([&](auto o) { return workspaceRows(o); })
        .Case<RowExpOp>([&](RowExpOp o) {
          if (failed(place(o, o.getResult()))) return failure();
          row(o.getResult(), "t::exp_rows(" + name(o.getResult()) + ", " + name(o.getX()) + ", " +
                                 cudaFloatLiteral(o.getPad().convertToDouble()) + ", at, i);");
          return success();
        })
        .Case<RowMulOp>([&](RowMulOp o) {
          if (failed(place(o, o.getResult()))) return failure();
          row(o.getResult(),
              "t::mul_rows(" + name(o.getResult()) + ", " + name(o.getLhs()) + ", " + name(o.getRhs()) + ", i);");
          return success();
        })
        .Case<ChannelScanOp>([&](auto o) { return channelScan(o); })
        .Case<StoreTokenRecordOp>([&](auto o) { return tokenRecord(o); })
        .Case<StoreGatedRowsOp>([&](StoreGatedRowsOp o) {
          gatedRows(o);
          return success();
        })
        .Case<StoreRowsOp>([&](StoreRowsOp o) {
          os_ << "  t::store_rows16<C, K, NW * 32>(" << region(o.getInto()) << ", " << name(o.getX()) << ", PQ);\n";
          return success();
        })
        .Case<StoreLastExp2Op>([&](StoreLastExp2Op o) {
          os_ << "  t::store_last_exp2<C, K>(" << region(o.getInto()) << ", " << name(o.getGate()) << ", PG);\n";
          return success();
        })
        .Case<EncodeBf16Op>([&](EncodeBf16Op o) {
          alias(o.getResult(), o.getX());
          encodes_.push_back(name(o.getX()));
          return success();
        })
        .Case<LowerProductsOp>([&](auto o) { return lowerProducts(o); })
        .Case<TriInverseOp>([&](TriInverseOp o) {
          alias(o.getResult(), o.getA());
          os_ << "  t::tri_inverse<C>(" << name(o.getA()) << ", PA);\n";
          return success();
        })
        .Case<StoreLowerColScaledOp>([&](StoreLowerColScaledOp o) {
          os_ << "  t::store_lower_col_scaled<C>(" << region(o.getInto()) << ", " << name(o.getT()) << ", PA, "
              << name(o.getS()) << ");\n";
          return success();
        })
        .Case<func::ReturnOp>([&](auto) { return success(); })
        .Default([&](Operation* o) { return o->emitOpError("has no chunk_local tile emitter"); });
  }

  std::ostringstream& os_;
  const bool diagonalGate_, precond_, keySide_;
  std::map<const void*, std::string> names_;
  /// The open row loop: its statements (of row i), what follows it, and the [C] vectors it writes.
  std::vector<std::string> rowBody_, rowAfter_;
  std::set<const void*> rowDefined_;
  /// The open gated-rows pass: one entry per output, and their common gate.
  struct GatedOut {
    std::string y, x;
    bool reverse;
  };
  std::vector<GatedOut> gated_;
  Value gatedGate_;
  const char* gatedCodec_ = "Codec";
  /// The open run of bf16 re-encodings (tile names), and whether a row tile was read across threads since the
  /// last barrier.
  std::vector<std::string> encodes_;
  bool otherThreadsReadRows_ = false;
  std::map<const void*, int> columns_;  ///< the token-area column of each [C] vector (planVectorColumns)
  int rowsUsed_ = 0, products_ = 0;
  bool blockUsed_ = false, gateUsed_ = false, pendingLoads_ = false, pstateUsed_ = false;
  bool rowCopyOpen_ = false;  ///< q/k row loads go through `rc` until the first wait for loads
};

}  // namespace

FailureOr<std::string> emitTileChunkKernel(func::FuncOp fn, const std::string& symbol) {
  auto role = fn->getAttrOfType<StringAttr>(kRoleAttr);
  auto grid = fn->getAttrOfType<StringAttr>(kGridAttr);
  if (!role || role.getValue() != "chunk_local" || !grid || grid.getValue() != stringifyGrid(Grid::chunk))
    return fn.emitOpError() << "is not a chunk_local tile function (needs " << kRoleAttr << " = \"chunk_local\", "
                            << kGridAttr << " = \"chunk\" and " << kLaunchFeaturesAttr << ")";
  FailureOr<launch::FeatureSet> f = launchFeaturesOf(fn);
  if (failed(f)) return failure();
  std::ostringstream os;
  os << "extern \"C\" __global__ void " << symbol << "(DGPS_GRID_CONST dgps::ForwardArgs a) {\n";
  os << "  // Generated from tile IR (" << fn.getSymName().str() << ", grid chunk: one CTA per chunk slot and value head).\n";
  os << "  namespace t = dgps::tile;\n  namespace dev = dgps::dev;\n";
  os << "  using Codec = dgps::dev::Act<dgps::cfg::kInputF16>;\n";
  os << "  constexpr int C = dgps::cfg::C, K = dgps::cfg::K, KP = dgps::cfg::KP, NW = dgps::cfg::WARPS;\n";
  os << "  constexpr int PQ = dgps::launch::bf16Pitch(KP), PA = dgps::launch::f32Pitch(C), PG = KP;\n";
  os << "  (void)PA;\n  (void)PG;\n  (void)NW;\n";
  os << "  // The launch contract: the workspace and this role's shared-memory layout (printed above).\n";
  os << "  constexpr dgps_package::ChunkLocalSmem L = dgps_package::chunk_local_smem();\n";
  os << workspaceOfCuda();
  os << "  const int64_t H = a.heads_qk, HV = a.heads_v;\n";
  // the divisions by the host's FastDivs (abi.h set_index_divisors): a short CTA spent a tenth of its time in them
  os << "  const int64_t slot = dev::udiv(dev::block_x(), a.div_heads_v), hv = dev::block_x() - slot * HV, "
        "h = dev::udiv(hv, a.div_gva);\n";
  os << "  (void)h;\n";
  os << "  int64_t n = 0, c = 0;\n  dev::Seq sq;\n";
  os << "  if (!dev::slot_to_chunk(a, slot, n, c, sq)) {\n";
  os << "    dev::zero_output_tail(a, slot, hv);  // varlen padding rows past cu_seqlens[N] read back as zeros\n";
  os << "    return;\n  }\n";
  os << "  t::ChunkAt at;\n  at.t0 = sq.bos + c * C;\n  at.Lr = (int)dev::lmin(C, sq.len - c * C);\n";
  os << "  unsigned char* const sm = dev::dyn_smem();\n";
  os << "  float* const sVec = dev::smem_at<float>(sm, L.tok);\n";
  os << "  unsigned char* const ws = static_cast<unsigned char*>(a.workspace);\n";
  os << "  const int64_t sh = slot * HV + hv;\n";
  ChunkEmitter e(os, *f);
  if (failed(e.block(fn.getBody().front()))) return failure();
  os << "}\n";
  return os.str();
}

}  // namespace dgps
