// The chunk summary of a feedback scan in its chunked form. A feedback scan is a diagonal (per-channel)
// recurrence over tokens whose step coefficient reads the state through one inner product:
//   d ← ρ_t d + c_t u_t,   u_t = (rk_t x_t)² (elementwise),   c_t = κ_t (1 − β_t ⟨d, u_t⟩)
// with a [K] state d, a 16-bit input row x_t, per-token scalars β_t, ρ_t = e^{logret_t} and κ_t = η β_t / ‖rk_t x_t‖²
// (0 for a zero row), rk_t = (Σ x_t² + eps)^{-1/2} (1 without the l2 norm). Without a projection the step is
// affine in d, so a chunk's coefficients and end state are affine in its incoming d (docs/math.md §5.2
// "Chunked form" derives it): here, for one chunk and head, that affine map, packed as the pass over chunks
// (feedback_scan_pass.cuh) reads it.
//
// Chunk rows i, j, m < C (Lr real rows; pad rows are zero rows with no retention), x raw 16-bit:
//   u_i = (rk_i x_i)²,  cum_i = Σ_{l<i} ln ρ_l,  L_i = e^{cum_i}
//   𝒢_ij = β_i ⟨u_i, u_j⟩ κ_j e^{cum_i − cum_{j+1}} (i > j),  𝒯 = (I + 𝒢)^{-1}  (unit lower triangular)
// writes, f32 in device memory,
//   tri[j(j+1)/2 + m] = κ_j 𝒯_jm β_m L_m rk_m²                     (m <= j: the lower triangle packed by rows)
//   vec = {a_j = κ_j Σ_m 𝒯_jm [C],  y_j = e^{cum_C − cum_{j+1}} rk_j² [C],  L_C,  0, 0, 0}
// so that the pass computes c = a − tri·((x²) d) and d ← L_C d + Σ_j y_j c_j x_j² from the raw rows alone.
//
// Shared memory: tile/feedback_scan_layout.h feedbackSummarySmem(K, C) at `sm` (FeedbackSummaryTiles names its parts). The
// caller loads the raw rows into `key` (pitch bf16Pitch(KP)) and β, ln ρ into the [C] vectors `beta`, `logret`
// (0 on pad rows), then synchronises; the row tile is dead after the u tile is built (𝒢 overwrites it).
// About 2C²K (the Gram matrix) + C³/3 (the inverse) FLOPs; the CTA's threads share every step.
#pragma once

#include "dgps/device/tri_inverse.cuh"
#include "dgps/tile/chunk_rows.cuh"
#include "dgps/tile/feedback_scan_layout.h"

