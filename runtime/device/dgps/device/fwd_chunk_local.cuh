// Forward role chunk_local: everything of one chunk that does not depend on the memory state, for one
// (chunk slot, value head). Fully parallel (grid = chunk slots x HV). docs/math.md §4.1 (scalar/no decay) and
// §4.3 (per-channel decay), with separate read (rows) and write (columns) keys.
//
// Writes to the workspace (launch_rules.h WorkspaceLayout):
//   tok[s][hv][i]  = {cq, ck, w, β, pa, pb, G2, 0}: cq = scale·rq·2^{G2_i}, ck = rk·2^{G2_i},
//                    w = rk·2^{G2_C − G2_i} (scalar decay; without decay the 2^ factors are 1; with diagonal
//                    decay they are applied per channel by state_output), rq/rk the l2norm factors, G2 the
//                    chunk-local inclusive cumsum of g in log2 units; row C = {2^{G2_C}}. pa, pb: the
//                    preconditioner's per-token coefficients (precond_rebuild.cuh), else rq, rk.
//   opq/opk/opw    = diagonal decay only: q⊙2^{G_i}, k⊙2^{G_i}, k⊙2^{G_C − G_i} per channel (never P: the
//                    preconditioned operand is rebuilt by state_output), plus pdec = 2^{G_C}.
//   aqk[s][hv]     = tril_0(scale · Q̂ K_wᵀ ⊙ Γ)   (Q̂ = P⊙q̂ for ATQ), bf16, lower 16x16 tiles
//   tb[s][hv]      = 𝒯·diag(β), 𝒯 = (I + tril_{-1}(diag(β) K̂_r K_wᵀ ⊙ Γ))^{-1}   (delta solve), bf16
// Pad rows of a partial last chunk are zero (k = q = β = 0, g = 0 so Γ carries the last real token's
// cumsum): they are exact no-ops (docs/math.md §4.2). Every exp of a gate difference is masked with a select
// before the exp (docs/math.md §7.5); the per-channel case never forms exp(G_i)·exp(−G_j) beyond a proven range (docs/math.md §4.3).
#pragma once

#include "dgps/device/common.cuh"
#include "dgps/device/precond_rebuild.cuh"
#include "dgps/device/tri_inverse.cuh"
#include "dgps/tile/exp2_scale.cuh"
#include "dgps/tile/gated_rows.cuh"
#include "dgps/tile/lower_product.cuh"
#include "dgps/tile/tri_solve.cuh"

