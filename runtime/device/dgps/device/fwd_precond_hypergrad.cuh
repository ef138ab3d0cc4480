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
#pragma once

#include "dgps/device/common.cuh"
#include "dgps/device/tri_inverse.cuh"

namespace dgps {

namespace dev {
/// Four floats read or written as one 16-byte shared-memory access.
struct alignas(16) HgF4 {
  float v[4];
};
}  // namespace dev

/// precond_summary for hypergradChunked(F): one CTA per (chunk slot, key head).
template <class Tr>
DGPS_DEV void fwd_precond_summary_hypergrad(const ForwardArgs& a) {
  using namespace dev;
  constexpr launch::FeatureSet F = features<Tr>();
  constexpr int C = cfg::C, K = cfg::K, KP = cfg::KP, PQ = launch::bf16Pitch(KP);
  constexpr int UP = C + 4, GP = launch::f32Pitch(C);  // uT and 𝒢/𝒯 row pitches (floats)
  static_assert(C % 16 == 0, "invert_unit_lower works on 16-row blocks");
  constexpr launch::HypergradSummarySmem SM = launch::hypergradSummarySmem(K, C);
  const launch::WorkspaceLayout W = launch::workspaceLayout(F, shape_of<Tr>(a), tile_of());
  const int64_t H = a.heads_qk, ratio = a.heads_v / H;
  const int64_t slot = block_x() / H, h = block_x() - slot * H;
  int64_t n = 0, c = 0;
  Seq sq;
  if (!slot_to_chunk(a, slot, n, c, sq)) return;  // varlen slack slot: the pass never reads it
  const int64_t t0 = sq.bos + c * C;
  const int L = (int)lmin(C, sq.len - c * C);
  const int t = tid(), nt = nthreads();

  unsigned char* sm = dyn_smem();
  float* uT = smem_at<float>(sm, SM.uT);
  uint16_t* sK = smem_at<uint16_t>(sm, SM.key);
  float* G = smem_at<float>(sm, SM.gt);  // 𝒢, strictly lower, then 𝒯 (aliases sK: written after uT is built)
  float* rk = smem_at<float>(sm, SM.tok);
  float* rk2 = rk + C;
  float* kap = rk2 + C;
  float* bet = kap + C;
  float* colf = bet + C;  // the retention log-gate, then hgtri's column factor β L rk²
  float* cum = colf + C;  // [C + 1]

  load_tile16<C, KP>(sK, PQ, static_cast<const uint16_t*>(a.k) + (t0 * H + h) * K, H * K, L, K);
  cp_async_commit();
  for (int i = t; i < C; i += nt) {
    const int64_t row = t0 + i;
    bet[i] = i < L ? (Tr::kGain ? a.beta[row * a.heads_v + h * ratio] : 1.f) : 0.f;
    colf[i] = (i < L && Tr::kRetention) ? a.precond_g[row * H + h] : 0.f;
  }
  cp_async_wait<0>();
  sync_threads();
  // l2 norm from the raw input bits, as the token scan: rk, ‖k̂‖² = ss·rk², κ (zero-filled rows: κ = 0).
  for (int i = warp(); i < C; i += nt / 32) {
    float ss = 0.f;
    for (int x = lane(); x < K; x += 32) {
      const float v = Act_t::load(sK[i * PQ + x]);
      ss += v * v;
    }
    ss = warp_sum(ss);
    if (lane() == 0) {
      const float r = Tr::kL2Norm ? rsqrt(ss + Tr::kL2Eps) : 1.f;
      const float nk = ss * r * r;
      rk[i] = i < L ? r : 0.f;
      rk2[i] = i < L ? r * r : 0.f;
      kap[i] = (i < L && nk > 0.f) ? Tr::kEta * bet[i] / nk : 0.f;
    }
  }
  if (t == 0) {  // C additions
    float s = 0.f;
    cum[0] = 0.f;
    for (int i = 0; i < C; ++i) cum[i + 1] = s = s + colf[i];
  }
  sync_threads();
  for (int e = t; e < C * K; e += nt) {  // u transposed; pad rows are zero keys (rk = 0)
    const int i = e / K, x = e - i * K;
    const float kh = Act_t::load(sK[i * PQ + x]) * rk[i];
    uT[x * UP + i] = kh * kh;
  }
  sync_threads();  // sK is dead from here: G overwrites it

  // 𝒢 by 8x4 register tiles on and below the diagonal, two float4 of rows and one of columns of uT per key
  // channel (3 shared loads per 32 FMAs); (C/8)(C/8 + 1) tiles: 72 at C = 64, one per thread.
  {
    constexpr int NBI = C / 8, NTILE = NBI * (NBI + 1);
    for (int q = t; q < NTILE; q += nt) {
      int bi = 0;  // block row bi holds tiles bj = 0 .. 2bi + 1 (columns up to its last row)
      while ((bi + 1) * (bi + 2) <= q) ++bi;
      const int bj = q - bi * (bi + 1);
      float acc[8][4] = {};
#pragma unroll 2
      for (int x = 0; x < K; ++x) {
        const HgF4 ui0 = *reinterpret_cast<const HgF4*>(uT + x * UP + 8 * bi);
        const HgF4 ui1 = *reinterpret_cast<const HgF4*>(uT + x * UP + 8 * bi + 4);
        const HgF4 uj = *reinterpret_cast<const HgF4*>(uT + x * UP + 4 * bj);
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int c4 = 0; c4 < 4; ++c4) {
            acc[r][c4] += ui0.v[r] * uj.v[c4];
            acc[r + 4][c4] += ui1.v[r] * uj.v[c4];
          }
      }
#pragma unroll
      for (int r = 0; r < 8; ++r)
#pragma unroll
        for (int c4 = 0; c4 < 4; ++c4) {
          const int i = 8 * bi + r, j = 4 * bj + c4;
          if (i > j) G[i * GP + j] = bet[i] * kap[j] * exp_(cum[i] - cum[j + 1]) * acc[r][c4];
        }
    }
  }
  sync_threads();
  // 𝒯 = (I + 𝒢)^{-1} in place, as chunk_local inverts its KKT block (16x16 diagonal blocks by f32
  // substitution, the block merge on tensor cores with split-bf16 operands: about 16 mantissa bits).
  invert_unit_lower<C>(G, GP);
  const float* Tm = G;  // lower block triangle: 𝒯 (unit diagonal, zeros above it inside diagonal blocks)

