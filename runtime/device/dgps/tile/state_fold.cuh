// The fold of a sequence-parallel state pass (docs/math.md §8): given, per segment s and value head hv (the
// segment summaries), the transition product M_s [K, K] (the segment's walk from the identity
// with zero values) and the end state E_s [K, V] (its walk from a zero start), one CTA per (sequence n, value
// head hv, value tile [v0, v0 + BV)) runs, over the sequence's segments in token order,
//   h = init[n] (zero when init is null);  for each segment s:  start[s] = h;  h = M_s h + E_s;
//   final[n] = h                                           (final may be null)
// in f32, the same recurrence as dsl SegmentScan.h foldSegments (its host/float64 twin). Per step the CTA
// reads M_s (K² f32, shared by all value tiles of the head) and the tile's columns of E_s.
//
// Layouts, all f32 row-major in global memory (S = segment slots, segment_slots below; the segments of one
// sequence are consecutive slots s0 .. s0 + ns − 1, segment_slots.cuh):
//   trans [S, HV, K, K], ext [S, HV, K, V], init [N, HV, K, V], start [S, HV, K, V], final [N, HV, K, V].
// X and Y are two shared [K, BV] f32 buffers (2·K·BV·4 bytes). One barrier per segment; cost 2K²·BV FLOPs
// per segment, which is small beside the summary's walk over L chunks. Not tuned yet: every thread reads M_s
// from global memory (L1/L2) K times per entry it owns; staging M_s in shared memory one segment ahead
// (cp.async, K²·4 bytes) and register-blocking X are the first steps once the GPU times it.
#pragma once

#include "dgps/device/platform.cuh"
#include "dgps/tile/segment_slots.cuh"

namespace dgps {
namespace tile {

/// The fold for one (sequence, value head hv of HV, value tile v0 .. v0 + BV − 1 clipped to V), by the
/// NT threads ct = 0 .. NT − 1 of a CTA. ns = 0 (a sequence with no token) writes final = init.
template <int BV>
DGPS_DEV void state_fold(float* X, float* Y, const float* trans, const float* ext, const float* init, float* start,
                         float* final, int64_t n, int64_t s0, int64_t ns, int64_t hv, int64_t HV, int K, int V,
                         int v0, int ct, int NT) {
  const int bw = V - v0 < BV ? V - v0 : BV;  // columns of this tile
  const int64_t KV = (int64_t)K * V, KK = (int64_t)K * K;
  const float* h0 = init != nullptr ? init + (n * HV + hv) * KV : nullptr;
  for (int i = ct; i < K * bw; i += NT) {
    const int r = i / bw, c = i % bw;
    X[r * BV + c] = h0 != nullptr ? h0[(int64_t)r * V + v0 + c] : 0.f;
  }
  dev::sync_threads();
  for (int64_t j = 0; j < ns; ++j) {
    const int64_t sh = (s0 + j) * HV + hv;
    const float* M = trans + sh * KK;
    const float* E = ext + sh * KV;
    float* st = start + sh * KV;
    for (int i = ct; i < K * bw; i += NT) {
      const int r = i / bw, c = i % bw;
      st[(int64_t)r * V + v0 + c] = X[r * BV + c];
      // E first, then M's row in order: the summation order of foldSegments
      float acc = E[(int64_t)r * V + v0 + c];
      for (int m = 0; m < K; ++m) acc += M[(int64_t)r * K + m] * X[m * BV + c];
      Y[r * BV + c] = acc;
    }
    dev::sync_threads();  // every read of X is done before the next step overwrites it as Y
    float* t = X;
    X = Y;
    Y = t;
  }
  if (final != nullptr) {
    float* fn = final + (n * HV + hv) * KV;
    for (int i = ct; i < K * bw; i += NT) {
      const int r = i / bw, c = i % bw;
      fn[(int64_t)r * V + v0 + c] = X[r * BV + c];
    }
  }
}

}  // namespace tile
}  // namespace dgps