namespace dgps {
namespace dev {

/// Epilogue of one 16x16 block (block row I, block col J) of the KKT (part 0: 𝒜 = β·rk_i·rk_j·(K Kᵀ), fp32 to
/// smem) or Q·Kᵀ (part 1: Aqk = scale·rq_i·rk_j·(Q Kᵀ), bf16 to global): the tile library's store_block over
/// the token columns β (3), rq (4), rk (5), G2 (6). kGate: times 2^{G2_i − G2_j} (scalar decay).
template <bool kGate>
DGPS_DEV void store_tile(int part, int I, int J, const float acc[2][4], float* sTok, float* sA, int lda,
                         uint16_t* aqk, float scale) {
  const tile::RowVec beta{sTok + 3, 8}, rq{sTok + 4, 8}, rk{sTok + 5, 8}, G{sTok + 6, 8};
  const tile::RowFactor a = part == 0 ? tile::RowFactor{beta.p, 8, 0.f} : tile::RowFactor{nullptr, 0, scale};
  tile::store_block<cfg::C, kGate>(part == 0, I, J, acc, a, part == 0 ? rk : rq, rk, G, sA, lda, aqk);
}

}  // namespace dev

template <class Tr>
DGPS_DEV void fwd_chunk_local(const ForwardArgs& a) {
  using namespace dev;
  static_assert(TraitsCheck<Tr>::ok, "");
  constexpr launch::FeatureSet F = features<Tr>();
  constexpr int C = cfg::C, K = cfg::K, KP = cfg::KP, NB = C / 16;
  constexpr int PQ = launch::bf16Pitch(KP), PA = launch::f32Pitch(C), PG = KP;
  constexpr launch::ChunkLocalSmem L = launch::chunkLocalSmem(F, K, C);
  constexpr bool kDelta = Tr::kSolve == 1;
  constexpr bool kPre = Tr::kPrecond == 1;
  constexpr bool kATK = kPre && Tr::kPrecondSide == 0;
  constexpr bool kDiag = Tr::kDecay == 2;
  constexpr int NW = cfg::WARPS;

  const launch::WorkspaceLayout W = launch::workspaceLayout(F, shape_of<Tr>(a), tile_of());
  const int64_t H = a.heads_qk, HV = a.heads_v, ratio = HV / H;
  const int64_t slot = block_x() / HV, hv = block_x() - slot * HV, h = hv / ratio;
  int64_t n = 0, c = 0;
  Seq sq;
  if (!slot_to_chunk(a, slot, n, c, sq)) {
    zero_output_tail(a, slot, hv);  // varlen padding rows past cu_seqlens[N] read back as zeros
    return;
  }
  const int64_t t0 = sq.bos + c * C;
  const int Lr = (int)lmin(C, sq.len - c * C);

  unsigned char* sm = dyn_smem();
  uint16_t* sQ = smem_at<uint16_t>(sm, L.q);
  uint16_t* sK = smem_at<uint16_t>(sm, L.k);
  uint16_t* sKw = smem_at<uint16_t>(sm, L.kw);  // == sK unless ATK
  float* sA = smem_at<float>(sm, L.A);
  float* sTok = smem_at<float>(sm, L.tok);  // [C][8] cq ck w β rq rk G2 -
  float* sPin = sTok + C * 8;               // [C][4] precond per-token inputs
  float* sPst = smem_at<float>(sm, L.pstate);
  unsigned char* ws = static_cast<unsigned char*>(a.workspace);
  const int64_t sh = slot * HV + hv;

  // ---- 1. loads ----
  load_tile16<C, KP>(sQ, PQ, static_cast<const uint16_t*>(a.q) + (t0 * H + h) * K, H * K, Lr, K);
  load_tile16<C, KP>(sK, PQ, static_cast<const uint16_t*>(a.k) + (t0 * H + h) * K, H * K, Lr, K);
  if (kPre) {
    const float* pst = reinterpret_cast<const float*>(ws + W.pst) + (slot * H + h) * K;
    load_tile32<1, KP>(sPst, KP, pst, K, 1, K);
  }
  if (kDiag) load_tile32<C, KP>(smem_at<float>(sm, L.G), PG, a.g + (t0 * HV + hv) * K, HV * K, Lr, K);
  cp_async_commit();
  for (int i = tid(); i < C; i += nthreads()) {
    const bool ok = i < Lr;
    const int64_t row = t0 + i;
    const float gi = (ok && Tr::kDecay == 1) ? a.g[row * HV + hv] : 0.f;
    sTok[i * 8 + 3] = ok ? (Tr::kGain ? a.beta[row * HV + hv] : 1.f) : 0.f;
    sTok[i * 8 + 6] = gi * kLog2e;
    if (kPre) {
      if (Tr::kPrecondSource == 0) {
        sPin[i * 4 + 0] = (ok && Tr::kSquashGate) ? exp_(a.precond_g[row * H + h]) : 1.f;
        sPin[i * 4 + 1] = ok ? (Tr::kSquashGain ? a.precond_beta[row * H + h] : 1.f) : 0.f;
      } else {
        sPin[i * 4 + 0] = (ok && Tr::kRetention) ? exp_(a.precond_g[row * H + h]) : 1.f;
        sPin[i * 4 + 1] = ok ? reinterpret_cast<const float*>(ws + W.pcoef)[(slot * H + h) * C + i] : 0.f;
      }
    }
  }
  cp_async_wait<0>();
  sync_threads();

  // ---- 2. l2norm factors (fp32 from the raw input bits), gate cumsum ----
  {
    // CH lanes per row, 8 elements (16 bytes) per lane; 32/CH rows per warp step
    constexpr int CH = KP / 8;
    constexpr int CHP = CH >= 32 ? 32 : (CH > 16 ? 32 : CH > 8 ? 16 : CH > 4 ? 8 : CH > 2 ? 4 : 2);
    constexpr int RPW = 32 / CHP;
    for (int r0 = warp() * RPW; r0 < 2 * C; r0 += NW * RPW) {
      const int r = r0 + lane() / CHP, sub = lane() % CHP;
      const int i = r < C ? r : r - C;
      const uint16_t* row = (r < C ? sK : sQ) + i * PQ;
      float ss = 0.f;
      for (int ch = sub; ch < CH; ch += CHP) {
        const U4 x = *reinterpret_cast<const U4*>(row + ch * 8);
        const uint32_t wv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float a0 = Act_t::load((uint16_t)(wv[e] & 0xffffu)), a1 = Act_t::load((uint16_t)(wv[e] >> 16));
          ss += a0 * a0 + a1 * a1;
        }
      }
#pragma unroll
      for (int m = CHP / 2; m >= 1; m >>= 1) ss += shfl_xor(ss, m);
      const float rs = i < Lr ? (Tr::kL2Norm ? rsqrt(ss + Tr::kL2Eps) : 1.f) : 0.f;
      if (sub == 0) sTok[i * 8 + (r < C ? 5 : 4)] = rs;
    }
  }
  if (Tr::kDecay == 1 && warp() == NW - 1) {
    float carry = 0.f;
    for (int base = 0; base < C; base += 32) {
      const int i = base + lane();  // C may be 16: lanes past the chunk add 0 and write nothing
      float x = i < C ? sTok[i * 8 + 6] : 0.f;
      x = warp_inclusive_scan(x) + carry;
      if (i < C) sTok[i * 8 + 6] = x;
      carry = shfl(x, 31);
    }
  }
  float* sG = kDiag ? smem_at<float>(sm, L.G) : nullptr;
  if (kDiag) {
    // per-channel inclusive cumsum in place (log2 units); pad rows/channels were zero-filled, so pad rows
    // carry the last real token's value
    for (int d = tid(); d < KP; d += nthreads()) {
      float G = 0.f;
#pragma unroll 8
      for (int i = 0; i < C; ++i) {
        G += sG[i * PG + d] * kLog2e;
        sG[i * PG + d] = G;
      }
    }
  }
  sync_threads();

