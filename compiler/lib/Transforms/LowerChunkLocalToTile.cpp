// --dgps-lower-chunk-local-to-tile: the `chunk.kernel "chunk_local"` of each partitioned forward function
// becomes `func.func @<name>_chunk_local` over tiles of one chunk (Passes.td has the before/after). The chunk
// ops are translated one by one (loads, l2norm, gate_cumsum, kkt, qk_attn, solve_tril); the per-token record
// and the per-channel gated operands that state_output reads from the workspace
// (tile.workspace, Dialect/Tile/IR/Workspace.h) are added from the same values; the preconditioner's in-chunk rebuild
// (accum_apply, hypergrad_apply) becomes a tile.channel_scan; a chunk.spread_steps (several steps per token)
// becomes the row map of its load's tile.chunk_rows. A chunk op without a tile lowering is an error
// naming it, and no package is written.
#include <cmath>
#include <map>

#include "llvm/ADT/DenseSet.h"

#include "StateWalkLowering.h"
#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Dialect/Tile/IR/LaunchFeatures.h"
#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/Transforms/PlanCost.h"
#include "dgps/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace dgps {
#define GEN_PASS_DEF_LOWERCHUNKLOCALTOTILE
#include "dgps/Transforms/Passes.h.inc"
}  // namespace dgps

using namespace mlir;
using namespace dgps::tile;
namespace ch = dgps::chunk;

namespace {

/// A chunk value's tile form: rows of one chunk and, for a normalised key or query, its per-row factor.
struct Rows {
  Value tile;    ///< [C, K] (16-bit input rows), [C] / [C, K] f32, or a uniform f32 (precond_center)
  Value factor;  ///< [C] f32 row factor of an l2norm result (the rows themselves stay unnormalised)
};

/// Translates one chunk_local kernel body; one method per group of chunk ops.
class ChunkLocalBuilder {
 public:
  /// `storeKey`: chunk_local stores the preconditioned write key for the walks (DeviceFeatures.h storesKw);
  /// `storeQuery`: the preconditioned query (DeviceFeatures.h needPwq).
  ChunkLocalBuilder(OpBuilder& b, Location loc, bool storeKey, bool storeQuery)
      : b_(b), loc_(loc), storeKey_(storeKey), storeQuery_(storeQuery) {
    MLIRContext* ctx = b.getContext();
    f32_ = b.getF32Type();
    rows16_ = TileType::get(ctx, {Extent::C, Extent::K}, b.getBF16Type(), Space::smem, Layout::row);
    rows32_ = TileType::get(ctx, {Extent::C, Extent::K}, f32_, Space::smem, Layout::row);
    vec_ = TileType::get(ctx, {Extent::C}, f32_, Space::smem, Layout::row);
    vecK_ = TileType::get(ctx, {Extent::K}, f32_, Space::smem, Layout::row);
    block_ = TileType::get(ctx, {Extent::C, Extent::C}, f32_, Space::smem, Layout::row);
  }

