// OSDN's hypergradient d-scan in its chunked form, as two forward roles (docs/math.md §5.2 "Chunked form";
// chunk IR ops hypergrad_chunk_summary / hypergrad_chunk_pass, ChunkPrecondScanOps.td). Launched when
// launch_rules.h hypergradChunked(F): hypergrad_ogd without a clamp. They write exactly what the per-token warp
// scan (fwd_precond.cuh) writes — pst, pcoef and final_precond_state — so chunk_local and state_output are
// unchanged, and they read the same inputs: the raw bf16/fp16 key (l2-normalised in f32 here), beta, the
// retention gate precond_g, initial_precond_state. The write timing (pre/post) is chunk_local's and
// state_output's business: the scan's outputs do not depend on it.
//
// Chunk rows i, j, m < n (n = the chunk's length; rows past it count as zero keys with no retention):
//   rk_i = (Σ_x k_ix² + ε)^{-1/2},  u_i = (rk_i k_i)²,  κ_i = η β_i/‖k̂_i‖² (0 for a zero key)
//   cum_i = Σ_{l<i} precond_g_l,  L_i = e^{cum_i},  Λ_ij = e^{cum_i − cum_{j+1}}
//   𝒢_ij = β_i ⟨u_i, u_j⟩ κ_j Λ_ij (i > j),  𝒯 = (I + 𝒢)^{-1}  (unit lower triangular)
//
//   precond_summary (grid = chunk slots x H, warps·32 threads, fully parallel) writes per (slot, key head)
//     hgtri_jm = κ_j 𝒯_jm β_m L_m rk_m²                          (m <= j, packed by rows at j(j+1)/2 + m)
//     hgvec    = {a_j = κ_j Σ_m 𝒯_jm,  y_j = Λ_nj rk_j²,  L_n}
//   precond_scan (grid = N x H, 256 threads, sequential over the sequence's chunks; the critical path):
//     pst_s = d;  w_m = Σ_x k_mx² d_x (raw key);  c = a − hgtri·w → pcoef_s;  d ← L_n d + Σ_j y_j c_j k_j²
//
// which is math.md's c = a − R d, d_end = L_n d + Yᵀ c with R = Diag(κ) 𝒯 Diag(β ⊙ L) U and Y_j = Λ_nj u_j,
// the l2 factor rk² folded into the columns so that the pass reads only the raw key: per chunk it moves a
// triangular block and the key tile instead of R and Y (2·C·K floats), and its work is three short products over
// [C][K] and [C][C] in shared memory, the next chunk's operands loading (cp.async) meanwhile.
//
// The steps are the tile library's (runtime/device/dgps/tile/hypergrad_summary.cuh, hypergrad_pass.cuh), which
// the tile-IR roles (dgpsc --codegen=tile-precond) call too: one implementation, bit-identical workspaces.
#pragma once

#include "dgps/device/common.cuh"
#include "dgps/tile/hypergrad_pass.cuh"
#include "dgps/tile/hypergrad_summary.cuh"

namespace dgps {

/// precond_summary for hypergradChunked(F): one CTA per (chunk slot, key head).
template <class Tr>
DGPS_DEV void fwd_precond_summary_hypergrad(const ForwardArgs& a) {
  using namespace dev;
  constexpr launch::FeatureSet F = features<Tr>();
  constexpr int C = cfg::C, K = cfg::K, KP = cfg::KP, PQ = launch::bf16Pitch(KP);
  const launch::WorkspaceLayout W = launch::workspaceLayout(F, shape_of<Tr>(a), tile_of());
  const int64_t H = a.heads_qk, ratio = a.heads_v / H;
  const int64_t slot = block_x() / H, h = block_x() - slot * H;
  int64_t n = 0, c = 0;
  Seq sq;
  if (!slot_to_chunk(a, slot, n, c, sq)) return;  // varlen slack slot: the pass never reads it
  const int64_t t0 = sq.bos + c * C;
  const int L = (int)lmin(C, sq.len - c * C);
  const tile::HypergradSummaryTiles<C, K> s(dyn_smem());
  load_tile16<C, KP>(s.key, PQ, static_cast<const uint16_t*>(a.k) + (t0 * H + h) * K, H * K, L, K);
  cp_async_commit();
  for (int i = tid(); i < C; i += nthreads()) {
    const int64_t row = t0 + i;
    s.bet[i] = i < L ? (Tr::kGain ? a.beta[row * a.heads_v + h * ratio] : 1.f) : 0.f;
    s.colf[i] = (i < L && Tr::kRetention) ? a.precond_g[row * H + h] : 0.f;
  }
  cp_async_wait<0>();
  sync_threads();
  unsigned char* ws = static_cast<unsigned char*>(a.workspace);
  tile::hypergrad_chunk_summary<C, K, KP, Act_t>(
      s, reinterpret_cast<float*>(ws + W.hgtri) + (slot * H + h) * launch::hypergradTriFloats(C),
      reinterpret_cast<float*>(ws + W.hgvec) + (slot * H + h) * launch::hypergradVecFloats(C), Tr::kEta,
      Tr::kL2Norm, Tr::kL2Eps, L);
}

/// precond_scan for hypergradChunked(F): one CTA per (sequence, key head), sequential over its chunks.
template <class Tr>
DGPS_DEV void fwd_precond_scan_hypergrad_chunked(const ForwardArgs& a) {
  using namespace dev;
  constexpr launch::FeatureSet F = features<Tr>();
  constexpr int C = cfg::C, K = cfg::K, KP = cfg::KP;
  const launch::WorkspaceLayout W = launch::workspaceLayout(F, shape_of<Tr>(a), tile_of());
  const int64_t H = a.heads_qk;
  const int64_t n = block_x() / H, h = block_x() - n * H;
  const Seq sq = seq_of(a, n);
  const int64_t s0 = first_slot(a, n, sq.bos);
  unsigned char* ws = static_cast<unsigned char*>(a.workspace);
  tile::HypergradPassIo io;
  io.key = static_cast<const uint16_t*>(a.k) + (sq.bos * H + h) * K;
  io.key_stride = H * K;
  io.tri = reinterpret_cast<const float*>(ws + W.hgtri) + (s0 * H + h) * launch::hypergradTriFloats(C);
  io.vec = reinterpret_cast<const float*>(ws + W.hgvec) + (s0 * H + h) * launch::hypergradVecFloats(C);
  io.starts = reinterpret_cast<float*>(ws + W.pst) + (s0 * H + h) * K;
  io.coef = reinterpret_cast<float*>(ws + W.pcoef) + (s0 * H + h) * C;
  io.slot_stride = H;
  const int64_t ph = (n * H + h) * K;
  tile::hypergrad_chunk_pass<C, K, KP, Act_t>(
      dyn_smem(), io, sq.len, a.initial_precond_state != nullptr ? a.initial_precond_state + ph : nullptr, Tr::kInit,
      a.final_precond_state != nullptr ? a.final_precond_state + ph : nullptr);
}

}  // namespace dgps
