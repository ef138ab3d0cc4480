// --chunk-derive-backward: reverse mode over the chunk ops of a lowered forward function (Passes.td,
// docs/backward_ir.md). The backward function recomputes (or loads, when kept) the forward values the
// adjoints need, then visits the forward ops in reverse program order: every op whose results carry a
// cotangent gets its adjoint op (ChunkGradOps.td), which contributes cotangents to the op's operands.
// Reverse program order means all uses of a value are visited before its definition, so its
// contributions are complete when they are summed.
#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

namespace dgps {
#define GEN_PASS_DEF_DERIVEBACKWARD
#include "dgps/Transforms/Passes.h.inc"
}  // namespace dgps

using namespace mlir;
using namespace dgps::chunk;

namespace {

/// The name of a forward intermediate in bwd.keep / bwd.recompute: the op's mnemonic, with the
/// result's name for ops with several results (and the normalised input for l2norm).
std::string intermediateName(OpResult r) {
  Operation* op = r.getOwner();
  const unsigned i = r.getResultNumber();
  return llvm::TypeSwitch<Operation*, std::string>(op)
      .Case([](L2NormOp o) {
        auto load = o.getInput().getDefiningOp<LoadOp>();
        return "l2norm." + (load ? load.getName().str() : std::string("x"));
      })
      .Case([&](WYRecomputeOp) { return i == 0 ? "wy_recompute.w" : "wy_recompute.u"; })
      .Case([&](StatePassOp) {
        static const char* names[] = {"state_pass.v_new", "state_pass.states", "state_pass.final"};
        return std::string(names[i]);
      })
      .Case([&](AccumScanOp) { return i == 0 ? "accum_scan.accum" : "accum_scan.final"; })
      .Case([&](HypergradScanOp) { return i == 0 ? "hypergrad_scan.diag" : "hypergrad_scan.final"; })
      .Default([](Operation* o) { return o->getName().stripDialect().str(); });
}

/// Intermediates the forward can store: each is produced by one kernel of the forward plan (the cheap
/// per-token values — l2norm, gate cumsum, the preconditioner apply — are recomputed where used).
const llvm::StringSet<>& keepable() {
  static const llvm::StringSet<> names = {"solve_tril",       "kkt",
                                          "qk_attn",          "wy_recompute.w",
                                          "wy_recompute.u",   "state_pass.v_new",
                                          "state_pass.states"};
  return names;
}

/// The diagnostic for a forward op the derivation does not handle; empty when it is handled.
std::string unsupported(Operation* op) {
  if (isa<AccumSummaryOp, AccumPassOp, AccumApplyOp, HypergradPassOp, HypergradApplyOp>(op))
    return "backward is derived from the unfused preconditioner scan; run --chunk-derive-backward before "
           "--chunk-fuse-preconditioner";
  if (isa<KernelOp>(op))
    return "forward is already partitioned; run --chunk-derive-backward before --chunk-partition-kernels";
  if (isa<LoadOp, StoreOp, SplatOp, L2NormOp, GateCumsumOp, KKTOp, SolveTrilOp, WYRecomputeOp, GainScaleOp,
          StatePassOp, QKAttnOp, OutputOp, AccumScanOp, SquashApplyOp, HypergradScanOp, DiagApplyOp,
          func::ReturnOp>(op))
    return "";
  return "backward not derived for '" + op->getName().getStringRef().str() + "' yet";
}

class Deriver {
 public:
  Deriver(func::FuncOp fwd, const llvm::StringSet<>& keep)
      : fwd_(fwd), keep_(keep), b_(fwd.getContext()), f32_(Float32Type::get(fwd.getContext())) {}

  LogicalResult run() {
    for (Operation& op : fwd_.getBody().front())
      if (std::string why = unsupported(&op); !why.empty()) return op.emitError() << why;
    createFunction();
    recomputeForward();
    seedCotangents();
    for (Operation& op : llvm::reverse(fwd_.getBody().front().without_terminator()))
      if (!isa<StoreOp>(op) && hasCotangent(&op)) adjoint(&op);
    b_.create<func::ReturnOp>(fwd_.getLoc());
    eraseDeadOps();
    saveKeptValues();
    return success();
  }

