// The float64 interpreter of chunk IR (Executor.h), shared by the forward ops (Executor.cpp) and the
// adjoint ops of a derived backward (ExecutorBackward.cpp). One member function per op, each a direct
// transcription of the op's formula in ChunkOps.td / ChunkGradOps.td, looping over chunks the way a
// kernel's grid would. Internal to dgps_executor.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>

#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Executor/Executor.h"
#include "dgps/dsl/SegmentScan.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

namespace dgps::exec {

using namespace mlir;
using namespace dgps::chunk;


/// An execution error; caught at the entry point and turned into ExecutorResult::error.
struct ExecError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One chunk of one sequence: tokens [t0, t0 + len) of batch row b, stored at chunk slot `slot`.
struct ChunkRef {
  int64_t b, n, t0, len, slot;
};

/// A whole tensor in row-major order over its symbolic dims.
struct Array {
  SmallVector<Dim, 5> dims;
  SmallVector<int64_t, 5> sizes;
  std::vector<double> data;
};
using ArrayPtr = std::shared_ptr<Array>;

class Interpreter {
 public:
  Interpreter(func::FuncOp fn, const TensorMap& inputs, const ExecutorOptions& options)
      : fn_(fn), inputs_(inputs) {
    readShape(options);
  }

  TensorMap run() {
    runBlock(fn_.getBody().front());
    return std::move(outputs_);
  }

 private:
  // ---- problem shape ---------------------------------------------------------------------------
  void readShape(const ExecutorOptions& options) {
    const Tensor& q = input("q");
    const Tensor& v = input("v");
    if (q.rank() != 4) throw ExecError("input q: expected [B, T, H, K], got " + q.shapeString());
    if (v.rank() != 4) throw ExecError("input v: expected [B, T, HV, V], got " + v.shapeString());
    // With n_h Householder steps per token, q has TQ tokens and the chunkwise ops run over T = TQ·n_h steps.
    if (auto n = fn_->getAttrOfType<IntegerAttr>(kHouseholderStepsAttr)) steps_ = n.getInt();
    if (steps_ < 1) throw ExecError("chunk.householder_steps must be >= 1");
    B_ = q.dim(0), TQ_ = q.dim(1), H_ = q.dim(2), K_ = q.dim(3);
    T_ = TQ_ * steps_;
    HV_ = v.dim(2), V_ = v.dim(3);
    if (v.dim(0) != B_ || v.dim(1) != T_)
      throw ExecError("input v: expected [B, T" + std::string(steps_ > 1 ? "·n_h" : "") + ", HV, V] with B = " +
                      std::to_string(B_) + ", T" + (steps_ > 1 ? "·n_h = " + std::to_string(TQ_) + "·" +
                                                                     std::to_string(steps_) + " = "
                                                               : std::string(" = ")) +
                      std::to_string(T_) + ", got " + v.shapeString());
    if (H_ < 1 || HV_ < H_ || HV_ % H_ != 0)
      throw ExecError("heads: HV = " + std::to_string(HV_) + " must be a positive multiple of H = " +
                      std::to_string(H_));
    if (options.chunkSize)
      C_ = *options.chunkSize;
    else if (auto c = fn_->getAttrOfType<IntegerAttr>(kChunkSizeAttr))
      C_ = c.getInt();
    if (C_ < 1) throw ExecError("chunk size must be >= 1");
    defaultScale_ = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(K_));
    segmentOptions_ = options;

    // Sequences and their chunks (varlen: B = 1 and chunks restart at every cu_seqlens boundary).
    auto cu = inputs_.find("cu_seqlens");
    std::vector<std::pair<int64_t, int64_t>> seqs;  // (b, bos) with length
    std::vector<int64_t> lens;
    if (cu != inputs_.end()) {
      const Tensor& c = cu->second;
      cu_ = true;
      if (B_ != 1) throw ExecError("cu_seqlens needs B = 1, got B = " + std::to_string(B_));
      if (c.rank() != 1 || c.numel() < 2) throw ExecError("cu_seqlens: expected [N + 1] with N >= 1");
      for (int64_t i = 0; i + 1 < c.numel(); ++i) {
        // cu_seqlens counts tokens; the chunks split the steps (token t owns rows t·n_h .. t·n_h + n_h − 1).
        int64_t a = c.getInt(i), e = c.getInt(i + 1);
        if (a < 0 || e < a || e > TQ_) throw ExecError("cu_seqlens: not a non-decreasing split of [0, T]");
        a *= steps_, e *= steps_;
        seqs.push_back({0, a});
        lens.push_back(e - a);
      }
      // cu[N] < T is a padded token buffer: rows past cu[N] are in no chunk and their outputs stay 0.
      if (c.getInt(0) != 0) throw ExecError("cu_seqlens: must start at 0 and end at most at T");
      int64_t slot = 0;
      for (size_t n = 0; n < seqs.size(); ++n)
        for (int64_t t = 0; t < lens[n]; t += C_)
          chunks_.push_back({0, static_cast<int64_t>(n), seqs[n].second + t, std::min(C_, lens[n] - t), slot++});
      NT_ = slot;
      N_ = static_cast<int64_t>(seqs.size());
    } else {
      NT_ = (T_ + C_ - 1) / C_;
      for (int64_t b = 0; b < B_; ++b)
        for (int64_t c = 0; c < NT_; ++c)
          chunks_.push_back({b, b, c * C_, std::min(C_, T_ - c * C_), b * NT_ + c});
      N_ = B_;
    }
  }

