// A per-channel linear scan down the rows of one chunk, read out as a multiplier of a row tile (one thread
// per channel, fp32, sequential over rows):
//   s_i = a_i·s_{i−1} + b_i·x_id²,  from the start vector s0 [KP]
//   soft_power:   P_id = base^(−r/(1+|r|)), r = ln(s_i + eps) − center   (s_i ≥ 0; the inclusive state)
//   clamped_pre:  P_id = s_{i−1};  clamped_post: P_id = s_i;  s clamped to [min, max] after each step
// Pad rows (i ≥ Lr) and channels (d ≥ K) keep the state and get P = 1. apply(i, d, P, x_id) receives every
// row i < C and channel d < KP. Rows are read B ahead so the read-outs of a batch overlap.
#pragma once

#include "dgps/tile/chunk_rows.cuh"

namespace dgps {
namespace tile {

enum class Readout { soft_power = 0, clamped_pre = 1, clamped_post = 2 };

struct ScanParams {
  float base = 0.f, eps = 0.f, center = 0.f;  ///< soft_power
  bool has_min = false, has_max = false;      ///< clamped_*
  float min = 0.f, max = 0.f;
};

template <int C, int K, int KP, Readout R, class Codec, int B = 8, class Apply>
DGPS_DEV void channel_scan(const float* s0, RowVec a, RowVec b, const uint16_t* x, int pitch, int Lr,
                           const ScanParams& p, Apply apply) {
  const float nl2x = -dev::lg2(p.base);
  for (int d = dev::tid(); d < KP; d += dev::nthreads()) {
    float st = d < K ? s0[d] : 0.f;
    for (int i0 = 0; i0 < C; i0 += B) {
      float kv[B], val[B];
#pragma unroll
      for (int u = 0; u < B; ++u) kv[u] = Codec::load(x[(i0 + u) * pitch + d]);
#pragma unroll
      for (int u = 0; u < B; ++u) {
        // selects, not branches, so the batch stays one straight-line block
        const int i = i0 + u;
        const bool ok = i < Lr && d < K;
        const float pre = a[i] * st + b[i] * kv[u] * kv[u];
        if (R == Readout::soft_power) {
          st = ok ? pre : st;
          val[u] = ok ? st : -1.f;  // -1: no read-out (pad row / channel)
        } else {
          float dn = pre;
          if (p.has_min) dn = dev::fmax_(dn, p.min);
          if (p.has_max) dn = dev::fmin_(dn, p.max);
          val[u] = ok ? (R == Readout::clamped_pre ? st : dn) : 1.f;
          st = ok ? dn : st;
        }
      }
#pragma unroll
      for (int u = 0; u < B; ++u) {
        float P = val[u];
        if (R == Readout::soft_power) {
          const float A = dev::fmax_(P, 0.f);
          const float r = dev::log_(A + p.eps) - p.center;
          const float s = r * dev::rcp(1.f + dev::fabs_(r));
          const float m = dev::ex2(nl2x * s);
          P = P >= 0.f ? m : 1.f;
        }
        apply(i0 + u, d, P, kv[u]);
      }
    }
  }
}

/// y = bf16(P ⊙ target) through channel_scan: target is x itself (y another tile) or a tile rewritten in place.
template <int C, int K, int KP, Readout R, class Codec>
DGPS_DEV void channel_scan_apply(uint16_t* y, const float* s0, RowVec a, RowVec b, const uint16_t* x,
                                 uint16_t* target, int pitch, int Lr, const ScanParams& p) {
  channel_scan<C, K, KP, R, Codec>(s0, a, b, x, pitch, Lr, p, [&](int i, int d, float P, float xv) {
    if (target == x)
      y[i * pitch + d] = dev::f32_to_bf16(P * xv);
    else
      target[i * pitch + d] = dev::f32_to_bf16(P * Codec::load(target[i * pitch + d]));
  });
}

}  // namespace tile
}  // namespace dgps
