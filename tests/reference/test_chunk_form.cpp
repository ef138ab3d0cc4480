// The token-by-token reference against independent algorithms written here from math.md:
//   * the chunkwise WY / UT-transform form of the asymmetric gated delta rule (§4.1, with per-channel
//     gates as in §4.3), solving (I + 𝒜) N = ... by forward substitution per chunk;
//   * the ATK accumulator and squash (§3.3) computed as an elementwise scan;
//   * the OSDN d-scan in its chunked affine form (§5.2): ε = (I + 𝒢)^{-1}(1 − β ⊙ L ⊙ (U d)).
// Agreement to ~1e-12 checks the read/write key placement, the decay-before-read order and the gains.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "TestUtil.h"

namespace dgps::test {
namespace {

using Mat = std::vector<std::vector<double>>;

Mat zeros(std::size_t r, std::size_t c) { return Mat(r, std::vector<double>(c, 0.0)); }

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Row-vector views of one (b, head) slice of a [B, T, heads, D] tensor.
Mat rows(const Tensor& x, std::int64_t b, std::int64_t head) {
  const std::int64_t T = x.dim(1), Hn = x.dim(2), D = x.dim(3);
  Mat m = zeros(static_cast<std::size_t>(T), static_cast<std::size_t>(D));
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::int64_t d = 0; d < D; ++d) m[t][d] = x.get(((b * T + t) * Hn + head) * D + d);
  }
  return m;
}

void l2normRows(Mat& m, double eps, double mul) {
  for (auto& r : m) {
    const double f = mul / std::sqrt(dot(r, r) + eps);
    for (double& x : r) x *= f;
  }
}

// ATK squash multipliers M_t for one key head (docs/math.md §3.3), as an elementwise scan.
Mat squashMultipliers(const Spec& spec, const ReferenceInputs& in, const Mat& khat, std::int64_t b, std::int64_t h) {
  const SquashParams& sp = spec.precond.squash;
  const std::int64_t T = in.at("q").dim(1), H = in.at("q").dim(2), K = in.at("q").dim(3);
  std::vector<double> A(static_cast<std::size_t>(K), 0.0);
  if (in.count("initial_precond_state")) {
    for (std::int64_t c = 0; c < K; ++c) A[c] = in.at("initial_precond_state").get((b * H + h) * K + c);
  }
  Mat M = zeros(static_cast<std::size_t>(T), static_cast<std::size_t>(K));
  for (std::int64_t t = 0; t < T; ++t) {
    const double gamma = sp.has_gate ? std::exp(in.at("precond_g").get((b * T + t) * H + h)) : 1.0;
    const double gain = sp.has_gain ? in.at("precond_beta").get((b * T + t) * H + h) : 1.0;
    for (std::int64_t c = 0; c < K; ++c) {
      A[c] = gamma * A[c] + gain * khat[t][c] * khat[t][c];
      const double r = std::log(A[c] + sp.eps) - in.at("precond_center").get(h);
      M[t][c] = std::pow(sp.x, -r / (1.0 + std::fabs(r)));
    }
  }
  return M;
}

// OSDN d before each token (row t) and after the last, via the chunked affine form of docs/math.md §5.2
// with chunk size C; ε solves the unit lower-triangular system by forward substitution.
Mat hypergradStates(const Spec& spec, const ReferenceInputs& in, const Mat& khat, std::int64_t b, std::int64_t h,
                    std::int64_t C) {
  const HypergradParams& hp = spec.precond.hypergrad;
  const std::int64_t T = in.at("q").dim(1), H = in.at("q").dim(2), K = in.at("q").dim(3);
  std::vector<double> d(static_cast<std::size_t>(K), hp.init);
  if (in.count("initial_precond_state")) {
    for (std::int64_t c = 0; c < K; ++c) d[c] = in.at("initial_precond_state").get((b * H + h) * K + c);
  }
  Mat out = zeros(static_cast<std::size_t>(T + 1), static_cast<std::size_t>(K));
  for (std::int64_t c0 = 0; c0 < T; c0 += C) {
    const std::int64_t n = std::min(C, T - c0);
    Mat U = zeros(n, K);
    std::vector<double> beta(n), kappa(n), logr(n), L(n + 1);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t t = c0 + i;
      for (std::int64_t c = 0; c < K; ++c) U[i][c] = khat[t][c] * khat[t][c];
      beta[i] = in.at("beta").get((b * T + t) * H + h);  // gva_ratio 1: value head h
      kappa[i] = hp.eta * beta[i] / std::accumulate(U[i].begin(), U[i].end(), 0.0);
      logr[i] = hp.has_retention ? in.at("precond_g").get((b * T + t) * H + h) : 0.0;
    }
    // L_i = Π_{j<i} r_j (exclusive); decay from after token j to before token i: L_i / L_{j+1}.
    std::vector<double> cum(n + 1, 0.0);
    for (std::int64_t i = 0; i < n; ++i) cum[i + 1] = cum[i] + logr[i];
    auto ratio = [&](std::int64_t i, std::int64_t j) { return std::exp(cum[i] - cum[j + 1]); };
    std::vector<double> eps(n);
    for (std::int64_t i = 0; i < n; ++i) {
      double rhs = 1.0 - beta[i] * std::exp(cum[i]) * dot(U[i], d);
      for (std::int64_t j = 0; j < i; ++j) rhs -= beta[i] * dot(U[i], U[j]) * kappa[j] * ratio(i, j) * eps[j];
      eps[i] = rhs;
    }
    for (std::int64_t i = 0; i <= n; ++i) {
      for (std::int64_t c = 0; c < K; ++c) {
        double v = std::exp(cum[i]) * d[c];
        for (std::int64_t j = 0; j < i; ++j) v += ratio(i, j) * kappa[j] * eps[j] * U[j][c];
        out[c0 + i][c] = v;
      }
    }
    d = out[c0 + n];
  }
  return out;
}