  const Tensor& input(const std::string& name) const {
    auto it = inputs_.find(name);
    if (it == inputs_.end()) throw ExecError("missing input '" + name + "'");
    return it->second;
  }

  int64_t sizeOf(Dim d) const {
    switch (d) {
      case Dim::B: return B_;
      case Dim::T: return T_;
      case Dim::H: return H_;
      case Dim::HV: return HV_;
      case Dim::K: return K_;
      case Dim::V: return V_;
      case Dim::C: return C_;
      case Dim::NT: return NT_;  // chunk slots per batch row (all chunks with varlen, B = 1)
      case Dim::N: return N_;
      case Dim::NS:  // segment slots per batch row (all segments with varlen, B = 1)
        return static_cast<int64_t>(segments().size()) / (cu_ ? 1 : std::max<int64_t>(B_, 1));
      case Dim::TQ: return TQ_;  // tokens; T counts their Householder steps (T = TQ·n_h)
    }
    return 0;
  }

  ArrayPtr make(Type type, double fill = 0.0) const {
    auto t = cast<ChunkTensorType>(type);
    auto a = std::make_shared<Array>();
    int64_t n = 1;
    for (Dim d : t.getDims()) {
      a->dims.push_back(d);
      a->sizes.push_back(sizeOf(d));
      n *= a->sizes.back();
    }
    a->data.assign(static_cast<size_t>(n), fill);
    return a;
  }

  // ---- value plumbing --------------------------------------------------------------------------
  const Array& get(Value v) const {
    auto it = values_.find(v);
    if (it == values_.end()) throw ExecError("value used before it is computed");
    return *it->second;
  }
  const Array* getOpt(Value v) const { return v ? &get(v) : nullptr; }
  void set(Value v, ArrayPtr a) { values_[v] = std::move(a); }

  void runBlock(Block& block) {
    for (Operation& op : block) runOp(&op);
  }

  void runOp(Operation* op) {
    llvm::TypeSwitch<Operation*>(op)
        .Case([&](LoadOp o) { load(o); })
        .Case([&](StoreOp o) { store(o); })
        .Case([&](SplatOp o) { set(o, make(o.getType(), o.getValue().convertToDouble())); })
        .Case([&](L2NormOp o) { l2norm(o); })
        .Case([&](GateCumsumOp o) { gateCumsum(o); })
        .Case([&](KKTOp o) { kkt(o); })
        .Case([&](SolveTrilOp o) { solveTril(o); })
        .Case([&](WYRecomputeOp o) { wyRecompute(o); })
        .Case([&](GainScaleOp o) { gainScale(o); })
        .Case([&](StatePassOp o) { statePass(o); })
        .Case([&](QKAttnOp o) { qkAttn(o); })
        .Case([&](OutputOp o) { output(o); })
        .Case([&](AccumScanOp o) { accumScan(o); })
        .Case([&](SquashApplyOp o) { squashApply(o); })
        .Case([&](AccumSummaryOp o) { accumSummary(o); })
        .Case([&](AccumPassOp o) { accumPass(o); })
        .Case([&](AccumApplyOp o) { accumApply(o); })
        .Case([&](HypergradScanOp o) { hypergradScan(o); })
        .Case([&](DiagApplyOp o) { diagApply(o); })
        .Case([&](HypergradPassOp o) { hypergradPass(o); })
        .Case([&](HypergradApplyOp o) { hypergradApply(o); })
        .Case([&](KernelOp o) {
          runBlock(o.getBody().front());
          auto yield = cast<YieldOp>(o.getBody().front().getTerminator());
          for (auto [r, v] : llvm::zip(o.getBuffers(), yield.getValues())) {
            auto it = values_.find(v);
            if (it == values_.end())
              throw ExecError("kernel '" + o.getRole().str() + "' yields a value it never computed");
            ArrayPtr buffer = it->second;  // a copy: inserting r may grow the map and move its entries
            values_[r] = std::move(buffer);
          }
        })
        .Case([&](SpreadStepsOp o) { spreadSteps(o); })
        .Case([&](GatherStepsOp o) { gatherSteps(o); })
        .Case([&](YieldOp) {})
        .Case([&](func::ReturnOp) {})
        .Default([&](Operation* other) {
          if (runGradOp(other)) return;
          if (runSegmentOp(other)) return;
          if (runPrecondScanOp(other)) return;
          throw ExecError("cannot execute '" + other->getName().getStringRef().str() + "'");
        });
  }

  // ---- index helpers (FLA layouts) ----------------------------------------------------------------
  int64_t tok(int64_t b, int64_t t) const { return b * T_ + t; }                 // [B, T]
  int64_t keyHead(int64_t hv) const { return hv / (HV_ / H_); }                  // GVA
  double scalarGate(const Array* G, int64_t bt, int64_t hv) const { return G ? G->data[bt * HV_ + hv] : 0.0; }
  bool diagonal(const Array* G) const { return G && G->dims.size() == 4; }
  double gateAt(const Array* G, int64_t bt, int64_t hv, int64_t d) const {
    if (!G) return 0.0;
    return diagonal(G) ? G->data[(bt * HV_ + hv) * K_ + d] : G->data[bt * HV_ + hv];
  }
  const double* row(const Array& a, int64_t bt, int64_t head, int64_t heads, int64_t width) const {
    return &a.data[static_cast<size_t>((bt * heads + head) * width)];
  }
  double* row(Array& a, int64_t bt, int64_t head, int64_t heads, int64_t width) const {
    return &a.data[static_cast<size_t>((bt * heads + head) * width)];
  }
  double scaleOf(std::optional<llvm::APFloat> s) const { return s ? s->convertToDouble() : defaultScale_; }

