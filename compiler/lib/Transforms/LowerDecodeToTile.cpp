// --dgps-lower-decode-to-tile: the decode role (one token step, docs/math.md §1) of every dgps.recurrence
// with a decode kernel becomes `func.func @<name>_decode` over typed tiles (Passes.td has the before/after).
// Every per-model choice is made here and shows up as different tile ops; the emitted CUDA has no branch
// on decay, gain, preconditioner or solve kinds.
#include <cmath>
#include <utility>

#include "dgps/Dialect/DGPS/IR/SpecConversion.h"
#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/Transforms/Passes.h"
#include "mlir/IR/Builders.h"

namespace dgps {
#define GEN_PASS_DEF_LOWERDECODETOTILE
#include "dgps/Transforms/Passes.h.inc"
}  // namespace dgps

using namespace mlir;
using namespace dgps::tile;

namespace {

/// The value tile of the decode CTA (LaunchContract.h decodeLaunch).
constexpr int64_t kValueTile = 32;

/// The launch bound of a key-head decode, CTAs per SM per KeyWidth (Tile.h kMinCtasPerSmAttr). Decode is bound
/// by the state's bytes: it needs warps resident to keep loads in flight. A key-head CTA walks several value
/// tiles and reads the next one's state ahead (tile.for_value_tiles), which doubles the state fragment's
/// registers; left alone ptxas gave such a decode 159 registers at K = 128 (3 CTAs of 128 threads per SM; 5-6%
/// slower than the deleted hand-written decode's 128 registers, 4 CTAs). So it asks for 4 CTAs per SM up to K = 128
/// (no spills there), 3 for a padded K or a partial last value tile (the masks cost registers: 4 CTAs spilled
/// PKDA's decode at K = 120, and at K = 128, V = 120) and 2 beyond K = 128, where the state fragment alone needs
/// more than 128 registers. A value-tile CTA (72-80 registers) gets no bound: it would only make ptxas spend more.
constexpr int32_t kKeyHeadCtasPerSm[] = {/*dense*/ 4, /*padded*/ 3, /*wide*/ 2};

/// Builds the tile ops of one decode function; one method per stage of the step.
class DecodeBuilder {
 public:
  DecodeBuilder(OpBuilder& b, Location loc, const dgps::Spec& s) : b_(b), loc_(loc), s_(s) {
    MLIRContext* ctx = b.getContext();
    f32_ = b.getF32Type();
    act_ = b.getBF16Type();  // stands for the spec's input dtype (bf16 or f16, chosen at JIT time)
    regK_ = TileType::get(ctx, {Extent::K}, f32_, Space::reg, Layout::split);
    smemK_ = TileType::get(ctx, {Extent::K}, f32_, Space::smem, Layout::row);
    regV_ = TileType::get(ctx, {Extent::BV}, f32_, Space::reg, Layout::quad);
    frag_ = TileType::get(ctx, {Extent::K, Extent::BV}, f32_, Space::reg, Layout::frag);
  }

  void build() {
    if (dgps::householderSteps(s_) > 1) return buildSteps();
    Value scale = b_.create<LoadScalarOp>(loc_, f32_, "scale", Index::none, FloatAttr(), IntegerAttr());
    Value k = b_.create<LoadOp>(loc_, regK_, view("k", Index::bh, {Extent::K}, act_));
    Value q = b_.create<LoadOp>(loc_, regK_, view("q", Index::bh, {Extent::K}, act_));
    auto [kh, qh] = normalised(k, q);
    Value qs = b_.create<MulOp>(loc_, regK_, qh, scale);
    Value kw = kh, qr = qs;
    if (s_.precond.kind == dgps::PrecondKind::Diagonal) {
      Value m = s_.precond.source == dgps::PrecondSource::EmaSqSquash ? squashStep(kh) : hypergradStep(kh);
      if (s_.precond.side == dgps::PrecondSide::Key)
        kw = b_.create<MulOp>(loc_, regK_, kh, m);
      else
        qr = b_.create<MulOp>(loc_, regK_, qs, m);
    }
    Value sKh = b_.create<CopyOp>(loc_, smemK_, kh);
    Value sKw = kw == kh ? sKh : b_.create<CopyOp>(loc_, smemK_, kw).getResult();
    Value sQr = b_.create<CopyOp>(loc_, smemK_, qr);
    // o = (D S)ᵀ q_r + (k_w·q_r) e: the write's contribution to the read-out needs only this scalar. Its
    // CTA reduction also publishes the shared vectors above, so they need no barrier of their own.
    Value kwq = sum(b_.create<MulOp>(loc_, regK_, kw, qr));
    valueTiles(sKh, sKw, sQr, kwq);
  }