  /// `gain`: the forward loads a gain (in any kernel); the per-token record carries it for state_output.
  LogicalResult build(ch::KernelOp kernel, bool gain) {
    Block& body = kernel.getBody().front();
    // every op must be one this lowering understands
    ch::KKTOp kkt;
    ch::QKAttnOp qk;
    ch::SolveTrilOp solve;
    Operation* apply = nullptr;
    for (Operation& op : body) {
      if (isa<ch::LoadOp, ch::L2NormOp, ch::GateCumsumOp, ch::SpreadStepsOp, ch::YieldOp>(op)) continue;
      if (auto k = dyn_cast<ch::KKTOp>(op))
        kkt = k;
      else if (auto q = dyn_cast<ch::QKAttnOp>(op))
        qk = q;
      else if (auto s = dyn_cast<ch::SolveTrilOp>(op))
        solve = s;
      else if (isa<ch::AccumApplyOp, ch::HypergradApplyOp>(op) && !apply)
        apply = &op;
      else
        return op.emitOpError() << "has no tile lowering in chunk_local (--dgps-lower-chunk-local-to-tile covers "
                                   "loads, l2norm, gate_cumsum, one accum_apply or hypergrad_apply, kkt, "
                                   "solve_tril and qk_attn)";
    }
    if (!qk) return kernel.emitOpError("chunk_local without chunk.qk_attn has no tile lowering");
    if (!kkt != !solve) return kernel.emitOpError("chunk_local needs both or neither of chunk.kkt and chunk.solve_tril");
    if (failed(collectRowMaps(body))) return failure();

    // 1. loads (the 16-bit rows and the scan's start vector asynchronously), published by the barrier
    for (Operation& op : body)
      if (auto l = dyn_cast<ch::LoadOp>(op)) {
        if (failed(load(l))) return failure();
        if (l.getName() == "beta") gain_ = map_[l.getResult()].tile;
      }
    if (gain && !gain_)
      gain_ = b_.create<ChunkRowsOp>(loc_, vec_, "beta", HeadOf::value_head, IntegerAttr(), IntegerAttr());
    if (apply) {
      scanStart_ = b_.create<WorkspaceRowsOp>(loc_, vecK_, "pst");
      if (isa<ch::HypergradApplyOp>(apply)) scanB_ = b_.create<WorkspaceRowsOp>(loc_, vec_, "pcoef");
      // the scan's coefficients depend on the loaded rows only: taken beside the loads (the emitter prints
      // them in the same row loop), not after the norms
      scanCoefficients(apply);
    }
    b_.create<BarrierOp>(loc_);
    // 2. l2norm factors of every normalised input, in one op; gate cumsums (log2 units)
    SmallVector<ch::L2NormOp> norms;
    for (Operation& op : body)
      if (auto n = dyn_cast<ch::L2NormOp>(op)) norms.push_back(n);
    spreadRows(body);  // spread_steps of a load: the load carries the row map
    if (failed(l2norms(norms))) return failure();
    spreadRows(body);  // spread_steps of an l2norm
    for (Operation& op : body)
      if (auto c = dyn_cast<ch::GateCumsumOp>(op)) map_[c.getResult()] = {cumsum(map_[c.getGate()].tile), {}};
    b_.create<BarrierOp>(loc_);
    return products(kkt, qk, solve, apply);
  }

 private:
  /// chunk.spread_steps (several steps per token) places a per-token tensor on one step of each token: it
  /// becomes a row map on the tile.chunk_rows of the load it reads (directly or through its l2norm; a zero
  /// row has a finite norm factor and stays zero). The load must feed nothing but that spread.
  LogicalResult collectRowMaps(Block& body) {
    for (Operation& op : body) {
      auto s = dyn_cast<ch::SpreadStepsOp>(op);
      if (!s) continue;
      Value root = s.getInput();
      Operation* via = nullptr;
      if (auto n = root.getDefiningOp<ch::L2NormOp>()) {
        via = n;
        root = n.getInput();
      }
      auto l = root.getDefiningOp<ch::LoadOp>();
      if (!l || l->getBlock() != &body)
        return s.emitOpError("has a tile lowering only for a load of this kernel, or its l2norm");
      for (Operation* user : l->getUsers())
        if (user != s.getOperation() && user != via)
          return user->emitOpError() << "reads the per-token load \"" << l.getName()
                                     << "\" beside its chunk.spread_steps (one row map per load)";
      if (via && !via->hasOneUse()) return via->emitOpError("feeds more than its chunk.spread_steps");
      rowMap_[l.getOperation()] = {(int64_t)s.getSteps(), (int64_t)s.getStep()};
    }
    return success();
  }

  /// Maps each spread_steps result to its input's tile once the input has one.
  void spreadRows(Block& body) {
    for (Operation& op : body)
      if (auto s = dyn_cast<ch::SpreadStepsOp>(op))
        if (!map_.count(s.getResult()) && map_.count(s.getInput())) map_[s.getResult()] = map_[s.getInput()];
  }

  Value fill(double x, double pad = 0.0) {
    return b_.create<ChunkFillOp>(loc_, vec_, b_.getF32FloatAttr((float)x), b_.getF32FloatAttr((float)pad));
  }

