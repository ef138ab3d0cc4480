// The diagonal preconditioner's multiplier P inside one chunk, rebuilt from the state at the chunk start.
// Both chunk_local (for the KKT and Aqk) and state_output (for the state update or the read query) run this
// same scan, so the preconditioned key P⊙k never goes through device memory (issue 3; docs/math.md §5.1 option (b)
// with the chunk-start state from the tiny precond_scan pre-pass).
//
// Per channel d, sequentially over the chunk's tokens i (fp32, one thread per channel):
//   ema_sq_squash (docs/math.md §3.3): A_i = pa_i·A_{i-1} + pb_i·k_{i,d}²,  P = x^{−s(ln(A_i + eps) − c_h)}
//   hypergrad_ogd (docs/math.md §5.2): d_{i+1} = clamp(pa_i·d_i + pb_i·k_{i,d}²), P = d_i (pre) or d_{i+1} (post)
// with k the raw input key (bf16/fp16 bits) and the per-token coefficients written by chunk_local:
//   pa_i = e^{precond_g_i} (accumulator gate or retention, 1 without it),
//   pb_i = β^a_i·rk_i² (ema_sq_squash) or κ_i ε_i·rk_i² (hypergrad_ogd), rk the key's l2norm factor,
// so k̂² = rk²·k² never needs the normalised key. Pad rows (i ≥ Lr) and pad channels (d ≥ K) get P = 1.
#pragma once

#include "dgps/device/common.cuh"

namespace dgps {
namespace dev {

/// Runs the scan over one chunk and calls apply(i, d, P, k_id) for every token row i < C and channel
/// d < KP (k_id = the raw key value as fp32). `coef` points at pa_0; pb_i is at coef[i·stride + 1]. Thread t of
/// nt owns channels t, t + nt, ...
/// Loads are batched B tokens ahead so the read-outs (MUFU) of a batch overlap each other (B = 8 where
/// registers allow; the state_output producer warpgroup uses 4 within its smaller register budget).
template <class Tr, int B = 8, class KAt, class Apply>
DGPS_DEV void precond_chunk_scan(const float* pstate, const float* coef, int stride, int Lr, float center,
                                 KAt k_at, Apply apply, int t = tid(), int nt = nthreads()) {
  constexpr int C = cfg::C, K = cfg::K, KP = cfg::KP;
  const float nl2x = squash_neg_log2x<Tr>();
  for (int d = t; d < KP; d += nt) {
    float st = d < K ? pstate[d] : 0.f;
    for (int i0 = 0; i0 < C; i0 += B) {
      float kv[B], val[B];
#pragma unroll
      for (int u = 0; u < B; ++u) kv[u] = k_at(i0 + u, d);
#pragma unroll
      for (int u = 0; u < B; ++u) {
        // selects, not branches, so the batch stays one straight-line block (coef rows exist up to C)
        const int i = i0 + u;
        const bool ok = i < Lr && d < K;
        const float pre = coef[i * stride] * st + coef[i * stride + 1] * kv[u] * kv[u];
        if (Tr::kPrecondSource == 0) {
          st = ok ? pre : st;
          val[u] = ok ? st : -1.f;  // -1: no read-out (pad row / channel)
        } else {
          const float dn = osdn_clamp<Tr>(pre);
          val[u] = ok ? (Tr::kTiming == 0 ? st : dn) : 1.f;
          st = ok ? dn : st;
        }
      }
#pragma unroll
      for (int u = 0; u < B; ++u) {
        float P = val[u];
        // branch-free read-out: a conditional squash compiles to one branch region per token, which serialises
        // the MUFU chains of a batch (measured 8.6 us per chunk in state_output's producer on H200)
        if (Tr::kPrecondSource == 0) {
          const float m = squash_m<Tr>(fmax_(P, 0.f), center, nl2x);
          P = P >= 0.f ? m : 1.f;
        }
        apply(i0 + u, d, P, kv[u]);
      }
    }
  }
}

/// The squash's centre c_h of key head h (ema_sq_squash; 0 for hypergrad_ogd or when not given).
template <class Tr>
DGPS_DEV float precond_center_of(const ForwardArgs& a, int64_t h) {
  return (Tr::kPrecondSource == 0 && a.precond_center != nullptr) ? a.precond_center[h] : 0.f;
}

}  // namespace dev
}  // namespace dgps