  /// Several Householder steps per token (solve.steps = n_h, docs/math.md §3.7; the delta rule without a
  /// preconditioner): S ← D S, then for j = 0 .. n_h − 1 e_j = β_j(v_j − Sᵀk̂_j), S ← S + k̂_j e_jᵀ; o = Sᵀq̂ after
  /// the last. k, v and β carry n_h rows per token ([B, n_h, ...]: views and scalars at `step` j).
  void buildSteps() {
    const int64_t n = dgps::householderSteps(s_);
    Value scale = b_.create<LoadScalarOp>(loc_, f32_, "scale", Index::none, FloatAttr(), IntegerAttr());
    SmallVector<Value> ks;
    for (int64_t j = 0; j < n; ++j) ks.push_back(b_.create<LoadOp>(loc_, regK_, view("k", Index::bh, {Extent::K}, act_, j)));
    Value q = b_.create<LoadOp>(loc_, regK_, view("q", Index::bh, {Extent::K}, act_));
    if (s_.qk_l2norm) {
      // the n_h + 1 norms, two to a CTA reduction
      SmallVector<Value> xs(ks.begin(), ks.end());
      xs.push_back(q);
      SmallVector<Value> normed;
      for (size_t i = 0; i < xs.size(); i += 2) {
        if (i + 1 == xs.size()) {
          normed.push_back(b_.create<MulOp>(loc_, regK_, xs[i], invNorm(sum(b_.create<MulOp>(loc_, regK_, xs[i], xs[i])))));
          break;
        }
        Value a2 = b_.create<MulOp>(loc_, regK_, xs[i], xs[i]);
        auto [sa, sb] = sums(a2, b_.create<MulOp>(loc_, regK_, xs[i + 1], xs[i + 1]));
        normed.push_back(b_.create<MulOp>(loc_, regK_, xs[i], invNorm(sa)));
        normed.push_back(b_.create<MulOp>(loc_, regK_, xs[i + 1], invNorm(sb)));
      }
      q = normed.back();
      ks.assign(normed.begin(), normed.end() - 1);
    }
    Value qs = b_.create<MulOp>(loc_, regK_, q, scale);
    SmallVector<Value> sKs;
    for (Value k : ks) sKs.push_back(b_.create<CopyOp>(loc_, smemK_, k));
    Value sQ = b_.create<CopyOp>(loc_, smemK_, qs);
    // o = (S after the last step's predecessors)ᵀ q + (k̂_last·q) e_last, as in the one-step read-out
    Value kq = sum(b_.create<MulOp>(loc_, regK_, ks.back(), qs));
    stepTiles(sKs, sQ, kq);
  }