  /// q, k (16-bit [C, K] rows at the key head), g ([C] or per-channel [C, K] at the value head), beta, the
  /// preconditioner's per-token inputs ([C] at the key head) and centre (a uniform scalar of the key head).
  LogicalResult load(ch::LoadOp l) {
    auto t = cast<ch::ChunkTensorType>(l.getType());
    const StringRef name = l.getName();
    const bool keyHead = t.hasDim(ch::Dim::H);
    if (name == "precond_center") {
      map_[l.getResult()] = {b_.create<LoadScalarOp>(loc_, f32_, name, Index::h, b_.getF32FloatAttr(0.f), IntegerAttr()), {}};
      return success();
    }
    Type type;
    if (name == "q" || name == "k")
      type = rows16_;
    else if (name == "g")
      type = t.hasDim(ch::Dim::K) ? rows32_ : vec_;
    else if (name == "beta" || name == "precond_g" || name == "precond_beta")
      type = vec_;
    else
      return l.emitOpError() << "loads \"" << name << "\", which chunk_local's tile lowering does not read";
    auto rows = b_.create<ChunkRowsOp>(loc_, type, name, keyHead ? HeadOf::key_head : HeadOf::value_head,
                                       IntegerAttr(), IntegerAttr());
    if (auto it = rowMap_.find(l.getOperation()); it != rowMap_.end()) {
      rows.setRowStepsAttr(b_.getI64IntegerAttr(it->second.first));
      rows.setRowPhaseAttr(b_.getI64IntegerAttr(it->second.second));
    }
    Value v = rows;
    if (type == rows16_) raw_.insert(v);
    map_[l.getResult()] = {v, {}};
    return success();
  }

  /// The scan's per-row decay a (e^{gate} on real rows; 1 without a gate and on pad rows) and step weight b
  /// (the gain, 1, or the workspace coefficients; 0 on pad rows).
  void scanCoefficients(Operation* apply) {
    Value gate;
    if (auto a = dyn_cast<ch::AccumApplyOp>(apply)) {
      gate = a.getGate();
      scanB_ = a.getGain() ? map_[a.getGain()].tile : fill(1.0);
    } else {
      gate = cast<ch::HypergradApplyOp>(apply).getRetention();
    }
    scanA_ = gate ? b_.create<RowExpOp>(loc_, vec_, map_[gate].tile, b_.getF32FloatAttr(1.f)).getResult()
                  : fill(1.0, 1.0);
  }

  /// One tile.row_rsqrt_norm for all l2norm ops (the same eps); each result keeps its input's rows.
  LogicalResult l2norms(MutableArrayRef<ch::L2NormOp> norms) {
    if (norms.empty()) return success();
    SmallVector<Value> rows;
    const double eps = norms.front().getEps().convertToDouble();
    for (ch::L2NormOp n : norms) {
      if (n.getEps().convertToDouble() != eps)
        return n.emitOpError("l2norm eps differs from the kernel's other l2norm");
      rows.push_back(map_[n.getInput()].tile);
    }
    SmallVector<Type> types(norms.size(), vec_);
    auto op = b_.create<RowRsqrtNormOp>(loc_, types, rows, b_.getF32FloatAttr((float)eps));
    for (auto [n, r] : llvm::zip(norms, op.getResults())) map_[n.getResult()] = {map_[n.getInput()].tile, r};
    return success();
  }

  Value cumsum(Value g) { return b_.create<CumsumOp>(loc_, g.getType(), g, b_.getF32FloatAttr((float)M_LOG2E)); }

  /// The per-row factor of a key or query operand: its l2norm factor, or 1 on real rows.
  Value factorOf(Value chunkValue) {
    Rows r = map_[chunkValue];
    if (r.factor) return r.factor;
    if (!ones_) ones_ = fill(1.0);
    return ones_;
  }

  /// The preconditioner's multiplier P (tile.channel_scan over the raw key), applied to the write key (a new
  /// tile) or in place to the read query. Returns the rows P ⊙ target; the result keeps the target's factor.
  LogicalResult scanApply(Operation* apply, Value& result) {
    Value target = apply->getOperand(0), key = apply->getOperand(1);
    Value x = map_[key].tile, t = map_[target].tile;
    ScanReadout readout;
    FloatAttr base, eps, mn, mx;
    Value center;
    if (auto a = dyn_cast<ch::AccumApplyOp>(apply)) {
      readout = ScanReadout::soft_power;
      base = b_.getF32FloatAttr((float)a.getX().convertToDouble());
      eps = b_.getF32FloatAttr((float)a.getEps().convertToDouble());
      center = map_[a.getCenter()].tile;
    } else {
      auto h = cast<ch::HypergradApplyOp>(apply);
      readout = h.getPost() ? ScanReadout::clamped_post : ScanReadout::clamped_pre;
      if (h.getClampMin()) mn = b_.getF32FloatAttr((float)h.getClampMin()->convertToDouble());
      if (h.getClampMax()) mx = b_.getF32FloatAttr((float)h.getClampMax()->convertToDouble());
    }
    if (!x || !t || !cast<TileType>(x.getType()).getElementType().isBF16())
      return apply->emitOpError("needs the key and target rows of this kernel's loads");
    b_.create<BarrierOp>(loc_);  // the scan reads every row of b (written row-parallel)
    result = b_.create<ChannelScanOp>(loc_, rows16_, x, scanStart_, scanA_, scanBk_, t, center, readout, base, eps, mn,
                                      mx);
    map_[apply->getResult(0)] = {result, factorOf(target)};
    if (t != x) raw_.erase(t);
    return success();
  }

