// Rows of one chunk gated per channel, written to device memory as bf16 [C, K] (launch_rules.h
// WorkspaceLayout opq/opk/opw): with log2 gates G [C, KP] (G_last = row C − 1)
//   forward: y_id = x_id·2^{G_id}          reverse: y_id = x_id·2^{G_last,d − G_id}
// x is a 16-bit tile of the input dtype (decoded by Codec). Also the last row's factors 2^{G_last,d}.
#pragma once

#include "dgps/tile/chunk_rows.cuh"

namespace dgps {
namespace tile {

/// y (global, row pitch K) from x (shared, pitch xp) and G (shared, pitch gp); 8 channels per step.
template <int C, int K, bool kReverse, class Codec>
DGPS_DEV void store_gated_rows(uint16_t* y, const uint16_t* x, int xp, const float* G, int gp) {
  constexpr int CH = K / 8;
  for (int e = dev::tid(); e < C * CH; e += dev::nthreads()) {
    const int i = e / CH, d0 = (e - i * CH) * 8;
    const float* Gi = G + i * gp + d0;
    const float* GL = G + (C - 1) * gp + d0;
    uint32_t p[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      float v[2];
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        const int d = d0 + 2 * u + w;
        const float f = kReverse ? dev::ex2(GL[2 * u + w] - Gi[2 * u + w]) : dev::ex2(Gi[2 * u + w]);
        v[w] = Codec::load(x[i * xp + d]) * f;
      }
      p[u] = dev::pack_bf16(v[0], v[1]);
    }
    *reinterpret_cast<dev::U4*>(y + i * K + d0) = dev::U4{p[0], p[1], p[2], p[3]};
  }
}

/// out_d = 2^{G_last,d} for d < K.
template <int C, int K>
DGPS_DEV void store_last_exp2(float* out, const float* G, int gp) {
  for (int d = dev::tid(); d < K; d += dev::nthreads()) out[d] = dev::ex2(G[(C - 1) * gp + d]);
}

}  // namespace tile
}  // namespace dgps