  /// Per value tile of several steps per token: the decay once, then the steps in order, each a contraction of
  /// the current state with its key (the last also with q) and a rank-1 update; a barrier keeps two contractions'
  /// shared scratch apart (TileOps.td tile.contract).
  void stepTiles(ArrayRef<Value> sKs, Value sQ, Value kq) {
    auto loop = b_.create<ForValueTilesOp>(loc_);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(&loop.getBody().emplaceBlock());
    Value sv = view("state", Index::bhv, {Extent::K, Extent::V}, f32_);
    Value st = decayed(b_.create<LoadOp>(loc_, frag_, sv));
    const int64_t n = static_cast<int64_t>(sKs.size());
    for (int64_t j = 0; j < n; ++j) {
      const bool last = j + 1 == n;
      if (j > 0) b_.create<BarrierOp>(loc_);
      Value v = b_.create<LoadOp>(loc_, regV_, view("v", Index::bhv, {Extent::V}, act_, j));
      SmallVector<Value> with{sKs[j]};
      SmallVector<Type> types{regV_};
      if (last) {
        with.push_back(sQ);
        types.push_back(regV_);
      }
      auto c = b_.create<ContractOp>(loc_, types, st, with);
      Value e = b_.create<SubOp>(loc_, regV_, v, c.getResult(0));
      if (s_.gain.kind == dgps::GainKind::Scalar) e = b_.create<MulOp>(loc_, regV_, e, scalar("beta", Index::bhv, j));
      if (last) {
        Value o = b_.create<AddOp>(loc_, regV_, c.getResult(1), b_.create<MulOp>(loc_, regV_, e, kq));
        b_.create<StoreOp>(loc_, o, view("o", Index::bhv, {Extent::V}, act_));
      }
      st = b_.create<OuterAddOp>(loc_, frag_, st, sKs[j], e);
    }
    b_.create<StoreOp>(loc_, st, sv);
  }

  /// D S: the token's decay of the state fragment `st` (scalar or per key channel; none: st).
  Value decayed(Value st) {
    if (s_.decay.kind == dgps::DecayKind::Scalar)
      return b_.create<MulOp>(loc_, frag_, st, b_.create<ExpOp>(loc_, scalar("g", Index::bhv)));
    if (s_.decay.kind == dgps::DecayKind::Diagonal) {
      Value g = b_.create<LoadOp>(loc_, regK_, view("g", Index::bhv, {Extent::K}, f32_));
      Value sDec = b_.create<CopyOp>(loc_, smemK_, b_.create<ExpOp>(loc_, g));
      b_.create<BarrierOp>(loc_);
      return b_.create<RowScaleOp>(loc_, frag_, st, sDec);
    }
    return st;
  }

 private:
  Value constant(double x) { return b_.create<ConstantOp>(loc_, f32_, b_.getF32FloatAttr((float)x)); }
  /// One element of a kernel tensor; `step` >= 0 picks Householder step `step` of the token's rows.
  Value scalar(const char* name, Index at, int64_t step = -1) {
    return b_.create<LoadScalarOp>(loc_, f32_, name, at, FloatAttr(), stepAttr(step));
  }
  Value view(const char* name, Index at, std::initializer_list<Extent> dims, Type elem, int64_t step = -1) {
    return b_.create<ViewOp>(loc_, TileType::get(b_.getContext(), dims, elem, Space::global, Layout::row), name, at,
                             stepAttr(step));
  }
  IntegerAttr stepAttr(int64_t step) { return step < 0 ? IntegerAttr() : b_.getI64IntegerAttr(step); }

  /// Σ_d x_d (one CTA-wide reduction).
  Value sum(Value x) { return b_.create<ReduceSumOp>(loc_, TypeRange{f32_}, ValueRange{x}).getResult(0); }
  /// {Σ_d x_d, Σ_d y_d} in one reduction: two independent sums share the CTA's barriers.
  std::pair<Value, Value> sums(Value x, Value y) {
    auto r = b_.create<ReduceSumOp>(loc_, TypeRange{f32_, f32_}, ValueRange{x, y});
    return {r.getResult(0), r.getResult(1)};
  }

  /// rsqrt(Σx² + eps), the l2 norm's factor.
  Value invNorm(Value ss) {
    return b_.create<RsqrtOp>(loc_, b_.create<AddOp>(loc_, f32_, ss, constant(s_.l2norm_eps)));
  }

