// Forward role state_output: the sequential part. One CTA per (sequence, value head, value tile of BV
// columns); one warp per 16 value columns, each owning Sᵀ[16 x KP] in fp32 registers (compile-time sized,
// no spills, docs/math.md §7.5). Per chunk (docs/math.md §4.1, transposed so accumulators feed the next product in registers):
//   XQᵀ = Sᵀ Q_opᵀ,  XKᵀ = Sᵀ K_opᵀ                       (one pass over S, bf16 operands, fp32 accumulate)
//   Nᵀ  = (Vᵀ − XKᵀ·diag(ck)) (𝒯 diag β)ᵀ    (delta)      Nᵀ = Vᵀ diag(β)   (linear)
//   Oᵀ  = XQᵀ·diag(cq) + Nᵀ Aqkᵀ                           -> o (bf16/fp16)
//   Sᵀ  ← Sᵀ·D_C + (Nᵀ diag(w)) K_w                         (D_C = 2^{G2_C}, or per channel)
// Operands: raw q/k tiles when the per-token factors cq/ck/w (tok workspace) carry the gating and l2norm;
// otherwise the tiles chunk_local prepared (opq/opk/opw: per-channel decay). A diagonal preconditioner's
// multiplier is rebuilt here from the chunk-start state pst and the raw key (tile/channel_scan.cuh, its
// parameters from the Traits by precond_rebuild.cuh), so P⊙k (ATK write key) and P⊙q (ATQ read query) never go
// through device memory: a producer warpgroup rebuilds chunk c+1's operand while the consumer warps run chunk c
// (tile/warp_split.cuh), so the rebuild stays off the sequential path. The kernel printed from tile IR
// (TileStateEmitter.cpp) calls the same headers in the same order.
// The state enters tensor-core products as bf16 also for fp16 inputs (|S| may exceed 65504, docs/math.md §7.5).
// Partial last chunks: zero pad rows are exact no-ops; the final decay is the last real token's (docs/math.md §4.2).
#pragma once

#include "dgps/device/common.cuh"
#include "dgps/device/precond_rebuild.cuh"
#include "dgps/tile/lower_readout.cuh"
#include "dgps/tile/state_frag.cuh"
#include "dgps/tile/state_rank_update.cuh"
#include "dgps/tile/state_rows_product.cuh"
#include "dgps/tile/value_residual.cuh"
#include "dgps/tile/warp_split.cuh"

