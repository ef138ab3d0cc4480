// A per-channel linear scan down the rows of one chunk, read out as a multiplier of a row tile (one thread
// per channel, fp32, sequential over rows):
//   s_i = ro.step(a_i·s_{i−1} + b_i·x_id²),  from the start vector s0 [KP]
//   P_id = ro(s_{i−1}, s_i)
// The read-out `ro` is a functor the compiler prints into the package (compiler/lib/Emit/ScanReadoutFunctor.cpp):
//   float step(float s) const                        the state kept after a step (a projection, or s itself)
//   float operator()(float prev, float next) const   row i's multiplier from the state before and after its step
//   enum : bool { kDeferred }                        whether to read out after the batch (below) or in the step
// This header knows nothing else about it. Pad rows (i ≥ Lr) and channels (d ≥ K) keep the state and get P = 1.
// apply(i, d, P, x_id) receives every row i < C and channel d < KP. Rows are read B ahead. A deferred read-out
// (a costly one, e.g. a log and an exp) runs after the batch's B sequential steps, so the B read-outs overlap;
// an on-chain one (a choice of state) runs in the step, so only the multiplier stays live to the apply.
// The rows may lie row-major with a pitch (chunk roles) or in the core-matrix layout of the state roles' operand
// tiles (dev::core_off); the threads may be the whole CTA or one warpgroup of it (the state walk's producer).
#pragma once

#include "dgps/tile/chunk_rows.cuh"

namespace dgps {
namespace tile {

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

/// The scan's loop for channels t, t + nt, ...; kAllRows: every row is real (Lr = C), so only pad channels need
/// the selects (none when K = KP), which saves a compare and two selects per element on every full chunk.
template <bool kAllRows, int C, int K, int KP, class Codec, int B, class Layout, class Readout, class Apply>
DGPS_DEV void channel_scan_rows(const float* s0, RowVec a, RowVec b, const uint16_t* x, Layout at, int Lr,
                                const Readout& ro, Apply apply, int t, int nt) {
  for (int d = t; d < KP; d += nt) {
    float st = d < K ? s0[d] : 0.f;
    for (int i0 = 0; i0 < C; i0 += B) {
      // a deferred read-out keeps the states before and after each step (val, nxt) and reads out after the
      // batch; an on-chain one reads out in the step and keeps only the multiplier (val)
      float kv[B], val[B], nxt[B];
#pragma unroll
      for (int u = 0; u < B; ++u) kv[u] = Codec::load(x[at(i0 + u, d)]);
#pragma unroll
      for (int u = 0; u < B; ++u) {
        // selects, not branches, so the batch stays one straight-line block
        const int i = i0 + u;
        const bool ok = (kAllRows || i < Lr) && (K == KP || d < K);
        const float next = ro.step(a[i] * st + b[i] * kv[u] * kv[u]);
        if constexpr (Readout::kDeferred) {
          val[u] = st;
          nxt[u] = next;
        } else {
          val[u] = ok ? ro(st, next) : 1.f;
        }
        st = ok ? next : st;
      }
#pragma unroll
      for (int u = 0; u < B; ++u) {
        float P = val[u];
        if constexpr (Readout::kDeferred) {
          const bool ok = (kAllRows || i0 + u < Lr) && (K == KP || d < K);
          const float r = ro(val[u], nxt[u]);  // for pad rows too: a select, not a branch around it
          P = ok ? r : 1.f;
        }
        apply(i0 + u, d, P, kv[u]);
      }
    }
  }
}

/// The scan over rows x laid out by `at` (PitchRows or CoreRows), channels t, t + nt, ... of thread t of nt.
template <int C, int K, int KP, class Codec, int B = 8, class Layout, class Readout, class Apply>
DGPS_DEV void channel_scan_in(const float* s0, RowVec a, RowVec b, const uint16_t* x, Layout at, int Lr,
                              const Readout& ro, Apply apply, int t, int nt) {
  if (Lr >= C)
    channel_scan_rows<true, C, K, KP, Codec, B>(s0, a, b, x, at, Lr, ro, apply, t, nt);
  else
    channel_scan_rows<false, C, K, KP, Codec, B>(s0, a, b, x, at, Lr, ro, apply, t, nt);
}

/// The scan over row-major rows (pitch `pitch`) by every thread of the CTA.
template <int C, int K, int KP, class Codec, int B = 8, class Readout, class Apply>
DGPS_DEV void channel_scan(const float* s0, RowVec a, RowVec b, const uint16_t* x, int pitch, int Lr,
                           const Readout& ro, Apply apply) {
  channel_scan_in<C, K, KP, Codec, B>(s0, a, b, x, PitchRows{pitch}, Lr, ro, apply, dev::tid(), dev::nthreads());
}

/// y = bf16(P ⊙ target) through channel_scan: target is x itself (y another tile) or a tile rewritten in place.
template <int C, int K, int KP, class Codec, class Readout>
DGPS_DEV void channel_scan_apply(uint16_t* y, const float* s0, RowVec a, RowVec b, const uint16_t* x,
                                 uint16_t* target, int pitch, int Lr, const Readout& ro) {
  channel_scan<C, K, KP, Codec>(s0, a, b, x, pitch, Lr, ro, [&](int i, int d, float P, float xv) {
    if (target == x)
      y[i * pitch + d] = dev::f32_to_bf16(P * xv);
    else
      target[i * pitch + d] = dev::f32_to_bf16(P * Codec::load(target[i * pitch + d]));
  });
}

/// The state roles' rebuild of one core-layout operand tile by threads t of nt: target = bf16(P ⊙ T), with T the
/// rows x themselves (kFromX: target is another tile) or the target's own values read through TCodec (in place).
/// x is read through XCodec (the raw input rows).
template <int C, int K, int KP, class XCodec, class TCodec, bool kFromX, class Readout>
DGPS_DEV void channel_scan_rescale(uint16_t* target, const float* s0, RowVec a, RowVec b, const uint16_t* x, int Lr,
                                   const Readout& ro, int t, int nt) {
  channel_scan_in<C, K, KP, XCodec, 8>(
      s0, a, b, x, CoreRows<C>{}, Lr, ro,
      [&](int i, int d, float P, float xv) {
        const int o = dev::core_off<C>(i, d);
        target[o] = dev::f32_to_bf16(P * (kFromX ? xv : TCodec::load(target[o])));
      },
      t, nt);
}

}  // namespace tile
}  // namespace dgps
