// Updates of a register fragment by shared vectors: diag(d) S and the rank-1 S + a eᵀ.
#pragma once

#include "dgps/device/platform.cuh"
#include "dgps/tile/frag.cuh"

namespace dgps {
namespace tile {

/// Row k of S times d[k] (d a [KP] shared vector).
template <int KP, int BV, int NT>
DGPS_DEV RowFrag<KP, BV, NT> row_scale(RowFrag<KP, BV, NT> s, const float* d) {
#pragma unroll
  for (int j = 0; j < RowFrag<KP, BV, NT>::kRows; ++j) {
    const float dk = d[RowFrag<KP, BV, NT>::row(j)];
#pragma unroll
    for (int c = 0; c < 4; ++c) s.x[4 * j + c] *= dk;
  }
  return s;
}

/// S + a eᵀ: S_kc += a[k] · e_c (a a [KP] shared vector, e the thread's column quad).
template <int KP, int BV, int NT>
DGPS_DEV RowFrag<KP, BV, NT> outer_add(RowFrag<KP, BV, NT> s, const float* a, const Quad<BV, NT>& e) {
#pragma unroll
  for (int j = 0; j < RowFrag<KP, BV, NT>::kRows; ++j) {
    const float ak = a[RowFrag<KP, BV, NT>::row(j)];
#pragma unroll
    for (int c = 0; c < 4; ++c) s.x[4 * j + c] += ak * e.x[c];
  }
  return s;
}

}  // namespace tile
}  // namespace dgps