namespace dgps {

/// Threads of a state_output CTA, for the kernel's __launch_bounds__ (the generated wrapper declares it, so
/// ptxas budgets registers for the producer warpgroup too).
template <class Tr>
DGPS_HD constexpr int state_output_threads() {
  return launch::stateOutputThreads(features<Tr>(), cfg::BV);
}

template <class Tr>
DGPS_DEV void fwd_state_output(const ForwardArgs& a) {
  using namespace dev;
  static_assert(TraitsCheck<Tr>::ok, "");
  constexpr launch::FeatureSet F = features<Tr>();
  constexpr int C = cfg::C, K = cfg::K, V = cfg::V, KP = cfg::KP, BV = cfg::BV, NCT = C / 8;
  constexpr int PV = launch::bf16Pitch(BV), PC = launch::bf16Pitch(C);
  constexpr launch::StateOutputSmem L = launch::stateOutputSmem(F, K, V, C, BV, cfg::STAGES, cfg::kInputF16);
  constexpr bool kDelta = Tr::kSolve == 1;
  constexpr bool kDiag = Tr::kDecay == 2;
  constexpr bool kPre = Tr::kPrecond == 1;
  constexpr bool kQop = launch::needOpQ(F), kKop = launch::needOpK(F), kKw = launch::needOpW(F);
  constexpr bool kRebuildW = launch::rebuildsKw(F), kRebuildQ = launch::rebuildsQ(F);
  constexpr bool kRawK = launch::rawKInKTile(F), kRawOwn = launch::rawKOwnTile(F);
  constexpr bool kRowAlignedO = (V * 2) % 32 == 0;  // rows of o start on a 32-byte sector boundary
  // warpgroup MMA needs C = 64 (N of m64n64k16) and whole warpgroups (BV a multiple of 64)
  constexpr bool kWG = DGPS_USE_WGMMA && C == 64 && (BV / 16) % 4 == 0;
  // Roles: NWC consumer warps (16 value columns each) run the sequential state pass; with a preconditioner a
  // producer warpgroup loads chunk c+1's key, preconditioner state and per-token coefficients and rebuilds its
  // P⊙k (ATK) or P⊙q (ATQ) tile while the consumers run chunk c (launch_rules.h stateOutputThreads).
  constexpr int NWC = launch::stateOutputConsumerWarps(BV), NWP = launch::stateOutputProducerWarps(F);
  constexpr int NTC = NWC * 32, NTP = NWP * 32, NT = NTC + NTP;
  static_assert(NWP == 0 || kPre, "a producer warpgroup exists only to rebuild the preconditioned operand");
  // 384 threads launch with 168 registers each (64512): the producer gives registers to the consumers (whole
  // warpgroups only); 256·224 + 128·56 fits that pool. The producer's loaders stay rolled (common.cuh) so its
  // scan fits in 56 (dgps-jit-check: no spills at K = 128).
  using Split = tile::WarpSplit<NWC, NWP, /*consumer registers*/ 224, /*producer registers*/ 56>;
  static_assert(Split::NT == NT, "");

  const launch::WorkspaceLayout W = launch::workspaceLayout(F, shape_of<Tr>(a), tile_of());
  const int64_t H = a.heads_qk, HV = a.heads_v, ratio = HV / H;
  constexpr int64_t VT = (V + BV - 1) / BV;
  const int64_t bid = block_x();
  const int64_t vt = bid % VT, nh = bid / VT, hv = nh % HV, n = nh / HV, h = hv / ratio;
  const Seq sq = seq_of(a, n);
  const int64_t s0 = first_slot(a, n, sq.bos);
  const int64_t nch = (sq.len + C - 1) / C;
  const int w = warp();
  const bool producer = Split::is_producer();
  const int v0 = (int)vt * BV;
  const int vw = v0 + 16 * w;  // first value column of this (consumer) warp

  unsigned char* sm = dyn_smem();
  unsigned char* ws = static_cast<unsigned char*>(a.workspace);
  const uint16_t* qg = static_cast<const uint16_t*>(a.q);
  const uint16_t* kg = static_cast<const uint16_t*>(a.k);
  const uint16_t* vg = static_cast<const uint16_t*>(a.v);
  uint16_t* og = static_cast<uint16_t*>(a.o);

  auto sync_all = [&]() { Split::sync_all(); };
  auto sync_consumers = [&]() { Split::sync_consumers(); };

  // Loads of chunk c into its stage by one role (thread ti of nt): the producer owns the tiles the rebuild
  // reads or rewrites, the consumers the rest (everything when there is no producer). Addresses are chunk 0's
  // plus c per-chunk steps, so each role keeps few 64-bit values live.
  const int64_t sh0 = s0 * HV + hv;  // workspace row (slot·HV + hv) of chunk 0; chunk c adds c·HV
  const uint16_t* q0 = qg + (sq.bos * H + h) * K;
  const uint16_t* k0 = kg + (sq.bos * H + h) * K;
  auto ws16 = [&](int64_t off, int64_t row_elems) {
    return reinterpret_cast<const uint16_t*>(ws + off) + sh0 * row_elems;
  };
  auto issue = [&](int64_t c, bool as_producer, int ti, int nt) {
    const bool P = NWP > 0;
    unsigned char* st = sm + (c % cfg::STAGES) * L.stage_bytes;
    const int64_t rows = c * C * H * K, chunk = c * HV;  // raw q/k element step, workspace row step
    const int Lr = (int)lmin(C, sq.len - c * C);
    if ((P && kRebuildQ) == as_producer) {
      if (kQop)
        load_tile16_core<C, KP>(smem_at<uint16_t>(st, L.q), ws16(W.opq, C * K) + chunk * C * K, K, Lr, K, ti, nt);
      else
        load_tile16_core<C, KP>(smem_at<uint16_t>(st, L.q), q0 + rows, H * K, Lr, K, ti, nt);
    }
    if (kKop && !as_producer)
      load_tile16_core<C, KP>(smem_at<uint16_t>(st, L.k), ws16(W.opk, C * K) + chunk * C * K, K, Lr, K, ti, nt);
    else if (kRawK && P == as_producer)
      load_tile16_core<C, KP>(smem_at<uint16_t>(st, L.k), k0 + rows, H * K, Lr, K, ti, nt);
    if (kRawOwn && as_producer)
      load_tile16_core<C, KP>(smem_at<uint16_t>(st, L.kraw), k0 + rows, H * K, Lr, K, ti, nt);
    if (kKw && (P && kRebuildW) == as_producer)
      load_tile16_core<C, KP>(smem_at<uint16_t>(st, L.kw), ws16(W.opw, C * K) + chunk * C * K, K, Lr, K, ti, nt);
    if (kPre && as_producer)
      load_tile32<1, KP>(smem_at<float>(st, L.pst), KP,
                         reinterpret_cast<const float*>(ws + W.pst) + ((s0 + c) * H + h) * K, K, 1, K, ti, nt);
    if (P == as_producer)
      load_tile32<C + 1, 8>(smem_at<float>(st, L.tok), 8,
                            reinterpret_cast<const float*>(ws16(W.tok, (C + 1) * 16)) + chunk * (C + 1) * 8, 8, C + 1,
                            8, ti, nt);
    if (as_producer) return;
    load_tile16<C, BV>(smem_at<uint16_t>(st, L.v), PV, vg + ((sq.bos + c * C) * HV + hv) * V + v0, HV * V, Lr, V - v0,
                       ti, nt);
    if (kDelta) load_tile16<C, C>(smem_at<uint16_t>(st, L.tb), PC, ws16(W.tb, C * C) + chunk * C * C, C, C, C, ti, nt);
    load_tile16<C, C>(smem_at<uint16_t>(st, L.aqk), PC, ws16(W.aqk, C * C) + chunk * C * C, C, C, C, ti, nt);
    if (kDiag)
      load_tile32<1, KP>(smem_at<float>(st, L.dec), KP,
                         reinterpret_cast<const float*>(ws16(W.pdec, K * 2)) + chunk * K, K, 1, K, ti, nt);
  };

  if (NWP > 0 && producer) {
    // ---- producer warpgroup: chunk c+1's P⊙k into the write-key tile (over opw with per-channel decay) or
    // P⊙q over the query tile, from the raw input key bits (tile/channel_scan.cuh channel_scan_rescale) ----
    Split::producer_registers();
    const int pt = Split::producer_thread();
    const tile::ScanParams sp = precond_scan_params<Tr>(a, h);
    constexpr tile::Readout R = precond_readout<Tr>();
    auto produce = [&](int64_t c) {
      issue(c, true, pt, NTP);
      cp_async_commit();
      cp_async_wait<0>();
      Split::sync_producer();
      unsigned char* st = sm + (c % cfg::STAGES) * L.stage_bytes;
      const int Lr = (int)lmin(C, sq.len - c * C);
      const uint16_t* sKraw = smem_at<uint16_t>(st, L.kraw);
      float* sPst = smem_at<float>(st, L.pst);
      float* sTok = smem_at<float>(st, L.tok);  // fields 4 and 5: the scan's coefficients pa, pb
      const tile::RowVec pa{sTok + 4, 8}, pb{sTok + 5, 8};
      if (kRebuildW && kKw)  // P ⊙ opw in place
        tile::channel_scan_rescale<C, K, KP, R, Act_t, Act<false>, false>(smem_at<uint16_t>(st, L.kw), sPst, pa, pb,
                                                                          sKraw, Lr, sp, pt, NTP);
      else if (kRebuildW)  // P ⊙ k into the write-key tile
        tile::channel_scan_rescale<C, K, KP, R, Act_t, Act<false>, true>(smem_at<uint16_t>(st, L.kw), sPst, pa, pb,
                                                                         sKraw, Lr, sp, pt, NTP);
      else  // P ⊙ q in place (opq bf16, or the raw query)
        tile::channel_scan_rescale<C, K, KP, R, Act_t, Act<!kQop && cfg::kInputF16>, false>(
            smem_at<uint16_t>(st, L.q), sPst, pa, pb, sKraw, Lr, sp, pt, NTP);
    };
    Split::template producer_loop<cfg::STAGES>(0, nch, produce);
    return;
  }
  Split::consumer_registers();

  // ---- state Sᵀ: rows v = vw + g (+8), columns d = 8 nt + 2t (+1) (tile/state_frag.cuh) ----
  float S[KP / 8][4];
  tile::state_start<KP>(S, a.initial_state != nullptr ? a.initial_state + (n * HV + hv) * (int64_t)K * V : nullptr, K,
                        V, vw);

  const int ct = tid();  // consumer thread index (consumers are warps 0..NWC-1)
  if (nch > 0) {
    issue(0, false, ct, NTC);
    cp_async_commit();
  }
  for (int64_t c = 0; c < nch; ++c) {
    unsigned char* st = sm + (c % cfg::STAGES) * L.stage_bytes;
    const int64_t t0 = sq.bos + c * C;
    const int Lr = (int)lmin(C, sq.len - c * C);
    if (cfg::STAGES == 2) {
      if (c + 1 < nch) issue(c + 1, false, ct, NTC);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    sync_all();
    uint16_t* sQop = smem_at<uint16_t>(st, L.q);
    uint16_t* sKop = smem_at<uint16_t>(st, L.k);
    uint16_t* sKw = smem_at<uint16_t>(st, L.kw);  // == sKop unless a prepared or rebuilt write operand exists
    uint16_t* sV = smem_at<uint16_t>(st, L.v);
    const uint16_t* sTb = smem_at<uint16_t>(st, L.tb);
    const uint16_t* sAqk = smem_at<uint16_t>(st, L.aqk);
    const float* sTok = smem_at<float>(st, L.tok);
    const float* sDec = smem_at<float>(st, L.dec);

    if (cfg::kInputF16) {
      // fp16 inputs feed bf16 tensor-core products; prepared or rebuilt operand tiles are bf16 already
      if (!kQop && !kRebuildQ) f16_to_bf16_lin(sQop, C * KP, ct, NTC);
      if (kRawK) f16_to_bf16_lin(sKop, C * KP, ct, NTC);
      f16_to_bf16_tile<C, BV>(sV, PV, ct, NTC);
      sync_consumers();
    }

    // ---- XQᵀ, XKᵀ = Sᵀ [Q_op; K_op]ᵀ (tile/state_rows_product.cuh) ----
    float XQ[NCT][4], XK[NCT][4];
    tile::state_times_rows<C, KP, kWG, kDelta>(XQ, XK, S, sQop, sKop);

    // ---- Nᵀ (tile/value_residual.cuh); the token record's columns: 0 cq, 1 ck, 2 w, 3 β ----
    float N[NCT][4];
    if (kDelta)
      tile::residual_lower<C, PV, PC, 8>(N, sV, w, sTok + 1, XK, sTb);
    else
      tile::scaled_values<C, PV, 8>(N, sV, w, sTok + 3);

    // ---- Oᵀ = XQᵀ diag(cq) + Nᵀ Aqkᵀ, staged through this warp's columns of the V tile (tile/lower_readout.cuh) ----
    uint32_t NA[C / 16][4];
    tile::lower_readout<C, PC, 8>(XQ, NA, N, sTok + 0, sAqk);
    // sV is next written by chunk c + STAGES's load, after this chunk's closing sync_all
    tile::store_rows<C, PV, BV, !kRowAlignedO, Act_t>(XQ, sV, w, og + (t0 * HV + hv) * V, HV * V, v0, V, Lr, ct, NTC,
                                                      sync_consumers);

    // ---- Sᵀ ← Sᵀ D_C + (Nᵀ diag(w)) K_w (tile/state_frag.cuh, tile/state_rank_update.cuh) ----
    if (Tr::kDecay == 1)
      tile::state_scale<KP>(S, sTok[C * 8 + 0]);
    else if (kDiag)
      tile::state_scale_columns<KP>(S, sDec);
    tile::state_rank_update<C, KP, 8>(S, NA, N, sTok + 2, sKw);
    sync_all();  // this stage may be overwritten from here on
    if (cfg::STAGES == 1 && c + 1 < nch) {
      issue(c + 1, false, ct, NTC);
      cp_async_commit();
    }
  }

  if (a.final_state != nullptr)
    tile::state_store<KP>(S, a.final_state + (n * HV + hv) * (int64_t)K * V, K, V, vw);
}

}  // namespace dgps