struct ChunkResult {
  Mat o;  // [T, V]
  Mat S;  // [K, V]
};

// One (b, hv) of the asymmetric gated delta rule in chunkwise WY form (docs/math.md §4.1, per-channel gates
// §4.3): read keys Kr, write keys Kw, queries Q (already scaled and preconditioned), log-gates G [T, K].
ChunkResult chunkDelta(const Mat& Q, const Mat& Kr, const Mat& Kw, const Mat& Vv, const std::vector<double>& beta,
                       const Mat& g, Mat S, std::int64_t C) {
  const std::int64_t T = static_cast<std::int64_t>(Q.size());
  const std::size_t K = S.size(), V = S[0].size();
  ChunkResult res{zeros(T, V), {}};
  for (std::int64_t c0 = 0; c0 < T; c0 += C) {
    const std::int64_t n = std::min(C, T - c0);
    Mat G = zeros(n, K);  // chunk-local inclusive cumsum per channel
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::size_t c = 0; c < K; ++c) G[i][c] = (i ? G[i - 1][c] : 0.0) + g[c0 + i][c];
    }
    auto decayDot = [&](const std::vector<double>& a, std::int64_t i, const std::vector<double>& w, std::int64_t j) {
      double s = 0.0;  // Σ_c a_c w_c e^{G_ic − G_jc}
      for (std::size_t c = 0; c < K; ++c) s += a[c] * w[c] * std::exp(G[i][c] - G[j][c]);
      return s;
    };
    // (I + 𝒜) N = diag(b) V − diag(b) (K̂ ⊙ e^G) S0, forward substitution.
    Mat N = zeros(n, V);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t t = c0 + i;
      for (std::size_t v = 0; v < V; ++v) {
        double rhs = beta[t] * Vv[t][v];
        for (std::size_t c = 0; c < K; ++c) rhs -= beta[t] * Kr[t][c] * std::exp(G[i][c]) * S[c][v];
        for (std::int64_t j = 0; j < i; ++j) rhs -= beta[t] * decayDot(Kr[t], i, Kw[c0 + j], j) * N[j][v];
        N[i][v] = rhs;
      }
    }
    // O = (Q ⊙ e^G) S0 + tril_0(Q K̃ᵀ ⊙ Γ) N
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t t = c0 + i;
      for (std::size_t v = 0; v < V; ++v) {
        double o = 0.0;
        for (std::size_t c = 0; c < K; ++c) o += Q[t][c] * std::exp(G[i][c]) * S[c][v];
        for (std::int64_t j = 0; j <= i; ++j) o += decayDot(Q[t], i, Kw[c0 + j], j) * N[j][v];
        res.o[t][v] = o;
      }
    }
    // S_next = e^{G_C} ⊙ S0 + (K̃ ⊙ e^{G_C − G})ᵀ N
    Mat Sn = zeros(K, V);
    for (std::size_t c = 0; c < K; ++c) {
      for (std::size_t v = 0; v < V; ++v) {
        double s = std::exp(G[n - 1][c]) * S[c][v];
        for (std::int64_t j = 0; j < n; ++j) s += Kw[c0 + j][c] * std::exp(G[n - 1][c] - G[j][c]) * N[j][v];
        Sn[c][v] = s;
      }
    }
    S = Sn;
  }
  res.S = S;
  return res;
}