  /// k and q of (b, h), l2-normalised when the spec asks: x · rsqrt(Σx² + eps), both norms in one reduction.
  std::pair<Value, Value> normalised(Value k, Value q) {
    if (!s_.qk_l2norm) return {k, q};
    Value kk = b_.create<MulOp>(loc_, regK_, k, k);  // (created in order: a stable printed IR)
    auto [kss, qss] = sums(kk, b_.create<MulOp>(loc_, regK_, q, q));
    return {b_.create<MulOp>(loc_, regK_, k, invNorm(kss)), b_.create<MulOp>(loc_, regK_, q, invNorm(qss))};
  }

  /// ema_sq_squash (docs/math.md §3.3): A ← γ A + b k̂², stored; M = x^(−s), s = r/(1+|r|), r = ln(A+eps) − c.
  Value squashStep(Value kh) {
    const dgps::SquashParams& sq = s_.precond.squash;
    Value pv = view("precond_state", Index::bh, {Extent::K}, f32_);
    Value a = b_.create<LoadOp>(loc_, regK_, pv);
    if (sq.has_gate) a = b_.create<MulOp>(loc_, regK_, a, b_.create<ExpOp>(loc_, scalar("precond_g", Index::bh)));
    Value w = b_.create<MulOp>(loc_, regK_, kh, kh);
    if (sq.has_gain) w = b_.create<MulOp>(loc_, regK_, w, scalar("precond_beta", Index::bh));
    a = b_.create<AddOp>(loc_, regK_, a, w);
    b_.create<StoreOp>(loc_, a, pv);
    Value c = b_.create<LoadScalarOp>(loc_, f32_, "precond_center", Index::h, b_.getF32FloatAttr(0.f), IntegerAttr());
    Value r = b_.create<SubOp>(loc_, regK_, b_.create<LogOp>(loc_, b_.create<AddOp>(loc_, regK_, a, constant(sq.eps))), c);
    Value den = b_.create<AddOp>(loc_, regK_, b_.create<AbsOp>(loc_, r), constant(1.0));
    Value sgn = b_.create<DivOp>(loc_, regK_, r, den);
    return b_.create<Exp2Op>(loc_, b_.create<MulOp>(loc_, regK_, sgn, constant(-std::log2(sq.x))));
  }

  /// hypergrad_ogd (docs/math.md §5.2): d' = ρ d + (η β/‖u‖)(1 − β⟨d, u⟩) u, u = k̂², clamped, stored;
  /// the multiplier is d (pre) or d' (post). β is the gain of the key head's first value head.
  Value hypergradStep(Value kh) {
    const dgps::HypergradParams& hg = s_.precond.hypergrad;
    Value pv = view("precond_state", Index::bh, {Extent::K}, f32_);
    Value d = b_.create<LoadOp>(loc_, regK_, pv);
    Value u = b_.create<MulOp>(loc_, regK_, kh, kh);
    auto [nk, du] = sums(u, b_.create<MulOp>(loc_, regK_, d, u));
    Value step = constant(hg.eta), keep = constant(1.0);
    if (s_.gain.kind == dgps::GainKind::Scalar) {
      Value beta = scalar("beta", Index::bh_first);
      step = b_.create<MulOp>(loc_, f32_, step, beta);
      du = b_.create<MulOp>(loc_, f32_, beta, du);
    }
    Value coef = b_.create<MulOp>(loc_, f32_, b_.create<DivOp>(loc_, f32_, step, nk),
                                  b_.create<SubOp>(loc_, f32_, keep, du));
    coef = b_.create<SelectPositiveOp>(loc_, f32_, nk, coef, constant(0.0));
    Value kept = d;
    if (hg.has_retention) kept = b_.create<MulOp>(loc_, regK_, d, b_.create<ExpOp>(loc_, scalar("precond_g", Index::bh)));
    Value dn = b_.create<AddOp>(loc_, regK_, kept, b_.create<MulOp>(loc_, regK_, u, coef));
    if (hg.clamp_min) dn = b_.create<MaxOp>(loc_, regK_, dn, constant(*hg.clamp_min));
    if (hg.clamp_max) dn = b_.create<MinOp>(loc_, regK_, dn, constant(*hg.clamp_max));
    b_.create<StoreOp>(loc_, dn, pv);
    return hg.timing == dgps::WriteTiming::Post ? dn : d;
  }