  /// The tensor-core operand of rows `v`: bf16 re-encoded once if they are still the input dtype.
  Value operand(Value v) {
    if (!raw_.count(v)) return v;
    auto it = encoded_.find(v);
    if (it != encoded_.end()) return it->second;
    return encoded_[v] = b_.create<EncodeBf16Op>(loc_, rows16_, v);
  }

  LogicalResult products(ch::KKTOp kkt, ch::QKAttnOp qk, ch::SolveTrilOp solve, Operation* apply) {
    if (kkt && (kkt.getWriteKey() != qk.getWriteKey() || kkt.getGate() != qk.getGate()))
      return qk.emitOpError("must share its write key and gate with chunk.kkt (one column operand)");
    Value gate = qk.getGate() ? map_[qk.getGate()].tile : Value();
    const bool perChannel = gate && cast<TileType>(gate.getType()).getRank() == 2;
    if (kkt && kkt.getGain() && map_[kkt.getGain()].tile != gain_)
      return kkt.emitOpError("gain is not the kernel's loaded \"beta\"");
    Value beta = gain_ ? gain_ : fill(1.0);
    Value scale = b_.create<LoadScalarOp>(loc_, f32_, "scale", Index::none, FloatAttr(), IntegerAttr());
    // Raw (unpreconditioned) query and write key: the record's factors and the gated operands use them.
    Value qIn = qk.getQuery(), kwIn = qk.getWriteKey();
    if (apply && apply->getResult(0) == qIn) qIn = apply->getOperand(0);
    if (apply && apply->getResult(0) == kwIn) kwIn = apply->getOperand(0);
    Value q = map_[qIn].tile, kw = map_[kwIn].tile;
    Value rq = factorOf(qIn), rk = factorOf(kwIn);
    // The preconditioner's step weight takes the key's squared l2norm factor (k̂² = rk²·k²).
    SmallVector<Value> fields;
    if (apply) {
      Value rk2 = b_.create<RowMulOp>(loc_, vec_, rk, rk);
      scanBk_ = b_.create<RowMulOp>(loc_, vec_, scanB_, rk2);
      fields = {scanA_, scanBk_};
    }
    // The per-token record: {scale·rq·2^G, rk·2^G, rk·2^(G_C − G), β, rq, rk, G, 0} (fields 4, 5 the scan's
    // coefficients with a preconditioner); per-channel gates stay out of it (they gate the operands below).
    b_.create<StoreTokenRecordOp>(loc_, rq, rk, beta, scale, perChannel ? Value() : gate, fields, "tok");
    // A stored write key (DeviceFeatures.h storesKw): P ⊙ k̂ is scanned before the gated stores, so that opw takes
    // it (P and the gating are both elementwise); without a per-channel gate it is written to "pwk" below.
    Value scanned;
    if (storeKey_) {
      if (!apply || apply->getResult(0) != qk.getWriteKey())
        return qk.emitOpError("chunk_local stores the preconditioned write key (tile.launch_features write_key), "
                              "but its write key is not a preconditioner's rebuild (chunk.accum_apply or "
                              "chunk.hypergrad_apply of the key)");
      if (failed(scanApply(apply, scanned))) return failure();
      if (perChannel) b_.create<BarrierOp>(loc_);  // the gated pass reads rows other threads scanned
    }
    if (perChannel) {
      b_.create<StoreGatedRowsOp>(loc_, q, gate, "opq", false);
      if (kkt) b_.create<StoreGatedRowsOp>(loc_, kw, gate, "opk", false);
      b_.create<StoreGatedRowsOp>(loc_, storeKey_ ? scanned : kw, gate, "opw", true);
      b_.create<StoreLastExp2Op>(loc_, gate, "pdec");
    }
    if (apply && !storeKey_ && failed(scanApply(apply, scanned))) return failure();
    // Tensor-core operands in bf16, then the products.
    Value qRows = operand(map_[qk.getQuery()].tile);
    Value cols = operand(map_[qk.getWriteKey()].tile);
    Value kRows = kkt ? operand(map_[kkt.getReadKey()].tile) : Value();
    b_.create<BarrierOp>(loc_);
    // before the products: with a scalar gate the KKT block may alias the write-key tile once they are done
    if (storeKey_ && !perChannel) b_.create<StoreRowsOp>(loc_, scanned, "pwk");
    // a stored query (DeviceFeatures.h needPwq): the scanned P ⊙ q (in place in the query tile), before the
    // products for the same reason
    if (storeQuery_) {
      if (!apply || apply->getResult(0) != qk.getQuery())
        return qk.emitOpError("chunk_local stores the preconditioned query (tile.launch_features write_key), but "
                              "its query is not a preconditioner's rebuild (chunk.accum_apply of the query)");
      b_.create<StoreRowsOp>(loc_, scanned, "pwq");
    }
    SmallVector<Value> rows, ra, rb;
    if (kkt) {
      rows.push_back(kRows);
      ra.push_back(beta);
      rb.push_back(factorOf(kkt.getReadKey()));
    }
    rows.push_back(qRows);
    ra.push_back(scale);
    rb.push_back(rq);
    SmallVector<Type> results(kkt ? 1 : 0, block_);
    auto prod = b_.create<LowerProductsOp>(loc_, results, rows, cols, ra, rb, rk, gate, "aqk");
    if (!kkt) return success();
    // 𝒯 = (I + 𝒜)^{-1}, stored as 𝒯·diag(β)
    b_.create<BarrierOp>(loc_);
    Value t = b_.create<TriInverseOp>(loc_, block_, prod.getResult(0));
    b_.create<StoreLowerColScaledOp>(loc_, t, beta, "tb");
    return success();
  }

