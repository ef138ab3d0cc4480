// The end state of a per-channel linear scan down the rows of one chunk, from a zero start (one thread per
// channel, fp32, sequential over the chunk's real rows):
//   s_d = Σ-scan over i < Lr of  s_d ← a_i·s_d + b_i·(r_i·x_id)²,   out[d] = s_d for d < K
// x is a [C, KP] 16-bit tile of the input dtype (Codec decodes it), a, b and r are [C] vectors (r a per-row
// factor, e.g. an inverse l2 norm). It is the summary of one chunk that a scan over chunks
// (chunk_affine_scan.cuh) combines: the state after the chunk is (Π a)·s_start + out.
#pragma once

#include "dgps/tile/chunk_rows.cuh"

namespace dgps {
namespace tile {

/// out[d] (device memory, d < K) = the scan's end state; rows i >= Lr are not visited.
template <int K, class Codec>
DGPS_DEV void channel_scan_total(float* out, const uint16_t* x, int pitch, RowVec a, RowVec b, RowVec r, int Lr) {
  for (int d = dev::tid(); d < K; d += dev::nthreads()) {
    float acc = 0.f;
#pragma unroll 8
    for (int i = 0; i < Lr; ++i) {
      const float xr = Codec::load(x[i * pitch + d]) * r[i];
      acc = a[i] * acc + b[i] * xr * xr;
    }
    out[d] = acc;
  }
}

/// *out = e^{Σ_{i<C} x_i} of a [C] vector (pad rows must hold 0), by warp 0; the other warps do nothing.
template <int C>
DGPS_DEV void store_sum_exp(float* out, RowVec x) {
  if (dev::warp() != 0) return;
  float s = 0.f;
  for (int i = dev::lane(); i < C; i += 32) s += x[i];
  s = dev::warp_sum(s);
  if (dev::lane() == 0) *out = dev::exp_(s);
}

}  // namespace tile
}  // namespace dgps
