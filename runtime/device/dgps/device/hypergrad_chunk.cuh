// OSDN's hypergradient d-scan in its chunked form (docs/math.md §5.2 "Chunked form"; chunk IR ops
// hypergrad_chunk_summary / hypergrad_chunk_pass, compiler/include/dgps/Dialect/Chunk/IR/ChunkPrecondScanOps.td).
// Plain SIMT CTA bodies, f32 throughout, materialising R and Y per token; no launch role uses them (the
// forward's roles are fwd_precond_hypergrad.cuh, which stores a C x C block per chunk instead). Kept as the
// standalone f32 statement of the algorithm checked by device_emu.hypergrad_chunk and gpu.hypergrad_chunk.
//
//   hypergrad_chunk_summary_cta  one CTA per (chunk, key head), any multiple of 32 threads:
//       u_i = k̂_i², κ_i = η β_i/‖k̂_i‖² (0 for a zero key), cum_i = Σ_{l<i} ρ_l;
//       𝒢_ij = β_i ⟨u_i,u_j⟩ κ_j e^{cum_i − cum_{j+1}} (i > j);  𝒯 = (I + 𝒢)^{-1} by forward substitution;
//       R_j = κ_j Σ_{i≤j} 𝒯_ji β_i e^{cum_i} u_i,  a_j = κ_j Σ_{i≤j} 𝒯_ji,  Y_j = e^{cum_n − cum_{j+1}} u_j,
//       log_decay = cum_n.
//   hypergrad_chunk_pass_cta     one CTA per (sequence, key head), sequential over its chunks:
//       pst_c = d;  coef_j = a_j − R_j·d;  d ← e^{log_decay_c} d + Σ_j coef_j Y_j;  final = d.
//
// Layouts (f32): inputs per token row, k̂ [rows][H][K] (the l2-normalised key), beta / rlog [rows][H] (rlog
// may be null: no retention); everything else per chunk slot s, as the device library's workspace
// (launch_rules.h WorkspaceLayout): R, Y [S][H][C][K], a [S][H][C], log_decay [S][H], and stage 2 writes
// exactly the token scan's pst [S][H][K] and pcoef [S][H][C] (0 past the chunk's length), so chunk_local and
// state_output read it unchanged. A chunk is (t0, len, slot) with len <= C; its rows are t0 .. t0+len−1.
#pragma once

#include "dgps/device/hypergrad_chunk_args.h"
#include "dgps/device/platform.cuh"

