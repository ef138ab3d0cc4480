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
// caller loads the raw rows into `key` (pitch bf16Pitch(KP), pad rows and channels zero) and β, ln ρ into the [C]
// vectors `beta`, `logret` (0 on pad rows), then synchronises. The key tile is rewritten in place into u's bf16 high
// part, and u's low part is overlaid by 𝒢 once the Gram product has read it.
// About 2C²K (the Gram matrix, on tensor cores) + C³/3 (the inverse) FLOPs; the CTA's NW warps share every step.
#pragma once

#include "dgps/device/tri_inverse.cuh"
#include "dgps/tile/chunk_rows.cuh"
#include "dgps/tile/feedback_scan_layout.h"
#include "dgps/tile/row_norm.cuh"

namespace dgps {
namespace tile {

/// The parts of the summary's shared memory (feedback_scan_layout.h FeedbackSummarySmem): the raw key [C][PQ]
/// (16-bit), rewritten in place into u's high part (bf16); u's low part [C][PQ] (bf16), aliased by 𝒢/𝒯 [C][GP]
/// (f32) after the Gram product; eight [C] per-row vectors (rk, rk², κ, β, ρ then the column factor, cum [C+1]);
/// the key copy's mbarrier.
template <int C, int K>
struct FeedbackSummaryTiles {
  static constexpr FeedbackSummarySmem SM = feedbackSummarySmem(K, C);
  static constexpr int KP = launch::pad16(K), PQ = launch::bf16Pitch(KP), GP = launch::f32Pitch(C);
  uint16_t* key;  ///< the raw key rows, then u's high part
  uint16_t* ulo;  ///< u's low part
  float* G;
  float *rk, *rk2, *kap, *bet, *colf, *cum;
  uint64_t* bar;  ///< the key's tensor copy (tile/chunk_rows.cuh RowCopy)
  DGPS_DEV explicit FeedbackSummaryTiles(unsigned char* sm)
      : key(dev::smem_at<uint16_t>(sm, SM.key)),
        ulo(dev::smem_at<uint16_t>(sm, SM.ulo)),
        G(dev::smem_at<float>(sm, SM.gt)),
        rk(dev::smem_at<float>(sm, SM.tok)),
        rk2(rk + C),
        kap(rk + 2 * C),
        bet(rk + 3 * C),
        colf(rk + 4 * C),
        cum(rk + 5 * C),
        bar(dev::smem_at<uint64_t>(sm, SM.bar)) {}
  DGPS_DEV RowVec beta() const { return RowVec{bet, 1}; }
  DGPS_DEV RowVec logret() const { return RowVec{colf, 1}; }
};

/// Per row, from the raw input bits (as the token scan): rk, rk², κ, and u = (rk x)² split into bf16 parts
/// u = hi + lo (about 16 mantissa bits together), hi in place of the raw key and lo in `ulo`. LR lanes share a row
/// and keep its 16-byte pieces in registers (row_norm.cuh's split), so a row costs one butterfly and one read.
/// Pad rows have rk = 0 and pad channels are zero, so their u is 0. Meanwhile warp 0 scans ln ρ into cum.
template <int C, int K, class Codec>
DGPS_DEV void feedback_row_factors(const FeedbackSummaryTiles<C, K>& s, float eta, bool l2norm, float eps, int Lr) {
  using Tiles = FeedbackSummaryTiles<C, K>;
  constexpr int CH = Tiles::KP / 8, LR = norm_lanes_per_row(CH), PPL = (CH + LR - 1) / LR, RPS = 32 / LR;
  const int nw = dev::nthreads() / 32, sub = dev::lane() % LR, rl = dev::lane() / LR;
  if (dev::warp() == 0) {  // cum_i = Σ_{l<i} ln ρ_l: E consecutive rows per lane, then a warp scan
    constexpr int E = (C + 31) / 32;
    float v[E], run = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int i = dev::lane() * E + e;
      run += i < C ? s.colf[i] : 0.f;
      v[e] = run;
    }
    const float incl = dev::warp_inclusive_scan(run);
    const float before = dev::shfl_up(incl, 1);
    const float base = dev::lane() == 0 ? 0.f : before;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int i = dev::lane() * E + e;
      if (i < C) s.cum[i + 1] = base + v[e];
    }
    if (dev::lane() == 0) s.cum[0] = 0.f;
  }
  for (int i0 = dev::warp() * RPS; i0 < C; i0 += nw * RPS) {
    const int i = i0 + rl;
    uint32_t wv[PPL][4];
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < PPL; ++j) {
      const int ch = sub + j * LR;
      if (i >= C || ch >= CH) continue;
      const dev::U4 x = *reinterpret_cast<const dev::U4*>(s.key + i * Tiles::PQ + ch * 8);
      wv[j][0] = x.x, wv[j][1] = x.y, wv[j][2] = x.z, wv[j][3] = x.w;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float a0 = Codec::load((uint16_t)(wv[j][e] & 0xffffu)), a1 = Codec::load((uint16_t)(wv[j][e] >> 16));
        ss += a0 * a0 + a1 * a1;
      }
    }
