// The fold of a sequence-parallel state pass (docs/math.md §8): given, per segment s and value head hv (the
// segment summaries), the transition product M_s [K, K] (the segment's walk from the identity with zero
// values) and the end state E_s [K, V] (its walk from a zero start), one CTA per (sequence n, value head hv,
// slab of kFoldCols value columns) runs, over the sequence's segments in token order,
//   h = init[n] (zero when init is null);  for each segment s:  start[s] = h;  h = M_s h + E_s;
//   final[n] = h                                           (final may be null)
// in f32, the same recurrence as dsl SegmentScan.h foldSegments (its host/float64 twin; the same summation
// order: E first, then M's row in increasing column order).
//
// The fold is the sequential critical path of the segmented pass (one step per segment), so a step must cost
// little beside a segment's walk: value columns fold independently, so a CTA takes only kFoldCols of them (a
// finer grid than the walk's value tile); M_s is staged in shared memory by cp.async one segment ahead
// (double-buffered, row pitch K + 4 floats against bank conflicts); each of the kFoldThreads threads keeps a
// 4 x 4 block of h in registers and reads M and h from shared memory as 16-byte vectors. One barrier per step.
//
// Layouts, all f32 row-major in global memory (S = segment slots, segment_slots below; the segments of one
// sequence are consecutive slots s0 .. s0 + ns − 1, segment_slots.cuh):
//   trans [S, HV, K, K], ext [S, HV, K, V], init [N, HV, K, V], start [S, HV, K, V], final [N, HV, K, V].
// Dynamic shared memory: state_fold_smem_bytes(K).
#pragma once

#include "dgps/device/platform.cuh"
#include "dgps/tile/segment_slots.cuh"

