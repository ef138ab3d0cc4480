// --dgps-lower-to-chunk: dgps.recurrence -> func.func @<name>_forward of chunk ops (docs/math.md §4.1).
//
// The lowering is deliberately uniform: an absent decay is a zero gate, an absent gain a unit gain,
// an absent preconditioner state a zero state; the canonicalizer folds those away. That keeps this
// file a direct transcription of the chunkwise algorithm, with one place per axis.
//
// Several Householder steps per token (householder_steps = n_h > 1, Gated DeltaProduct, docs/math.md
// §3.7) reuse the same algorithm over the T·n_h steps: k, v and beta already have one row per step;
// the per-token q and g (dim TQ) are spread onto the steps — the gate on each token's first step, the
// query on its last — and o is gathered from the last steps (chunk.spread_steps / gather_steps).
#include <algorithm>

#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Dialect/DGPS/IR/DGPS.h"
#include "dgps/Transforms/Passes.h"
#include "mlir/IR/Builders.h"

namespace dgps {
#define GEN_PASS_DEF_LOWERTOCHUNK
#include "dgps/Transforms/Passes.h.inc"
}  // namespace dgps

using namespace mlir;
using dgps::chunk::ChunkTensorType;
using dgps::chunk::Dim;

namespace {

/// Builds the body of one forward function.
class ForwardBuilder {
 public:
  ForwardBuilder(dgps::ir::RecurrenceOp op, OpBuilder& b)
      : op_(op), b_(b), loc_(op.getLoc()), ctx_(op.getContext()) {
    f32_ = b.getF32Type();
    steps_ = op.householderStepsOr1();
    // Activations (q, k, v, o, and buffers stored in the input dtype) use the spec's first input
    // dtype; the float64 executor ignores element types.
    act_ = cast<TypeAttr>(op.getInputDtypes()[0]).getValue();
  }

  void build() {
    Value q = load("q", {Dim::B, tokens(), Dim::H, Dim::K}, act_);
    Value k = load("k", {Dim::B, Dim::T, Dim::H, Dim::K}, act_);
    Value v = load("v", {Dim::B, Dim::T, Dim::HV, Dim::V}, act_);
    Value gate = decayGate();
    Value gain = mainGain();

    // Read key k̂ and normalised query q̂ (scale is applied by the output op).
    Value readKey = normalise(k);
    Value query = onStep(normalise(q), steps_ - 1);
    Value G = b_.create<dgps::chunk::GateCumsumOp>(loc_, gate.getType(), gate);

    // Write key: k̃ = P ⊙ k̂ for a key-side preconditioner, else the read key itself.
    Value writeKey = readKey;
    if (op_.getPrecond() == dgps::ir::PrecondKind::Diagonal) {
      bool keySide = *op_.getPrecondSide() == dgps::ir::PrecondSide::Key;
      Value applied = precondition(keySide ? readKey : query, readKey, gain);
      (keySide ? writeKey : query) = applied;
    }

    Value w, u;
    if (op_.getSolve() == dgps::ir::SolveKind::Delta) {
      Value kkt = b_.create<dgps::chunk::KKTOp>(loc_, type({Dim::B, Dim::T, Dim::HV, Dim::C}), readKey,
                                                writeKey, gain, G);
      // 𝒯 is stored in the input dtype between kernels, as FLA does (docs/math.md §4.2 step 4).
      Value tril = b_.create<dgps::chunk::SolveTrilOp>(loc_, type({Dim::B, Dim::T, Dim::HV, Dim::C}, act_), kkt);
      auto wy = b_.create<dgps::chunk::WYRecomputeOp>(
          loc_, type({Dim::B, Dim::T, Dim::HV, Dim::K}, act_), type({Dim::B, Dim::T, Dim::HV, Dim::V}, act_),
          tril, readKey, v, gain, G);
      w = wy.getW();
      u = wy.getU();
    } else {
      u = b_.create<dgps::chunk::GainScaleOp>(loc_, v.getType(), v, gain);
    }

    Value s0 = op_.getIo().getInitialState().getValue()
                   ? load("initial_state", {Dim::N, Dim::HV, Dim::K, Dim::V}, f32_, 0.0)
                   : splat(0.0, {Dim::N, Dim::HV, Dim::K, Dim::V});
    auto pass = b_.create<dgps::chunk::StatePassOp>(
        loc_, type({Dim::B, Dim::T, Dim::HV, Dim::V}), type({Dim::B, Dim::NT, Dim::HV, Dim::K, Dim::V}),
        type({Dim::N, Dim::HV, Dim::K, Dim::V}), w, u, writeKey, G, s0);
    FloatAttr scale = op_.getScaleAttr() ? b_.getF64FloatAttr(op_.getScale()->convertToDouble()) : FloatAttr();
    Value attn = b_.create<dgps::chunk::QKAttnOp>(loc_, type({Dim::B, Dim::T, Dim::HV, Dim::C}, act_), query,
                                                  writeKey, G, scale);
    Value o = b_.create<dgps::chunk::OutputOp>(loc_, type({Dim::B, Dim::T, Dim::HV, Dim::V}, act_), query,
                                               pass.getVNew(), pass.getStates(), attn, G, scale);
    store("o", steps_ > 1 ? b_.create<dgps::chunk::GatherStepsOp>(loc_, type({Dim::B, Dim::TQ, Dim::HV, Dim::V}, act_), o,
                                                                b_.getI64IntegerAttr(steps_),
                                                                b_.getI64IntegerAttr(steps_ - 1))
                          : o);
    if (op_.getIo().getFinalState().getValue()) store("final_state", pass.getFinal());
  }