  // ---- memory ----------------------------------------------------------------------------------
  void load(LoadOp o) {
    ArrayPtr a = make(o.getType());
    auto it = inputs_.find(o.getName().str());
    if (it == inputs_.end()) {
      if (!o.getAbsent()) throw ExecError("missing input '" + o.getName().str() + "'");
      std::fill(a->data.begin(), a->data.end(), o.getAbsent()->convertToDouble());
    } else {
      const Tensor& t = it->second;
      std::vector<int64_t> expected(a->sizes.begin(), a->sizes.end());
      if (t.shape() != expected) {
        std::string e = "[";
        for (size_t i = 0; i < expected.size(); ++i) e += (i ? ", " : "") + std::to_string(expected[i]);
        throw ExecError("input '" + o.getName().str() + "': expected shape " + e + "], got " + t.shapeString());
      }
      a->data = t.toDoubles();
    }
    set(o, a);
  }

  void store(StoreOp o) {
    const Array& a = get(o.getValue());
    std::vector<int64_t> shape(a.sizes.begin(), a.sizes.end());
    outputs_[o.getName().str()] = Tensor::fromDoubles(ScalarType::F64, shape, a.data);
  }

  // ---- prologue --------------------------------------------------------------------------------
  void l2norm(L2NormOp o) {
    const Array& x = get(o.getInput());
    ArrayPtr r = make(o.getType());
    const int64_t w = x.sizes.back(), rows = static_cast<int64_t>(x.data.size()) / std::max<int64_t>(w, 1);
    const double eps = o.getEps().convertToDouble();
    for (int64_t i = 0; i < rows; ++i) {
      double ss = 0;
      for (int64_t d = 0; d < w; ++d) ss += x.data[i * w + d] * x.data[i * w + d];
      const double f = 1.0 / std::sqrt(ss + eps);
      for (int64_t d = 0; d < w; ++d) r->data[i * w + d] = x.data[i * w + d] * f;
    }
    set(o, r);
  }

  void gateCumsum(GateCumsumOp o) {
    const Array& g = get(o.getGate());
    ArrayPtr r = make(o.getType());
    const int64_t w = g.dims.size() == 4 ? K_ : 1;
    for (const ChunkRef& c : chunks_)
      for (int64_t hv = 0; hv < HV_; ++hv)
        for (int64_t d = 0; d < w; ++d) {
          double acc = 0;
          for (int64_t i = 0; i < c.len; ++i) {
            const int64_t at = (tok(c.b, c.t0 + i) * HV_ + hv) * w + d;
            acc += g.data[at];
            r->data[at] = acc;
          }
        }
    set(o, r);
  }

  // ---- chunkwise WY (docs/math.md §4.1, §4.3) ----------------------------------------------------------
  /// Σ_d a_d b_d exp(G_i,d − G_j,d) for a diagonal gate, or (a·b) exp(G_i − G_j); only for i >= j.
  double gatedDot(const double* a, const double* b, const Array* G, int64_t ti, int64_t tj, int64_t hv) const {
    double s = 0;
    if (diagonal(G)) {
      for (int64_t d = 0; d < K_; ++d) s += a[d] * b[d] * std::exp(gateAt(G, ti, hv, d) - gateAt(G, tj, hv, d));
      return s;
    }
    for (int64_t d = 0; d < K_; ++d) s += a[d] * b[d];
    return s * std::exp(scalarGate(G, ti, hv) - scalarGate(G, tj, hv));
  }

  void kkt(KKTOp o) {
    const Array &kr = get(o.getReadKey()), &kw = get(o.getWriteKey());
    const Array *beta = getOpt(o.getGain()), *G = getOpt(o.getGate());
    ArrayPtr r = make(o.getType());
    for (const ChunkRef& c : chunks_)
      for (int64_t hv = 0; hv < HV_; ++hv) {
        const int64_t h = keyHead(hv);
        for (int64_t i = 0; i < c.len; ++i) {
          const int64_t ti = tok(c.b, c.t0 + i);
          const double bi = beta ? beta->data[ti * HV_ + hv] : 1.0;
          double* out = row(*r, ti, hv, HV_, C_);
          for (int64_t j = 0; j < i; ++j) {  // strictly lower; the mask precedes every exp
            const int64_t tj = tok(c.b, c.t0 + j);
            out[j] = bi * gatedDot(row(kr, ti, h, H_, K_), row(kw, tj, h, H_, K_), G, ti, tj, hv);
          }
        }
      }
    set(o, r);
  }

  void solveTril(SolveTrilOp o) {
    const Array& A = get(o.getKkt());
    ArrayPtr r = make(o.getType());
    for (const ChunkRef& c : chunks_)
      for (int64_t hv = 0; hv < HV_; ++hv) {
        auto a = [&](int64_t i, int64_t j) { return A.data[(tok(c.b, c.t0 + i) * HV_ + hv) * C_ + j]; };
        auto t = [&](int64_t i, int64_t j) -> double& { return r->data[(tok(c.b, c.t0 + i) * HV_ + hv) * C_ + j]; };
        // (I + A) T = I, A strictly lower: forward substitution row by row.
        for (int64_t i = 0; i < c.len; ++i) {
          t(i, i) = 1.0;
          for (int64_t j = 0; j < i; ++j) {
            double s = 0;
            for (int64_t k = j; k < i; ++k) s += a(i, k) * t(k, j);
            t(i, j) = -s;
          }
        }
      }
    set(o, r);
  }

