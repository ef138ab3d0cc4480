// --dgps-lower-precond-roles-to-tile: the preconditioner roles of each partitioned forward become tile
// functions (Passes.td has the before/after):
//   precond_summary (chunk.accum_summary) -> @<name>_precond_summary: the chunk's key rows and per-row inputs,
//       then tile.channel_scan_total (the chunk's scan summary, "psum") and tile.store_sum_exp (its decay, "pgam")
//   precond_scan (chunk.accum_pass)       -> @<name>_precond_scan: one tile.chunk_affine_scan over the chunks
// and OSDN's chunked hypergradient d-scan (docs/math.md §5.2 "Chunked form"):
//   precond_summary (chunk.hypergrad_chunk_summary) -> the chunk's raw key rows, β and retention, then
//       tile.hypergrad_chunk_summary (the triangular block "hgtri" and per-row vectors "hgvec")
//   precond_scan (chunk.hypergrad_chunk_pass)       -> one tile.hypergrad_chunk_pass over the chunks ("pst",
//       "pcoef" and the final d)
//   precond_scan alone (chunk.hypergrad_pass with a clamp: not affine in d, no summary) -> one
//       tile.hypergrad_token_scan, one warp per (sequence, key head)
// The per-model choices (gate or not, gain or not, l2norm or not) are made here; the ops are generic. A kernel
// op this lowering does not know is an error naming it.
#include "StateWalkLowering.h"
#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace dgps {
#define GEN_PASS_DEF_LOWERPRECONDROLESTOTILE
#include "dgps/Transforms/Passes.h.inc"
}  // namespace dgps

using namespace mlir;
using namespace dgps::tile;
namespace ch = dgps::chunk;