  OpBuilder& b_;
  Location loc_;
  const bool storeKey_, storeQuery_;
  Type f32_;
  TileType rows16_, rows32_, vec_, vecK_, block_;
  llvm::DenseMap<Value, Rows> map_;
  llvm::DenseMap<Operation*, std::pair<int64_t, int64_t>> rowMap_;  ///< load -> (steps, step) of its spread
  llvm::DenseSet<Value> raw_;                ///< 16-bit rows still in the input dtype
  llvm::DenseMap<Value, Value> encoded_;     ///< their bf16 re-encodings
  Value ones_, gain_;
  Value scanStart_, scanA_, scanB_, scanBk_;  ///< the preconditioner scan's start vector and coefficients
};

struct LowerChunkLocalToTilePass : public dgps::impl::LowerChunkLocalToTileBase<LowerChunkLocalToTilePass> {
  using LowerChunkLocalToTileBase::LowerChunkLocalToTileBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<ch::KernelOp> kernels;
    module.walk([&](ch::KernelOp k) {
      if (k.getRole() == "chunk_local") kernels.push_back(k);
    });
    for (ch::KernelOp kernel : kernels) {
      auto parent = kernel->getParentOfType<func::FuncOp>();
      StringRef base = parent.getSymName();
      base.consume_back("_forward");
      OpBuilder b(module.getContext());
      b.setInsertionPointToEnd(module.getBody());
      auto fn = b.create<func::FuncOp>(kernel.getLoc(), (base + "_chunk_local").str(), b.getFunctionType({}, {}));
      fn->setAttr(kRoleAttr, b.getStringAttr("chunk_local"));
      fn->setAttr(kGridAttr, b.getStringAttr(stringifyGrid(Grid::chunk)));
      // The launch contract shared with the other roles (DeviceFeatures.h FeatureSet, read over the whole forward):
      // it fixes the workspace and shared-memory layout the emitted kernel must reproduce.
      dgps::launch::FeatureSet features = dgps::featuresOf(parent);
      FailureOr<int> writeKey = resolveWriteKey(writeKey_, features, kernel);
      if (failed(writeKey)) {
        fn.erase();
        return signalPassFailure();
      }
      features.write_key = *writeKey;
      fn->setAttr(kLaunchFeaturesAttr, launchFeaturesAttr(b, features));
      OpBuilder body(fn.getContext());
      body.setInsertionPointToStart(fn.addEntryBlock());
      if (failed(ChunkLocalBuilder(body, kernel.getLoc(), dgps::launch::storesKw(features),
                                   dgps::launch::needPwq(features))
                     .build(kernel, features.gain == 1))) {
        fn.erase();
        return signalPassFailure();
      }
      body.create<func::ReturnOp>(kernel.getLoc());
    }
  }
};

}  // namespace