  void wyRecompute(WYRecomputeOp o) {
    const Array &T = get(o.getTril()), &kr = get(o.getReadKey()), &v = get(o.getValue());
    const Array *beta = getOpt(o.getGain()), *G = getOpt(o.getGate());
    ArrayPtr w = make(o.getW().getType()), u = make(o.getU().getType());
    for (const ChunkRef& c : chunks_)
      for (int64_t hv = 0; hv < HV_; ++hv) {
        const int64_t h = keyHead(hv);
        for (int64_t i = 0; i < c.len; ++i) {
          const int64_t ti = tok(c.b, c.t0 + i);
          double* wi = row(*w, ti, hv, HV_, K_);
          double* ui = row(*u, ti, hv, HV_, V_);
          for (int64_t j = 0; j <= i; ++j) {
            const int64_t tj = tok(c.b, c.t0 + j);
            const double tij = T.data[(ti * HV_ + hv) * C_ + j] * (beta ? beta->data[tj * HV_ + hv] : 1.0);
            const double* kj = row(kr, tj, h, H_, K_);
            for (int64_t d = 0; d < K_; ++d) wi[d] += tij * std::exp(gateAt(G, tj, hv, d)) * kj[d];
            const double* vj = row(v, tj, hv, HV_, V_);
            for (int64_t e = 0; e < V_; ++e) ui[e] += tij * vj[e];
          }
        }
      }
    set(o.getW(), w);
    set(o.getU(), u);
  }

  void gainScale(GainScaleOp o) {
    const Array& v = get(o.getValue());
    const Array* beta = getOpt(o.getGain());
    ArrayPtr r = make(o.getType());
    for (int64_t bt = 0; bt < B_ * T_; ++bt)
      for (int64_t hv = 0; hv < HV_; ++hv)
        for (int64_t e = 0; e < V_; ++e)
          r->data[(bt * HV_ + hv) * V_ + e] = v.data[(bt * HV_ + hv) * V_ + e] * (beta ? beta->data[bt * HV_ + hv] : 1.0);
    set(o, r);
  }

  void statePass(StatePassOp o) {
    const Array *w = getOpt(o.getW()), &u = get(o.getU()), &kw = get(o.getWriteKey());
    const Array *G = getOpt(o.getGate()), *init = getOpt(o.getInit());
    ArrayPtr vnew = make(o.getVNew().getType()), states = make(o.getStates().getType()),
             fin = make(o.getFinal().getType());
    const int64_t KV = K_ * V_;
    std::vector<double> S(static_cast<size_t>(KV));
    for (int64_t hv = 0; hv < HV_; ++hv) {
      const int64_t h = keyHead(hv);
      int64_t current = -1;
      for (const ChunkRef& c : chunks_) {
        if (c.n != current) {  // a new sequence: its initial state
          if (current >= 0) std::copy(S.begin(), S.end(), fin->data.begin() + (current * HV_ + hv) * KV);
          current = c.n;
          for (int64_t x = 0; x < KV; ++x) S[x] = init ? init->data[(c.n * HV_ + hv) * KV + x] : 0.0;
        }
        std::copy(S.begin(), S.end(), states->data.begin() + (c.slot * HV_ + hv) * KV);
        // v_new = U − W S
        for (int64_t i = 0; i < c.len; ++i) {
          const int64_t ti = tok(c.b, c.t0 + i);
          double* vn = row(*vnew, ti, hv, HV_, V_);
          const double* ui = row(u, ti, hv, HV_, V_);
          for (int64_t e = 0; e < V_; ++e) vn[e] = ui[e];
          if (!w) continue;
          const double* wi = row(*w, ti, hv, HV_, K_);
          for (int64_t d = 0; d < K_; ++d)
            for (int64_t e = 0; e < V_; ++e) vn[e] -= wi[d] * S[d * V_ + e];
        }
        // S ← e^{G_C} S + (e^{G_C − G} ⊙ K̃)ᵀ v_new
        const int64_t tl = tok(c.b, c.t0 + c.len - 1);
        for (int64_t d = 0; d < K_; ++d) {
          const double decay = std::exp(gateAt(G, tl, hv, d));
          for (int64_t e = 0; e < V_; ++e) S[d * V_ + e] *= decay;
        }
        for (int64_t i = 0; i < c.len; ++i) {
          const int64_t ti = tok(c.b, c.t0 + i);
          const double* ki = row(kw, ti, h, H_, K_);
          const double* vn = row(*vnew, ti, hv, HV_, V_);
          for (int64_t d = 0; d < K_; ++d) {
            const double f = ki[d] * std::exp(gateAt(G, tl, hv, d) - gateAt(G, ti, hv, d));
            for (int64_t e = 0; e < V_; ++e) S[d * V_ + e] += f * vn[e];
          }
        }
      }
      if (current >= 0) std::copy(S.begin(), S.end(), fin->data.begin() + (current * HV_ + hv) * KV);
      // Sequences without tokens (varlen) keep their initial state.
      for (int64_t n = 0; n < N_; ++n) {
        bool seen = false;
        for (const ChunkRef& c : chunks_) seen |= c.n == n;
        if (!seen)
          for (int64_t x = 0; x < KV; ++x)
            fin->data[(n * HV_ + hv) * KV + x] = init ? init->data[(n * HV_ + hv) * KV + x] : 0.0;
      }
    }
    set(o.getVNew(), vnew);
    set(o.getStates(), states);
    set(o.getFinal(), fin);
  }