 private:
  // ---- setup -------------------------------------------------------------------------------------
  void createFunction() {
    OpBuilder mb(fwd_);
    mb.setInsertionPointAfter(fwd_);
    StringRef name = fwd_.getSymName();
    std::string bwdName = (name.ends_with("_forward") ? name.drop_back(8) : name).str() + "_backward";
    bwd_ = mb.create<func::FuncOp>(fwd_.getLoc(), bwdName, mb.getFunctionType({}, {}));
    for (const char* attr : {kChunkSizeAttr, kGvaAttr, kKeyDimsAttr, kValueDimsAttr, kTuningAttr})
      if (Attribute a = fwd_->getAttr(attr)) bwd_->setAttr(attr, a);
    bwd_->setAttr(kBackwardOfAttr, FlatSymbolRefAttr::get(fwd_.getSymNameAttr()));
    b_.setInsertionPointToStart(bwd_.addEntryBlock());
  }

  /// Clones the forward's ops (not its stores) into the backward; a kept result is loaded instead.
  void recomputeForward() {
    for (Operation& op : fwd_.getBody().front().without_terminator()) {
      if (isa<StoreOp>(op)) continue;
      Operation* clone = b_.clone(op, map_);
      clones_.insert(clone);
      for (OpResult r : op.getResults()) {
        std::string name = intermediateName(r);
        if (isa<LoadOp, SplatOp>(op) || !keep_.contains(name)) continue;
        auto type = cast<ChunkTensorType>(r.getType()).withGlobal(true);
        Value saved = b_.create<LoadOp>(op.getLoc(), type, b_.getStringAttr(kSavedPrefix + name), FloatAttr());
        map_.map(r, saved);
        kept_.push_back({r, saved.getDefiningOp(), name});
      }
    }
  }

  /// The cotangents of the forward's outputs: loads of do, dfinal_state, dfinal_precond_state.
  void seedCotangents() {
    for (StoreOp store : fwd_.getBody().getOps<StoreOp>()) {
      StringRef name = store.getName();
      if (name.starts_with(kSavedPrefix)) continue;
      auto type = cast<ChunkTensorType>(store.getValue().getType());
      FloatAttr absent = name == "o" ? FloatAttr() : b_.getF64FloatAttr(0.0);
      Value seed = b_.create<LoadOp>(store.getLoc(), type.withGlobal(false), b_.getStringAttr("d" + name.str()),
                                     absent);
      contribute(store.getValue(), seed);
    }
  }

  // ---- cotangent bookkeeping -----------------------------------------------------------------------
  void contribute(Value fwdValue, Value cot) {
    if (!fwdValue || fwdValue.getDefiningOp<SplatOp>()) return;  // constants have no gradient
    cot_[fwdValue].push_back(cot);
  }
  bool hasCotangent(Operation* op) const {
    return llvm::any_of(op->getResults(), [&](Value r) { return cot_.count(r); });
  }
  /// The summed cotangent of a forward value (a zero splat when nothing reached it).
  Value cotangent(Value fwdValue) {
    auto it = cot_.find(fwdValue);
    if (it == cot_.end()) return zero(fwdValue);
    if (it->second.size() == 1) return it->second.front();
    Type t = it->second.front().getType();
    return b_.create<AddOp>(fwdValue.getLoc(), t, it->second);
  }
  Value zero(Value like) {
    return b_.create<SplatOp>(like.getLoc(), f32(like), b_.getF64FloatAttr(0.0));
  }
  /// The backward's copy of a forward value (null for an absent optional operand).
  Value m(Value fwdValue) const { return fwdValue ? map_.lookup(fwdValue) : Value(); }
  ChunkTensorType f32(Value like) const {
    return tensorType(f32_.getContext(), cast<ChunkTensorType>(like.getType()).getDims(), f32_);
  }
  ChunkTensorType f32(ArrayRef<Dim> dims) const { return tensorType(f32_.getContext(), dims, f32_); }
  /// The cotangent type of a gate operand: the gate's dims, [B,T,HV] when absent.
  ChunkTensorType gateType(Value gate) const {
    return gate ? f32(gate) : f32({Dim::B, Dim::T, Dim::HV});
  }