namespace dgps {
namespace tile {

/// Four floats read as one 16-byte shared-memory access.
struct alignas(16) F4x {
  float v[4];
};

/// The parts of the summary's shared memory (feedback_scan_layout.h FeedbackSummarySmem): the u tile transposed
/// [KP][C+4], the raw key [C][bf16Pitch(KP)] aliased by 𝒢/𝒯 [C][f32Pitch(C)], and eight [C] per-row vectors
/// (rk, rk², κ, β, ρ then the column factor, cum [C+1]).
template <int C, int K>
struct FeedbackSummaryTiles {
  static constexpr FeedbackSummarySmem SM = feedbackSummarySmem(K, C);
  static constexpr int UP = C + 4, GP = launch::f32Pitch(C);
  float* uT;
  uint16_t* key;
  float* G;
  float *rk, *rk2, *kap, *bet, *colf, *cum;
  DGPS_DEV explicit FeedbackSummaryTiles(unsigned char* sm)
      : uT(dev::smem_at<float>(sm, SM.uT)),
        key(dev::smem_at<uint16_t>(sm, SM.key)),
        G(dev::smem_at<float>(sm, SM.gt)),
        rk(dev::smem_at<float>(sm, SM.tok)),
        rk2(rk + C),
        kap(rk + 2 * C),
        bet(rk + 3 * C),
        colf(rk + 4 * C),
        cum(rk + 5 * C) {}
  DGPS_DEV RowVec beta() const { return RowVec{bet, 1}; }
  DGPS_DEV RowVec logret() const { return RowVec{colf, 1}; }
};

/// rk, rk², κ per row (one warp per row, from the raw input bits as the token scan) and cum (thread 0).
template <int C, int K, class Codec>
DGPS_DEV void feedback_row_factors(const FeedbackSummaryTiles<C, K>& s, int pitch, float eta, bool l2norm,
                                    float eps, int Lr) {
  const int nt = dev::nthreads();
  for (int i = dev::warp(); i < C; i += nt / 32) {
    float ss = 0.f;
    for (int x = dev::lane(); x < K; x += 32) {
      const float v = Codec::load(s.key[i * pitch + x]);
      ss += v * v;
    }
    ss = dev::warp_sum(ss);
    if (dev::lane() == 0) {
      const float r = l2norm ? dev::rsqrt(ss + eps) : 1.f;
      const float nk = ss * r * r;
      s.rk[i] = i < Lr ? r : 0.f;
      s.rk2[i] = i < Lr ? r * r : 0.f;
      s.kap[i] = (i < Lr && nk > 0.f) ? eta * s.bet[i] / nk : 0.f;
    }
  }
  if (dev::tid() == 0) {  // C additions
    float acc = 0.f;
    s.cum[0] = 0.f;
    for (int i = 0; i < C; ++i) s.cum[i + 1] = acc = acc + s.colf[i];
  }
}

/// uT[x][i] = u_ix = (rk_i x_ix)²; pad rows are zero keys (rk = 0).
template <int C, int K, class Codec>
DGPS_DEV void feedback_u_tile(const FeedbackSummaryTiles<C, K>& s, int pitch) {
  constexpr int UP = FeedbackSummaryTiles<C, K>::UP;
  for (int e = dev::tid(); e < C * K; e += dev::nthreads()) {
    const int i = e / K, x = e - i * K;
    const float kh = Codec::load(s.key[i * pitch + x]) * s.rk[i];
    s.uT[x * UP + i] = kh * kh;
  }
}

/// 𝒢 (strictly lower) by 8x4 register tiles on and below the diagonal: two float4 of rows and one of columns of
/// uT per key channel (3 shared loads per 32 FMAs); (C/8)(C/8 + 1) tiles, 72 at C = 64.
template <int C, int K>
DGPS_DEV void feedback_gram(const FeedbackSummaryTiles<C, K>& s) {
  constexpr int UP = FeedbackSummaryTiles<C, K>::UP, GP = FeedbackSummaryTiles<C, K>::GP;
  constexpr int NBI = C / 8, NTILE = NBI * (NBI + 1);
  for (int q = dev::tid(); q < NTILE; q += dev::nthreads()) {
    int bi = 0;  // block row bi holds tiles bj = 0 .. 2bi + 1 (columns up to its last row)
    while ((bi + 1) * (bi + 2) <= q) ++bi;
    const int bj = q - bi * (bi + 1);
    float acc[8][4] = {};
#pragma unroll 2
    for (int x = 0; x < K; ++x) {
      const F4x ui0 = *reinterpret_cast<const F4x*>(s.uT + x * UP + 8 * bi);
      const F4x ui1 = *reinterpret_cast<const F4x*>(s.uT + x * UP + 8 * bi + 4);
      const F4x uj = *reinterpret_cast<const F4x*>(s.uT + x * UP + 4 * bj);
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c4 = 0; c4 < 4; ++c4) {
          acc[r][c4] += ui0.v[r] * uj.v[c4];
          acc[r + 4][c4] += ui1.v[r] * uj.v[c4];
        }
    }
#pragma unroll
    for (int r = 0; r < 8; ++r)
#pragma unroll
      for (int c4 = 0; c4 < 4; ++c4) {
        const int i = 8 * bi + r, j = 4 * bj + c4;
        if (i > j) s.G[i * GP + j] = s.bet[i] * s.kap[j] * dev::exp_(s.cum[i] - s.cum[j + 1]) * acc[r][c4];
      }
  }
}

/// tri and vec (above) from 𝒯 in s.G; the column factor β L rk² replaces ρ in colf.
template <int C, int K>
DGPS_DEV void feedback_store_block(const FeedbackSummaryTiles<C, K>& s, float* tri, float* vec) {
  constexpr int GP = FeedbackSummaryTiles<C, K>::GP;
  const int t = dev::tid(), nt = dev::nthreads();
  const float* Tm = s.G;  // lower block triangle: 𝒯 (unit diagonal, zeros above it inside diagonal blocks)
  for (int m = t; m < C; m += nt) s.colf[m] = s.bet[m] * dev::exp_(s.cum[m]) * s.rk2[m];
  dev::sync_threads();
  for (int j = dev::warp(); j < C; j += nt / 32)  // the lower triangle, one warp per row
    for (int m = dev::lane(); m <= j; m += 32) tri[j * (j + 1) / 2 + m] = s.kap[j] * Tm[j * GP + m] * s.colf[m];
  for (int j = t; j < C; j += nt) {
    float acc = 0.f;
    for (int m = 0; m <= j; ++m) acc += Tm[j * GP + m];
    vec[j] = s.kap[j] * acc;
    vec[C + j] = dev::exp_(s.cum[C] - s.cum[j + 1]) * s.rk2[j];  // cum[C] = cum[Lr]: pad rows add no retention
  }
  if (t < 4) vec[2 * C + t] = t == 0 ? dev::exp_(s.cum[C]) : 0.f;
}

/// The whole summary of one chunk (file comment), after the caller's loads and barrier. `tri` and `vec` are
/// the CTA's (chunk slot, key head) entries of the workspace regions hgtri and hgvec.
template <int C, int K, int KP, class Codec>
DGPS_DEV void feedback_chunk_summary(const FeedbackSummaryTiles<C, K>& s, float* tri, float* vec, float eta,
                                      bool l2norm, float eps, int Lr) {
  static_assert(C % 16 == 0, "invert_unit_lower works on 16-row blocks");
  constexpr int PQ = launch::bf16Pitch(KP);
  feedback_row_factors<C, K, Codec>(s, PQ, eta, l2norm, eps, Lr);
  dev::sync_threads();
  feedback_u_tile<C, K, Codec>(s, PQ);
  dev::sync_threads();  // the key tile is dead from here: 𝒢 overwrites it
  feedback_gram<C, K>(s);
  dev::sync_threads();
  // 𝒯 = (I + 𝒢)^{-1} in place, as chunk_local inverts its KKT block (16x16 diagonal blocks by f32
  // substitution, the block merge on tensor cores with split-bf16 operands: about 16 mantissa bits).
  dev::invert_unit_lower<C>(s.G, FeedbackSummaryTiles<C, K>::GP);
  feedback_store_block<C, K>(s, tri, vec);
}

}  // namespace tile
}  // namespace dgps