  void qkAttn(QKAttnOp o) {
    const Array &q = get(o.getQuery()), &kw = get(o.getWriteKey());
    const Array* G = getOpt(o.getGate());
    const double scale = scaleOf(o.getScale());
    ArrayPtr r = make(o.getType());
    for (const ChunkRef& c : chunks_)
      for (int64_t hv = 0; hv < HV_; ++hv) {
        const int64_t h = keyHead(hv);
        for (int64_t i = 0; i < c.len; ++i) {
          const int64_t ti = tok(c.b, c.t0 + i);
          double* out = row(*r, ti, hv, HV_, C_);
          for (int64_t j = 0; j <= i; ++j) {
            const int64_t tj = tok(c.b, c.t0 + j);
            out[j] = scale * gatedDot(row(q, ti, h, H_, K_), row(kw, tj, h, H_, K_), G, ti, tj, hv);
          }
        }
      }
    set(o, r);
  }

  void output(OutputOp o) {
    const Array &q = get(o.getQuery()), &vnew = get(o.getVNew()), &states = get(o.getStates()),
                &attn = get(o.getAttn());
    const Array* G = getOpt(o.getGate());
    const double scale = scaleOf(o.getScale());
    ArrayPtr r = make(o.getType());
    const int64_t KV = K_ * V_;
    for (const ChunkRef& c : chunks_)
      for (int64_t hv = 0; hv < HV_; ++hv) {
        const int64_t h = keyHead(hv);
        const double* S = &states.data[(c.slot * HV_ + hv) * KV];
        for (int64_t i = 0; i < c.len; ++i) {
          const int64_t ti = tok(c.b, c.t0 + i);
          double* oi = row(*r, ti, hv, HV_, V_);
          const double* qi = row(q, ti, h, H_, K_);
          for (int64_t d = 0; d < K_; ++d) {
            const double f = scale * qi[d] * std::exp(gateAt(G, ti, hv, d));
            for (int64_t e = 0; e < V_; ++e) oi[e] += f * S[d * V_ + e];
          }
          const double* ai = row(attn, ti, hv, HV_, C_);
          for (int64_t j = 0; j <= i; ++j) {
            const double* vj = row(vnew, tok(c.b, c.t0 + j), hv, HV_, V_);
            for (int64_t e = 0; e < V_; ++e) oi[e] += ai[j] * vj[e];
          }
        }
      }
    set(o, r);
  }

  // ---- ema_sq_squash preconditioner (docs/math.md §3.3, §5.1) -------------------------------------------
  double headScalar(const Array* a, int64_t bt, int64_t h, double absent) const {
    return a ? a->data[bt * H_ + h] : absent;
  }
  /// M(A) = x^{−s}, s = r/(1+|r|), r = ln(A + eps) − c.
  static double squash(double A, double c, double lnx, double eps) {
    const double r = std::log(A + eps) - c;
    return std::exp(-lnx * (r / (1.0 + std::fabs(r))));
  }

  /// One token of the accumulator: A ← e^{g^a} A + β^a k̂² (gate 0 and gain 1 when absent).
  void accumStep(std::vector<double>& A, const Array& key, const Array* gate, const Array* gain, int64_t bt,
                 int64_t h) const {
    const double gamma = std::exp(headScalar(gate, bt, h, 0.0)), ba = headScalar(gain, bt, h, 1.0);
    const double* k = row(key, bt, h, H_, K_);
    for (int64_t d = 0; d < K_; ++d) A[d] = gamma * A[d] + ba * k[d] * k[d];
  }

  void accumScan(AccumScanOp o) {
    const Array& key = get(o.getKey());
    const Array *gate = getOpt(o.getGate()), *gain = getOpt(o.getGain()), *init = getOpt(o.getInit());
    ArrayPtr acc = make(o.getAccum().getType()), fin = make(o.getFinal().getType());
    std::vector<double> A(static_cast<size_t>(K_));
    for (int64_t n = 0; n < N_; ++n)
      for (int64_t h = 0; h < H_; ++h) {
        for (int64_t d = 0; d < K_; ++d) A[d] = init ? init->data[(n * H_ + h) * K_ + d] : 0.0;
        for (const ChunkRef& c : chunks_) {
          if (c.n != n) continue;
          for (int64_t i = 0; i < c.len; ++i) {
            const int64_t bt = tok(c.b, c.t0 + i);
            accumStep(A, key, gate, gain, bt, h);
            std::copy(A.begin(), A.end(), row(*acc, bt, h, H_, K_));
          }
        }
        std::copy(A.begin(), A.end(), fin->data.begin() + (n * H_ + h) * K_);
      }
    set(o.getAccum(), acc);
    set(o.getFinal(), fin);
  }

