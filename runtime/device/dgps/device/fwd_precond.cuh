// Forward roles that produce the diagonal preconditioner's state at every chunk start, so chunk_local and
// state_output can rebuild the write key (ATK) or read query (ATQ) of any chunk on the fly; the
// preconditioned key itself never goes to device memory.
//
//   precond_summary, ema_sq_squash (grid = chunk slots x H, fully parallel):
//       psum[s][h][:] = accumulator scanned from 0 over chunk s: a <- γ_i a + β^a_i k̂_i²   (docs/math.md §3.3, §5.1)
//       pgam[s][h]    = exp(Σ_i precond_g_i)  (1 without the accumulator gate)
//   precond_scan, ema_sq_squash (grid = N x H, one thread per channel, sequential over chunks):
//       pst[s][h][:] = A at the start of chunk s;  A <- pgam·A + psum;  final A -> final_precond_state
//   precond_summary / precond_scan, hypergrad_ogd without a clamp (launch_rules.h hypergradChunked): the
//   chunked form, fwd_precond_hypergrad.cuh (same outputs as the token scan below).
//   precond_scan, hypergrad_ogd with a clamp (grid = ceil(N·H / 4), one warp per (sequence, key head),
//   sequential over tokens; docs/math.md §5.2):
//       pst[s][h][:] = d at the start of chunk s;  pcoef[s][h][i] = κ_t ε_t = (η β_t/‖k̂_t‖²)(1 − β_t⟨d_t,u_t⟩)
//       (0 when ‖k̂_t‖² = 0), so that inside a chunk d_{t+1} = clamp(ρ_t d_t + pcoef_t u_t) is elementwise.
#pragma once

#include "dgps/device/common.cuh"
#include "dgps/device/fwd_precond_hypergrad.cuh"
#include "dgps/tile/channel_scan_total.cuh"
#include "dgps/tile/chunk_affine_scan.cuh"
#include "dgps/tile/hypergrad_token_scan.cuh"
#include "dgps/tile/row_norm.cuh"

