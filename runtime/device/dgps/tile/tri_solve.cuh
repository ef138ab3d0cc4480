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

/// One warp per lower 16x16 block (blocks I >= J in row-major order), lane (r, h) = (l % 16, l / 16) writing
/// row 16I + r, columns 16J + 8h .. +7 with one 16-byte store. Why this shape: T's rows are lda = C + 4 floats
/// apart, so the 16 rows' two 16-byte loads each fall on distinct bank groups per quarter-warp; the scales s sit
/// 8 floats apart in the token record, so each lane loads one of the block's 16 and the others come by shuffle
/// (one load on 4 banks where per-element loads put 8 lanes on 2 banks: a quarter of chunk_local's remaining
/// shared-memory conflicts, docs/performance.md run 17). Needs lda a multiple of 4 and T and out 16-byte aligned
/// (the launch contract's f32 pitch and smem/workspace alignment).
template <int C>
DGPS_DEV void store_lower_col_scaled(uint16_t* out, const float* T, int lda, RowVec s) {
  constexpr int NB = C / 16, NBLK = NB * (NB + 1) / 2;
  const int r = dev::lane() & 15, h = dev::lane() >> 4;
  for (int blk = dev::warp(); blk < NBLK; blk += dev::nthreads() >> 5) {
    int I = 0, J = blk;  // warp-uniform
    while (J > I) J -= ++I;
    const int i = 16 * I + r, j0 = 16 * J + 8 * h;
    const float sv = s[16 * J + r];
    float t[8];
    load_f8(t, T + i * lda + j0);
    uint32_t p[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int c = 2 * u;
      const float f0 = dev::shfl(sv, 8 * h + c), f1 = dev::shfl(sv, 8 * h + c + 1);
      p[u] = dev::pack_bf16(j0 + c <= i ? t[c] * f0 : 0.f, j0 + c + 1 <= i ? t[c + 1] * f1 : 0.f);
    }
    dev::st_global_u4(out + i * C + j0, dev::U4{p[0], p[1], p[2], p[3]});
  }
}

}  // namespace tile
}  // namespace dgps
