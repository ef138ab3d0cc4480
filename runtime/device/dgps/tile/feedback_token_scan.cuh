// A feedback scan token by token: the diagonal recurrence whose step coefficient reads the state through one
// inner product, optionally projected onto bounds after each step. One warp per (sequence, head), sequential
// over the sequence's tokens t, lane l holding channels l + 32 j of the [K] state d:
//   u = (rk_t x_t)²,  κ = η β_t / ‖rk_t x_t‖² (0 for a zero row),  coef_t = κ (1 − β_t ⟨d, u⟩)
//   d ← proj(ρ_t d + coef_t u, [lo, hi])       ρ_t = e^{logret_t} (1 without), rk_t = (Σ x_t² + eps)^{-1/2}
// writing d at every chunk start into starts[c] and coef_t into coef[c][i] (0 on the last chunk's pad rows), so
// the kernels after it rebuild d inside a chunk elementwise (d_{t+1} = ρ_t d_t + coef_t u_t). d starts from s0
// (`absent` in every channel when s0 is null); fin receives d after the last token. This is the form a
// projection needs: a projection is not affine in d, so the chunked form (feedback_scan_summary.cuh,
// feedback_scan_pass.cuh) does not apply. docs/math.md §5.2 has the maths.
//
// Tokens go in blocks of 32: the block's raw rows to the warp's [32][bf16Pitch(KP)] shared rows (coalesced
// 16-byte loads), then lane u computes token u's norm, β, ρ and κ off the sequential chain.
#pragma once

#include "dgps/device/common.cuh"

namespace dgps {
namespace tile {

/// The scan's per-spec constants: η, the key's l2 norm, the clamp bounds (each optional).
struct FeedbackStep {
  float eta = 1.f;
  bool l2norm = false;
  float eps = 0.f;
  bool has_min = false, has_max = false;
  float lo = 0.f, hi = 0.f;
  DGPS_DEV float clamp(float d) const { return dev::clamp_bounds(d, has_min, lo, has_max, hi); }
};

/// Where the scan reads and writes, at the sequence's first token / first chunk slot and the warp's key head:
/// key rows (row stride key_stride elements), β and the retention log-gate (null when absent; strides per
/// token), the chunk-start states starts[c][K] and the coefficients coef[c][C] (slot_stride entries per chunk).
struct FeedbackTokenIo {
  const uint16_t* key = nullptr;
  int64_t key_stride = 0;
  const float* beta = nullptr;
  int64_t beta_stride = 0;
  const float* retention = nullptr;
  int64_t retention_stride = 0;
  float* starts = nullptr;
  float* coef = nullptr;
  int64_t slot_stride = 0;
};

/// The scan of one (sequence, key head) by the calling warp over its `len` tokens; sKb is the warp's 32 shared
/// key rows. Uses no CTA barrier (warps of one CTA scan different pairs).
template <int C, int K, int KP, class Codec>
DGPS_DEV void feedback_token_scan(uint16_t* sKb, const FeedbackTokenIo& io, const FeedbackStep& st, int64_t len,
                                   const float* s0, float absent, float* fin) {
  constexpr int PQ = launch::bf16Pitch(KP);
  constexpr int J = (K + 31) / 32;  // channels per lane: d = lane + 32 j
  const int l = dev::lane();
  float d[J];
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int ch = l + 32 * j;
    d[j] = ch < K ? (s0 != nullptr ? s0[ch] : absent) : 0.f;
  }
  for (int64_t i0 = 0; i0 < len; i0 += 32) {
    const int nb = (int)dev::lmin(32, len - i0);
    // block of 32 tokens: rows to smem (coalesced), then lane u owns token i0+u's scalars
    dev::sync_warp();
    for (int e = l; e < 32 * (KP / 8); e += 32) {
      const int r = e / (KP / 8), ch = e - r * (KP / 8);
      const bool ok = r < nb && ch * 8 < K;
      dev::U4 x = {0u, 0u, 0u, 0u};
      if (ok) x = *reinterpret_cast<const dev::U4*>(io.key + (i0 + r) * io.key_stride + ch * 8);
      *reinterpret_cast<dev::U4*>(sKb + r * PQ + ch * 8) = x;
    }
    dev::sync_warp();
    float ss = 0.f;  // lane u: Σ k² of token u (row pitch keeps the column walk conflict-light)
    for (int c = 0; c < K; ++c) {
      const float x = Codec::load(sKb[l * PQ + ((c + 2 * l) % K)]);
      ss += x * x;
    }
    const int64_t rowu = i0 + l;
    const bool oku = l < nb;
    const float rk_u = st.l2norm ? dev::rsqrt(ss + st.eps) : 1.f;
    const float nk_u = ss * rk_u * rk_u;  // ‖k̂‖²
    const float beta_u = (oku && io.beta != nullptr) ? io.beta[rowu * io.beta_stride] : 1.f;
    const float rho_u = (oku && io.retention != nullptr) ? dev::exp_(io.retention[rowu * io.retention_stride]) : 1.f;
    const float kap_u = nk_u > 0.f ? st.eta * beta_u / nk_u : 0.f;  // off the sequential chain
    float coef_mine = 0.f;
    for (int u = 0; u < nb; ++u) {
      const int64_t i = i0 + u;
      if (i % C == 0) {
        float* const sc = io.starts + (i / C) * io.slot_stride * K;
#pragma unroll
        for (int j = 0; j < J; ++j)
          if (l + 32 * j < K) sc[l + 32 * j] = d[j];
      }
      const float rk = dev::shfl(rk_u, u), kap = dev::shfl(kap_u, u), beta = dev::shfl(beta_u, u),
                  rho = dev::shfl(rho_u, u);
      float uu[J], du = 0.f;
#pragma unroll
      for (int j = 0; j < J; ++j) {
        const float kh = (l + 32 * j < K ? Codec::load(sKb[u * PQ + l + 32 * j]) : 0.f) * rk;
        uu[j] = kh * kh;
        du += d[j] * uu[j];
      }
      du = dev::warp_sum(du);
      const float coef = kap * (1.f - beta * du);
      if (l == u) coef_mine = coef;
#pragma unroll
      for (int j = 0; j < J; ++j) d[j] = st.clamp(rho * d[j] + coef * uu[j]);
    }
    // per-token coefficients of this block; zero for pad positions so a chunk row is always defined
    {
      const int64_t i = i0 + l;
      const bool in_chunk_row = i < ((len + C - 1) / C) * C;
      if (in_chunk_row) io.coef[(i / C) * io.slot_stride * C + (i % C)] = l < nb ? coef_mine : 0.f;
    }
  }
  if (fin != nullptr) {
#pragma unroll
    for (int j = 0; j < J; ++j)
      if (l + 32 * j < K) fin[l + 32 * j] = d[j];
  }
}

}  // namespace tile
}  // namespace dgps
