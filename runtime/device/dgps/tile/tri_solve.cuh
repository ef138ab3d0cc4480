// The unit-lower-triangular inverse of one chunk and its column-scaled store:
//   T = (I + A)^{-1} for strictly lower A [C, C] fp32 in shared memory, in place (dgps/device/tri_inverse.cuh:
//   16x16 diagonal blocks by substitution, off-diagonal blocks on tensor cores with split-bf16 operands);
//   out = tril(T·diag(s)) as bf16 [C, C] in device memory, lower 16x16 blocks only.
#pragma once

#include "dgps/device/tri_inverse.cuh"
#include "dgps/tile/chunk_rows.cuh"

namespace dgps {
namespace tile {

template <int C>
DGPS_DEV void tri_inverse(float* A, int lda) {
  dev::invert_unit_lower<C>(A, lda);
}

template <int C>
DGPS_DEV void store_lower_col_scaled(uint16_t* out, const float* T, int lda, RowVec s) {
  constexpr int NB = C / 16;
  for (int e = dev::tid(); e < NB * (NB + 1) / 2 * 16 * 8; e += dev::nthreads()) {
    int blk = e >> 7;
    const int r = (e >> 3) & 15, cp = e & 7;
    int I = 0;
    while (blk > I) {
      blk -= I + 1;
      ++I;
    }
    const int i = 16 * I + r, j = 16 * blk + 2 * cp;
    const float v0 = j <= i ? T[i * lda + j] * s[j] : 0.f;
    const float v1 = j + 1 <= i ? T[i * lda + j + 1] * s[j + 1] : 0.f;
    *reinterpret_cast<uint32_t*>(out + i * C + j) = dev::pack_bf16(v0, v1);
  }
}

}  // namespace tile
}  // namespace dgps
