// The adjoint of the memory recurrence of one value head (docs/backward.md, "The memory step").
//
// Forward of token t, with S the state before it (K×V, key-major), a the per-row decay factors:
//   S' = Diag(a) S
//   delta:  w = v − S'ᵀ k^r,  e = β w          linear:  e = β v
//   S_t = S' + k^w eᵀ
//   o_t = S_tᵀ q^r
// The reverse sweep carries dS, the adjoint of the state after the token, from dfinal_state (or 0) back
// to dinitial_state. Each token needs the state before it; those are rebuilt from checkpoints kept
// every C ≈ √L tokens, so memory stays O(√L·K·V) per value head instead of O(L·K·V).
#include <algorithm>
#include <cmath>

#include "ReferenceGradDetail.h"

namespace dgps::refgrad {
namespace {

/// The per-token inputs of one value head's memory step.
struct TokenStep {
  bool decays = false;
  const double* a = nullptr;  ///< K decay factors exp(g) (scalar decay: K copies), when decays
  double beta = 1.0;
  const double* v = nullptr;  ///< V
  const double* kr = nullptr;
  const double* kw = nullptr;
  const double* qr = nullptr;  ///< K each
};

/// The memory of one value head: its sizes, solve kind and scratch space.
class MemoryAdjoint {
 public:
  MemoryAdjoint(std::int64_t K, std::int64_t V, SolveKind solve)
      : K_(K), V_(V), delta_(solve == SolveKind::Delta), Sp_(static_cast<std::size_t>(K * V)), St_(Sp_.size()),
        w_(static_cast<std::size_t>(V)), e_(w_.size()), de_(w_.size()) {}

  /// S ← S_t (the forward step, in the reference's order of operations).
  void forward(const TokenStep& x, std::vector<double>& S) {
    for (std::int64_t j = 0; j < V_; ++j) w_[j] = x.v[j];
    for (std::int64_t i = 0; i < K_; ++i) {
      double* row = &S[static_cast<std::size_t>(i * V_)];
      if (x.decays) {
        for (std::int64_t j = 0; j < V_; ++j) row[j] *= x.a[i];
      }
      if (delta_) {
        for (std::int64_t j = 0; j < V_; ++j) w_[j] -= row[j] * x.kr[i];
      }
    }
    for (std::int64_t j = 0; j < V_; ++j) e_[j] = x.beta * w_[j];
    for (std::int64_t i = 0; i < K_; ++i) {
      double* row = &S[static_cast<std::size_t>(i * V_)];
      for (std::int64_t j = 0; j < V_; ++j) row[j] += x.kw[i] * e_[j];
    }
  }