  // ---- adjoints ------------------------------------------------------------------------------------
  void adjoint(Operation* op) {
    Location loc = op->getLoc();
    llvm::TypeSwitch<Operation*>(op)
        .Case([&](LoadOp o) {
          b_.create<StoreOp>(loc, b_.getStringAttr("d" + o.getName().str()), cotangent(o));
        })
        .Case([&](L2NormOp o) {
          contribute(o.getInput(), b_.create<L2NormGradOp>(loc, f32(o.getInput()), m(o.getInput()), cotangent(o),
                                                           o.getEpsAttr()));
        })
        .Case([&](GateCumsumOp o) {
          contribute(o.getGate(), b_.create<GateCumsumGradOp>(loc, f32(o.getGate()), cotangent(o)));
        })
        .Case([&](KKTOp o) {
          auto g = b_.create<KKTGradOp>(loc, f32(o.getReadKey()), f32(o.getWriteKey()),
                                        f32({Dim::B, Dim::T, Dim::HV}), gateType(o.getGate()), m(o.getReadKey()),
                                        m(o.getWriteKey()), m(o.getGain()), m(o.getGate()), cotangent(o));
          contribute(o.getReadKey(), g.getDReadKey());
          contribute(o.getWriteKey(), g.getDWriteKey());
          contribute(o.getGain(), g.getDGain());
          contribute(o.getGate(), g.getDGate());
        })
        .Case([&](SolveTrilOp o) {
          contribute(o.getKkt(), b_.create<SolveTrilGradOp>(loc, f32(o.getKkt()), m(o), cotangent(o)));
        })
        .Case([&](WYRecomputeOp o) {
          auto g = b_.create<WYRecomputeGradOp>(
              loc, f32(o.getTril()), f32(o.getReadKey()), f32(o.getValue()), f32({Dim::B, Dim::T, Dim::HV}),
              gateType(o.getGate()), m(o.getTril()), m(o.getReadKey()), m(o.getValue()), m(o.getGain()),
              m(o.getGate()), cotangent(o.getW()), cotangent(o.getU()));
          contribute(o.getTril(), g.getDTril());
          contribute(o.getReadKey(), g.getDReadKey());
          contribute(o.getValue(), g.getDValue());
          contribute(o.getGain(), g.getDGain());
          contribute(o.getGate(), g.getDGate());
        })
        .Case([&](GainScaleOp o) {
          auto g = b_.create<GainScaleGradOp>(loc, f32(o.getValue()), f32(o.getGain()), m(o.getValue()),
                                              m(o.getGain()), cotangent(o));
          contribute(o.getValue(), g.getDValue());
          contribute(o.getGain(), g.getDGain());
        })
        .Case([&](StatePassOp o) {
          auto g = b_.create<StatePassGradOp>(
              loc, f32({Dim::B, Dim::T, Dim::HV, Dim::K}), f32(o.getU()), f32(o.getWriteKey()),
              gateType(o.getGate()), f32(o.getFinal()), m(o.getW()), m(o.getWriteKey()), m(o.getGate()),
              m(o.getVNew()), m(o.getStates()), cotangent(o.getVNew()), cotangent(o.getStates()),
              cotangent(o.getFinal()));
          contribute(o.getW(), g.getDW());
          contribute(o.getU(), g.getDU());
          contribute(o.getWriteKey(), g.getDWriteKey());
          contribute(o.getGate(), g.getDGate());
          contribute(o.getInit(), g.getDInit());
        })
        .Case([&](QKAttnOp o) {
          auto g = b_.create<QKAttnGradOp>(loc, f32(o.getQuery()), f32(o.getWriteKey()), gateType(o.getGate()),
                                           m(o.getQuery()), m(o.getWriteKey()), m(o.getGate()), cotangent(o),
                                           o.getScaleAttr());
          contribute(o.getQuery(), g.getDQuery());
          contribute(o.getWriteKey(), g.getDWriteKey());
          contribute(o.getGate(), g.getDGate());
        })
        .Case([&](OutputOp o) {
          auto g = b_.create<OutputGradOp>(loc, f32(o.getQuery()), f32(o.getVNew()), f32(o.getStates()),
                                           f32(o.getAttn()), gateType(o.getGate()), m(o.getQuery()), m(o.getVNew()),
                                           m(o.getStates()), m(o.getAttn()), m(o.getGate()), cotangent(o),
                                           o.getScaleAttr());
          contribute(o.getQuery(), g.getDQuery());
          contribute(o.getVNew(), g.getDVNew());
          contribute(o.getStates(), g.getDStates());
          contribute(o.getAttn(), g.getDAttn());
          contribute(o.getGate(), g.getDGate());
        })
        .Case([&](AccumScanOp o) {
          auto g = b_.create<AccumScanGradOp>(loc, f32(o.getKey()), f32({Dim::B, Dim::T, Dim::H}),
                                              f32({Dim::B, Dim::T, Dim::H}), f32(o.getFinal()), m(o.getKey()),
                                              m(o.getGate()), m(o.getGain()), m(o.getInit()), m(o.getAccum()),
                                              cotangent(o.getAccum()), cotangent(o.getFinal()));
          contribute(o.getKey(), g.getDKey());
          contribute(o.getGate(), g.getDGate());
          contribute(o.getGain(), g.getDGain());
          contribute(o.getInit(), g.getDInit());
        })
        .Case([&](SquashApplyOp o) {
          auto g = b_.create<SquashApplyGradOp>(loc, f32(o.getTarget()), f32(o.getAccum()), f32(o.getCenter()),
                                                m(o.getTarget()), m(o.getAccum()), m(o.getCenter()), cotangent(o),
                                                o.getXAttr(), o.getEpsAttr());
          contribute(o.getTarget(), g.getDTarget());
          contribute(o.getAccum(), g.getDAccum());
          contribute(o.getCenter(), g.getDCenter());
        })
        .Case([&](HypergradScanOp o) {
          auto g = b_.create<HypergradScanGradOp>(
              loc, f32(o.getKey()), o.getGain() ? f32(o.getGain()) : f32({Dim::B, Dim::T, Dim::HV}),
              o.getRetention() ? f32(o.getRetention()) : f32({Dim::B, Dim::T, Dim::H}), f32(o.getFinal()),
              m(o.getKey()), m(o.getGain()), m(o.getRetention()), m(o.getInit()), m(o.getDiag()),
              cotangent(o.getDiag()), cotangent(o.getFinal()), o.getEtaAttr(), o.getDInitAttr(), o.getPostAttr(),
              o.getClampMinAttr(), o.getClampMaxAttr());
          contribute(o.getKey(), g.getDKey());
          contribute(o.getGain(), g.getDGain());
          contribute(o.getRetention(), g.getDRetention());
          contribute(o.getInit(), g.getDInitState());
        })
        .Case([&](DiagApplyOp o) {  // y = t ⊙ d: dt = dy ⊙ d, dd = dy ⊙ t (the same elementwise product)
          Value dy = cotangent(o);
          contribute(o.getTarget(), b_.create<DiagApplyOp>(loc, f32(o.getTarget()), dy, m(o.getDiag())));
          contribute(o.getDiag(), b_.create<DiagApplyOp>(loc, f32(o.getDiag()), dy, m(o.getTarget())));
        })
        .Default([](Operation*) {});  // splat: a constant
  }