  // ---- 3. per-token factors -> tok workspace; the preconditioner's key coefficient takes rk² in ----
  {
    const float G2C = sTok[(C - 1) * 8 + 6];
    float* tokw = reinterpret_cast<float*>(ws + W.tok) + sh * (C + 1) * 8;
    for (int i = tid(); i <= C; i += nthreads()) {
      if (i == C) {
        tokw[C * 8 + 0] = Tr::kDecay == 1 ? ex2(G2C) : 1.f;
#pragma unroll
        for (int e = 1; e < 8; ++e) tokw[C * 8 + e] = 0.f;
        continue;
      }
      const float rq = sTok[i * 8 + 4], rk = sTok[i * 8 + 5], G2 = sTok[i * 8 + 6];
      const float eg = Tr::kDecay == 1 ? ex2(G2) : 1.f;
      const float ew = Tr::kDecay == 1 ? ex2(G2C - G2) : 1.f;
      sTok[i * 8 + 0] = a.scale * rq * eg;
      sTok[i * 8 + 1] = rk * eg;
      sTok[i * 8 + 2] = rk * ew;
      sTok[i * 8 + 7] = 0.f;
      if (kPre) sPin[i * 4 + 1] *= rk * rk;
#pragma unroll
      for (int e = 0; e < 8; ++e) tokw[i * 8 + e] = sTok[i * 8 + e];
      if (kPre) {
        tokw[i * 8 + 4] = sPin[i * 4 + 0];
        tokw[i * 8 + 5] = sPin[i * 4 + 1];
      }
    }
  }
  if (kDiag) {
    // ---- 3'. per-channel gated operands of state_output (launch_rules.h WorkspaceLayout opq/opk/opw), from
    // the raw inputs, before the preconditioner rewrites q (ATQ) ----
    // one pass for all three (tile/gated_rows.cuh: 2^{G} and 2^{G_C − G} taken once per element)
    uint16_t* opq = reinterpret_cast<uint16_t*>(ws + W.opq) + sh * C * K;
    uint16_t* opk = reinterpret_cast<uint16_t*>(ws + W.opk) + sh * C * K;
    uint16_t* opw = reinterpret_cast<uint16_t*>(ws + W.opw) + sh * C * K;
    if constexpr (launch::needOpK(F)) {
      uint16_t* const y[3] = {opq, opk, opw};
      const uint16_t* const x[3] = {sQ, sK, sK};
      tile::store_gated_rows<C, K, Act_t, false, false, true>(y, x, PQ, sG, PG);
    } else {
      uint16_t* const y[2] = {opq, opw};
      const uint16_t* const x[2] = {sQ, sK};
      tile::store_gated_rows<C, K, Act_t, false, true>(y, x, PQ, sG, PG);
    }
    tile::store_last_exp2<C, K>(reinterpret_cast<float*>(ws + W.pdec) + sh * K, sG, PG);
  }
  // pb (sPin) now carries rk²; and with fp16 inputs the re-encoding below rewrites the q/k tiles that the
  // gated-operand loop above read through other threads
  if (kPre || (kDiag && cfg::kInputF16)) sync_threads();

