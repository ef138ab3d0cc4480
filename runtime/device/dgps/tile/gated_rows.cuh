// Rows of one chunk gated per channel, written to device memory as bf16 [C, K] (launch_rules.h
// WorkspaceLayout opq/opk/opw): with log2 gates G [C, KP] (G_last = row C − 1), for each output n
//   forward: y_n,id = x_n,id·2^{G_id}          reverse: y_n,id = x_n,id·2^{G_last,d − G_id}
// x_n are 16-bit tiles of the input dtype (decoded by Codec). Also the last row's factors 2^{G_last,d}.
#pragma once

#include "dgps/tile/chunk_rows.cuh"

namespace dgps {
namespace tile {

/// Every output y_n (global, row pitch K) from x_n (shared, pitch xp) and G (shared, pitch gp) in one pass,
/// 8 channels per step: G is read once, each power of two is taken once per element and direction and shared
/// by the outputs that use it, and an x that several outputs share is loaded once (the same pointer).
/// kReverse: one flag per output.
template <int C, int K, class Codec, bool... kReverse>
DGPS_DEV void store_gated_rows(uint16_t* const (&y)[sizeof...(kReverse)],
                               const uint16_t* const (&x)[sizeof...(kReverse)], int xp, const float* G, int gp) {
  constexpr int N = sizeof...(kReverse), CH = K / 8;
  constexpr bool rev[N] = {kReverse...};
  constexpr bool anyFwd = (!kReverse || ...), anyRev = (kReverse || ...);
  for (int e = dev::tid(); e < C * CH; e += dev::nthreads()) {
    const int i = e / CH, d0 = (e - i * CH) * 8;
    const float* Gi = G + i * gp + d0;
    const float* GL = G + (C - 1) * gp + d0;
    uint32_t p[N][4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      float v[N][2];
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        const int d = d0 + 2 * u + w;
        const float fwd = anyFwd ? dev::ex2(Gi[2 * u + w]) : 0.f;
        const float bwd = anyRev ? dev::ex2(GL[2 * u + w] - Gi[2 * u + w]) : 0.f;
#pragma unroll
        for (int n = 0; n < N; ++n) v[n][w] = Codec::load(x[n][i * xp + d]) * (rev[n] ? bwd : fwd);
      }
#pragma unroll
      for (int n = 0; n < N; ++n) p[n][u] = dev::pack_bf16(v[n][0], v[n][1]);
    }
#pragma unroll
    for (int n = 0; n < N; ++n)
      *reinterpret_cast<dev::U4*>(y[n] + i * K + d0) = dev::U4{p[n][0], p[n][1], p[n][2], p[n][3]};
  }
}

/// out_d = 2^{G_last,d} for d < K.
template <int C, int K>
DGPS_DEV void store_last_exp2(float* out, const float* G, int gp) {
  for (int d = dev::tid(); d < K; d += dev::nthreads()) out[d] = dev::ex2(G[(C - 1) * gp + d]);
}

}  // namespace tile
}  // namespace dgps
