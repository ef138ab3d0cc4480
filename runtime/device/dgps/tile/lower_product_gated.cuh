// The lower products of lower_product.cuh with per-channel log2 gates G [C, KP] inside the sum
// (docs/math.md §4.3):
//   P_p[i, j] = (a_p,i·b_p,i)·c_j·Σ_d R_p[i, d] Kc[j, d]·2^{G_id − G_jd}
// Block row I uses reference row r = 16I: its rows carry 2^{G_i − G_r} <= 1, the columns 2^{G_r − G_j} (<= 1
// for j < r). The diagonal block's columns carry factors >= 1, safe while the block's gate span
// max_d (G_rd − G_{r+15,d}) is <= 100; otherwise that block is evaluated directly, exponents <= 0 only.
// Scratch: sRows bf16 [16·NP][PITCH], sKc bf16 [C][PITCH], span NB floats (all shared).
#pragma once

#include "dgps/tile/exp2_scale.cuh"
#include "dgps/tile/lower_product.cuh"

namespace dgps {
namespace tile {

template <int C, int K, int KP, int PITCH, int NW, int NP>
DGPS_DEV void lower_products_channel_gated(const uint16_t* const (&rows)[NP], const RowFactor (&a)[NP],
                                           const RowVec (&b)[NP], const uint16_t* cols, RowVec c, const float* G,
                                           int gp, uint16_t* sRows, uint16_t* sKc, float* span, float* out_s,
                                           int lda, uint16_t* out_g) {
  constexpr int NB = C / 16;
  if (dev::tid() < 32) {
    for (int I = 0; I < NB; ++I) {
      float m = 0.f;
      for (int d = dev::lane(); d < KP; d += 32) m = dev::fmax_(m, G[(16 * I) * gp + d] - G[(16 * I + 15) * gp + d]);
      m = dev::warp_max(m);
      if (dev::lane() == 0) span[I] = m;
    }
  }
  dev::sync_threads();
  unsigned unsafe = 0;
  for (int I = 0; I < NB; ++I) unsafe |= (span[I] <= 100.f ? 0u : 1u) << I;
  for (int I = 0; I < NB; ++I) {
    const int r = 16 * I;
    // 8 channels (16 bytes) per thread step; pad channels are built too (their rows and gates are zero)
    constexpr int CK = KP / 8;
    for (int e = dev::tid(); e < 16 * NP * CK; e += dev::nthreads()) {
      const int rr = e / CK, d0 = 8 * (e - rr * CK);
      const int i = r + (rr & 15);
      exp2_scale_row8(sRows + rr * PITCH + d0, part_of(rows, rr >> 4) + i * PITCH + d0, G + i * gp + d0,
                      G + r * gp + d0, 1e30f);
    }
    for (int e = dev::tid(); e < (r + 16) * CK; e += dev::nthreads()) {
      const int j = e / CK, d0 = 8 * (e - j * CK);
      exp2_scale_row8(sKc + j * PITCH + d0, cols + j * PITCH + d0, G + r * gp + d0, G + j * gp + d0, 100.f);
    }
    dev::sync_threads();
    const int ntile = NP * (I + 1);
    for (int tt = dev::warp(); tt < ntile; tt += NW) {
      // NP <= 2 (part_of): a compare, not a division by the runtime I + 1
      const int p = tt > I ? 1 : 0, J = tt - p * (I + 1);
      float acc[2][4];
#pragma unroll
      for (int x = 0; x < 2; ++x)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[x][e] = 0.f;
      mma_block<KP, PITCH>(acc, sRows, 16 * p, sKc, 16 * J);
      if (!(J == I && ((unsafe >> I) & 1u)))
        store_block<C, NP, false>(p, I, J, acc, a, b, c, RowVec{nullptr, 0}, out_s, lda, out_g);
    }
    dev::sync_threads();
  }
  // unsafe diagonal blocks: direct per-element evaluation, exponents G_i − G_j <= 0 only
  for (int I = 0; I < NB; ++I) {
    if (!((unsafe >> I) & 1u)) continue;
    for (int e = dev::tid(); e < NP * 256; e += dev::nthreads()) {
      const int p = e >> 8, i = 16 * I + ((e >> 4) & 15), j = 16 * I + (e & 15);
      const bool strict = p < NP - 1;
      float s = 0.f;
      if (j <= i) {
        const uint16_t* ri = part_of(rows, p) + i * PITCH;
        for (int d = 0; d < K; ++d)
          s += dev::bf16_to_f32(ri[d]) * dev::bf16_to_f32(cols[j * PITCH + d]) * dev::ex2(G[i * gp + d] - G[j * gp + d]);
      }
      if (strict)
        out_s[i * lda + j] = i > j ? s * part_factor(a, b, p, i) * c[j] : 0.f;
      else
        out_g[i * C + j] = dev::f32_to_bf16(i >= j ? s * part_factor(a, b, p, i) * c[j] : 0.f);
    }
  }
}

}  // namespace tile
}  // namespace dgps
