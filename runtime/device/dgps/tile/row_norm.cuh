// Per-row inverse norms of one or two [C, KP] 16-bit tiles in shared memory: r_i = rsqrt(Σ_d x_id² + eps)
// in fp32 from the raw input bits (Codec decodes the input dtype), 0 for pad rows (i >= Lr).
#pragma once

#include "dgps/tile/chunk_rows.cuh"

namespace dgps {
namespace tile {

/// r0 from x0 and r1 from x1 (x1 may be null: one tile). CH lanes per row, 8 elements (16 bytes) per lane.
template <int C, int KP, class Codec>
DGPS_DEV void row_rsqrt_norm(RowVec r0, const uint16_t* x0, RowVec r1, const uint16_t* x1, int pitch, float eps,
                             int Lr) {
  constexpr int CH = KP / 8;
  constexpr int CHP = CH >= 32 ? 32 : (CH > 16 ? 32 : CH > 8 ? 16 : CH > 4 ? 8 : CH > 2 ? 4 : 2);
  constexpr int RPW = 32 / CHP;
  const int nrows = x1 != nullptr ? 2 * C : C;
  const int nw = dev::nthreads() / 32;
  for (int q0 = dev::warp() * RPW; q0 < nrows; q0 += nw * RPW) {
    const int q = q0 + dev::lane() / CHP, sub = dev::lane() % CHP;
    const int i = q < C ? q : q - C;
    const uint16_t* row = (q < C ? x0 : x1) + i * pitch;
    float ss = 0.f;
    for (int ch = sub; ch < CH; ch += CHP) {
      const dev::U4 x = *reinterpret_cast<const dev::U4*>(row + ch * 8);
      const uint32_t wv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float a0 = Codec::load((uint16_t)(wv[e] & 0xffffu)), a1 = Codec::load((uint16_t)(wv[e] >> 16));
        ss += a0 * a0 + a1 * a1;
      }
    }
#pragma unroll
    for (int m = CHP / 2; m >= 1; m >>= 1) ss += dev::shfl_xor(ss, m);
    const float rs = i < Lr ? dev::rsqrt(ss + eps) : 0.f;
    if (sub == 0) (q < C ? r0 : r1)[i] = rs;
  }
}

}  // namespace tile
}  // namespace dgps
