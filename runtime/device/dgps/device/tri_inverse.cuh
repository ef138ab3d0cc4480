// (I + 𝒜)^{-1} for a strictly lower-triangular C x C block 𝒜 in fp32 shared memory, in place
// (math.md §4.1 𝒯; FLA's solve_tril does the same with 16x16 diagonal blocks and a block merge).
//
// 1. Each 16x16 diagonal block D_b = (I + 𝒜_bb)^{-1} by forward substitution, one thread per column, with
//    the column held in registers (compile-time indices only).
// 2. Block rows I = 1.. in order: X_J = Σ_{K=J}^{I-1} 𝒜_IK T_KJ for all J < I (T_KJ already in place),
//    then T_IJ = −D_I X_J written over 𝒜_IJ. Reads of 𝒜 row I finish before any write (barrier between).
// All arithmetic is fp32 (field case C09: no TF32 in the solve).
#pragma once

#include "dgps/device/platform.cuh"

namespace dgps {
namespace dev {

/// A: [C][lda] fp32, strictly lower part significant; on return holds T (unit lower, zeros above the
/// diagonal inside diagonal 16x16 blocks; blocks above the block diagonal untouched). X: 16*16*(C/16) floats.
template <int C>
DGPS_DEV void invert_unit_lower(float* A, int lda, float* X) {
  constexpr int NB = C / 16;
  const int t = tid(), nt = nthreads();
  {
    float x[16];
    const bool act = t < NB * 16;
    const int b = t >> 4, col = t & 15;
    const float* Ab = A + (16 * b) * lda + 16 * b;
    if (act) {
#pragma unroll
      for (int r = 0; r < 16; ++r) {
        float s = 0.f;
#pragma unroll
        for (int s2 = 0; s2 < r; ++s2) s += Ab[r * lda + s2] * x[s2];
        x[r] = (r == col ? 1.f : 0.f) - s;  // x[s2] = 0 for s2 < col, so this is exact forward substitution
      }
    }
    sync_threads();
    if (act) {
      float* Aw = A + (16 * b) * lda + 16 * b;
#pragma unroll
      for (int r = 0; r < 16; ++r) Aw[r * lda + col] = x[r];
    }
    sync_threads();
  }
  for (int I = 1; I < NB; ++I) {
    for (int e = t; e < I * 256; e += nt) {
      const int J = e >> 8, r = (e >> 4) & 15, cc = e & 15;
      float s = 0.f;
      const float* arow = A + (16 * I + r) * lda;
      for (int Kb = J; Kb < I; ++Kb) {
#pragma unroll
        for (int s2 = 0; s2 < 16; ++s2) s += arow[16 * Kb + s2] * A[(16 * Kb + s2) * lda + 16 * J + cc];
      }
      X[e] = s;
    }
    sync_threads();
    for (int e = t; e < I * 256; e += nt) {
      const int J = e >> 8, r = (e >> 4) & 15, cc = e & 15;
      const float* drow = A + (16 * I + r) * lda + 16 * I;  // D_I row r (unit diagonal)
      float s = X[e];
      for (int s2 = 0; s2 < r; ++s2) s += drow[s2] * X[(J << 8) + (s2 << 4) + cc];
      A[(16 * I + r) * lda + 16 * J + cc] = -s;
    }
    sync_threads();
  }
}

}  // namespace dev
}  // namespace dgps
