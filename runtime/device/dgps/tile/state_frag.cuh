// The transposed state Sᵀ [V, K] of a state walk, held in registers as mma.sync accumulator fragments: the
// warp owning value rows vw .. vw+15 keeps S[nt][e] at value row vw + g + 8·(e >> 1) and key column
// 8·nt + 2t + (e & 1) (g = lane / 4, t = lane % 4) for nt < KP / 8, so the state feeds the next product as an
// A operand without passing through shared memory (common.cuh acc_to_a). Global states are f32 [K, V]
// row-major (abi.h initial_state / final_state of one (sequence, value head)); entries past K or V are zero
// in registers and never written.
#pragma once

#include "dgps/device/common.cuh"

namespace dgps {
namespace tile {

/// Sᵀ from a global [K, V] state `src`, or zero when src is null.
template <int KP>
DGPS_DEV void state_start(float (&S)[KP / 8][4], const float* src, int K, int V, int vw) {
  const int l = dev::lane(), g = l >> 2, t = l & 3;
#pragma unroll
  for (int nt = 0; nt < KP / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int v = vw + g + 8 * (e >> 1), d = 8 * nt + 2 * t + (e & 1);
      S[nt][e] = (src != nullptr && v < V && d < K) ? src[(int64_t)d * V + v] : 0.f;
    }
}

/// Sᵀ = I (entries with d == v are 1): the start of a transition product over a square K x K state.
template <int KP>
DGPS_DEV void state_identity(float (&S)[KP / 8][4], int K, int V, int vw) {
  const int l = dev::lane(), g = l >> 2, t = l & 3;
#pragma unroll
  for (int nt = 0; nt < KP / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int v = vw + g + 8 * (e >> 1), d = 8 * nt + 2 * t + (e & 1);
      S[nt][e] = (v < V && d < K && v == d) ? 1.f : 0.f;
    }
}

/// dst[d, v] = Sᵀ[v, d] for d < K, v < V (dst a global [K, V] f32 state).
template <int KP>
DGPS_DEV void state_store(const float (&S)[KP / 8][4], float* dst, int K, int V, int vw) {
  const int l = dev::lane(), g = l >> 2, t = l & 3;
#pragma unroll
  for (int nt = 0; nt < KP / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int v = vw + g + 8 * (e >> 1), d = 8 * nt + 2 * t + (e & 1);
      if (v < V && d < K) dst[(int64_t)d * V + v] = S[nt][e];
    }
}

/// Sᵀ ← s · Sᵀ (a uniform factor).
template <int KP>
DGPS_DEV void state_scale(float (&S)[KP / 8][4], float s) {
#pragma unroll
  for (int nt = 0; nt < KP / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) S[nt][e] *= s;
}

/// Sᵀ ← Sᵀ diag(d): key column d scaled by d[d] (d a [KP] f32 shared vector).
template <int KP>
DGPS_DEV void state_scale_columns(float (&S)[KP / 8][4], const float* d) {
  const int t = dev::lane() & 3;
#pragma unroll
  for (int nt = 0; nt < KP / 8; ++nt) {
    const float d0 = d[8 * nt + 2 * t], d1 = d[8 * nt + 2 * t + 1];
    S[nt][0] *= d0;
    S[nt][1] *= d1;
    S[nt][2] *= d0;
    S[nt][3] *= d1;
  }
}

}  // namespace tile
}  // namespace dgps