  void squashApply(SquashApplyOp o) {
    const Array &t = get(o.getTarget()), &A = get(o.getAccum()), &center = get(o.getCenter());
    const double lnx = std::log(o.getX().convertToDouble()), eps = o.getEps().convertToDouble();
    ArrayPtr r = make(o.getType());
    for (int64_t bt = 0; bt < B_ * T_; ++bt)
      for (int64_t h = 0; h < H_; ++h)
        for (int64_t d = 0; d < K_; ++d) {
          const int64_t at = (bt * H_ + h) * K_ + d;
          r->data[at] = t.data[at] * squash(A.data[at], center.data[h], lnx, eps);
        }
    set(o, r);
  }

  void accumSummary(AccumSummaryOp o) {
    const Array& key = get(o.getKey());
    const Array *gate = getOpt(o.getGate()), *gain = getOpt(o.getGain());
    ArrayPtr sum = make(o.getSum().getType()), logDecay = make(o.getLogDecay().getType());
    std::vector<double> a(static_cast<size_t>(K_));
    for (const ChunkRef& c : chunks_)
      for (int64_t h = 0; h < H_; ++h) {
        std::fill(a.begin(), a.end(), 0.0);
        double sa = 0;
        for (int64_t i = 0; i < c.len; ++i) {
          const int64_t bt = tok(c.b, c.t0 + i);
          sa += headScalar(gate, bt, h, 0.0);
          accumStep(a, key, gate, gain, bt, h);  // the scan from 0 = Σ_j e^{sa − cum_j} β^a_j k̂_j²
        }
        std::copy(a.begin(), a.end(), sum->data.begin() + (c.slot * H_ + h) * K_);
        logDecay->data[c.slot * H_ + h] = sa;
      }
    set(o.getSum(), sum);
    set(o.getLogDecay(), logDecay);
  }

  void accumPass(AccumPassOp o) {
    const Array &sum = get(o.getSum()), &logDecay = get(o.getLogDecay());
    const Array* init = getOpt(o.getInit());
    ArrayPtr start = make(o.getStart().getType()), fin = make(o.getFinal().getType());
    std::vector<double> A(static_cast<size_t>(K_));
    for (int64_t n = 0; n < N_; ++n)
      for (int64_t h = 0; h < H_; ++h) {
        for (int64_t d = 0; d < K_; ++d) A[d] = init ? init->data[(n * H_ + h) * K_ + d] : 0.0;
        for (const ChunkRef& c : chunks_) {
          if (c.n != n) continue;
          std::copy(A.begin(), A.end(), start->data.begin() + (c.slot * H_ + h) * K_);
          const double gamma = std::exp(logDecay.data[c.slot * H_ + h]);
          for (int64_t d = 0; d < K_; ++d) A[d] = gamma * A[d] + sum.data[(c.slot * H_ + h) * K_ + d];
        }
        std::copy(A.begin(), A.end(), fin->data.begin() + (n * H_ + h) * K_);
      }
    set(o.getStart(), start);
    set(o.getFinal(), fin);
  }

  void accumApply(AccumApplyOp o) {
    const Array &t = get(o.getTarget()), &key = get(o.getKey()), &start = get(o.getStart()),
                &center = get(o.getCenter());
    const Array *gate = getOpt(o.getGate()), *gain = getOpt(o.getGain());
    const double lnx = std::log(o.getX().convertToDouble()), eps = o.getEps().convertToDouble();
    ArrayPtr r = make(o.getType());
    std::vector<double> A(static_cast<size_t>(K_));
    for (const ChunkRef& c : chunks_)
      for (int64_t h = 0; h < H_; ++h) {
        std::copy_n(start.data.begin() + (c.slot * H_ + h) * K_, K_, A.begin());
        for (int64_t i = 0; i < c.len; ++i) {
          const int64_t bt = tok(c.b, c.t0 + i);
          accumStep(A, key, gate, gain, bt, h);
          const double* ti = row(t, bt, h, H_, K_);
          double* ri = row(*r, bt, h, H_, K_);
          for (int64_t d = 0; d < K_; ++d) ri[d] = ti[d] * squash(A[d], center.data[h], lnx, eps);
        }
      }
    set(o, r);
  }

  // ---- hypergrad_ogd preconditioner (docs/math.md §5.2) -------------------------------------------------
  struct HypergradParams {
    double eta, init;
    bool post;
    std::optional<double> lo, hi;
  };
  template <typename OpTy>
  HypergradParams paramsOf(OpTy o) const {
    HypergradParams p{o.getEta().convertToDouble(), o.getDInit().convertToDouble(), o.getPost(), {}, {}};
    if (auto v = o.getClampMin()) p.lo = v->convertToDouble();
    if (auto v = o.getClampMax()) p.hi = v->convertToDouble();
    return p;
  }
  double clamp(double d, const HypergradParams& p) const {
    if (p.lo) d = std::max(d, *p.lo);
    if (p.hi) d = std::min(d, *p.hi);
    return d;
  }
  /// β_t of key head h: the gain of value head h (the reference requires HV == H).
  double hypergradGain(const Array* gain, int64_t bt, int64_t h) const {
    if (!gain) return 1.0;
    if (HV_ != H_) throw ExecError("hypergrad_ogd needs HV == H (one gain per key head)");
    return gain->data[bt * HV_ + h];
  }
  /// The step coefficient c_t = (η β/‖k‖²)(1 − β⟨d, k²⟩), 0 for a zero key.
  double stepCoef(const std::vector<double>& d, const double* k, double beta, const HypergradParams& p) const {
    double kk = 0, du = 0;
    for (int64_t i = 0; i < K_; ++i) {
      kk += k[i] * k[i];
      du += d[i] * k[i] * k[i];
    }
    return kk > 0 ? p.eta * beta / kk * (1.0 - beta * du) : 0.0;
  }
  void hypergradUpdate(std::vector<double>& d, const double* k, double rho, double coef,
                       const HypergradParams& p) const {
    for (int64_t i = 0; i < K_; ++i) d[i] = clamp(rho * d[i] + coef * k[i] * k[i], p);
  }

