// (I + 𝒜)^{-1} for a strictly lower-triangular C x C block 𝒜 in fp32 shared memory, in place
// (docs/math.md §4.1 𝒯; FLA's solve_tril uses the same 16x16 diagonal blocks + block merge).
//
// 1. Diagonal blocks D_b = (I + 𝒜_bb)^{-1} by forward substitution, one thread per column, the column in
//    registers (compile-time indices only); written over 𝒜_bb.
// 2. One warp per block column J, all in registers: T_JJ = D_J, and for I > J
//        T_IJ = −D_I Σ_{K=J}^{I−1} 𝒜_IK T_KJ,
//    computed transposed (T_IJᵀ = −(Σ T_KJᵀ 𝒜_IKᵀ) D_Iᵀ) so each accumulator is the next product's A operand.
//    Products run on tensor cores with split-bf16 operands (x = hi + lo, hi·hi + hi·lo + lo·hi): about 16
//    mantissa bits, i.e. near-fp32 accuracy (docs/math.md §7.5: no TF32-grade error in the solve).
// 3. After a barrier the off-diagonal T blocks are written over 𝒜.
#pragma once

#include "dgps/device/common.cuh"

namespace dgps {
namespace dev {

DGPS_DEV void split_bf16(uint32_t& hi, uint32_t& lo, float x0, float x1) {
  hi = pack_bf16(x0, x1);
  lo = pack_bf16(x0 - bf16_lo(hi), x1 - bf16_hi(hi));
}

/// acc += A·B with A = (ah + al), B = (bh + bl) split operands (one n-tile).
DGPS_DEV void mma_split(float acc[4], const uint32_t ah[4], const uint32_t al[4], uint32_t bh0, uint32_t bh1,
                        uint32_t bl0, uint32_t bl1) {
  mma_bf16(acc, al, bh0, bh1);
  mma_bf16(acc, ah, bl0, bl1);
  mma_bf16(acc, ah, bh0, bh1);
}

/// A operand (16x16) from two accumulator tiles, split into hi/lo.
DGPS_DEV void acc_to_a_split(uint32_t ah[4], uint32_t al[4], const float c0[4], const float c1[4]) {
  split_bf16(ah[0], al[0], c0[0], c0[1]);
  split_bf16(ah[1], al[1], c0[2], c0[3]);
  split_bf16(ah[2], al[2], c1[0], c1[1]);
  split_bf16(ah[3], al[3], c1[2], c1[3]);
}

/// acc (16x16, two n-tiles) += Xᵀ-operand · Mᵀ where M is the fp32 16x16 smem block at `m` (pitch lda):
/// B(k, n) = M[n][k].
DGPS_DEV void mma_acc_times_blockT(float acc[2][4], const float x0[4], const float x1[4], const float* m, int lda) {
  uint32_t ah[4], al[4];
  acc_to_a_split(ah, al, x0, x1);
  const int g = lane() >> 2, t = lane() & 3;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const float* row = m + (8 * nt + g) * lda + 2 * t;
    uint32_t bh0, bl0, bh1, bl1;
    split_bf16(bh0, bl0, row[0], row[1]);
    split_bf16(bh1, bl1, row[8], row[9]);
    mma_split(acc[nt], ah, al, bh0, bh1, bl0, bl1);
  }
}

/// A: [C][lda] fp32, strictly lower part significant; on return the lower block triangle holds T (unit lower;
/// zeros above the diagonal inside diagonal blocks; blocks above the block diagonal untouched).
template <int C>
DGPS_DEV void invert_unit_lower(float* A, int lda) {
  constexpr int NB = C / 16;
  const int t = tid();
  {
    float x[16];
    const bool act = t < NB * 16;
    const int b = t >> 4, col = t & 15;
    float* Ab = A + (16 * b) * lda + 16 * b;
    if (act) {
#pragma unroll
      for (int r = 0; r < 16; ++r) {
        float s = 0.f;
#pragma unroll
        for (int s2 = 0; s2 < r; ++s2) s += Ab[r * lda + s2] * x[s2];
        x[r] = (r == col ? 1.f : 0.f) - s;  // x[s2] = 0 for s2 < col: exact forward substitution
      }
    }
    sync_threads();
    if (act) {
#pragma unroll
      for (int r = 0; r < 16; ++r) Ab[r * lda + col] = x[r];
    }
    sync_threads();
  }
  if (NB == 1) return;
  const int g = lane() >> 2, tq = lane() & 3, nw = nthreads() >> 5;
  float TT[NB][2][4];  // T_IJᵀ, rows = column index within block J, cols = row index within block I
  // Each warp handles block columns J = warp, warp + nw, ... (< NB - 1); results stay in registers until
  // every warp has finished reading 𝒜, then they are stored.
  constexpr int MAXJ = NB - 1;
  for (int J0 = 0; J0 < MAXJ; J0 += nw) {
    const int J = J0 + warp();
    const bool active = J < MAXJ;
#pragma unroll
    for (int I = 0; I < NB; ++I) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) TT[I][nt][e] = 0.f;
      if (!active || I < J) continue;
      if (I == J) {
        // T_JJᵀ[r][c] = D_J[c][r]
        const float* D = A + (16 * J) * lda + 16 * J;
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = g + 8 * (e >> 1), c = 8 * nt + 2 * tq + (e & 1);
            TT[I][nt][e] = D[c * lda + r];
          }
        continue;
      }
      float X[2][4];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) X[nt][e] = 0.f;
#pragma unroll
      for (int Kb = 0; Kb < I; ++Kb)
        if (Kb >= J) mma_acc_times_blockT(X, TT[Kb][0], TT[Kb][1], A + (16 * I) * lda + 16 * Kb, lda);
      float Y[2][4];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) Y[nt][e] = 0.f;
      mma_acc_times_blockT(Y, X[0], X[1], A + (16 * I) * lda + 16 * I, lda);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) TT[I][nt][e] = -Y[nt][e];
    }
    sync_threads();  // all reads of 𝒜 done before off-diagonal blocks are overwritten
    if (active) {
#pragma unroll
      for (int I = 0; I < NB; ++I) {
        if (I <= J) continue;
        float* blk = A + (16 * I) * lda + 16 * J;
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = g + 8 * (e >> 1), c = 8 * nt + 2 * tq + (e & 1);
            blk[c * lda + r] = TT[I][nt][e];
          }
      }
    }
    sync_threads();
  }
}

}  // namespace dev
}  // namespace dgps