 private:
  ChunkTensorType type(ArrayRef<Dim> dims, Type elem = {}) {
    return dgps::chunk::tensorType(ctx_, dims, elem ? elem : f32_);
  }
  Value load(StringRef name, ArrayRef<Dim> dims, Type elem, std::optional<double> absent = {}) {
    FloatAttr a = absent ? b_.getF64FloatAttr(*absent) : FloatAttr();
    return b_.create<dgps::chunk::LoadOp>(loc_, type(dims, elem), b_.getStringAttr(name), a);
  }
  Value splat(double value, ArrayRef<Dim> dims) {
    return b_.create<dgps::chunk::SplatOp>(loc_, type(dims), b_.getF64FloatAttr(value));
  }
  void store(StringRef name, Value v) { b_.create<dgps::chunk::StoreOp>(loc_, b_.getStringAttr(name), v); }

  /// The axis of the per-token tensors q, g, o: T, or TQ when T counts Householder steps.
  Dim tokens() const { return steps_ > 1 ? Dim::TQ : Dim::T; }

  /// A per-token tensor on Householder step `step` of each token (zero on the others); itself with one step.
  Value onStep(Value x, int64_t step) {
    if (steps_ == 1) return x;
    auto t = cast<ChunkTensorType>(x.getType());
    SmallVector<Dim, 4> dims(t.getDims());
    dims[1] = Dim::T;
    return b_.create<dgps::chunk::SpreadStepsOp>(loc_, type(dims, t.getElementType()), x, b_.getI64IntegerAttr(steps_),
                                                 b_.getI64IntegerAttr(step));
  }

  Value normalise(Value x) {
    if (!op_.getQkL2norm()) return x;
    auto t = cast<ChunkTensorType>(x.getType());
    return b_.create<dgps::chunk::L2NormOp>(loc_, type(t.getDims()), x,
                                            b_.getF64FloatAttr(op_.getL2normEps().convertToDouble()));
  }

  /// The natural-log decay gate: g [B,T,HV] or [B,T,HV,K]; zero without decay (D = I).
  Value decayGate() {
    switch (op_.getDecay()) {
      case dgps::ir::DecayKind::Scalar: return onStep(load("g", {Dim::B, tokens(), Dim::HV}, f32_), 0);
      case dgps::ir::DecayKind::Diagonal: return onStep(load("g", {Dim::B, tokens(), Dim::HV, Dim::K}, f32_), 0);
      case dgps::ir::DecayKind::None: break;
    }
    return splat(0.0, {Dim::B, Dim::T, Dim::HV});
  }

  /// β [B,T,HV]; one without a gain input.
  Value mainGain() {
    if (op_.getGain() == dgps::ir::GainKind::Scalar) return load("beta", {Dim::B, Dim::T, Dim::HV}, f32_);
    return splat(1.0, {Dim::B, Dim::T, Dim::HV});
  }