  /// Scans every (sequence, key head) token by token; `visit(chunk, i, bt, h, d_before, coef, d_after)`.
  template <typename Visit>
  void hypergradWalk(const Array& key, const Array* gain, const Array* retention, const Array* init,
                     const HypergradParams& p, Array& fin, Visit visit) const {
    std::vector<double> d(static_cast<size_t>(K_)), before(d.size());
    for (int64_t n = 0; n < N_; ++n)
      for (int64_t h = 0; h < H_; ++h) {
        for (int64_t i = 0; i < K_; ++i) d[i] = init ? init->data[(n * H_ + h) * K_ + i] : p.init;
        for (const ChunkRef& c : chunks_) {
          if (c.n != n) continue;
          for (int64_t i = 0; i < c.len; ++i) {
            const int64_t bt = tok(c.b, c.t0 + i);
            const double* k = row(key, bt, h, H_, K_);
            const double coef = stepCoef(d, k, hypergradGain(gain, bt, h), p);
            before = d;
            hypergradUpdate(d, k, std::exp(headScalar(retention, bt, h, 0.0)), coef, p);
            visit(c, i, bt, h, before, coef, d);
          }
        }
        std::copy(d.begin(), d.end(), fin.data.begin() + (n * H_ + h) * K_);
      }
  }

  void hypergradScan(HypergradScanOp o) {
    HypergradParams p = paramsOf(o);
    ArrayPtr diag = make(o.getDiag().getType()), fin = make(o.getFinal().getType());
    hypergradWalk(get(o.getKey()), getOpt(o.getGain()), getOpt(o.getRetention()), getOpt(o.getInit()), p, *fin,
                  [&](const ChunkRef&, int64_t, int64_t bt, int64_t h, const std::vector<double>& before, double,
                      const std::vector<double>& after) {
                    const std::vector<double>& P = p.post ? after : before;
                    std::copy(P.begin(), P.end(), row(*diag, bt, h, H_, K_));
                  });
    set(o.getDiag(), diag);
    set(o.getFinal(), fin);
  }

  void diagApply(DiagApplyOp o) {
    const Array &t = get(o.getTarget()), &d = get(o.getDiag());
    ArrayPtr r = make(o.getType());
    for (size_t i = 0; i < r->data.size(); ++i) r->data[i] = t.data[i] * d.data[i];
    set(o, r);
  }

  void hypergradPass(HypergradPassOp o) {
    HypergradParams p = paramsOf(o);
    ArrayPtr start = make(o.getStart().getType()), coef = make(o.getCoef().getType()),
             fin = make(o.getFinal().getType());
    hypergradWalk(get(o.getKey()), getOpt(o.getGain()), getOpt(o.getRetention()), getOpt(o.getInit()), p, *fin,
                  [&](const ChunkRef& c, int64_t i, int64_t bt, int64_t h, const std::vector<double>& before,
                      double cf, const std::vector<double>&) {
                    if (i == 0) std::copy(before.begin(), before.end(), start->data.begin() + (c.slot * H_ + h) * K_);
                    coef->data[bt * H_ + h] = cf;
                  });
    set(o.getStart(), start);
    set(o.getCoef(), coef);
    set(o.getFinal(), fin);
  }

  void hypergradApply(HypergradApplyOp o) {
    HypergradParams p = paramsOf(o);
    const Array &t = get(o.getTarget()), &key = get(o.getKey()), &coef = get(o.getCoef()),
                &start = get(o.getStart());
    const Array* retention = getOpt(o.getRetention());
    ArrayPtr r = make(o.getType());
    std::vector<double> d(static_cast<size_t>(K_));
    for (const ChunkRef& c : chunks_)
      for (int64_t h = 0; h < H_; ++h) {
        std::copy_n(start.data.begin() + (c.slot * H_ + h) * K_, K_, d.begin());
        for (int64_t i = 0; i < c.len; ++i) {
          const int64_t bt = tok(c.b, c.t0 + i);
          const double* ti = row(t, bt, h, H_, K_);
          double* ri = row(*r, bt, h, H_, K_);
          if (!p.post)
            for (int64_t x = 0; x < K_; ++x) ri[x] = ti[x] * d[x];
          hypergradUpdate(d, row(key, bt, h, H_, K_), std::exp(headScalar(retention, bt, h, 0.0)),
                          coef.data[bt * H_ + h], p);
          if (p.post)
            for (int64_t x = 0; x < K_; ++x) ri[x] = ti[x] * d[x];
        }
      }
    set(o, r);
  }