  // ---- cleanup -------------------------------------------------------------------------------------
  /// Removes recomputed forward ops (and adjoint results) the backward does not use.
  void eraseDeadOps() {
    Block& body = bwd_.getBody().front();
    for (Operation& op : llvm::make_early_inc_range(llvm::reverse(body))) {
      if (isa<StoreOp, func::ReturnOp>(op) || !op.use_empty()) continue;
      erased_.insert(&op);
      clones_.remove(&op);
      op.erase();
    }
  }

  /// The forward stores each kept value the backward still loads; records the policy on the backward.
  void saveKeptValues() {
    SmallVector<Attribute> keep, recompute;
    for (const Kept& k : kept_) {
      if (erased_.contains(k.load)) continue;
      OpBuilder fb(k.value.getOwner()->getNextNode());
      fb.create<StoreOp>(k.value.getLoc(), fb.getStringAttr(kSavedPrefix + k.name), k.value);
      keep.push_back(b_.getStringAttr(k.name));
    }
    for (Operation* op : clones_)
      if (!isa<LoadOp, SplatOp>(op))
        for (OpResult r : op->getResults())
          if (!r.use_empty()) recompute.push_back(b_.getStringAttr(intermediateName(r)));
    bwd_->setAttr(kBwdKeepAttr, b_.getArrayAttr(keep));
    bwd_->setAttr(kBwdRecomputeAttr, b_.getArrayAttr(recompute));
  }