  for (int m = t; m < C; m += nt) colf[m] = bet[m] * exp_(cum[m]) * rk2[m];
  sync_threads();
  unsigned char* ws = static_cast<unsigned char*>(a.workspace);
  float* tri = reinterpret_cast<float*>(ws + W.hgtri) + (slot * H + h) * launch::hypergradTriFloats(C);
  float* vec = reinterpret_cast<float*>(ws + W.hgvec) + (slot * H + h) * launch::hypergradVecFloats(C);
  for (int j = warp(); j < C; j += nt / 32)  // the lower triangle, one warp per row
    for (int m = lane(); m <= j; m += 32) tri[j * (j + 1) / 2 + m] = kap[j] * Tm[j * GP + m] * colf[m];
  for (int j = t; j < C; j += nt) {
    float s = 0.f;
    for (int m = 0; m <= j; ++m) s += Tm[j * GP + m];
    vec[j] = kap[j] * s;
    vec[C + j] = exp_(cum[C] - cum[j + 1]) * rk2[j];  // cum[C] = cum[L]: pad rows add no retention
  }
  if (t < 4) vec[2 * C + t] = t == 0 ? exp_(cum[C]) : 0.f;
}

namespace dev {
/// Starts the cp.async loads of chunk `ci`'s pass operands (key rows, hgtri, hgvec) into stage ci % 2.
template <class Tr>
DGPS_DEV void hypergrad_pass_issue(const ForwardArgs& a, unsigned char* stage, const launch::HypergradPassSmem& SM,
                                   const float* tri, const float* vec, const Seq& sq, int64_t s0, int64_t ci,
                                   int64_t h) {
  constexpr int C = cfg::C, K = cfg::K, KP = cfg::KP, PQ = launch::bf16Pitch(KP), VF = launch::hypergradVecFloats(C),
                TF = launch::hypergradTriFloats(C);
  const int64_t H = a.heads_qk, s = s0 + ci;
  const int L = (int)lmin(C, sq.len - ci * C);
  load_tile16<C, KP>(smem_at<uint16_t>(stage, SM.key), PQ,
                     static_cast<const uint16_t*>(a.k) + ((sq.bos + ci * C) * H + h) * K, H * K, L, K);
  load_tile32<1, TF>(smem_at<float>(stage, SM.tri), TF, tri + (s * H + h) * TF, TF, 1, TF);
  load_tile32<1, VF>(smem_at<float>(stage, SM.vec), VF, vec + (s * H + h) * VF, VF, 1, VF);
  cp_async_commit();
}
}  // namespace dev