  /// The token-by-token preconditioner scan and its application to `target` (k̂ or q̂).
  Value precondition(Value target, Value readKey, Value gain) {
    const Dims bthk{Dim::B, Dim::T, Dim::H, Dim::K};
    const Dims bth{Dim::B, Dim::T, Dim::H};
    const Dims nhk{Dim::N, Dim::H, Dim::K};
    bool initState = op_.getIo().getInitialPrecondState().getValue();
    bool finalState = op_.getIo().getFinalPrecondState().getValue();
    if (dgps::ir::SquashAttr sq = op_.getSquashAttr()) {
      Value ga = sq.getGate().getValue() ? load("precond_g", bth, f32_) : splat(0.0, bth);
      Value ba = sq.getGain().getValue() ? load("precond_beta", bth, f32_) : splat(1.0, bth);
      Value a0 = initState ? load("initial_precond_state", nhk, f32_, 0.0) : splat(0.0, nhk);
      Value center = load("precond_center", {Dim::H}, f32_);
      auto scan = b_.create<dgps::chunk::AccumScanOp>(loc_, type(bthk), type(nhk), readKey, ga, ba, a0);
      if (finalState) store("final_precond_state", scan.getFinal());
      return b_.create<dgps::chunk::SquashApplyOp>(loc_, type(bthk), target, scan.getAccum(), center,
                                                   b_.getF64FloatAttr(sq.getX().getValueAsDouble()),
                                                   b_.getF64FloatAttr(sq.getEps().getValueAsDouble()));
    }
    dgps::ir::HypergradAttr hg = op_.getHypergradAttr();
    double init = hg.getInit().getValueAsDouble();
    Value retention = hg.getRetention().getValue() ? load("precond_g", bth, f32_) : splat(0.0, bth);
    Value d0 = initState ? load("initial_precond_state", nhk, f32_, init) : Value();
    FloatAttr mn = hg.getClampMin() ? b_.getF64FloatAttr(hg.getClampMin().getValueAsDouble()) : FloatAttr();
    FloatAttr mx = hg.getClampMax() ? b_.getF64FloatAttr(hg.getClampMax().getValueAsDouble()) : FloatAttr();
    auto scan = b_.create<dgps::chunk::HypergradScanOp>(
        loc_, type(bthk), type(nhk), readKey, gain, retention, d0,
        b_.getF64FloatAttr(hg.getEta().getValueAsDouble()), b_.getF64FloatAttr(init),
        b_.getBoolAttr(hg.getTiming().getValue() == dgps::ir::WriteTiming::Post), mn, mx);
    if (finalState) store("final_precond_state", scan.getFinal());
    return b_.create<dgps::chunk::DiagApplyOp>(loc_, type(bthk), target, scan.getDiag());
  }

  using Dims = SmallVector<Dim, 4>;
  dgps::ir::RecurrenceOp op_;
  OpBuilder& b_;
  Location loc_;
  MLIRContext* ctx_;
  Type f32_, act_;
  int64_t steps_ = 1;  ///< Householder steps per token n_h
};

/// The chunk size the IR is specialised for: 64 when the tuning space allows it (the released
/// kernels' size, docs/math.md §7.6), else the largest allowed.
int64_t defaultChunk(dgps::ir::TuningAttr t) {
  ArrayRef<int64_t> c = t.getChunk().asArrayRef();
  if (llvm::is_contained(c, 64)) return 64;
  return c.empty() ? 64 : *std::max_element(c.begin(), c.end());
}

struct LowerToChunkPass : dgps::impl::LowerToChunkBase<LowerToChunkPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<dgps::ir::RecurrenceOp> ops(module.getOps<dgps::ir::RecurrenceOp>());
    if (ops.empty()) {
      module.emitError() << "no dgps.recurrence to lower; expected a module of dgps IR";
      return signalPassFailure();
    }
    for (dgps::ir::RecurrenceOp op : ops) {
      OpBuilder b(op);
      auto fn = b.create<func::FuncOp>(op.getLoc(), (op.getSymName() + "_forward").str(),
                                       b.getFunctionType({}, {}));
      fn->setAttr(dgps::chunk::kChunkSizeAttr, b.getI64IntegerAttr(defaultChunk(op.getTuning())));
      fn->setAttr(dgps::chunk::kGvaAttr, b.getI64IntegerAttr(op.getGvaRatio()));
      fn->setAttr(dgps::chunk::kKeyDimsAttr, op.getKeyDimsAttr());
      fn->setAttr(dgps::chunk::kValueDimsAttr, op.getValueDimsAttr());
      fn->setAttr(dgps::chunk::kTuningAttr, op.getTuning());
      if (op.householderStepsOr1() > 1)
        fn->setAttr(dgps::chunk::kHouseholderStepsAttr, b.getI64IntegerAttr(op.householderStepsOr1()));
      Block* body = fn.addEntryBlock();
      b.setInsertionPointToStart(body);
      ForwardBuilder(op, b).build();
      b.create<func::ReturnOp>(op.getLoc());
      op.erase();
    }
  }
};

}  // namespace