#pragma unroll
    for (int m = LR / 2; m >= 1; m >>= 1) ss += dev::shfl_xor(ss, m);
    if (i < C) {
      const float r = l2norm ? dev::rsqrt(ss + eps) : 1.f, rr = i < Lr ? r : 0.f;
      if (sub == 0) {
        const float nk = ss * r * r;
        s.rk[i] = rr;
        s.rk2[i] = rr * rr;
        s.kap[i] = (i < Lr && nk > 0.f) ? eta * s.bet[i] / nk : 0.f;
      }
#pragma unroll
      for (int j = 0; j < PPL; ++j) {
        const int ch = sub + j * LR;
        if (ch >= CH) continue;
        uint32_t hi[4], lo[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float a0 = Codec::load((uint16_t)(wv[j][e] & 0xffffu)) * rr;
          const float a1 = Codec::load((uint16_t)(wv[j][e] >> 16)) * rr;
          dev::split_bf16(hi[e], lo[e], a0 * a0, a1 * a1);
        }
        const int o = i * Tiles::PQ + ch * 8;
        *reinterpret_cast<dev::U4*>(s.key + o) = dev::U4{hi[0], hi[1], hi[2], hi[3]};
        *reinterpret_cast<dev::U4*>(s.ulo + o) = dev::U4{lo[0], lo[1], lo[2], lo[3]};
      }
    }
  }
}

/// 𝒢 (strictly lower) from the Gram matrix u uᵀ on tensor cores: 16x16 blocks on and below the diagonal, block q
/// to warp q mod NW, each product hi·hi + hi·lo + lo·hi (dev::mma_split). The accumulators stay in registers over
/// a barrier, because 𝒢 overwrites u's low part.
template <int C, int K, int NW>
DGPS_DEV void feedback_gram(const FeedbackSummaryTiles<C, K>& s) {
  using Tiles = FeedbackSummaryTiles<C, K>;
  constexpr int NB = C / 16, NBLK = NB * (NB + 1) / 2, PER = (NBLK + NW - 1) / NW, KP = Tiles::KP, PQ = Tiles::PQ;
  const int w = dev::warp();
  // block q = R(R+1)/2 + J covers rows 16R.. and columns 16J.. (J <= R)
  auto block_of = [](int q, int& R, int& J) {
    R = 0;
    while ((R + 1) * (R + 2) / 2 <= q) ++R;
    J = q - R * (R + 1) / 2;
  };
  float acc[PER][2][4];
#pragma unroll
  for (int u = 0; u < PER; ++u) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[u][nt][e] = 0.f;
    const int q = w + u * NW;
    if (q >= NBLK) continue;
    int R, J;
    block_of(q, R, J);
#pragma unroll 2
    for (int k0 = 0; k0 < KP; k0 += 16) {
      uint32_t ah[4], al[4], bh[4], bl[4];
      dev::lds_a(ah, s.key, PQ, 16 * R, k0);
      dev::lds_a(al, s.ulo, PQ, 16 * R, k0);
      dev::lds_b_nk(bh, s.key, PQ, 16 * J, k0);
      dev::lds_b_nk(bl, s.ulo, PQ, 16 * J, k0);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
        dev::mma_split(acc[u][nt], ah, al, bh[2 * nt], bh[2 * nt + 1], bl[2 * nt], bl[2 * nt + 1]);
    }
  }
  dev::sync_threads();  // every warp has read u's low part: 𝒢 may overwrite it
  const int g = dev::lane() >> 2, tq = dev::lane() & 3;