// Runs every (b, hv) of `spec` through the chunk form and compares with runReference.
void checkAgainstChunkForm(const Spec& spec, std::uint64_t seed, std::int64_t C) {
  const std::int64_t B = 2, T = 21, H = 2, K = 5, V = 4, ratio = spec.gva_ratio, HV = H * ratio;
  const ReferenceInputs in = inputs64(spec, shapeOf(B, T, H, HV, K, V), seed);
  const ReferenceOutputs ref = runReference(spec, in);
  const double scale = spec.scale ? *spec.scale : 1.0 / std::sqrt(static_cast<double>(K));
  const bool precond = spec.precond.kind == PrecondKind::Diagonal;
  const bool hyper = precond && spec.precond.source == PrecondSource::HypergradOgd;
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < H; ++h) {
      Mat Q = rows(in.at("q"), b, h), Kh = rows(in.at("k"), b, h);
      l2normRows(Q, spec.l2norm_eps, scale);
      l2normRows(Kh, spec.l2norm_eps, 1.0);
      Mat P = zeros(T, K);
      for (auto& r : P) std::fill(r.begin(), r.end(), 1.0);
      if (precond && !hyper) P = squashMultipliers(spec, in, Kh, b, h);
      if (hyper) {
        const Mat d = hypergradStates(spec, in, Kh, b, h, 4);
        const bool post = spec.precond.hypergrad.timing == WriteTiming::Post;
        for (std::int64_t t = 0; t < T; ++t) P[t] = d[t + (post ? 1 : 0)];
        for (std::int64_t c = 0; c < K; ++c) {
          EXPECT_NEAR(ref.final_precond_state.get((b * H + h) * K + c), d[T][c], 1e-12) << "d_T channel " << c;
        }
      }
      Mat Kw = Kh, Qr = Q;
      Mat& target = (precond && spec.precond.side == PrecondSide::Query) ? Qr : Kw;
      for (std::int64_t t = 0; t < T; ++t) {
        for (std::int64_t c = 0; c < K; ++c) target[t][c] *= P[t][c];
      }
      for (std::int64_t r = 0; r < ratio; ++r) {
        const std::int64_t hv = h * ratio + r;
        const Mat Vv = rows(in.at("v"), b, hv);
        std::vector<double> beta(T, 1.0);
        Mat g = zeros(T, K);
        for (std::int64_t t = 0; t < T; ++t) {
          if (in.count("beta")) beta[t] = in.at("beta").get((b * T + t) * HV + hv);
          for (std::int64_t c = 0; c < K; ++c) {
            if (spec.decay.kind == DecayKind::Scalar) g[t][c] = in.at("g").get((b * T + t) * HV + hv);
            if (spec.decay.kind == DecayKind::Diagonal) g[t][c] = in.at("g").get(((b * T + t) * HV + hv) * K + c);
          }
        }
        Mat S0 = zeros(K, V);
        for (std::int64_t c = 0; c < K; ++c) {
          for (std::int64_t v = 0; v < V; ++v) S0[c][v] = in.at("initial_state").get(((b * HV + hv) * K + c) * V + v);
        }
        const ChunkResult cr = chunkDelta(Qr, Kh, Kw, Vv, beta, g, S0, C);
        double maxO = 0.0;
        for (std::int64_t t = 0; t < T; ++t) {
          for (std::int64_t v = 0; v < V; ++v) {
            const double want = cr.o[t][v];
            maxO = std::max(maxO, std::fabs(want));
            ASSERT_NEAR(ref.o.get(((b * T + t) * HV + hv) * V + v), want, 1e-12)
                << "o at b=" << b << " t=" << t << " hv=" << hv << " v=" << v;
          }
        }
        EXPECT_GT(maxO, 1e-3);
        for (std::int64_t c = 0; c < K; ++c) {
          for (std::int64_t v = 0; v < V; ++v) {
            ASSERT_NEAR(ref.final_state.get(((b * HV + hv) * K + c) * V + v), cr.S[c][v], 1e-12);
          }
        }
      }
    }
  }
}

TEST(ReferenceChunkForm, DeltaFamilyMatchesChunkwiseWyForm) {
  DGPS_SEEDED(seed);
  Spec pgdnAtq = withSquash(gdn(), PrecondSide::Query);
  pgdnAtq.name = "pgdn_atq";
  Spec gva = pkda();
  gva.name = "pkda_gva3";
  gva.gva_ratio = 3;
  for (const Spec& spec : {deltanet(), gdn(), kda(), pdn(), pgdn(), pkda(), pgdnAtq, gva,
                           osdn(WriteTiming::Pre, true), osdn(WriteTiming::Post, true), osdn(WriteTiming::Post, false)}) {
    for (std::int64_t C : {1, 4, 8}) {
      SCOPED_TRACE(spec.name + " timing " + toString(spec.precond.hypergrad.timing) + " chunk " + std::to_string(C));
      checkAgainstChunkForm(spec, seed, C);
    }
  }
}

}  // namespace
}  // namespace dgps::test