namespace {

InFlightDiagnostic unknownOp(Operation& op, StringRef role, StringRef covers) {
  return op.emitOpError() << "has no tile lowering in " << role << " (--dgps-lower-precond-roles-to-tile covers "
                          << covers << ")";
}

/// The load feeding `v` (possibly through one chunk.l2norm), or null.
ch::LoadOp loadOf(Value v) {
  if (!v) return nullptr;
  if (auto n = v.getDefiningOp<ch::L2NormOp>()) v = n.getInput();
  return v.getDefiningOp<ch::LoadOp>();
}

constexpr const char* kSummaryCovers = "loads, l2norm and one accum_summary or hypergrad_chunk_summary";
constexpr const char* kTokenScanCovers =
    "loads, l2norm, one hypergrad_pass and the store of \"final_precond_state\"";
constexpr const char* kScanCovers =
    "one accum_pass or hypergrad_chunk_pass and the store of \"final_precond_state\"";

/// precond_summary of OSDN's chunked d-scan: the raw key rows (the device takes the l2 factor itself), β at
/// the key head's first value head (1 on real rows without a gain), the retention log-gate (0 without one),
/// then tile.hypergrad_chunk_summary.
LogicalResult buildHypergradSummary(ch::HypergradChunkSummaryOp sum, OpBuilder& b) {
  ch::LoadOp key = loadOf(sum.getKey()), gain = loadOf(sum.getGain()), ret = loadOf(sum.getRetention());
  auto norm = sum.getKey().getDefiningOp<ch::L2NormOp>();
  if (!key || (sum.getGain() && (!gain || gain.getResult() != sum.getGain())) ||
      (sum.getRetention() && (!ret || ret.getResult() != sum.getRetention())))
    return sum.emitOpError("needs its key (optionally l2-normalised), gain and retention loaded in this kernel");
  const Location loc = sum.getLoc();
  MLIRContext* ctx = b.getContext();
  auto rows16 = TileType::get(ctx, {Extent::C, Extent::K}, b.getBF16Type(), Space::smem, Layout::row);
  auto vec = TileType::get(ctx, {Extent::C}, b.getF32Type(), Space::smem, Layout::row);
  auto fill = [&](double x) -> Value {
    return b.create<ChunkFillOp>(loc, vec, b.getF32FloatAttr((float)x), b.getF32FloatAttr(0.f));
  };
  Value x = b.create<ChunkRowsOp>(loc, rows16, key.getName(), HeadOf::key_head, IntegerAttr(), IntegerAttr());
  Value beta = gain ? Value(b.create<ChunkRowsOp>(loc, vec, gain.getName(), HeadOf::value_head, IntegerAttr(),
                                                  IntegerAttr()))
                    : fill(1.0);
  Value rho = ret ? Value(b.create<ChunkRowsOp>(loc, vec, ret.getName(), HeadOf::key_head, IntegerAttr(),
                                                IntegerAttr()))
                  : fill(0.0);
  b.create<BarrierOp>(loc);
  FloatAttr eps = norm ? b.getF32FloatAttr((float)norm.getEps().convertToDouble()) : FloatAttr();
  b.create<HypergradChunkSummaryOp>(loc, x, beta, rho, b.getStringAttr("hgtri"), b.getStringAttr("hgvec"),
                                    b.getF32FloatAttr((float)sum.getEta().convertToDouble()), eps);
  return success();
}

/// precond_summary: exactly one chunk.accum_summary or chunk.hypergrad_chunk_summary over loads (its key
/// optionally l2-normalised).
LogicalResult buildSummary(ch::KernelOp k, OpBuilder& b) {
  ch::AccumSummaryOp sum;
  ch::HypergradChunkSummaryOp hg;
  for (Operation& op : k.getBody().front()) {
    if (isa<ch::LoadOp, ch::L2NormOp, ch::YieldOp>(op)) continue;
    if (auto s = dyn_cast<ch::AccumSummaryOp>(op); s && !sum && !hg) {
      sum = s;
      continue;
    }
    if (auto s = dyn_cast<ch::HypergradChunkSummaryOp>(op); s && !sum && !hg) {
      hg = s;
      continue;
    }
    return unknownOp(op, "precond_summary", kSummaryCovers);
  }
  if (hg) return buildHypergradSummary(hg, b);
  if (!sum) return k.emitOpError("precond_summary kernel without chunk.accum_summary or chunk.hypergrad_chunk_summary");
  ch::LoadOp key = loadOf(sum.getKey()), gate = loadOf(sum.getGate()), gain = loadOf(sum.getGain());
  auto norm = sum.getKey().getDefiningOp<ch::L2NormOp>();
  if (!key || (sum.getGate() && (!gate || gate.getResult() != sum.getGate())) ||
      (sum.getGain() && (!gain || gain.getResult() != sum.getGain())))
    return sum.emitOpError("needs its key (optionally l2-normalised), gate and gain loaded in this kernel");

  const Location loc = sum.getLoc();
  MLIRContext* ctx = b.getContext();
  auto rows16 = TileType::get(ctx, {Extent::C, Extent::K}, b.getBF16Type(), Space::smem, Layout::row);
  auto vec = TileType::get(ctx, {Extent::C}, b.getF32Type(), Space::smem, Layout::row);
  auto fill = [&](double x, double pad) -> Value {
    return b.create<ChunkFillOp>(loc, vec, b.getF32FloatAttr((float)x), b.getF32FloatAttr((float)pad));
  };
  // loads and per-row coefficients (the emitter prints the row-local ones as one loop beside the row loads)
  Value x = b.create<ChunkRowsOp>(loc, rows16, key.getName(), HeadOf::key_head, IntegerAttr(), IntegerAttr());
  Value logDecay, a, gainRows;
  if (gate) {
    logDecay = b.create<ChunkRowsOp>(loc, vec, gate.getName(), HeadOf::key_head, IntegerAttr(), IntegerAttr());
    a = b.create<RowExpOp>(loc, vec, logDecay, b.getF32FloatAttr(1.f));  // e^0 = 1 on pad rows
  } else {
    a = fill(1.0, 1.0);
    logDecay = fill(0.0, 0.0);
  }
  gainRows = gain ? Value(b.create<ChunkRowsOp>(loc, vec, gain.getName(), HeadOf::key_head, IntegerAttr(), IntegerAttr())) : fill(1.0, 0.0);
  Value r = norm ? Value() : fill(1.0, 0.0);
  b.create<BarrierOp>(loc);
  if (norm) {
    r = b.create<RowRsqrtNormOp>(loc, TypeRange{vec}, ValueRange{x},
                                 b.getF32FloatAttr((float)norm.getEps().convertToDouble()))
            .getResult(0);
    b.create<BarrierOp>(loc);
  }
  b.create<ChannelScanTotalOp>(loc, x, a, gainRows, r, b.getStringAttr("psum"));
  b.create<StoreSumExpOp>(loc, logDecay, b.getStringAttr("pgam"));
  return success();
}

/// precond_scan of OSDN's chunked d-scan: one tile.hypergrad_chunk_pass over the summary kernel's results, the
/// raw key being the summary's key load. An absent initial d reads as the pass's d_init on the device.
LogicalResult buildHypergradScan(ch::HypergradChunkPassOp pass, bool writesFinal, ch::KernelOp summary,
                                 OpBuilder& b) {
  for (Value v : {pass.getReadRows(), pass.getBase(), pass.getWriteRows(), pass.getLogDecay()})
    if (v.getDefiningOp() != summary)
      return pass.emitOpError("must scan the results of the forward's precond_summary kernel");
  ch::HypergradChunkSummaryOp sum;
  summary.walk([&](ch::HypergradChunkSummaryOp s) { sum = s; });
  ch::LoadOp key = sum ? loadOf(sum.getKey()) : nullptr;
  if (!key) return pass.emitOpError("its precond_summary kernel has no chunk.hypergrad_chunk_summary of a loaded key");
  ch::LoadOp init = loadOf(pass.getInit());
  if (pass.getInit() && (!init || init.getName() != "initial_precond_state"))
    return pass.emitOpError("init must be the load of \"initial_precond_state\"");
  const double dInit = pass.getDInit().convertToDouble();
  if (init && init.getAbsent() && init.getAbsent()->convertToDouble() != dInit)
    return init.emitOpError() << "an absent initial preconditioner state reads as d_init = " << dInit
                              << " on the device, but the load's absent value is "
                              << init.getAbsent()->convertToDouble();
  b.create<HypergradChunkPassOp>(pass.getLoc(), b.getStringAttr(key.getName()),
                                 b.getStringAttr("initial_precond_state"), b.getStringAttr("hgtri"),
                                 b.getStringAttr("hgvec"), b.getStringAttr("pst"), b.getStringAttr("pcoef"),
                                 writesFinal ? b.getStringAttr("final_precond_state") : StringAttr(),
                                 b.getF32FloatAttr((float)dInit));
  return success();
}

/// The clamped d-scan (chunk.hypergrad_pass with a bound): one tile.hypergrad_token_scan over the raw key, the
/// gain and retention loads by name, η, the l2 eps and the bounds as attributes.
LogicalResult buildTokenScan(ch::HypergradPassOp pass, bool writesFinal, OpBuilder& b) {
  if (!pass.getClampMin() && !pass.getClampMax())
    return pass.emitOpError("is unclamped, so it is affine in d: run --chunk-parallel-precond-scan before "
                            "partitioning (its chunked form lowers to tile.hypergrad_chunk_summary / _pass)");
  ch::LoadOp key = loadOf(pass.getKey()), gain = loadOf(pass.getGain()), ret = loadOf(pass.getRetention());
  auto norm = pass.getKey().getDefiningOp<ch::L2NormOp>();
  if (!key || (pass.getGain() && (!gain || gain.getResult() != pass.getGain())) ||
      (pass.getRetention() && (!ret || ret.getResult() != pass.getRetention())))
    return pass.emitOpError("needs its key (optionally l2-normalised), gain and retention loaded in this kernel");
  ch::LoadOp init = loadOf(pass.getInit());
  if (pass.getInit() && (!init || init.getName() != "initial_precond_state"))
    return pass.emitOpError("init must be the load of \"initial_precond_state\"");
  const double dInit = pass.getDInit().convertToDouble();
  if (init && init.getAbsent() && init.getAbsent()->convertToDouble() != dInit)
    return init.emitOpError() << "an absent initial preconditioner state reads as d_init = " << dInit
                              << " on the device, but the load's absent value is "
                              << init.getAbsent()->convertToDouble();
  auto f32 = [&](std::optional<APFloat> v) {
    return v ? b.getF32FloatAttr((float)v->convertToDouble()) : FloatAttr();
  };
  b.create<HypergradTokenScanOp>(
      pass.getLoc(), b.getStringAttr(key.getName()), gain ? b.getStringAttr(gain.getName()) : StringAttr(),
      ret ? b.getStringAttr(ret.getName()) : StringAttr(), b.getStringAttr("initial_precond_state"),
      b.getStringAttr("pst"), b.getStringAttr("pcoef"),
      writesFinal ? b.getStringAttr("final_precond_state") : StringAttr(),
      b.getF32FloatAttr((float)pass.getEta().convertToDouble()),
      norm ? b.getF32FloatAttr((float)norm.getEps().convertToDouble()) : FloatAttr(), f32(pass.getClampMin()),
      f32(pass.getClampMax()), b.getF32FloatAttr((float)dInit));
  return success();
}

/// precond_scan: one chunk.accum_pass (or chunk.hypergrad_chunk_pass) of the summary kernel's results, its
/// init a load of "initial_precond_state", its final value stored (or not) as "final_precond_state".
LogicalResult buildScan(ch::KernelOp k, ch::KernelOp summary, OpBuilder& b) {
  ch::AccumPassOp pass;
  ch::HypergradChunkPassOp hg;
  bool writesFinal = false;
  for (Operation& op : k.getBody().front()) {
    if (isa<ch::LoadOp, ch::YieldOp>(op)) continue;
    if (auto p = dyn_cast<ch::AccumPassOp>(op); p && !pass && !hg) {
      pass = p;
      continue;
    }
    if (auto p = dyn_cast<ch::HypergradChunkPassOp>(op); p && !pass && !hg) {
      hg = p;
      continue;
    }
    Value fin = pass ? pass.getFinal() : hg ? hg.getFinal() : Value();
    if (auto st = dyn_cast<ch::StoreOp>(op); st && fin && st.getName() == "final_precond_state" &&
                                             st.getValue() == fin) {
      writesFinal = true;
      continue;
    }
    return unknownOp(op, "precond_scan", kScanCovers);
  }
  if (hg) return buildHypergradScan(hg, writesFinal, summary, b);
  if (!pass) return k.emitOpError("precond_scan kernel without chunk.accum_pass or chunk.hypergrad_chunk_pass");
  if (pass.getSum().getDefiningOp() != summary || pass.getLogDecay().getDefiningOp() != summary)
    return pass.emitOpError("must scan the results of the forward's precond_summary kernel");
  ch::LoadOp init = loadOf(pass.getInit());
  if (pass.getInit() && (!init || init.getName() != "initial_precond_state"))
    return pass.emitOpError("init must be the load of \"initial_precond_state\"");
  float absent = 0.f;
  if (init && init.getAbsent()) absent = (float)init.getAbsent()->convertToDouble();
  if (absent != 0.f) return init.emitOpError("an absent initial preconditioner state must read as 0 on the device");
  b.create<ChunkAffineScanOp>(pass.getLoc(), b.getStringAttr("initial_precond_state"), b.getStringAttr("pgam"),
                              b.getStringAttr("psum"), b.getStringAttr("pst"),
                              writesFinal ? b.getStringAttr("final_precond_state") : StringAttr(),
                              b.getF32FloatAttr(absent));
  return success();
}

struct LowerPrecondRolesToTilePass : public dgps::impl::LowerPrecondRolesToTileBase<LowerPrecondRolesToTilePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> forwards;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.getBody().getOps<ch::KernelOp>().empty()) forwards.push_back(fn);
    for (func::FuncOp fwd : forwards)
      if (failed(lower(module, fwd))) return signalPassFailure();
  }

  /// A precond_scan without a summary: the clamped d-scan token by token, one warp per (sequence, key head).
  LogicalResult lowerTokenScan(ModuleOp module, func::FuncOp fwd, ch::KernelOp scan) {
    ch::HypergradPassOp pass;
    bool writesFinal = false;
    for (Operation& op : scan.getBody().front()) {
      if (isa<ch::LoadOp, ch::L2NormOp, ch::YieldOp>(op)) continue;
      if (auto p = dyn_cast<ch::HypergradPassOp>(op); p && !pass) {
        pass = p;
        continue;
      }
      if (auto st = dyn_cast<ch::StoreOp>(op);
          st && pass && st.getName() == "final_precond_state" && st.getValue() == pass.getFinal()) {
        writesFinal = true;
        continue;
      }
      return unknownOp(op, "precond_scan", kTokenScanCovers);
    }
    if (!pass) return scan.emitOpError("precond_scan without a precond_summary kernel or a chunk.hypergrad_pass");
    OpBuilder body(module.getContext());
    func::FuncOp fn = createRoleFunction(module, fwd, scan.getLoc(), "precond_scan", "precond_scan",
                                         Grid::sequence_key_head_warp, body);
    if (failed(buildTokenScan(pass, writesFinal, body))) {
      fn.erase();
      return failure();
    }
    body.create<func::ReturnOp>(scan.getLoc());
    return success();
  }

  LogicalResult lower(ModuleOp module, func::FuncOp fwd) {
    ch::KernelOp summary, scan;
    for (ch::KernelOp k : fwd.getBody().getOps<ch::KernelOp>()) {
      if (k.getRole() == "precond_summary") summary = k;
      if (k.getRole() == "precond_scan") scan = k;
    }
    if (!summary && !scan) return success();  // no preconditioner state: nothing to lower
    if (!summary) return lowerTokenScan(module, fwd, scan);
    if (!scan) return summary.emitOpError("precond_summary without a precond_scan kernel");
    OpBuilder body(module.getContext());
    func::FuncOp sumFn = createRoleFunction(module, fwd, summary.getLoc(), "precond_summary", "precond_summary",
                                            Grid::chunk_key_head, body);
    if (failed(buildSummary(summary, body))) {
      sumFn.erase();
      return failure();
    }
    body.create<func::ReturnOp>(summary.getLoc());
    func::FuncOp scanFn = createRoleFunction(module, fwd, scan.getLoc(), "precond_scan", "precond_scan",
                                             Grid::sequence_key_head, body);
    if (failed(buildScan(scan, summary, body))) {
      sumFn.erase();
      scanFn.erase();
      return failure();
    }
    body.create<func::ReturnOp>(scan.getLoc());
    return success();
  }
};

}  // namespace
