// Forward role chunk_local: everything of one chunk that does not depend on the memory state, for one
// (chunk slot, value head). Fully parallel (grid = chunk slots x HV). docs/math.md §4.1 (scalar/no decay) and
// §4.3 (per-channel decay), with separate read (rows) and write (columns) keys.
//
// Writes to the workspace (launch_rules.h WorkspaceLayout):
//   tok[s][hv][i]  = {cq, ck, w, β, pa, pb, G2, 0}: cq = scale·rq·2^{G2_i}, ck = rk·2^{G2_i},
//                    w = rk·2^{G2_C − G2_i} (scalar decay; without decay the 2^ factors are 1; with diagonal
//                    decay they are applied per channel by state_output), rq/rk the l2norm factors, G2 the
//                    chunk-local inclusive cumsum of g in log2 units; row C = {2^{G2_C}}. pa, pb: the
//                    preconditioner's per-token coefficients (the a_i, b_i of tile/channel_scan.cuh), else rq, rk.
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
#include "dgps/tile/gated_rows.cuh"
#include "dgps/tile/lower_product.cuh"
#include "dgps/tile/lower_product_gated.cuh"
#include "dgps/tile/row_norm.cuh"
#include "dgps/tile/scan.cuh"
#include "dgps/tile/token_record.cuh"
#include "dgps/tile/tri_solve.cuh"

namespace dgps {
template <class Tr>
DGPS_DEV void fwd_chunk_local(const ForwardArgs& a) {
  using namespace dev;
  static_assert(TraitsCheck<Tr>::ok, "");
  constexpr launch::FeatureSet F = features<Tr>();
  constexpr int C = cfg::C, K = cfg::K, KP = cfg::KP;
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
  float* sTok = smem_at<float>(sm, L.tok);  // [C][8]: columns 3-6 β rq rk G2 (0-2, 7 unused)
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

  // ---- 2. l2norm factors (fp32 from the raw input bits; tile/row_norm.cuh), gate cumsums (tile/scan.cuh) ----
  const tile::RowVec beta{sTok + 3, 8}, rq{sTok + 4, 8}, rk{sTok + 5, 8}, G2{sTok + 6, 8};
  if (Tr::kL2Norm) {
    tile::row_rsqrt_norm<C, KP, Act_t>(rk, sK, rq, sQ, PQ, Tr::kL2Eps, Lr);
  } else {
    for (int i = tid(); i < C; i += nthreads()) rq[i] = rk[i] = i < Lr ? 1.f : 0.f;
  }
  if (Tr::kDecay == 1) tile::cumsum_rows<C>(G2, 1.f);  // G2 holds g in log2 units already
  float* sG = kDiag ? smem_at<float>(sm, L.G) : nullptr;
  // per-channel: in place, log2 units; pad rows/channels were zero-filled, so pad rows carry the last real
  // token's value
  if (kDiag) tile::cumsum_columns<C, KP>(sG, PG, kLog2e);
  sync_threads();

  // ---- 3. per-token record -> tok workspace (tile/token_record.cuh); the preconditioner's key coefficient
  // takes rk² in first ----
  {
    const tile::RowVec pa{sPin, 4}, pb{sPin + 1, 4};
    const tile::RowVec* G = Tr::kDecay == 1 ? &G2 : nullptr;
    float* tokw = reinterpret_cast<float*>(ws + W.tok) + sh * (C + 1) * 8;
    for (int i = tid(); i < C; i += nthreads()) {
      if (kPre) pb[i] *= rk[i] * rk[i];
      tile::store_token_record<C>(tokw, rq, rk, beta, G, a.scale, kPre ? &pa : nullptr, kPre ? &pb : nullptr, i);
    }
    tile::store_token_record_last<C>(tokw, G);
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

  // ---- 4. preconditioner multiplier P (tile/channel_scan.cuh, read-out from the Traits by precond_rebuild.cuh):
  // write key P⊙k (ATK) or read query P⊙q (ATQ), kept in shared memory only ----
  if (kPre) {
    tile::channel_scan<C, K, KP, precond_readout<Tr>(), Act_t>(
        sPst, tile::RowVec{sPin, 4}, tile::RowVec{sPin + 1, 4}, sK, PQ, Lr, precond_scan_params<Tr>(a, h),
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

  // ---- 5. tensor-core products [K̂ ; Q̂] · K_wᵀ over the lower 16x16 blocks (tile/lower_product.cuh), with
  // scalar decay 2^{G2_i − G2_j} in the epilogue; per-channel decay inside the operands and a per-block-pair
  // channel multiplier (tile/lower_product_gated.cuh, docs/math.md §4.3) ----
  {
    constexpr int NP = kDelta ? 2 : 1;
    // per-channel decay gates the operands in place (the tiles are dead afterwards); the key, a row and the
    // column operand at once without a write key, gets its gated column copy in L.kcol
    auto products = [&](uint16_t* const (&rows)[NP], const tile::RowFactor (&fa)[NP], const tile::RowVec (&fb)[NP]) {
      if constexpr (!kDiag) {
        tile::lower_products<C, KP, PQ, NW, NP, Tr::kDecay == 1>(rows, fa, fb, sKw, rk, G2, sA, PA, aqk);
      } else {
        static_assert((L.kcol >= 0) == (kDelta && !kATK), "chunkLocalSmem: a gated column copy iff k is a row");
        tile::lower_products_channel_gated<C, K, KP, PQ, NW, NP>(
            rows, fa, fb, sKw, rk, sG, PG, L.kcol >= 0 ? smem_at<uint16_t>(sm, L.kcol) : nullptr,
            smem_at<uint16_t>(sm, L.mul), sTok + C * 12, sA, PA, aqk);
      }
    };
    const tile::RowFactor scale{nullptr, 0, a.scale};
    if constexpr (kDelta) {  // the KKT's rows (part 0), then the queries'
      uint16_t* const rows[NP] = {sK, sQ};
      const tile::RowFactor fa[NP] = {tile::RowFactor{beta.p, 8, 0.f}, scale};
      const tile::RowVec fb[NP] = {rk, rq};
      products(rows, fa, fb);
    } else {
      uint16_t* const rows[NP] = {sQ};
      const tile::RowFactor fa[NP] = {scale};
      const tile::RowVec fb[NP] = {rq};
      products(rows, fa, fb);
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