  // ---- sequence-parallel state pass (ExecutorSegment.cpp, ChunkSegmentOps.td) -------------------------
  /// Segments of L consecutive chunks of one sequence, in slot order (the NS dim).
  struct SegmentRef {
    int64_t n, first, count, slot;  ///< sequence, index of its first chunk in chunks_, chunks, NS slot
  };
  /// The segments (built on first use from the segment length; see ExecutorOptions::segmentChunks).
  const std::vector<SegmentRef>& segments() const;
  /// Runs `op` if it is a segmented-pass op; false for any other op.
  bool runSegmentOp(Operation* op);
  void segmentSummary(SegmentSummaryOp o);
  void segmentFold(SegmentFoldOp o);
  void segmentStatePass(SegmentStatePassOp o);
  void accumSegmentPass(AccumSegmentPassOp o);
  void hypergradSegmentPass(HypergradSegmentPassOp o);
  /// One chunk of the state pass on X [K, width]: v_new = U − W X (U = 0 when u is null), then
  /// X ← D_C X + (e^{G_C − G} ⊙ K̃)ᵀ v_new; v_new rows (len × width) are left in `vn`.
  void chunkStep(const ChunkRef& c, int64_t hv, const Array* w, const Array* u, const Array& kw, const Array* G,
                 std::vector<double>& X, int64_t width, std::vector<double>& vn) const;
  /// The fold's segment list (sequence, token range) in slot order.
  std::vector<dgps::segment::Segment> foldSegmentsList() const;
  // ---- chunked hypergradient scan (ExecutorPrecondScan.cpp, ChunkPrecondScanOps.td) -------------------
  /// Runs `op` if it is a chunked-scan op; false for any other op.
  bool runPrecondScanOp(Operation* op);
  void hypergradChunkSummary(HypergradChunkSummaryOp o);
  void hypergradChunkPass(HypergradChunkPassOp o);
  // ---- Householder steps (ChunkStepOps.td) ------------------------------------------------------------
  /// Rows per (b, t) entry of `a`: the product of its dims after B and T/TQ.
  static int64_t rowWidth(const Array& a) {
    int64_t w = 1;
    for (size_t i = 2; i < a.sizes.size(); ++i) w *= a.sizes[i];
    return w;
  }
  void checkSteps(int64_t steps) const {
    if (steps != steps_)
      throw ExecError("step op has steps = " + std::to_string(steps) + " but the function's chunk.householder_steps is " +
                      std::to_string(steps_));
  }
  // result[b, t·n + step] = input[b, t]; the other steps' rows stay 0.
  void spreadSteps(SpreadStepsOp o) {
    checkSteps(o.getSteps());
    const Array& in = get(o.getInput());
    ArrayPtr r = make(o.getType());
    const int64_t w = rowWidth(in), step = static_cast<int64_t>(o.getStep());
    for (int64_t b = 0; b < B_; ++b)
      for (int64_t t = 0; t < TQ_; ++t)
        std::copy_n(&in.data[static_cast<size_t>((b * TQ_ + t) * w)], w,
                    &r->data[static_cast<size_t>((b * T_ + t * steps_ + step) * w)]);
    set(o, r);
  }
  // result[b, t] = input[b, t·n + step].
  void gatherSteps(GatherStepsOp o) {
    checkSteps(o.getSteps());
    const Array& in = get(o.getInput());
    ArrayPtr r = make(o.getType());
    const int64_t w = rowWidth(in), step = static_cast<int64_t>(o.getStep());
    for (int64_t b = 0; b < B_; ++b)
      for (int64_t t = 0; t < TQ_; ++t)
        std::copy_n(&in.data[static_cast<size_t>((b * T_ + t * steps_ + step) * w)], w,
                    &r->data[static_cast<size_t>((b * TQ_ + t) * w)]);
    set(o, r);
  }

  // ---- adjoint ops (ExecutorBackward.cpp) ------------------------------------------------------------
  /// Runs `op` if it is an adjoint op (ChunkGradOps.td); false for any other op.
  bool runGradOp(Operation* op);
  void addOp(AddOp o);
  void l2normGrad(L2NormGradOp o);
  void gateCumsumGrad(GateCumsumGradOp o);
  void kktGrad(KKTGradOp o);
  void solveTrilGrad(SolveTrilGradOp o);
  void wyRecomputeGrad(WYRecomputeGradOp o);
  void gainScaleGrad(GainScaleGradOp o);
  void statePassGrad(StatePassGradOp o);
  void qkAttnGrad(QKAttnGradOp o);
  void outputGrad(OutputGradOp o);
  void accumScanGrad(AccumScanGradOp o);
  void hypergradScanGrad(HypergradScanGradOp o);
  void squashApplyGrad(SquashApplyGradOp o);
  /// Adds x to the cotangent of gate G at (token, value head, channel d); a scalar gate sums over d.
  void addGate(Array& dG, int64_t bt, int64_t hv, int64_t d, double x) const {
    if (dG.dims.size() == 4)
      dG.data[(bt * HV_ + hv) * K_ + d] += x;
    else
      dG.data[bt * HV_ + hv] += x;
  }

  func::FuncOp fn_;
  const TensorMap& inputs_;
  TensorMap outputs_;
  llvm::DenseMap<Value, ArrayPtr> values_;
  std::vector<ChunkRef> chunks_;
  int64_t B_ = 0, T_ = 0, H_ = 0, HV_ = 0, K_ = 0, V_ = 0, C_ = 64, NT_ = 0, N_ = 0;
  int64_t TQ_ = 0, steps_ = 1;  // tokens and Householder steps per token (T_ = TQ_ · steps_)
  double defaultScale_ = 1.0;
  bool cu_ = false;  ///< varlen (cu_seqlens given)
  ExecutorOptions segmentOptions_;
  mutable std::vector<SegmentRef> segments_;
  mutable bool segmentsBuilt_ = false;
};

}  // namespace dgps::exec