  /// One token in reverse. `S` is the state before the token, `dS` the adjoint of the state after it
  /// (replaced by the adjoint of the state before it). Adds into dkw, dkr, dqr (K), dv (V); returns
  /// dβ; writes dlogA[i] = ∂loss/∂ln a_i (K) when the step decays.
  double backward(const TokenStep& x, const std::vector<double>& S, const double* dO, std::vector<double>& dS,
                  double* dkw, double* dkr, double* dqr, double* dv, double* dlogA) {
    recompute(x, S);
    // o = S_tᵀ q^r:  dq^r += S_t dO,  dS += q^r dOᵀ.
    for (std::int64_t i = 0; i < K_; ++i) {
      const double* st = &St_[static_cast<std::size_t>(i * V_)];
      double* ds = &dS[static_cast<std::size_t>(i * V_)];
      double acc = 0.0;
      for (std::int64_t j = 0; j < V_; ++j) {
        acc += st[j] * dO[j];
        ds[j] += x.qr[i] * dO[j];
      }
      dqr[i] += acc;
    }
    // S_t = S' + k^w eᵀ:  dk^w += dS e,  de = dSᵀ k^w,  dS' = dS.
    for (std::int64_t j = 0; j < V_; ++j) de_[j] = 0.0;
    for (std::int64_t i = 0; i < K_; ++i) {
      const double* ds = &dS[static_cast<std::size_t>(i * V_)];
      double acc = 0.0;
      for (std::int64_t j = 0; j < V_; ++j) {
        acc += ds[j] * e_[j];
        de_[j] += x.kw[i] * ds[j];
      }
      dkw[i] += acc;
    }
    // e = β w:  dβ = ⟨de, w⟩,  dw = β de.  delta: w = v − S'ᵀ k^r;  linear: w = v.
    double dbeta = 0.0;
    for (std::int64_t j = 0; j < V_; ++j) {
      dbeta += de_[j] * w_[j];
      de_[j] *= x.beta;  // now dw
      dv[j] += de_[j];
    }
    if (delta_) {  // dS' −= k^r dwᵀ,  dk^r −= S' dw
      for (std::int64_t i = 0; i < K_; ++i) {
        const double* sp = &Sp_[static_cast<std::size_t>(i * V_)];
        double* ds = &dS[static_cast<std::size_t>(i * V_)];
        double acc = 0.0;
        for (std::int64_t j = 0; j < V_; ++j) {
          acc += sp[j] * de_[j];
          ds[j] -= x.kr[i] * de_[j];
        }
        dkr[i] -= acc;
      }
    }
    // S' = Diag(a) S:  ∂/∂ln a_i = Σ_j dS'_ij S'_ij,  dS = Diag(a) dS'.
    if (x.decays) {
      for (std::int64_t i = 0; i < K_; ++i) {
        const double* sp = &Sp_[static_cast<std::size_t>(i * V_)];
        double* ds = &dS[static_cast<std::size_t>(i * V_)];
        double acc = 0.0;
        for (std::int64_t j = 0; j < V_; ++j) {
          acc += ds[j] * sp[j];
          ds[j] *= x.a[i];
        }
        dlogA[i] = acc;
      }
    }
    return dbeta;
  }

 private:
  // S', w, e and S_t of the token from the state S before it.
  void recompute(const TokenStep& x, const std::vector<double>& S) {
    for (std::int64_t j = 0; j < V_; ++j) w_[j] = x.v[j];
    for (std::int64_t i = 0; i < K_; ++i) {
      const std::size_t r = static_cast<std::size_t>(i * V_);
      for (std::int64_t j = 0; j < V_; ++j) Sp_[r + j] = x.decays ? S[r + j] * x.a[i] : S[r + j];
      if (delta_) {
        for (std::int64_t j = 0; j < V_; ++j) w_[j] -= Sp_[r + j] * x.kr[i];
      }
    }
    for (std::int64_t j = 0; j < V_; ++j) e_[j] = x.beta * w_[j];
    for (std::int64_t i = 0; i < K_; ++i) {
      const std::size_t r = static_cast<std::size_t>(i * V_);
      for (std::int64_t j = 0; j < V_; ++j) St_[r + j] = Sp_[r + j] + x.kw[i] * e_[j];
    }
  }