  struct Kept {
    OpResult value;  // in the forward
    Operation* load;  // in the backward
    std::string name;
  };
  func::FuncOp fwd_, bwd_;
  const llvm::StringSet<>& keep_;
  OpBuilder b_;
  Type f32_;
  IRMapping map_;
  llvm::DenseMap<Value, SmallVector<Value, 2>> cot_;
  llvm::SetVector<Operation*> clones_;
  llvm::SmallPtrSet<Operation*, 8> erased_;
  SmallVector<Kept> kept_;
};

struct DeriveBackwardPass : dgps::impl::DeriveBackwardBase<DeriveBackwardPass> {
  using DeriveBackwardBase::DeriveBackwardBase;
  void runOnOperation() override {
    llvm::StringSet<> keepSet;
    if (keep.empty()) keepSet.insert("solve_tril");  // FLA's policy: 𝒯 saved, everything else recomputed
    for (const std::string& k : keep) {
      if (k == "none") continue;
      if (!keepable().contains(k)) {
        getOperation().emitError() << "--chunk-derive-backward keep: '" << k
                                   << "' is not a forward intermediate the forward can store; expected one of "
                                      "solve_tril, kkt, qk_attn, wy_recompute.w, wy_recompute.u, "
                                      "state_pass.v_new, state_pass.states (or none)";
        return signalPassFailure();
      }
      keepSet.insert(k);
    }
    SmallVector<func::FuncOp> forwards;
    for (func::FuncOp fn : getOperation().getOps<func::FuncOp>())
      if (fn->hasAttr(kChunkSizeAttr) && !fn->hasAttr(kBackwardOfAttr)) forwards.push_back(fn);
    if (forwards.empty()) {
      getOperation().emitError() << "no forward function (func.func with chunk.chunk_size) to differentiate; "
                                    "run --dgps-lower-to-chunk first";
      return signalPassFailure();
    }
    for (func::FuncOp fn : forwards) {
      for (func::FuncOp other : getOperation().getOps<func::FuncOp>())
        if (auto of = other->getAttrOfType<FlatSymbolRefAttr>(kBackwardOfAttr); of && of.getValue() == fn.getSymName()) {
          fn.emitError() << "already has a backward function (@" << other.getSymName() << ")";
          return signalPassFailure();
        }
      if (failed(Deriver(fn, keepSet).run())) return signalPassFailure();
    }
  }
};

}  // namespace