  // ---- 4. preconditioner multiplier P (precond_rebuild.cuh): write key P⊙k (ATK) or read query P⊙q (ATQ),
  // kept in shared memory only ----
  if (kPre) {
    dev::precond_chunk_scan<Tr>(
        sPst, sPin, 4, Lr, precond_center_of<Tr>(a, h), [&](int i, int d) { return Act_t::load(sK[i * PQ + d]); },
        [&](int i, int d, float P, float kv) {
          if (kATK)
            sKw[i * PQ + d] = f32_to_bf16(P * kv);
          else
            sQ[i * PQ + d] = f32_to_bf16(P * Act_t::load(sQ[i * PQ + d]));
        });
  }
  if (cfg::kInputF16) {
    // fp16 inputs feed bf16 tensor-core products: re-encode what the multiplier pass did not rewrite
    // (each thread converts only the channels it owned above, so no barrier is needed in between)
    for (int d = tid(); d < KP; d += nthreads()) {
      for (int i = 0; i < C; ++i) {
        sK[i * PQ + d] = f32_to_bf16(f16_to_f32(sK[i * PQ + d]));
        if (!(kPre && !kATK)) sQ[i * PQ + d] = f32_to_bf16(f16_to_f32(sQ[i * PQ + d]));
      }
    }
  }
  sync_threads();

  uint16_t* aqk = reinterpret_cast<uint16_t*>(ws + W.aqk) + sh * C * C;