namespace dgps {
namespace tile {

/// Value columns of one fold CTA and its threads (4 x 4 outputs each: K / 4 row groups x kFoldCols / 4 column
/// groups, K <= 128).
constexpr int kFoldCols = 16;
constexpr int kFoldThreads = 128;
/// Row pitch (floats) of a staged M_s: 16-byte rows, and rows 4 banks apart for the row-group reads.
DGPS_DEV constexpr int fold_pitch(int K) { return K + 4; }
/// Dynamic shared memory of state_fold (bytes): two stages of M_s [K][K + 4] and two h slabs [K][kFoldCols].
DGPS_DEV constexpr int state_fold_smem_bytes(int K) { return (2 * K * fold_pitch(K) + 2 * K * kFoldCols) * 4; }

/// The fold for one (sequence n, value head hv of HV, value columns v0 .. v0 + kFoldCols − 1 clipped to V) by the
/// kFoldThreads threads ct of a CTA, with `smem` the CTA's dynamic shared memory (state_fold_smem_bytes(K)).
/// K and V must be multiples of 4, K <= 128. ns = 0 (a sequence with no token) writes final = init.
template <int K>
DGPS_DEV void state_fold(float* smem, const float* trans, const float* ext, const float* init, float* start,
                         float* final, int64_t n, int64_t s0, int64_t ns, int64_t hv, int64_t HV, int V, int v0,
                         int ct) {
  static_assert(K % 4 == 0 && K <= 4 * (kFoldThreads / (kFoldCols / 4)), "K rows in 4-row groups of the CTA");
  constexpr int P = fold_pitch(K), CG = kFoldCols / 4;
  float* Ms = smem;                  // [2][K][P]
  float* Xs = smem + 2 * K * P;      // [2][K][kFoldCols]
  const int rg = ct / CG, cg = ct % CG;
  const int r0 = 4 * rg, c0 = 4 * cg;
  const bool rows = r0 < K, cols = v0 + c0 < V;  // V % 4 == 0: a column group is all in or all out
  const bool mine = rows && cols;
  const int64_t KV = (int64_t)K * V, KK = (int64_t)K * K;
  auto stage = [&](int64_t j, int buf) {  // M of segment j into stage buf, 16 bytes per copy
    const float* M = trans + ((s0 + j) * HV + hv) * KK;
    for (int e = ct; e < K * K / 4; e += kFoldThreads) {
      const int r = e / (K / 4), q = e % (K / 4);
      dev::cp_async16(Ms + buf * K * P + r * P + 4 * q, M + (int64_t)r * K + 4 * q, true);
    }
    dev::cp_async_commit();
  };
  // h for this thread's 4 x 4 block, in registers; the slab in shared memory is the next step's operand
  float h[4][4];
  const float* h0 = init != nullptr ? init + (n * HV + hv) * KV : nullptr;
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const dev::F4 x = (h0 != nullptr && mine) ? *reinterpret_cast<const dev::F4*>(h0 + (int64_t)(r0 + a) * V + v0 + c0)
                                               : dev::F4{0.f, 0.f, 0.f, 0.f};
    h[a][0] = x.x, h[a][1] = x.y, h[a][2] = x.z, h[a][3] = x.w;
    if (rows) *reinterpret_cast<dev::F4*>(Xs + (r0 + a) * kFoldCols + c0) = dev::F4{h[a][0], h[a][1], h[a][2], h[a][3]};
  }
  if (ns > 0) stage(0, 0);
  for (int64_t j = 0; j < ns; ++j) {
    const int cur = (int)(j & 1);
    const int64_t sh = (s0 + j) * HV + hv;
    dev::F4 e[4];
#pragma unroll
    for (int a = 0; a < 4; ++a)  // E first: its latency overlaps the wait for M
      e[a] = mine ? *reinterpret_cast<const dev::F4*>(ext + sh * KV + (int64_t)(r0 + a) * V + v0 + c0)
                  : dev::F4{0.f, 0.f, 0.f, 0.f};
    if (mine) {
#pragma unroll
      for (int a = 0; a < 4; ++a)
        *reinterpret_cast<dev::F4*>(start + sh * KV + (int64_t)(r0 + a) * V + v0 + c0) =
            dev::F4{h[a][0], h[a][1], h[a][2], h[a][3]};
    }
    dev::cp_async_wait<0>();
    dev::sync_threads();  // M_j and the h slab visible; every read of the other stage (step j − 1) is done
    if (j + 1 < ns) stage(j + 1, cur ^ 1);
#pragma unroll
    for (int a = 0; a < 4; ++a) h[a][0] = e[a].x, h[a][1] = e[a].y, h[a][2] = e[a].z, h[a][3] = e[a].w;
    const float* M = Ms + cur * K * P;
    const float* X = Xs + cur * K * kFoldCols;
    if (rows) {
      for (int m = 0; m < K; m += 4) {
        dev::F4 mr[4], xr[4];
#pragma unroll
        for (int a = 0; a < 4; ++a) mr[a] = *reinterpret_cast<const dev::F4*>(M + (r0 + a) * P + m);
#pragma unroll
        for (int b = 0; b < 4; ++b) xr[b] = *reinterpret_cast<const dev::F4*>(X + (m + b) * kFoldCols + c0);
#pragma unroll
        for (int a = 0; a < 4; ++a) {
          const float mv[4] = {mr[a].x, mr[a].y, mr[a].z, mr[a].w};
#pragma unroll
          for (int b = 0; b < 4; ++b) {  // column m + b of M's row: increasing m, as foldSegments sums
            h[a][0] += mv[b] * xr[b].x;
            h[a][1] += mv[b] * xr[b].y;
            h[a][2] += mv[b] * xr[b].z;
            h[a][3] += mv[b] * xr[b].w;
          }
        }
      }
      float* Xn = Xs + (cur ^ 1) * K * kFoldCols;
#pragma unroll
      for (int a = 0; a < 4; ++a)
        *reinterpret_cast<dev::F4*>(Xn + (r0 + a) * kFoldCols + c0) = dev::F4{h[a][0], h[a][1], h[a][2], h[a][3]};
    }
  }
  if (final != nullptr && mine) {
    float* fn = final + (n * HV + hv) * KV;
#pragma unroll
    for (int a = 0; a < 4; ++a)
      *reinterpret_cast<dev::F4*>(fn + (int64_t)(r0 + a) * V + v0 + c0) = dev::F4{h[a][0], h[a][1], h[a][2], h[a][3]};
  }
}

}  // namespace tile
}  // namespace dgps
