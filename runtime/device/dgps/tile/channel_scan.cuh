// A per-channel linear scan down the rows of one chunk, read out as a multiplier of a row tile (one thread
// per channel, fp32, sequential over rows):
//   s_i = a_i·s_{i−1} + b_i·x_id²,  from the start vector s0 [KP]
//   soft_power:   P_id = base^(−r/(1+|r|)), r = ln(s_i + eps) − center   (s_i ≥ 0; the inclusive state)
//   clamped_pre:  P_id = s_{i−1};  clamped_post: P_id = s_i;  s clamped to [min, max] after each step
// Pad rows (i ≥ Lr) and channels (d ≥ K) keep the state and get P = 1. apply(i, d, P, x_id) receives every
// row i < C and channel d < KP. Rows are read B ahead so the read-outs of a batch overlap.
// The rows may lie row-major with a pitch (chunk roles) or in the core-matrix layout of the state roles' operand
// tiles (dev::core_off); the threads may be the whole CTA or one warpgroup of it (the state walk's producer).
#pragma once

#include "dgps/tile/chunk_rows.cuh"

namespace dgps {
namespace tile {

enum class Readout { soft_power = 0, clamped_pre = 1, clamped_post = 2 };

/// Row-major rows, `pitch` elements apart.
struct PitchRows {
  int pitch;
  DGPS_DEV int operator()(int i, int d) const { return i * pitch + d; }
};
/// The core-matrix layout of an [R, KP] operand tile of the state roles (dev::core_off: wgmma / ldmatrix).
template <int R>
struct CoreRows {
  DGPS_DEV int operator()(int i, int d) const { return dev::core_off<R>(i, d); }
};

struct ScanParams {
  float base = 0.f, eps = 0.f, center = 0.f;  ///< soft_power
  bool has_min = false, has_max = false;      ///< clamped_*
  float min = 0.f, max = 0.f;
};

/// The scan over rows x laid out by `at` (PitchRows or CoreRows), channels t, t + nt, ... of thread t of nt.
template <int C, int K, int KP, Readout R, class Codec, int B = 8, class Layout, class Apply>
DGPS_DEV void channel_scan_in(const float* s0, RowVec a, RowVec b, const uint16_t* x, Layout at, int Lr,
                              const ScanParams& p, Apply apply, int t, int nt) {
  const float nl2x = -dev::lg2(p.base);
  for (int d = t; d < KP; d += nt) {
    float st = d < K ? s0[d] : 0.f;
    for (int i0 = 0; i0 < C; i0 += B) {
      float kv[B], val[B];
#pragma unroll
      for (int u = 0; u < B; ++u) kv[u] = Codec::load(x[at(i0 + u, d)]);
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
          const float dn = dev::clamp_bounds(pre, p.has_min, p.min, p.has_max, p.max);
          val[u] = ok ? (R == Readout::clamped_pre ? st : dn) : 1.f;
          st = ok ? dn : st;
        }
      }
#pragma unroll
      for (int u = 0; u < B; ++u) {
        float P = val[u];
        if (R == Readout::soft_power) {
          const float m = dev::soft_power(dev::fmax_(P, 0.f), p.eps, p.center, nl2x);
          P = P >= 0.f ? m : 1.f;
        }
        apply(i0 + u, d, P, kv[u]);
      }
    }
  }
}

/// The scan over row-major rows (pitch `pitch`) by every thread of the CTA.
template <int C, int K, int KP, Readout R, class Codec, int B = 8, class Apply>
DGPS_DEV void channel_scan(const float* s0, RowVec a, RowVec b, const uint16_t* x, int pitch, int Lr,
                           const ScanParams& p, Apply apply) {
  channel_scan_in<C, K, KP, R, Codec, B>(s0, a, b, x, PitchRows{pitch}, Lr, p, apply, dev::tid(), dev::nthreads());
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

/// The state roles' rebuild of one core-layout operand tile by threads t of nt: target = bf16(P ⊙ T), with T the
/// rows x themselves (kFromX: target is another tile) or the target's own values read through TCodec (in place).
/// x is read through XCodec (the raw input rows).
template <int C, int K, int KP, Readout R, class XCodec, class TCodec, bool kFromX>
DGPS_DEV void channel_scan_rescale(uint16_t* target, const float* s0, RowVec a, RowVec b, const uint16_t* x, int Lr,
                                   const ScanParams& p, int t, int nt) {
  channel_scan_in<C, K, KP, R, XCodec, 8>(
      s0, a, b, x, CoreRows<C>{}, Lr, p,
      [&](int i, int d, float P, float xv) {
        const int o = dev::core_off<C>(i, d);
        target[o] = dev::f32_to_bf16(P * (kFromX ? xv : TCodec::load(target[o])));
      },
      t, nt);
}

}  // namespace tile
}  // namespace dgps