  /// Per value tile: S ← D S; e = β(v − Sᵀk̂) or β v; o = Sᵀq_r + (k_w·q_r) e; S ← S + k_w eᵀ.
  void valueTiles(Value sKh, Value sKw, Value sQr, Value kwq) {
    auto loop = b_.create<ForValueTilesOp>(loc_);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(&loop.getBody().emplaceBlock());
    Value sv = view("state", Index::bhv, {Extent::K, Extent::V}, f32_);
    Value st = decayed(b_.create<LoadOp>(loc_, frag_, sv));
    Value v = b_.create<LoadOp>(loc_, regV_, view("v", Index::bhv, {Extent::V}, act_));
    Value e = v, readOut;
    if (s_.solve.kind == dgps::SolveKind::Delta) {
      auto c = b_.create<ContractOp>(loc_, TypeRange{regV_, regV_}, st, ValueRange{sKh, sQr});
      e = b_.create<SubOp>(loc_, regV_, v, c.getResult(0));
      readOut = c.getResult(1);
    } else {
      readOut = b_.create<ContractOp>(loc_, TypeRange{regV_}, st, ValueRange{sQr}).getResult(0);
    }
    if (s_.gain.kind == dgps::GainKind::Scalar) e = b_.create<MulOp>(loc_, regV_, e, scalar("beta", Index::bhv));
    Value o = b_.create<AddOp>(loc_, regV_, readOut, b_.create<MulOp>(loc_, regV_, e, kwq));
    b_.create<StoreOp>(loc_, o, view("o", Index::bhv, {Extent::V}, act_));
    b_.create<StoreOp>(loc_, b_.create<OuterAddOp>(loc_, frag_, st, sKw, e), sv);
  }

  OpBuilder& b_;
  Location loc_;
  const dgps::Spec& s_;
  Type f32_, act_;
  TileType regK_, smemK_, regV_, frag_;
};

struct LowerDecodeToTilePass : public dgps::impl::LowerDecodeToTileBase<LowerDecodeToTilePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto rec : llvm::to_vector(module.getOps<dgps::ir::RecurrenceOp>())) {
      const dgps::Spec spec = dgps::ir::exportSpec(rec);
      if (!dgps::hasKernel(spec, dgps::KernelKind::Decode)) continue;
      // each step's key and q live in the decode CTA's shared [K] vectors (TileEmitter.cpp kSmemVectors = 4); dgpsc
      // compile refuses such a spec first (kernelsRefusal), IR given to dgps-opt gets this error
      if (dgps::householderSteps(spec) > dgps::kMaxDecodeHouseholderSteps) {
        rec.emitError() << "decode of solve.steps = " << dgps::householderSteps(spec)
                        << " Householder steps per token: " << dgps::decodeStepLimitReason();
        return signalPassFailure();
      }
      OpBuilder b(rec);
      b.setInsertionPointAfter(rec);
      auto fn = b.create<func::FuncOp>(rec.getLoc(), (rec.getSymName() + "_decode").str(), b.getFunctionType({}, {}));
      const bool keyHead = spec.precond.kind == dgps::PrecondKind::Diagonal;
      fn->setAttr(kRoleAttr, b.getStringAttr("decode"));
      fn->setAttr(kGridAttr, b.getStringAttr(stringifyGrid(keyHead ? Grid::key_head : Grid::value_tile)));
      fn->setAttr(kValueTileAttr, b.getI64IntegerAttr(kValueTile));
      if (keyHead) fn->setAttr(kMinCtasPerSmAttr, b.getDenseI32ArrayAttr(kKeyHeadCtasPerSm));
      OpBuilder body(fn.getContext());
      body.setInsertionPointToStart(fn.addEntryBlock());
      DecodeBuilder(body, rec.getLoc(), spec).build();
      body.create<func::ReturnOp>(rec.getLoc());
    }
  }
};

}  // namespace