  if (!kDiag) {
    // ---- 5. tensor-core products [K̂ ; Q̂] · K_wᵀ, lower 16x16 tiles ----
    constexpr int NTRI = NB * (NB + 1) / 2;
    constexpr int NTILE = (kDelta ? 2 : 1) * NTRI;
    constexpr int PER = (NTILE + NW - 1) / NW;
    float acc[PER][2][4];
#pragma unroll
    for (int u = 0; u < PER; ++u) {
      const int tt = warp() + NW * u;
#pragma unroll
      for (int x = 0; x < 2; ++x)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[u][x][e] = 0.f;
      if (tt < NTILE) {
        const int part = kDelta ? (tt < NTRI ? 0 : 1) : 1;
        int idx = kDelta && tt >= NTRI ? tt - NTRI : tt;
        int I = 0;
        while (idx > I) {
          idx -= I + 1;
          ++I;
        }
        const int J = idx;
        tile::mma_block<KP, PQ>(acc[u], part == 0 ? sK : sQ, 16 * I, sKw, 16 * J);
      }
    }
    sync_threads();  // sA aliases the operand tiles
#pragma unroll
    for (int u = 0; u < PER; ++u) {
      const int tt = warp() + NW * u;
      if (tt < NTILE) {
        const int part = kDelta ? (tt < NTRI ? 0 : 1) : 1;
        int idx = kDelta && tt >= NTRI ? tt - NTRI : tt;
        int I = 0;
        while (idx > I) {
          idx -= I + 1;
          ++I;
        }
        store_tile<Tr::kDecay == 1>(part, I, idx, acc[u], sTok, sA, PA, aqk, a.scale);
      }
    }
  } else {
    // ---- 5'. per-channel decay (docs/math.md §4.3): block row I uses reference row r = 16I; rows carry
    // 2^{G_i − G_r} <= 1, columns 2^{G_r − G_j} (<= 1 for j < r). The diagonal block's columns carry factors
    // >= 1, safe while the block's decay span is <= 100 (log2); otherwise that block is recomputed directly.
    uint16_t* sRows = smem_at<uint16_t>(sm, L.rows);  // rows 0-15: gated keys of block row I, 16-31: queries
    uint16_t* sKc = smem_at<uint16_t>(sm, L.kcol);
    float* sSpan = sTok + C * 12;  // NB floats: per diagonal block, max over channels of G_r − G_{r+15}
    if (tid() < 32) {
      for (int I = 0; I < NB; ++I) {
        float m = 0.f;
        for (int d = lane(); d < KP; d += 32) m = fmax_(m, sG[(16 * I) * PG + d] - sG[(16 * I + 15) * PG + d]);
        m = warp_max(m);
        if (lane() == 0) sSpan[I] = m;
      }
    }
    sync_threads();
    unsigned unsafe = 0;
    for (int I = 0; I < NB; ++I) unsafe |= (sSpan[I] <= 100.f ? 0u : 1u) << I;
    // The gated operands are built 8 channels (16 bytes) at a time. Pad channels are built too: their q/k and
    // G are zero-filled, so they come out 0 (a K-only loop measured slower at K = 120: CK = 15 splits the
    // CTA's threads unevenly and adds a division).
    constexpr int CK = KP / 8;
    for (int I = 0; I < NB; ++I) {
      const int r = 16 * I;
      for (int e = tid(); e < 32 * CK; e += nthreads()) {
        const int rr = e / CK, d0 = 8 * (e - rr * CK);
        const int i = r + (rr & 15);
        const uint16_t* src = (rr < 16 ? sK : sQ) + i * PQ + d0;
        tile::exp2_scale_row8(sRows + rr * PQ + d0, src, sG + i * PG + d0, sG + r * PG + d0, 1e30f);
      }
      for (int e = tid(); e < (r + 16) * CK; e += nthreads()) {
        const int j = e / CK, d0 = 8 * (e - j * CK);
        tile::exp2_scale_row8(sKc + j * PQ + d0, sKw + j * PQ + d0, sG + r * PG + d0, sG + j * PG + d0, 100.f);
      }
      sync_threads();
      const int ntile = (kDelta ? 2 : 1) * (I + 1);
      for (int tt = warp(); tt < ntile; tt += NW) {
        const int part = kDelta ? (tt <= I ? 0 : 1) : 1;
        const int J = kDelta && tt > I ? tt - I - 1 : tt;
        float acc[2][4];
#pragma unroll
        for (int x = 0; x < 2; ++x)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[x][e] = 0.f;
        // tile_rows_cols reads rows [r0, r0+16) of the row operand: block row I's gated rows live at 0 / 16
        tile::mma_block<KP, PQ>(acc, sRows, part == 0 ? 0 : 16, sKc, 16 * J);
        if (!(J == I && ((unsafe >> I) & 1u))) store_tile<false>(part, I, J, acc, sTok, sA, PA, aqk, a.scale);
      }
      sync_threads();
    }
    // unsafe diagonal blocks: direct per-element evaluation, exp of (G_i − G_j) <= 0 only
    for (int I = 0; I < NB; ++I) {
      if (!((unsafe >> I) & 1u)) continue;
      for (int e = tid(); e < 2 * 256; e += nthreads()) {
        const int part = e >> 8, i = 16 * I + ((e >> 4) & 15), j = 16 * I + (e & 15);
        if (part == 0 && !kDelta) continue;
        float s = 0.f;
        if (j <= i) {
          const uint16_t* ri = (part == 0 ? sK : sQ) + i * PQ;
          for (int d = 0; d < K; ++d)
            s += bf16_to_f32(ri[d]) * bf16_to_f32(sKw[j * PQ + d]) * ex2(sG[i * PG + d] - sG[j * PG + d]);
        }
        if (part == 0) {
          sA[i * PA + j] = i > j ? s * sTok[i * 8 + 3] * sTok[i * 8 + 5] * sTok[j * 8 + 5] : 0.f;
        } else {
          aqk[i * C + j] = f32_to_bf16(i >= j ? s * a.scale * sTok[i * 8 + 4] * sTok[j * 8 + 5] : 0.f);
        }
      }
    }
  }

  // ---- 6. 𝒯 = (I + 𝒜)^{-1}, store 𝒯·diag(β) ----
  if (kDelta) {
    sync_threads();
    invert_unit_lower<C>(sA, PA);
    tile::store_lower_col_scaled<C>(reinterpret_cast<uint16_t*>(ws + W.tb) + sh * C * C, sA, PA,
                                    tile::RowVec{sTok + 3, 8});
  }
}

}  // namespace dgps
