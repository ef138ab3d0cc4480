// Inclusive prefix sums down the rows of one chunk, each term scaled first: X_i = Σ_{j<=i} s·x_j (e.g. a
// log gate turned into log2 units). Pad rows hold x = 0, so they carry the last real row's sum.
#pragma once

#include "dgps/tile/chunk_rows.cuh"

namespace dgps {
namespace tile {

/// In place over a [C] vector, by the CTA's last warp (32 rows per step, carried across steps).
template <int C>
DGPS_DEV void cumsum_rows(RowVec x, float s) {
  if (dev::warp() != dev::nthreads() / 32 - 1) return;
  float carry = 0.f;
  for (int base = 0; base < C; base += 32) {
    const int i = base + dev::lane();  // C may be 16: lanes past the chunk add 0 and write nothing
    float v = i < C ? x[i] * s : 0.f;
    v = dev::warp_inclusive_scan(v) + carry;
    if (i < C) x[i] = v;
    carry = dev::shfl(v, 31);
  }
}

/// In place over every column of a [C, KP] f32 tile (pitch `pitch`), one thread per column; columns are
/// independent, so a swizzled tile (SwizzledF32Row) needs no mapping.
template <int C, int KP>
DGPS_DEV void cumsum_columns(float* x, int pitch, float s) {
  for (int d = dev::tid(); d < KP; d += dev::nthreads()) {
    float G = 0.f;
#pragma unroll 8
    for (int i = 0; i < C; ++i) {
      G += x[i * pitch + d] * s;
      x[i * pitch + d] = G;
    }
  }
}

}  // namespace tile
}  // namespace dgps