namespace dgps {
namespace dev {

DGPS_DEV float hg_exp(float x) { return ex2(x * 1.4426950408889634f); }

/// Stage 1 for chunk (t0, len, slot) and key head h.
DGPS_DEV void hypergrad_chunk_summary_cta(const HypergradChunkArgs& p, int t0, int len, int slot, int h) {
  const int K = p.K, H = p.H, n = len, nt = nthreads(), t = tid();
  float* u = reinterpret_cast<float*>(dyn_smem());
  float* G = u + n * K;
  float* T = G + n * n;
  float* kap = T + n * n;
  float* bet = kap + n;
  float* cum = bet + n;
  for (int e = t; e < n * K; e += nt) {
    const float x = p.khat[((long long)(t0 + e / K) * H + h) * K + e % K];
    u[e] = x * x;
  }
  sync_threads();
  // κ_i from ‖k̂_i‖² = Σ u_i: one warp per row.
  for (int i = warp(); i < n; i += nt / 32) {
    float s = 0.f;
    for (int x = lane(); x < K; x += 32) s += u[i * K + x];
    s = warp_sum(s);
    if (lane() == 0) {
      const float b = p.beta[(long long)(t0 + i) * H + h];
      bet[i] = b;
      kap[i] = s > 0.f ? p.eta * b / s : 0.f;
    }
  }
  if (t == 0) {  // n <= C additions
    cum[0] = 0.f;
    for (int i = 0; i < n; ++i) cum[i + 1] = cum[i] + (p.rlog ? p.rlog[(long long)(t0 + i) * H + h] : 0.f);
  }
  sync_threads();
  for (int e = t; e < n * n; e += nt) {  // 𝒢, strictly lower
    const int i = e / n, j = e % n;
    float g = 0.f;
    if (i > j) {
      for (int x = 0; x < K; ++x) g += u[i * K + x] * u[j * K + x];
      g *= bet[i] * kap[j] * hg_exp(cum[i] - cum[j + 1]);
    }
    G[e] = g;
  }
  sync_threads();
  // 𝒯 row by row: 𝒯_i = e_i − Σ_{j<i} 𝒢_ij 𝒯_j (row j of 𝒯 is zero past column j); columns in parallel.
  for (int i = 0; i < n; ++i) {
    for (int m = t; m < n; m += nt) {
      float s = m == i ? 1.f : 0.f;
      for (int j = m; j < i; ++j) s -= G[i * n + j] * T[j * n + m];
      T[i * n + m] = m <= i ? s : 0.f;
    }
    sync_threads();
  }
  for (int e = t; e < n * K; e += nt) {
    const int j = e / K, x = e % K;
    float r = 0.f;
    for (int i = 0; i <= j; ++i) r += T[j * n + i] * bet[i] * hg_exp(cum[i]) * u[i * K + x];
    const long long row = (((long long)slot * H + h) * p.C + j) * K + x;
    p.R[row] = kap[j] * r;
    p.Y[row] = hg_exp(cum[n] - cum[j + 1]) * u[j * K + x];
  }
  for (int j = t; j < n; j += nt) {
    float s = 0.f;
    for (int i = 0; i <= j; ++i) s += T[j * n + i];
    p.a[((long long)slot * H + h) * p.C + j] = kap[j] * s;
  }
  if (t == 0) p.log_decay[(long long)slot * H + h] = cum[n];
}

/// Stage 2 for sequence `seq` and key head h over its chunks (len[c], slot[c]), c < count, in order.
DGPS_DEV void hypergrad_chunk_pass_cta(const HypergradPassArgs& p, const int* len, const int* slot, int count,
                                       int seq, int h) {
  const int K = p.K, H = p.H, C = p.C, nt = nthreads(), t = tid();
  float* d = reinterpret_cast<float*>(dyn_smem());
  float* c = d + K;
  for (int x = t; x < K; x += nt) d[x] = p.init ? p.init[((long long)seq * H + h) * K + x] : p.d_init;
  sync_threads();
  for (int ci = 0; ci < count; ++ci) {
    const int n = len[ci], s = slot[ci];
    for (int x = t; x < K; x += nt) p.pst[((long long)s * H + h) * K + x] = d[x];
    for (int j = warp(); j < n; j += nt / 32) {  // coef_j = a_j − R_j·d: one warp per row
      const float* Rj = p.R + (((long long)s * H + h) * C + j) * K;
      float v = 0.f;
      for (int x = lane(); x < K; x += 32) v += Rj[x] * d[x];
      v = warp_sum(v);
      if (lane() == 0) {
        c[j] = p.a[((long long)s * H + h) * C + j] - v;
      }
    }
    sync_threads();
    for (int j = t; j < C; j += nt) p.pcoef[((long long)s * H + h) * C + j] = j < n ? c[j] : 0.f;  // 0: pad rows
    const float decay = hg_exp(p.log_decay[(long long)s * H + h]);
    for (int x = t; x < K; x += nt) {  // each thread owns its channels of d: no race with the reads above
      float v = decay * d[x];
      for (int j = 0; j < n; ++j) v += c[j] * p.Y[(((long long)s * H + h) * C + j) * K + x];
      d[x] = v;
    }
    sync_threads();
  }
  for (int x = t; x < K; x += nt) p.final_d[((long long)seq * H + h) * K + x] = d[x];
}

}  // namespace dev
}  // namespace dgps
