// The key-head part of the reference gradients (docs/backward.md): l2 normalisation and scale, the
// diagonal preconditioner (ema_sq_squash or hypergrad_ogd) and the choice of read/write keys (ATK/ATQ),
// recorded forward along one sequence, then differentiated in reverse.
#include <algorithm>
#include <cmath>

#include "ReferenceGradDetail.h"

namespace dgps::refgrad {
namespace {

bool hasDiagonalPrecond(const Spec& s) { return s.precond.kind == PrecondKind::Diagonal; }
bool isSquash(const Spec& s) { return hasDiagonalPrecond(s) && s.precond.source == PrecondSource::EmaSqSquash; }
bool isHypergrad(const Spec& s) {
  return hasDiagonalPrecond(s) && s.precond.source == PrecondSource::HypergradOgd;
}

double queryScale(const Spec& spec, std::int64_t K) {
  return spec.scale ? *spec.scale : 1.0 / std::sqrt(static_cast<double>(K));
}

/// y = x · mul · ρ with ρ = (Σx² + eps)^{-1/2} under qk_l2norm, else ρ = 1 (the forward's arithmetic).
/// Returns ρ.
double normalise(const double* x, std::int64_t K, bool l2norm, double eps, double mul, double* y) {
  double ss = 0.0;
  for (std::int64_t i = 0; i < K; ++i) ss += x[i] * x[i];
  const double f = l2norm ? mul / std::sqrt(ss + eps) : mul;
  for (std::int64_t i = 0; i < K; ++i) y[i] = x[i] * f;
  return l2norm ? 1.0 / std::sqrt(ss + eps) : 1.0;
}

/// The adjoint of normalise: y = mul·ρ·x, ρ = (Σx² + eps)^{-1/2}, ∂ρ/∂x = −ρ³x, so
///   dx = mul·ρ·dy − mul·ρ³·⟨x, dy⟩·x        (dx = mul·dy without l2norm).
void normaliseBackward(const double* x, std::int64_t K, bool l2norm, double rho, double mul, const double* dy,
                       double* dx) {
  double xdy = 0.0;
  for (std::int64_t i = 0; i < K; ++i) xdy += x[i] * dy[i];
  const double c = l2norm ? mul * rho * rho * rho * xdy : 0.0;
  for (std::int64_t i = 0; i < K; ++i) dx[i] += mul * rho * dy[i] - c * x[i];
}

/// The squash of the accumulator: P = exp(−ln x · s(r)), s(r) = r / (1 + |r|), r = ln(A + eps) − c.
double squash(double A, double c, const SquashParams& sp) {
  const double r = std::log(A + sp.eps) - c;
  return std::exp(-std::log(sp.x) * (r / (1.0 + std::fabs(r))));
}

/// The hypergradient update of one token (before the clamp): x = ρ d + coef·u, u = k̂², with
/// coef = η β (1 − β⟨d, u⟩) / ‖k̂‖² (0 when ‖k̂‖² = 0). Fills `u` and returns the parts the adjoint needs.
struct HypergradStep {
  double rho = 1.0, beta = 1.0, kk = 0.0, du = 0.0, coef = 0.0;
};
HypergradStep hypergradTerms(const HypergradParams& hp, double rho, double beta, const double* d, const double* khat,
                             std::int64_t K, double* u) {
  HypergradStep st;
  st.rho = rho;
  st.beta = beta;
  for (std::int64_t i = 0; i < K; ++i) {
    u[i] = khat[i] * khat[i];
    st.kk += u[i];
    st.du += d[i] * u[i];
  }
  st.coef = st.kk > 0.0 ? hp.eta * beta / st.kk * (1.0 - beta * st.du) : 0.0;
  return st;
}

/// The optional projection of d; `passes` says whether the gradient flows (the value was inside).
double clampD(const HypergradParams& hp, double x, bool* passes) {
  double d = x;
  if (hp.clamp_min) d = std::max(d, *hp.clamp_min);
  if (hp.clamp_max) d = std::min(d, *hp.clamp_max);
  // std::max/min return their first argument on ties, so a value on a bound is passed through.
  if (passes) *passes = (!hp.clamp_min || !(x < *hp.clamp_min)) && (!hp.clamp_max || !(*hp.clamp_max < x));
  return d;
}

double retention(const Spec& spec, const Problem& p, std::int64_t b, std::int64_t t, std::int64_t h) {
  const bool has = isSquash(spec) ? spec.precond.squash.has_gate : spec.precond.hypergrad.has_retention;
  return has ? std::exp(p.pg[static_cast<std::size_t>(p.perH(b, t, h))]) : 1.0;
}

/// hypergrad_ogd uses the gain of value head h (gva_ratio 1) as its β.
double hypergradBeta(const Spec& spec, const Problem& p, std::int64_t b, std::int64_t t, std::int64_t h) {
  return spec.gain.kind == GainKind::Scalar ? p.beta[static_cast<std::size_t>(p.perV(b, t, h))] : 1.0;
}

// ---- preconditioner adjoints ----------------------------------------------------------------------

/// ema_sq_squash in reverse. Per token, with A' = γ A + β^a k̂² (γ = exp(precond_g)) and P = squash(A'):
///   dr   = dP ⊙ P ⊙ (−ln x) ⊙ s'(r),   s'(r) = 1 / (1 + |r|)²
///   dc  −= Σ dr;   dA' += dr / (A' + eps)
///   dprecond_g += γ ⟨dA', A⟩;   dprecond_beta += ⟨dA', k̂²⟩;   dk̂ += 2 β^a k̂ ⊙ dA';   dA = γ dA'.
/// dA starts as the cotangent of final_precond_state and ends as dinitial_precond_state.
void squashBackward(const Spec& spec, const Problem& p, const SequenceSpan& seq, std::int64_t h,
                    const KeyHeadTape& tape, const std::vector<double>& dP, std::vector<double>& dkhat,
                    Gradients& out) {
  const SquashParams& sp = spec.precond.squash;
  const std::int64_t K = tape.K;
  const double lnx = std::log(sp.x), c = p.pc[static_cast<std::size_t>(h)];
  const std::size_t p0 = static_cast<std::size_t>((seq.n * p.s.heads_qk + h) * K);
  std::vector<double> dA(static_cast<std::size_t>(K), 0.0);
  if (!p.dPfinal.empty()) std::copy(p.dPfinal.begin() + p0, p.dPfinal.begin() + p0 + K, dA.begin());
  double dc = 0.0;
  for (std::int64_t j = tape.L - 1; j >= 0; --j) {
    const std::int64_t t = seq.t0 + j;
    const std::size_t ih = static_cast<std::size_t>(p.perH(seq.b, t, h));
    const double gamma = retention(spec, p, seq.b, t, h);
    const double gain = sp.has_gain ? p.pb[ih] : 1.0;
    const double* Anew = tape.row(tape.state, j + 1);
    const double* Aold = tape.row(tape.state, j);
    const double* P = tape.row(tape.P, j);
    const double* k = tape.row(tape.khat, j);
    double dgamma = 0.0, dgain = 0.0;
    for (std::int64_t i = 0; i < K; ++i) {
      const double r = std::log(Anew[i] + sp.eps) - c;
      const double ds = 1.0 / ((1.0 + std::fabs(r)) * (1.0 + std::fabs(r)));
      const double dr = dP[static_cast<std::size_t>(j * K + i)] * P[i] * (-lnx) * ds;
      dc -= dr;
      double& a = dA[static_cast<std::size_t>(i)];
      a += dr / (Anew[i] + sp.eps);
      dgamma += a * Aold[i];
      dgain += a * k[i] * k[i];
      dkhat[static_cast<std::size_t>(j * K + i)] += 2.0 * gain * k[i] * a;
      a *= gamma;
    }
    if (sp.has_gate) out.dpg[ih] += gamma * dgamma;  // γ = exp(precond_g)
    if (sp.has_gain) out.dpb[ih] += dgain;
  }
  out.dpc[static_cast<std::size_t>(h)] += dc;
  if (p.hasP0) std::copy(dA.begin(), dA.end(), out.dp0.begin() + p0);
}

/// hypergrad_ogd in reverse. Per token, d' = clamp(x), x = ρ d + coef·u (hypergradTerms). With
/// dx = [inside the clamp] ⊙ dd' and dcoef = ⟨dx, u⟩:
///   dprecond_g += ρ ⟨dx, d⟩                         (ρ = exp(precond_g))
///   dβ        += dcoef · η (1 − 2β⟨d, u⟩) / ‖k̂‖²
///   du         = coef·dx − dcoef·coef/‖k̂‖² · 1 − dcoef·η β²/‖k̂‖² · d,   dk̂ += 2 k̂ ⊙ du
///   dd         = ρ dx − dcoef·η β²/‖k̂‖² · u
/// (the coef terms vanish when ‖k̂‖² = 0). The read P adds dP to dd' (timing post) or to dd (pre).
void hypergradBackward(const Spec& spec, const Problem& p, const SequenceSpan& seq, std::int64_t h,
                       const KeyHeadTape& tape, const std::vector<double>& dP, std::vector<double>& dkhat,
                       Gradients& out) {
  const HypergradParams& hp = spec.precond.hypergrad;
  const bool pre = hp.timing == WriteTiming::Pre;
  const std::int64_t K = tape.K;
  const std::size_t p0 = static_cast<std::size_t>((seq.n * p.s.heads_qk + h) * K);
  std::vector<double> dd(static_cast<std::size_t>(K), 0.0), dx(dd.size()), u(dd.size());
  if (!p.dPfinal.empty()) std::copy(p.dPfinal.begin() + p0, p.dPfinal.begin() + p0 + K, dd.begin());
  for (std::int64_t j = tape.L - 1; j >= 0; --j) {
    const std::int64_t t = seq.t0 + j;
    const double* d = tape.row(tape.state, j);
    const double* k = tape.row(tape.khat, j);
    const double* dPj = &dP[static_cast<std::size_t>(j * K)];
    if (!pre) {
      for (std::int64_t i = 0; i < K; ++i) dd[i] += dPj[i];
    }
    const HypergradStep st = hypergradTerms(hp, retention(spec, p, seq.b, t, h), hypergradBeta(spec, p, seq.b, t, h),
                                            d, k, K, u.data());
    double drho = 0.0, dcoef = 0.0;
    for (std::int64_t i = 0; i < K; ++i) {
      bool passes = true;
      clampD(hp, st.rho * d[i] + st.coef * u[i], &passes);
      dx[i] = passes ? dd[i] : 0.0;
      drho += dx[i] * d[i];
      dcoef += dx[i] * u[i];
    }
    if (hp.has_retention) out.dpg[static_cast<std::size_t>(p.perH(seq.b, t, h))] += st.rho * drho;
    const bool step = st.kk > 0.0;
    const double ddu = step ? -dcoef * hp.eta * st.beta * st.beta / st.kk : 0.0;  // ∂/∂⟨d, u⟩
    const double dkk = step ? -dcoef * st.coef / st.kk : 0.0;                    // ∂/∂‖k̂‖²
    if (step && spec.gain.kind == GainKind::Scalar) {
      out.dbeta[static_cast<std::size_t>(p.perV(seq.b, t, h))] +=
          dcoef * hp.eta * (1.0 - 2.0 * st.beta * st.du) / st.kk;
    }
    for (std::int64_t i = 0; i < K; ++i) {
      const double du = st.coef * dx[i] + dkk + ddu * d[i];
      dkhat[static_cast<std::size_t>(j * K + i)] += 2.0 * k[i] * du;
      dd[i] = st.rho * dx[i] + ddu * u[i];
    }
    if (pre) {
      for (std::int64_t i = 0; i < K; ++i) dd[i] += dPj[i];
    }
  }
  if (p.hasP0) std::copy(dd.begin(), dd.end(), out.dp0.begin() + p0);
}

}  // namespace

KeyHeadTape recordKeyHead(const Spec& spec, const Problem& p, const SequenceSpan& seq, std::int64_t h) {
  const std::int64_t K = p.s.key_dim, L = seq.length();
  const std::size_t LK = static_cast<std::size_t>(L * K);
  const double scale = queryScale(spec, K);
  const bool precond = hasDiagonalPrecond(spec), atq = precond && spec.precond.side == PrecondSide::Query;
  KeyHeadTape tape;
  tape.L = L;
  tape.K = K;
  tape.qhat.assign(LK, 0.0);
  tape.khat.assign(LK, 0.0);
  tape.rq.assign(static_cast<std::size_t>(L), 1.0);
  tape.rk.assign(static_cast<std::size_t>(L), 1.0);
  if (precond) {
    tape.P.assign(LK, 1.0);
    tape.state.assign(LK + static_cast<std::size_t>(K), isHypergrad(spec) ? spec.precond.hypergrad.init : 0.0);
    if (p.hasP0) {
      const auto first = p.p0.begin() + (seq.n * p.s.heads_qk + h) * K;
      std::copy(first, first + K, tape.state.begin());
    }
  }
  std::vector<double> u(static_cast<std::size_t>(K));
  for (std::int64_t j = 0; j < L; ++j) {
    const std::int64_t t = seq.t0 + j;
    const std::size_t row = static_cast<std::size_t>(j * K);
    const std::size_t x0 = static_cast<std::size_t>(p.qk(seq.b, t, h));
    tape.rq[j] = normalise(&p.q[x0], K, spec.qk_l2norm, spec.l2norm_eps, scale, &tape.qhat[row]);
    tape.rk[j] = normalise(&p.k[x0], K, spec.qk_l2norm, spec.l2norm_eps, 1.0, &tape.khat[row]);
    if (!precond) continue;
    const double* k = &tape.khat[row];
    const double* before = &tape.state[row];
    double* after = &tape.state[row + static_cast<std::size_t>(K)];
    double* P = &tape.P[row];
    if (isSquash(spec)) {  // A' = γ A + β^a k̂²,  P = squash(A')
      const SquashParams& sp = spec.precond.squash;
      const double gamma = retention(spec, p, seq.b, t, h);
      const double gain = sp.has_gain ? p.pb[static_cast<std::size_t>(p.perH(seq.b, t, h))] : 1.0;
      for (std::int64_t i = 0; i < K; ++i) {
        after[i] = gamma * before[i] + gain * k[i] * k[i];
        P[i] = squash(after[i], p.pc[static_cast<std::size_t>(h)], sp);
      }
    } else {  // d' = clamp(ρ d + coef·u); P = d (timing pre) or d' (post)
      const HypergradParams& hp = spec.precond.hypergrad;
      const HypergradStep st = hypergradTerms(hp, retention(spec, p, seq.b, t, h),
                                              hypergradBeta(spec, p, seq.b, t, h), before, k, K, u.data());
      for (std::int64_t i = 0; i < K; ++i) after[i] = clampD(hp, st.rho * before[i] + st.coef * u[i], nullptr);
      const double* read = hp.timing == WriteTiming::Pre ? before : after;
      std::copy(read, read + K, P);
    }
  }
  // Read/write vectors: ATK writes with P ⊙ k̂, ATQ reads with P ⊙ q̂; otherwise k̂ and q̂.
  tape.kr = tape.khat;
  tape.kw = tape.khat;
  tape.qr = tape.qhat;
  if (precond) {
    std::vector<double>& target = atq ? tape.qr : tape.kw;
    for (std::size_t i = 0; i < LK; ++i) target[i] *= tape.P[i];
  }
  return tape;
}

void keyHeadBackward(const Spec& spec, const Problem& p, const SequenceSpan& seq, std::int64_t h,
                     const KeyHeadTape& tape, const KeyHeadAdjoint& adj, Gradients& out) {
  const std::int64_t K = tape.K, L = tape.L;
  const std::size_t LK = static_cast<std::size_t>(L * K);
  const bool precond = hasDiagonalPrecond(spec), atq = precond && spec.precond.side == PrecondSide::Query;

  // Undo the choice of read/write vectors: k^r = k̂; ATK k^w = P ⊙ k̂; ATQ q^r = P ⊙ q̂.
  std::vector<double> dqhat = adj.dqr, dkhat(LK), dP(precond ? LK : 0, 0.0);
  for (std::size_t i = 0; i < LK; ++i) {
    if (precond && !atq) {
      dkhat[i] = adj.dkr[i] + tape.P[i] * adj.dkw[i];
      dP[i] = tape.khat[i] * adj.dkw[i];
    } else {
      dkhat[i] = adj.dkr[i] + adj.dkw[i];
    }
    if (atq) {
      dP[i] = tape.qhat[i] * adj.dqr[i];
      dqhat[i] = tape.P[i] * adj.dqr[i];
    }
  }
  if (isSquash(spec)) squashBackward(spec, p, seq, h, tape, dP, dkhat, out);
  if (isHypergrad(spec)) hypergradBackward(spec, p, seq, h, tape, dP, dkhat, out);

  // Through the normalisation (and the scale of q̂) to dq, dk.
  const double scale = queryScale(spec, K);
  for (std::int64_t j = 0; j < L; ++j) {
    const std::size_t x0 = static_cast<std::size_t>(p.qk(seq.b, seq.t0 + j, h));
    const std::size_t row = static_cast<std::size_t>(j * K);
    normaliseBackward(&p.q[x0], K, spec.qk_l2norm, tape.rq[j], scale, &dqhat[row], &out.dq[x0]);
    normaliseBackward(&p.k[x0], K, spec.qk_l2norm, tape.rk[j], 1.0, &dkhat[row], &out.dk[x0]);
  }
}

}  // namespace dgps::refgrad
