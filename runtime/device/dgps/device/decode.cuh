// Single-token decode: for every batch row b, one step of the recurrence with the state updated in place
// (docs/math.md §1 canonical form):
//   S ← D S;  delta: e = β (v − Sᵀ k̂);  linear: e = β v;  S ← S + k_w eᵀ;  o = Sᵀ q_r = (D S)ᵀ q_r + (k_w·q_r) e
// with k_w = P⊙k̂ (ATK) or k̂ and q_r = scale·(P⊙q̂ (ATQ) or q̂). The preconditioner state (A or d, [B,H,K])
// advances first (docs/math.md §3.3 / §5.2); a CTA that owns a key head's preconditioner loops over all value heads
// of its group so the in-place update has a single writer.
// Each thread keeps KP/16 rows x 4 columns of the state tile in registers (compile-time sized, docs/math.md §7.5);
// everything is fp32. Memory traffic: the state is read once and written once.
#pragma once

#include "dgps/device/common.cuh"

namespace dgps {
namespace dev {

/// Sum over the 128 threads of the CTA; `red` holds 4 floats. Every thread gets the result.
DGPS_DEV float block_sum128(float v, float* red) {
  v = warp_sum(v);
  sync_threads();
  if (lane() == 0) red[warp()] = v;
  sync_threads();
  return red[0] + red[1] + red[2] + red[3];
}

}  // namespace dev

template <class Tr>
DGPS_DEV void decode(const DecodeArgs& a) {
  using namespace dev;
  static_assert(TraitsCheck<Tr>::ok, "");
  constexpr int K = cfg::K, V = cfg::V, KP = cfg::KP;
  constexpr int DBV = 32, TPR = DBV / 4, RG = 128 / TPR, RPT = KP / RG;
  static_assert(KP % RG == 0, "decode: K padded to 16 rows per row group");
  static_assert(KP <= 2 * 128, "decode: each of the 128 threads owns key channels tx and tx + 128");
  constexpr bool kPre = Tr::kPrecond == 1;
  constexpr bool kATK = kPre && Tr::kPrecondSide == 0;
  constexpr bool kATQ = kPre && Tr::kPrecondSide == 1;
  constexpr int VT = (V + DBV - 1) / DBV;

  const int64_t H = a.heads_qk, HV = a.heads_v, ratio = HV / H;
  const int64_t bid = block_x();
  int64_t b, h, hv_first, vt_first;
  int ntile;
  if (kPre) {
    b = bid / H;
    h = bid - b * H;
    hv_first = h * ratio;
    vt_first = 0;
    ntile = (int)(ratio * VT);
  } else {
    vt_first = bid % VT;
    const int64_t bh = bid / VT;
    hv_first = bh % HV;
    b = bh / HV;
    h = hv_first / ratio;
    ntile = 1;
  }

  // What one (value head, value tile) `tile` reads from memory, read straight into registers: the state tile
  // (load_state) and the value, gain and raw decay (load_small). Tile 0's reads are issued before the key/query
  // reductions below, so the state stream (all but a few bytes of decode's traffic) and the small per-head reads
  // never wait for the prologue; a preconditioned CTA, which walks several tiles, reads the next tile's state
  // while the current one computes (prefetching its small reads too cost registers and measured no faster).
  const int tx = tid();
  const int rg = tx / TPR, cg = tx - rg * TPR;
  auto head_of = [&](int tile) { return kPre ? hv_first + tile / VT : hv_first; };
  auto col_of = [&](int tile) { return (int)(kPre ? tile % VT : vt_first) * DBV + 4 * cg; };
  struct TileInputs {
    F4 S[RPT];
    F4 v;
    float beta, g[2];  // g: the raw log-decay (scalar in g[0]; per channel: channels tx and tx + 128)
  };
  auto load_state = [&](int tile, TileInputs& in) {
    const int64_t hv = head_of(tile);
    const int col0 = col_of(tile);
    const float* sp = a.state + (b * HV + hv) * (int64_t)K * V;
#pragma unroll
    for (int j = 0; j < RPT; ++j) {
      const int k = rg + RG * j;
      if (k < K && col0 < V) {
        in.S[j] = *reinterpret_cast<const F4*>(sp + (int64_t)k * V + col0);
      } else {
        in.S[j].x = in.S[j].y = in.S[j].z = in.S[j].w = 0.f;
      }
    }
  };
  auto load_small = [&](int tile, TileInputs& in) {
    const int64_t hv = head_of(tile);
    const int col0 = col_of(tile);
    in.v.x = in.v.y = in.v.z = in.v.w = 0.f;
    if (col0 < V) {
      const uint16_t* vp = static_cast<const uint16_t*>(a.v) + (b * HV + hv) * V + col0;
      const H4 h = ld_global_h4(vp);  // one 8-byte read
      in.v.x = Act_t::load(h.x);
      in.v.y = Act_t::load(h.y);
      in.v.z = Act_t::load(h.z);
      in.v.w = Act_t::load(h.w);
    }
    in.beta = Tr::kGain ? a.beta[b * HV + hv] : 1.f;
    in.g[0] = in.g[1] = 0.f;
    if (Tr::kDecay == 1) in.g[0] = a.g[b * HV + hv];
    if (Tr::kDecay == 2) {
#pragma unroll
      for (int r = 0; r < 2; ++r)
        if (tx + 128 * r < K) in.g[r] = a.g[(b * HV + hv) * K + tx + 128 * r];
    }
  };
  TileInputs cur;
  load_state(0, cur);
  load_small(0, cur);

  float* sm = reinterpret_cast<float*>(dyn_smem());
  float* sKh = sm;           // k̂ (read key)
  float* sKw = sm + KP;      // write key
  float* sQr = sm + 2 * KP;  // read query, scale included
  float* sDec = sm + 3 * KP; // per-channel decay of the current value head
  float* sRed = sm + 4 * KP; // [4][2][32]
  float* sScal = sRed + 256; // scalars

  // ---- normalised key / query ----
  const uint16_t* kp = static_cast<const uint16_t*>(a.k) + (b * H + h) * K;
  const uint16_t* qp = static_cast<const uint16_t*>(a.q) + (b * H + h) * K;
  const float kv = tx < K ? Act_t::load(kp[tx]) : 0.f;  // KP <= 256: threads 0..127 own d = tx, tx + 128
  const float qv = tx < K ? Act_t::load(qp[tx]) : 0.f;
  const float kv2 = tx + 128 < K ? Act_t::load(kp[tx + 128]) : 0.f;
  const float qv2 = tx + 128 < K ? Act_t::load(qp[tx + 128]) : 0.f;
  const float kss = block_sum128(kv * kv + kv2 * kv2, sScal);
  const float qss = block_sum128(qv * qv + qv2 * qv2, sScal + 4);
  const float rk = Tr::kL2Norm ? rsqrt(kss + Tr::kL2Eps) : 1.f;
  const float rq = Tr::kL2Norm ? rsqrt(qss + Tr::kL2Eps) : 1.f;

  // ---- preconditioner step (this CTA is the only writer of (b, h)) ----
  float P[2] = {1.f, 1.f};
  if (kPre) {
    float* pst = a.precond_state + (b * H + h) * K;
    if (Tr::kPrecondSource == 0) {
      const float gam = Tr::kSquashGate ? exp_(a.precond_g[b * H + h]) : 1.f;
      const float ba = Tr::kSquashGain ? a.precond_beta[b * H + h] : 1.f;
      const float center = a.precond_center != nullptr ? a.precond_center[h] : 0.f;
      const float nl2x = squash_neg_log2x<Tr>();
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int d = tx + 128 * r;
        if (d < K) {
          const float kh = (r == 0 ? kv : kv2) * rk;
          const float A = gam * pst[d] + ba * kh * kh;
          pst[d] = A;
          P[r] = squash_m<Tr>(A, center, nl2x);
        }
      }
    } else {
      const float beta = Tr::kGain ? a.beta[b * HV + h * ratio] : 1.f;
      const float rho = Tr::kRetention ? exp_(a.precond_g[b * H + h]) : 1.f;
      float dd[2], u[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int d = tx + 128 * r;
        dd[r] = d < K ? pst[d] : 0.f;
        const float kh = (r == 0 ? kv : kv2) * rk;
        u[r] = d < K ? kh * kh : 0.f;
      }
      const float nk = block_sum128(u[0] + u[1], sScal + 8);
      const float du = block_sum128(dd[0] * u[0] + dd[1] * u[1], sScal + 12);
      const float coef = nk > 0.f ? Tr::kEta * beta / nk * (1.f - beta * du) : 0.f;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int d = tx + 128 * r;
        if (d < K) {
          const float dn = osdn_clamp<Tr>(rho * dd[r] + coef * u[r]);
          pst[d] = dn;
          P[r] = Tr::kTiming == 0 ? dd[r] : dn;
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int d = tx + 128 * r;
    if (d < KP) {
      const float kh = (r == 0 ? kv : kv2) * rk;
      const float qh = (r == 0 ? qv : qv2) * rq * a.scale;
      sKh[d] = kh;
      sKw[d] = kATK ? P[r] * kh : kh;
      sQr[d] = kATQ ? P[r] * qh : qh;
    }
  }
  float kwq_part = 0.f;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int d = tx + 128 * r;
    if (d < K) {
      const float kh = (r == 0 ? kv : kv2) * rk;
      const float qh = (r == 0 ? qv : qv2) * rq * a.scale;
      kwq_part += (kATK ? P[r] * kh : kh) * (kATQ ? P[r] * qh : qh);
    }
  }
  const float kwq = block_sum128(kwq_part, sScal + 16);  // also orders the sKh/sKw/sQr writes

  TileInputs next;  // the next tile's inputs (only a preconditioned CTA walks several tiles)
  for (int tile = 0; tile < ntile; ++tile) {
    const int64_t hv = head_of(tile);
    const int col0 = col_of(tile);
    const bool colok = col0 < V;
    if constexpr (kPre) {
      if (tile + 1 < ntile) load_state(tile + 1, next);
      if (tile > 0) load_small(tile, cur);
    }
    F4* S = cur.S;
    float dec = 1.f;
    if (Tr::kDecay == 1) dec = exp_(cur.g[0]);
    if (Tr::kDecay == 2) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int d = tx + 128 * r;
        if (d < KP) sDec[d] = d < K ? exp_(cur.g[r]) : 1.f;
      }
      sync_threads();
    }
    const float beta = cur.beta;
    float* sp = a.state + (b * HV + hv) * (int64_t)K * V;
    const F4 vv = cur.v;
    float pk[4] = {0.f, 0.f, 0.f, 0.f}, pq[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int j = 0; j < RPT; ++j) {
      const int k = rg + RG * j;
      const float dk = Tr::kDecay == 2 ? sDec[k] : dec;
      S[j].x *= dk;
      S[j].y *= dk;
      S[j].z *= dk;
      S[j].w *= dk;
      const float kh = sKh[k], qr = sQr[k];
      pk[0] += S[j].x * kh;
      pk[1] += S[j].y * kh;
      pk[2] += S[j].z * kh;
      pk[3] += S[j].w * kh;
      pq[0] += S[j].x * qr;
      pq[1] += S[j].y * qr;
      pq[2] += S[j].z * qr;
      pq[3] += S[j].w * qr;
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      pk[c] += shfl_xor(pk[c], 8);
      pk[c] += shfl_xor(pk[c], 16);
      pq[c] += shfl_xor(pq[c], 8);
      pq[c] += shfl_xor(pq[c], 16);
    }
    if ((lane() >> 3) == 0) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        sRed[(warp() * 2 + 0) * 32 + 4 * cg + c] = pk[c];
        sRed[(warp() * 2 + 1) * 32 + 4 * cg + c] = pq[c];
      }
    }
    sync_threads();
    float e[4], o[4];
    const float vin[4] = {vv.x, vv.y, vv.z, vv.w};
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      float k4 = 0.f, q4 = 0.f;
#pragma unroll
      for (int ww = 0; ww < 4; ++ww) {
        k4 += sRed[(ww * 2 + 0) * 32 + 4 * cg + c];
        q4 += sRed[(ww * 2 + 1) * 32 + 4 * cg + c];
      }
      e[c] = Tr::kSolve == 1 ? beta * (vin[c] - k4) : beta * vin[c];
      o[c] = q4 + kwq * e[c];
    }
    if (rg == 0 && colok) {
      uint16_t* op = static_cast<uint16_t*>(a.o) + (b * HV + hv) * V + col0;
      st_global_h4(op, H4{Act_t::store(o[0]), Act_t::store(o[1]), Act_t::store(o[2]), Act_t::store(o[3])});
    }
#pragma unroll
    for (int j = 0; j < RPT; ++j) {
      const int k = rg + RG * j;
      if (k < K && colok) {
        const float kw = sKw[k];
        F4 x;
        x.x = S[j].x + kw * e[0];
        x.y = S[j].y + kw * e[1];
        x.z = S[j].z + kw * e[2];
        x.w = S[j].w + kw * e[3];
        st_global_f4(sp + (int64_t)k * V + col0, x);  // one 16-byte store (a struct store is split in four)
      }
    }
    sync_threads();  // sRed / sDec reuse by the next tile
    if constexpr (kPre) {
      if (tile + 1 < ntile) {
#pragma unroll
        for (int j = 0; j < RPT; ++j) cur.S[j] = next.S[j];  // the small reads come at the tile's start
      }
    }
  }
}

}  // namespace dgps
