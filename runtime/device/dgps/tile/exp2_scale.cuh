// Eight channels (16 bytes) of a bf16 row scaled by per-channel powers of two:
//   dst_d = bf16(src_d · 2^{min(a_d − b_d, cap)}),  d = 0..7
// src and dst are bf16 shared-memory segments, a and b f32 shared-memory segments, all 16-byte aligned.
// The cap bounds a factor that may exceed 1 (a gate difference taken the "wrong" way); pass a large cap when
// a − b <= 0 is known. Rounding is round-to-nearest-even, as f32_to_bf16.
#pragma once

#include "dgps/device/platform.cuh"

namespace dgps {
namespace tile {

DGPS_DEV void exp2_scale_row8(uint16_t* dst, const uint16_t* src, const float* a, const float* b, float cap) {
  const dev::U4 x = *reinterpret_cast<const dev::U4*>(src);
  const uint32_t xs[4] = {x.x, x.y, x.z, x.w};
  uint32_t out[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const float f0 = dev::ex2(dev::fmin_(a[2 * u] - b[2 * u], cap));
    const float f1 = dev::ex2(dev::fmin_(a[2 * u + 1] - b[2 * u + 1], cap));
    out[u] = dev::pack_bf16(dev::bf16_lo(xs[u]) * f0, dev::bf16_hi(xs[u]) * f1);
  }
  *reinterpret_cast<dev::U4*>(dst) = dev::U4{out[0], out[1], out[2], out[3]};
}

}  // namespace tile
}  // namespace dgps