/// precond_scan for hypergradChunked(F): one CTA per (sequence, key head), sequential over its chunks.
template <class Tr>
DGPS_DEV void fwd_precond_scan_hypergrad_chunked(const ForwardArgs& a) {
  using namespace dev;
  constexpr launch::FeatureSet F = features<Tr>();
  constexpr int C = cfg::C, K = cfg::K, KP = cfg::KP, PQ = launch::bf16Pitch(KP);
  constexpr launch::HypergradPassSmem SM = launch::hypergradPassSmem(K, C);
  const launch::WorkspaceLayout W = launch::workspaceLayout(F, shape_of<Tr>(a), tile_of());
  const int64_t H = a.heads_qk;
  const int64_t n = block_x() / H, h = block_x() - n * H;
  const Seq sq = seq_of(a, n);
  const int64_t s0 = first_slot(a, n, sq.bos);
  const int64_t nch = (sq.len + C - 1) / C;
  const int t = tid(), nt = nthreads();
  unsigned char* ws = static_cast<unsigned char*>(a.workspace);
  float* pst = reinterpret_cast<float*>(ws + W.pst);
  float* pcoef = reinterpret_cast<float*>(ws + W.pcoef);
  const float* tri = reinterpret_cast<const float*>(ws + W.hgtri);
  const float* vec = reinterpret_cast<const float*>(ws + W.hgvec);
  unsigned char* sm = dyn_smem();
  float* d = smem_at<float>(sm, SM.d);
  float* w = smem_at<float>(sm, SM.w);
  float* cc = smem_at<float>(sm, SM.c);
  float* part = smem_at<float>(sm, SM.part);
  // P lanes per row of the two products (a power of two <= 32: a row's lanes are adjacent in one warp), Q
  // partial sums per channel of the update
  constexpr int NT = launch::kHypergradPassThreads, P = NT / C, Q = NT / K > 0 ? NT / K : 1;
  static_assert(NT % C == 0 && P <= 32 && (P & (P - 1)) == 0, "the pass maps its threads onto the chunk's rows");
  static_assert(K <= NT, "the update needs a thread per key channel");
  if (nt != NT) return;  // launched with launch_rules.h geometry only

  for (int x = t; x < K; x += nt)
    d[x] = a.initial_precond_state != nullptr ? a.initial_precond_state[(n * H + h) * K + x] : Tr::kInit;
  if (nch > 0) hypergrad_pass_issue<Tr>(a, sm, SM, tri, vec, sq, s0, 0, h);
  for (int64_t ci = 0; ci < nch; ++ci) {
    if (ci + 1 < nch) {  // the next chunk's operands do not depend on d: load them under this chunk's work
      hypergrad_pass_issue<Tr>(a, sm + ((ci + 1) & 1) * SM.stage_bytes, SM, tri, vec, sq, s0, ci + 1, h);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    sync_threads();
    unsigned char* stage = sm + (ci & 1) * SM.stage_bytes;
    const uint16_t* sK = smem_at<uint16_t>(stage, SM.key);
    const float* sT = smem_at<float>(stage, SM.tri);
    const float* sV = smem_at<float>(stage, SM.vec);
    const int64_t s = s0 + ci;
    const int L = (int)lmin(C, sq.len - ci * C);
    for (int x = t; x < K; x += nt) pst[(s * H + h) * K + x] = d[x];
    {  // w = (k²) d: P adjacent lanes per row, each over every P-th channel
      const int m = t / P, p = t - m * P;
      float v = 0.f;
      for (int x = p; x < K; x += P) {
        const float k = Act_t::load(sK[m * PQ + x]);
        v += k * k * d[x];
      }
#pragma unroll
      for (int o = P / 2; o >= 1; o >>= 1) v += shfl_xor(v, o);
      if (p == 0) w[m] = v;
    }
    sync_threads();
    {  // c = a − hgtri·w over the lower triangle, same split; 0 for pad rows (never read)
      const int j = t / P, p = t - j * P;
      float v = 0.f;
      const float* row = sT + j * (j + 1) / 2;
      for (int m = p; m <= j; m += P) v += row[m] * w[m];
#pragma unroll
      for (int o = P / 2; o >= 1; o >>= 1) v += shfl_xor(v, o);
      if (p == 0) {
        const float cj = j < L ? sV[j] - v : 0.f;
        cc[j] = sV[C + j] * cj;  // y_j c_j: the update's weight of row j
        pcoef[(s * H + h) * C + j] = cj;
      }
    }
    sync_threads();
    if (t < Q * K) {  // Σ_j y_j c_j k_j², the rows split over Q partial sums per channel
      const int x = t % K, q = t / K;
      float v = 0.f;
      for (int j = q; j < L; j += Q) {
        const float k = Act_t::load(sK[j * PQ + x]);
        v += cc[j] * (k * k);
      }
      part[q * K + x] = v;
    }
    sync_threads();
    const float decay = sV[2 * C];
    for (int x = t; x < K; x += nt) {  // each thread owns its channels of d
      float v = decay * d[x];
      for (int q = 0; q < Q; ++q) v += part[q * K + x];
      d[x] = v;
    }
    sync_threads();  // the stage is refilled by the next iteration's issue
  }
  if (a.final_precond_state != nullptr)
    for (int x = t; x < K; x += nt) a.final_precond_state[(n * H + h) * K + x] = d[x];
}

}  // namespace dgps
