// A per-channel affine scan over the chunks of one sequence (one thread per channel, sequential over chunks):
//   starts[c][d] = s_d;   s_d ← γ_c·s_d + u_c[d]      for c = 0 .. nch−1, from s_d = s0[d] (0 when s0 is null)
//   fin[d] = s_d after the last chunk (when fin is not null)
// γ_c and u_c are per-chunk summaries (e.g. channel_scan_total.cuh and store_sum_exp) that do not depend on s,
// so they are loaded U chunks ahead of the sequential update. Chunk c's [K] vectors are at starts + c·stride and
// u + c·stride, its γ at gam[c·gstride]; d < K only.
#pragma once

#include "dgps/device/common.cuh"

namespace dgps {
namespace tile {

template <int K, int U = 8>
DGPS_DEV void chunk_affine_scan(float* starts, const float* gam, const float* u, int64_t stride, int64_t gstride,
                                int64_t nch, const float* s0, float* fin) {
  for (int d = dev::tid(); d < K; d += dev::nthreads()) {
    float s = s0 != nullptr ? s0[d] : 0.f;
    // pointers advance by U chunks per batch (no per-chunk index products); opaque keeps them in registers
    float* st = dev::opaque(starts + d);
    const float* uc = dev::opaque(u + d);
    const float* gc = dev::opaque(gam);
    for (int64_t c0 = 0; c0 < nch; c0 += U, st += U * stride, uc += U * stride, gc += U * gstride) {
      float gv[U], uv[U];
#pragma unroll
      for (int j = 0; j < U; ++j) {
        const bool ok = c0 + j < nch;
        gv[j] = ok ? gc[j * gstride] : 1.f;
        uv[j] = ok ? uc[j * stride] : 0.f;
      }
#pragma unroll
      for (int j = 0; j < U; ++j) {
        if (c0 + j < nch) {
          st[j * stride] = s;
          s = gv[j] * s + uv[j];
        }
      }
    }
    if (fin != nullptr) fin[d] = s;
  }
}

}  // namespace tile
}  // namespace dgps
