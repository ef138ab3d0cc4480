// Per-row inverse norms of one or two [C, KP] 16-bit tiles in shared memory: r_i = rsqrt(Σ_d x_id² + eps)
// in fp32 from the raw input bits (Codec decodes the input dtype), 0 for pad rows (i >= Lr).
#pragma once

#include "dgps/tile/chunk_rows.cuh"

namespace dgps {
namespace tile {

/// Lanes that share one row of CH 16-byte pieces: the power of two (at most 16) that leaves each lane one or two
/// pieces (CH <= 2: one lane takes the row), so a row costs a butterfly of log2(lanes) shuffles instead of log2(CH).
DGPS_HD constexpr int norm_lanes_per_row(int CH) {
  int l = 1;
  while (2 * l < CH && l < 16) l *= 2;
  return l;
}

/// r0 from x0 and r1 from x1 (x1 may be null: one tile); rows q < C are x0's, C <= q < 2C are x1's.
/// A warp step covers 32 / LR rows (LR lanes per row, each summing its pieces with 16-byte loads) and a warp keeps
/// kSteps steps in flight: their loads issue together and their butterflies interleave. Why: with one row step
/// at a time each shuffle waited on the one before (a dependent shuffle-add chain per step), and the norms took
/// close to a third of the instructions and stall samples of the scalar-decay chunk role (docs/performance.md,
/// run 18).
template <int C, int KP, class Codec>
DGPS_DEV void row_rsqrt_norm(RowVec r0, const uint16_t* x0, RowVec r1, const uint16_t* x1, int pitch, float eps,
                             int Lr) {
  constexpr int CH = KP / 8, LR = norm_lanes_per_row(CH), PPL = (CH + LR - 1) / LR, RPS = 32 / LR, kSteps = 4;
  const int nrows = x1 != nullptr ? 2 * C : C;
  const int nw = dev::nthreads() / 32, sub = dev::lane() % LR, rl = dev::lane() / LR;
  for (int q0 = dev::warp() * RPS * kSteps; q0 < nrows; q0 += nw * RPS * kSteps) {
    float ss[kSteps];
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      ss[u] = 0.f;
      const int q = q0 + u * RPS + rl;
      if (q >= nrows) continue;
      const uint16_t* row = q < C ? x0 + q * pitch : x1 + (q - C) * pitch;
#pragma unroll
      for (int j = 0; j < PPL; ++j) {
        const int ch = sub + j * LR;
        if (ch >= CH) continue;
        const dev::U4 x = *reinterpret_cast<const dev::U4*>(row + ch * 8);
        const uint32_t wv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float a0 = Codec::load((uint16_t)(wv[e] & 0xffffu)), a1 = Codec::load((uint16_t)(wv[e] >> 16));
          ss[u] += a0 * a0 + a1 * a1;
        }
      }
    }
#pragma unroll
    for (int m = LR / 2; m >= 1; m >>= 1)
#pragma unroll
      for (int u = 0; u < kSteps; ++u) ss[u] += dev::shfl_xor(ss[u], m);
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const int q = q0 + u * RPS + rl;
      if (q >= nrows || sub != 0) continue;
      const int i = q < C ? q : q - C;
      (q < C ? r0 : r1)[i] = i < Lr ? dev::rsqrt(ss[u] + eps) : 0.f;
    }
  }
}

}  // namespace tile
}  // namespace dgps