  std::int64_t K_, V_;
  bool delta_;
  std::vector<double> Sp_, St_, w_, e_, de_;
};

/// Checkpoint spacing: √L rounded up, so checkpoints and one rebuilt block each hold about √L states.
std::int64_t blockLength(std::int64_t L) {
  std::int64_t c = static_cast<std::int64_t>(std::ceil(std::sqrt(static_cast<double>(L))));
  return c < 1 ? 1 : c;
}

}  // namespace

void memoryBackward(const Spec& spec, const Problem& p, const SequenceSpan& seq, std::int64_t hv,
                    const KeyHeadTape& tape, KeyHeadAdjoint& adj, Gradients& out) {
  const ReferenceProblem& s = p.s;
  const std::int64_t K = s.key_dim, V = s.value_dim, KV = K * V, L = seq.length();
  const std::size_t kv = static_cast<std::size_t>(KV);
  const bool scalarDecay = spec.decay.kind == DecayKind::Scalar;
  const bool diagDecay = spec.decay.kind == DecayKind::Diagonal;
  const bool gain = spec.gain.kind == GainKind::Scalar;
  MemoryAdjoint mem(K, V, spec.solve.kind);

  // The inputs of token j (decay factors go to `a`, which must outlive the use of the result).
  std::vector<double> a(static_cast<std::size_t>(K), 1.0);
  auto token = [&](std::int64_t j) {
    const std::int64_t t = seq.t0 + j;
    TokenStep x;
    x.decays = scalarDecay || diagDecay;
    if (scalarDecay) {
      const double f = std::exp(p.g[static_cast<std::size_t>(p.perV(seq.b, t, hv))]);
      for (double& ai : a) ai = f;
    } else if (diagDecay) {
      const std::size_t g0 = static_cast<std::size_t>(p.perV(seq.b, t, hv) * K);
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::exp(p.g[g0 + i]);
    }
    x.a = a.data();
    x.beta = gain ? p.beta[static_cast<std::size_t>(p.perV(seq.b, t, hv))] : 1.0;
    x.v = &p.v[static_cast<std::size_t>(p.vIdx(seq.b, t, hv))];
    x.kr = tape.row(tape.kr, j);
    x.kw = tape.row(tape.kw, j);
    x.qr = tape.row(tape.qr, j);
    return x;
  };

  // Forward: the state before token j for every j ≡ 0 (mod C).
  const std::int64_t C = blockLength(L), blocks = (L + C - 1) / C;
  std::vector<double> S(kv, 0.0);
  const std::size_t s0 = static_cast<std::size_t>((seq.n * s.heads_v + hv) * KV);
  if (p.hasS0) std::copy(p.s0.begin() + s0, p.s0.begin() + s0 + kv, S.begin());
  std::vector<std::vector<double>> checkpoints(static_cast<std::size_t>(blocks));
  for (std::int64_t j = 0; j < L; ++j) {
    if (j % C == 0) checkpoints[static_cast<std::size_t>(j / C)] = S;
    mem.forward(token(j), S);
  }

  // Reverse: dS starts as the cotangent of final_state.
  std::vector<double> dS(kv, 0.0);
  if (!p.dSfinal.empty()) std::copy(p.dSfinal.begin() + s0, p.dSfinal.begin() + s0 + kv, dS.begin());
  std::vector<std::vector<double>> before(static_cast<std::size_t>(C));  // states before each token of a block
  std::vector<double> dlogA(static_cast<std::size_t>(K), 0.0);
  for (std::int64_t blk = blocks - 1; blk >= 0; --blk) {
    const std::int64_t j0 = blk * C, j1 = std::min(L, j0 + C);
    S = checkpoints[static_cast<std::size_t>(blk)];
    for (std::int64_t j = j0; j < j1; ++j) {
      before[static_cast<std::size_t>(j - j0)] = S;
      if (j + 1 < j1) mem.forward(token(j), S);
    }
    for (std::int64_t j = j1 - 1; j >= j0; --j) {
      const std::int64_t t = seq.t0 + j;
      const std::size_t vi = static_cast<std::size_t>(p.vIdx(seq.b, t, hv));
      const std::size_t kj = static_cast<std::size_t>(j * K);
      const double dbeta = mem.backward(token(j), before[static_cast<std::size_t>(j - j0)], &p.dO[vi], dS,
                                        &adj.dkw[kj], &adj.dkr[kj], &adj.dqr[kj], &out.dv[vi], dlogA.data());
      const std::size_t iv = static_cast<std::size_t>(p.perV(seq.b, t, hv));
      if (gain) out.dbeta[iv] += dbeta;
      // g is the log of the decay: dg = ∂loss/∂ln a (summed over rows for the scalar decay).
      if (scalarDecay) {
        double sum = 0.0;
        for (double x : dlogA) sum += x;
        out.dg[iv] += sum;
      } else if (diagDecay) {
        for (std::int64_t i = 0; i < K; ++i) out.dg[iv * static_cast<std::size_t>(K) + i] += dlogA[i];
      }
    }
  }
  if (p.hasS0) std::copy(dS.begin(), dS.end(), out.ds0.begin() + s0);
}

}  // namespace dgps::refgrad
