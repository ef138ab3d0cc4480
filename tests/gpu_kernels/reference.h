// Independent float64 token-by-token reference of the DGPS recurrence for the kernel harness (docs/math.md §1,
// §3.3–3.5, §5.2; same semantics as dsl/lib/Reference.cpp, written separately so the two can check each
// other). Layouts are those of runtime/device/dgps/device/abi.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace gk {

struct Feat {
  const char* name;
  int decay;
  bool gain;
  int precond, side, source, solve;
  bool l2;
  double l2eps, sqx, sqeps;
  bool sqgate, sqgain;
  double eta;
  bool retention;
  int timing;
  double init;
  bool cmin, cmax;
  double cminv, cmaxv;
};

/// One forward problem; all tensors in double, values already rounded to the kernel input dtype.
struct Problem {
  int64_t B = 1, T = 0, H = 1, HV = 1, K = 0, V = 0;
  std::vector<int64_t> cu;  // empty: no varlen
  double scale = 1.0;
  std::vector<double> q, k, v, g, beta, pg, pb, pc, s0, p0;
  bool has_s0 = false, has_p0 = false;
  int64_t N() const { return cu.empty() ? B : (int64_t)cu.size() - 1; }
};

struct RefOut {
  std::vector<double> o, sT, pT;
};

/// Per (sequence, key head) preconditioner state along the sequence.
struct RefPrecond {
  std::vector<double> st;
  explicit RefPrecond(size_t K) : st(K) {}

  /// Advances by one token with normalised key kh; returns P (K values).
  std::vector<double> step(const Feat& f, double pg, double pb, double center, double beta, const std::vector<double>& kh) {
    const size_t K = st.size();
    std::vector<double> P(K, 1.0);
    if (f.source == 0) {
      const double gam = f.sqgate ? std::exp(pg) : 1.0;
      const double ga = f.sqgain ? pb : 1.0;
      for (size_t i = 0; i < K; ++i) {
        st[i] = gam * st[i] + ga * kh[i] * kh[i];
        const double r = std::log(st[i] + f.sqeps) - center;
        const double s = r / (1.0 + std::fabs(r));
        P[i] = std::exp(-std::log(f.sqx) * s);
      }
    } else {
      const double rho = f.retention ? std::exp(pg) : 1.0;
      double kk = 0.0, du = 0.0;
      for (size_t i = 0; i < K; ++i) {
        kk += kh[i] * kh[i];
        du += st[i] * kh[i] * kh[i];
      }
      const double coef = kk > 0.0 ? f.eta * beta / kk * (1.0 - beta * du) : 0.0;
      const std::vector<double> pre = st;
      for (size_t i = 0; i < K; ++i) {
        double d = rho * st[i] + coef * kh[i] * kh[i];
        if (f.cmin) d = std::max(d, f.cminv);
        if (f.cmax) d = std::min(d, f.cmaxv);
        st[i] = d;
      }
      P = f.timing == 0 ? pre : st;
    }
    return P;
  }
};

inline void ref_normalise(const double* x, int64_t n, bool l2, double eps, double mul, std::vector<double>& out) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double r = l2 ? mul / std::sqrt(ss + eps) : mul;
  out.resize((size_t)n);
  for (int64_t i = 0; i < n; ++i) out[(size_t)i] = x[i] * r;
}

/// One token for one value head: S <- D S; delta/linear write; returns o (V values) into `o`.
inline void ref_token(const Feat& f, std::vector<double>& S, int64_t K, int64_t V, const double* g, double beta,
                      const double* v, const std::vector<double>& kr, const std::vector<double>& kw,
                      const std::vector<double>& qr, double* o) {
  if (f.decay == 1) {
    const double a = std::exp(g[0]);
    for (double& x : S) x *= a;
  } else if (f.decay == 2) {
    for (int64_t i = 0; i < K; ++i) {
      const double a = std::exp(g[i]);
      for (int64_t j = 0; j < V; ++j) S[(size_t)(i * V + j)] *= a;
    }
  }
  std::vector<double> e(v, v + V);
  if (f.solve == 1)
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < V; ++j) e[(size_t)j] -= S[(size_t)(i * V + j)] * kr[(size_t)i];
  for (double& x : e) x *= beta;
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = 0; j < V; ++j) S[(size_t)(i * V + j)] += kw[(size_t)i] * e[(size_t)j];
  for (int64_t j = 0; j < V; ++j) {
    double s = 0.0;
    for (int64_t i = 0; i < K; ++i) s += S[(size_t)(i * V + j)] * qr[(size_t)i];
    o[j] = s;
  }
}