#pragma unroll
  for (int u = 0; u < PER; ++u) {
    const int q = w + u * NW;
    if (q >= NBLK) continue;
    int R, J;
    block_of(q, R, J);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 16 * R + g + 8 * (e >> 1), j = 16 * J + 8 * nt + 2 * tq + (e & 1);
        if (i > j)
          s.G[i * Tiles::GP + j] = s.bet[i] * s.kap[j] * dev::exp_(s.cum[i] - s.cum[j + 1]) * acc[u][nt][e];
      }
  }
}

/// tri and vec (above) from 𝒯 in s.G; the column factor β L rk² replaces ρ in colf. Eight lanes share a row j
/// (a warp step covers four rows): each writes its tri entries m ≡ lane (mod 8) and adds them up, and a
/// three-step butterfly gives the row sum Σ_m 𝒯_jm. Why: with a warp per row the five dependent shuffles of every
/// row's sum and its divergent tail took more than a third of the role's stall samples (docs/performance.md, run 21).
template <int C, int K>
DGPS_DEV void feedback_store_block(const FeedbackSummaryTiles<C, K>& s, float* tri, float* vec) {
  constexpr int GP = FeedbackSummaryTiles<C, K>::GP, LPR = 8, RPS = 32 / LPR, PER = C / LPR;
  static_assert(C % RPS == 0, "a warp step covers whole rows");
  const int t = dev::tid(), nt = dev::nthreads(), sub = dev::lane() % LPR;
  const float* Tm = s.G;  // lower block triangle: 𝒯 (unit diagonal, zeros above it inside diagonal blocks)
  for (int m = t; m < C; m += nt) s.colf[m] = s.bet[m] * dev::exp_(s.cum[m]) * s.rk2[m];
  dev::sync_threads();
  for (int j = dev::warp() * RPS + dev::lane() / LPR; j < C; j += (nt / 32) * RPS) {
    const float kj = s.kap[j];
    float* const row = tri + j * (j + 1) / 2;
    float sum = 0.f;
#pragma unroll
    for (int r = 0; r < PER; ++r) {
      const int m = sub + LPR * r;
      if (m > j) continue;
      const float v = Tm[j * GP + m];
      row[m] = kj * v * s.colf[m];
      sum += v;
    }
#pragma unroll
    for (int o = LPR / 2; o >= 1; o >>= 1) sum += dev::shfl_xor(sum, o);
    if (sub == 0) {
      vec[j] = kj * sum;
      vec[C + j] = dev::exp_(s.cum[C] - s.cum[j + 1]) * s.rk2[j];  // cum[C] = cum[Lr]: pad rows add no retention
    }
  }
  if (t < 4) vec[2 * C + t] = t == 0 ? dev::exp_(s.cum[C]) : 0.f;
}

/// The whole summary of one chunk (file comment), after the caller's loads and barrier, by a CTA of NW warps.
/// `tri` and `vec` are the CTA's (chunk slot, key head) entries of the workspace regions hgtri and hgvec.
template <int C, int K, int KP, int NW, class Codec>
DGPS_DEV void feedback_chunk_summary(const FeedbackSummaryTiles<C, K>& s, float* tri, float* vec, float eta,
                                      bool l2norm, float eps, int Lr) {
  static_assert(C % 16 == 0, "the Gram blocks and invert_unit_lower work on 16-row blocks");
  static_assert(KP == FeedbackSummaryTiles<C, K>::KP, "KP is pad16(K)");
  feedback_row_factors<C, K, Codec>(s, eta, l2norm, eps, Lr);
  dev::sync_threads();
  feedback_gram<C, K, NW>(s);
  dev::sync_threads();
  // 𝒯 = (I + 𝒢)^{-1} in place, as chunk_local inverts its KKT block (16x16 diagonal blocks by f32
  // substitution, the block merge on tensor cores with split-bf16 operands: about 16 mantissa bits).
  dev::invert_unit_lower<C>(s.G, FeedbackSummaryTiles<C, K>::GP);
  feedback_store_block<C, K>(s, tri, vec);
}

}  // namespace tile
}  // namespace dgps