namespace dgps {

template <class Tr>
DGPS_DEV void fwd_precond_summary_squash(const ForwardArgs& a) {
  using namespace dev;
  constexpr launch::FeatureSet F = features<Tr>();
  constexpr int C = cfg::C, K = cfg::K, KP = cfg::KP, PQ = launch::bf16Pitch(KP);
  const launch::WorkspaceLayout W = launch::workspaceLayout(F, shape_of<Tr>(a), tile_of());
  const int64_t H = a.heads_qk;
  const int64_t slot = block_x() / H, h = block_x() - slot * H;
  int64_t n = 0, c = 0;
  Seq sq;
  if (!slot_to_chunk(a, slot, n, c, sq)) return;
  const int64_t t0 = sq.bos + c * C;
  const int L = (int)lmin(C, sq.len - c * C);

  unsigned char* sm = dyn_smem();
  uint16_t* sK = smem_at<uint16_t>(sm, 0);
  float* sTok = smem_at<float>(sm, C * PQ * 2);  // [C][4]: γ, β^a, rk, g^a

  load_tile16<C, KP>(sK, PQ, static_cast<const uint16_t*>(a.k) + (t0 * H + h) * K, H * K, L, K);
  cp_async_commit();
  for (int i = tid(); i < C; i += nthreads()) {
    const int64_t row = t0 + i;
    const float ga = (i < L && Tr::kSquashGate) ? a.precond_g[row * H + h] : 0.f;
    sTok[i * 4 + 0] = exp_(ga);
    sTok[i * 4 + 1] = i < L ? (Tr::kSquashGain ? a.precond_beta[row * H + h] : 1.f) : 0.f;
    sTok[i * 4 + 3] = ga;
  }
  cp_async_wait<0>();
  sync_threads();
  // fp32 from the raw input bits (bf16 or fp16): the accumulator never sees a re-rounded key. The steps below
  // are the tile library's (the tile-IR precond_summary calls the same headers).
  const tile::RowVec gam{sTok + 0, 4}, gain{sTok + 1, 4}, rk{sTok + 2, 4}, lg{sTok + 3, 4};
  if constexpr (Tr::kL2Norm)
    tile::row_rsqrt_norm<C, KP, Act_t>(rk, sK, tile::RowVec{nullptr, 0}, nullptr, PQ, Tr::kL2Eps, L);
  else
    for (int i = tid(); i < C; i += nthreads()) rk[i] = 1.f;
  sync_threads();
  float* psum = reinterpret_cast<float*>(static_cast<unsigned char*>(a.workspace) + W.psum);
  float* pgam = reinterpret_cast<float*>(static_cast<unsigned char*>(a.workspace) + W.pgam);
  tile::channel_scan_total<K, Act_t>(psum + (slot * H + h) * K, sK, PQ, gam, gain, rk, L);
  tile::store_sum_exp<C>(pgam + slot * H + h, lg);
}

template <class Tr>
DGPS_DEV void fwd_precond_scan_squash(const ForwardArgs& a) {
  using namespace dev;
  constexpr launch::FeatureSet F = features<Tr>();
  constexpr int C = cfg::C, K = cfg::K;
  const launch::WorkspaceLayout W = launch::workspaceLayout(F, shape_of<Tr>(a), tile_of());
  const int64_t H = a.heads_qk;
  const int64_t n = block_x() / H, h = block_x() - n * H;
  const Seq sq = seq_of(a, n);
  const int64_t s0 = first_slot(a, n, sq.bos);
  const int64_t nch = (sq.len + C - 1) / C;
  unsigned char* ws = static_cast<unsigned char*>(a.workspace);
  float* pst = reinterpret_cast<float*>(ws + W.pst);
  const float* psum = reinterpret_cast<const float*>(ws + W.psum);
  const float* pgam = reinterpret_cast<const float*>(ws + W.pgam);
  // the summaries do not depend on A: chunk_affine_scan loads them 8 chunks ahead of the sequential update
  const int64_t ph = (n * H + h) * K;
  tile::chunk_affine_scan<K>(pst + (s0 * H + h) * K, pgam + s0 * H + h, psum + (s0 * H + h) * K, H * K, H, nch,
                             a.initial_precond_state != nullptr ? a.initial_precond_state + ph : nullptr,
                             a.final_precond_state != nullptr ? a.final_precond_state + ph : nullptr);
}

template <class Tr>
DGPS_DEV void fwd_precond_scan_hypergrad(const ForwardArgs& a) {
  using namespace dev;
  constexpr launch::FeatureSet F = features<Tr>();
  constexpr int C = cfg::C, K = cfg::K, KP = cfg::KP, PQ = launch::bf16Pitch(KP);
  const launch::WorkspaceLayout W = launch::workspaceLayout(F, shape_of<Tr>(a), tile_of());
  const int64_t H = a.heads_qk, HV = a.heads_v, ratio = HV / H;
  const int64_t pair = block_x() * 4 + warp();
  if (pair >= a.num_seqs * H) return;  // whole warp leaves together; no CTA barriers below
  const int64_t n = pair / H, h = pair - n * H;
  const Seq sq = seq_of(a, n);
  const int64_t s0 = first_slot(a, n, sq.bos);
  unsigned char* ws = static_cast<unsigned char*>(a.workspace);
  tile::HypergradTokenIo io;
  io.key = static_cast<const uint16_t*>(a.k) + (sq.bos * H + h) * K;
  io.key_stride = H * K;
  io.beta = Tr::kGain ? a.beta + sq.bos * HV + h * ratio : nullptr;
  io.beta_stride = HV;
  io.retention = Tr::kRetention ? a.precond_g + sq.bos * H + h : nullptr;
  io.retention_stride = H;
  io.starts = reinterpret_cast<float*>(ws + W.pst) + (s0 * H + h) * K;
  io.coef = reinterpret_cast<float*>(ws + W.pcoef) + (s0 * H + h) * C;
  io.slot_stride = H;
  tile::HypergradStep st;
  st.eta = Tr::kEta;
  st.l2norm = Tr::kL2Norm;
  st.eps = Tr::kL2Eps;
  st.has_min = Tr::kClampMin;
  st.has_max = Tr::kClampMax;
  st.lo = Tr::kClampMinV;
  st.hi = Tr::kClampMaxV;
  const int64_t ph = (n * H + h) * K;
  tile::hypergrad_token_scan<C, K, KP, Act_t>(
      smem_at<uint16_t>(dyn_smem(), (int64_t)warp() * 32 * PQ * 2), io, st, sq.len,  // this warp's 32 key rows
      a.initial_precond_state != nullptr ? a.initial_precond_state + ph : nullptr, Tr::kInit,
      a.final_precond_state != nullptr ? a.final_precond_state + ph : nullptr);
}

template <class Tr>
DGPS_DEV void fwd_precond_summary(const ForwardArgs& a) {
  static_assert(TraitsCheck<Tr>::ok, "");
  static_assert(Tr::kPrecond == 1 && (Tr::kPrecondSource == 0 || launch::hypergradChunked(features<Tr>())),
                "precond_summary is the ema_sq_squash role or the chunked hypergrad_ogd scan's");
  if constexpr (Tr::kPrecondSource == 0)
    fwd_precond_summary_squash<Tr>(a);
  else
    fwd_precond_summary_hypergrad<Tr>(a);
}

template <class Tr>
DGPS_DEV void fwd_precond_scan(const ForwardArgs& a) {
  static_assert(TraitsCheck<Tr>::ok, "");
  static_assert(Tr::kPrecond == 1, "precond_scan is only generated for preconditioned specs");
  if constexpr (Tr::kPrecondSource == 0)
    fwd_precond_scan_squash<Tr>(a);
  else if constexpr (launch::hypergradChunked(features<Tr>()))
    fwd_precond_scan_hypergrad_chunked<Tr>(a);
  else
    fwd_precond_scan_hypergrad<Tr>(a);
}

}  // namespace dgps