inline RefOut reference(const Feat& f, const Problem& p) {
  const int64_t K = p.K, V = p.V, H = p.H, HV = p.HV, ratio = HV / H, N = p.N();
  RefOut out;
  out.o.assign((size_t)(p.B * p.T * HV * V), 0.0);
  out.sT.assign((size_t)(N * HV * K * V), 0.0);
  out.pT.assign((size_t)(N * H * K), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t bos = p.cu.empty() ? n * p.T : p.cu[(size_t)n];
    const int64_t len = p.cu.empty() ? p.T : p.cu[(size_t)n + 1] - bos;
    for (int64_t h = 0; h < H; ++h) {
      RefPrecond pre((size_t)K);
      for (int64_t i = 0; i < K; ++i)
        pre.st[(size_t)i] = p.has_p0 ? p.p0[(size_t)((n * H + h) * K + i)] : (f.source == 1 ? f.init : 0.0);
      std::vector<std::vector<double>> S((size_t)ratio, std::vector<double>((size_t)(K * V), 0.0));
      for (int64_t r = 0; r < ratio; ++r)
        if (p.has_s0)
          for (int64_t i = 0; i < K * V; ++i) S[(size_t)r][(size_t)i] = p.s0[(size_t)((n * HV + h * ratio + r) * K * V + i)];
      std::vector<double> kh, qh;
      for (int64_t t = 0; t < len; ++t) {
        const int64_t row = bos + t;
        ref_normalise(&p.k[(size_t)((row * H + h) * K)], K, f.l2, f.l2eps, 1.0, kh);
        ref_normalise(&p.q[(size_t)((row * H + h) * K)], K, f.l2, f.l2eps, p.scale, qh);
        std::vector<double> kw = kh, qr = qh;
        if (f.precond == 1) {
          const double pg = p.pg.empty() ? 0.0 : p.pg[(size_t)(row * H + h)];
          const double pb = p.pb.empty() ? 1.0 : p.pb[(size_t)(row * H + h)];
          const double center = p.pc.empty() ? 0.0 : p.pc[(size_t)h];
          const double beta = f.gain ? p.beta[(size_t)(row * HV + h * ratio)] : 1.0;
          const std::vector<double> P = pre.step(f, pg, pb, center, beta, kh);
          for (int64_t i = 0; i < K; ++i) {
            if (f.side == 0) kw[(size_t)i] *= P[(size_t)i];
            else qr[(size_t)i] *= P[(size_t)i];
          }
        }
        for (int64_t r = 0; r < ratio; ++r) {
          const int64_t hv = h * ratio + r;
          const double* g = f.decay == 1 ? &p.g[(size_t)(row * HV + hv)] : f.decay == 2 ? &p.g[(size_t)((row * HV + hv) * K)] : nullptr;
          const double beta = f.gain ? p.beta[(size_t)(row * HV + hv)] : 1.0;
          ref_token(f, S[(size_t)r], K, V, g, beta, &p.v[(size_t)((row * HV + hv) * V)], kh, kw, qr,
                    &out.o[(size_t)((row * HV + hv) * V)]);
        }
      }
      for (int64_t r = 0; r < ratio; ++r)
        for (int64_t i = 0; i < K * V; ++i) out.sT[(size_t)((n * HV + h * ratio + r) * K * V + i)] = S[(size_t)r][(size_t)i];
      for (int64_t i = 0; i < K; ++i) out.pT[(size_t)((n * H + h) * K + i)] = pre.st[(size_t)i];
    }
  }
  return out;
}

}  // namespace gk
