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

/// out[d] (device memory, d < K) = the scan's end state; rows i >= Lr are not visited. Two channels per thread
/// from one 32-bit load, and row i's factor b_i·r_i² once per pair: six instructions per element instead of eight
/// (the summary kernel is issue-bound). Channel K of an odd K is the tile's zero pad and is not stored.
template <int K, class Codec>
DGPS_DEV void channel_scan_total(float* out, const uint16_t* x, int pitch, RowVec a, RowVec b, RowVec r, int Lr) {
  for (int j = dev::tid(); 2 * j < K; j += dev::nthreads()) {
    float s0 = 0.f, s1 = 0.f;
#pragma unroll 8
    for (int i = 0; i < Lr; ++i) {
      const uint32_t w = *reinterpret_cast<const uint32_t*>(x + i * pitch + 2 * j);  // pitch even, 4-byte aligned
      const float x0 = Codec::load((uint16_t)(w & 0xffffu)), x1 = Codec::load((uint16_t)(w >> 16));
      const float c = b[i] * (r[i] * r[i]);
      s0 = a[i] * s0 + c * (x0 * x0);
      s1 = a[i] * s1 + c * (x1 * x1);
    }
    out[2 * j] = s0;
    if (2 * j + 1 < K) out[2 * j + 1] = s1;
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
