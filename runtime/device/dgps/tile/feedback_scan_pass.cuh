// The pass over chunks of a chunked feedback scan (the recurrence d ← ρ_t d + c_t u_t with the step coefficient
// c_t = κ_t (1 − β_t ⟨d, u_t⟩) reading the state; feedback_scan_summary.cuh, docs/math.md §5.2 "Chunked form"):
// for one sequence and head, sequential over its chunks (the critical path), from the chunk summaries that
// feedback_scan_summary.cuh wrote (tri, vec) and the raw rows x:
//   starts[c] = d;   w_m = Σ_x x_mx² d_x;   coef_j = a_j − Σ_{m<=j} tri_jm w_m (0 on pad rows);
//   d ← L_C d + Σ_j y_j coef_j x_j²
// from d = s0 (the value `absent` in every channel when s0 is null); fin receives d after the last chunk.
// coef is the token-by-token scan's step coefficient c_t (feedback_token_scan.cuh), so the kernels that rebuild
// d inside a chunk from (starts, coef) do not depend on which form ran.
//
// Launch: kFeedbackPassThreads threads (other block sizes return at once), shared memory feedback_scan_layout.h
// feedbackPassSmem(K, C) at `sm`: two cp.async stages of {rows [C][bf16Pitch(KP)], tri, vec}, so the next
// chunk's operands (which do not depend on d) load under the current chunk's products.
#pragma once

#include "dgps/device/common.cuh"
#include "dgps/tile/feedback_scan_layout.h"

namespace dgps {
namespace tile {

/// Where the pass reads and writes, each at the sequence's first chunk and the CTA's key head: the key rows
/// (row stride `key_stride` elements), the summaries (`slot_stride` (chunk slot, key head) entries per chunk),
/// the chunk-start states starts[c][K] and the coefficients coef[c][C] (same chunk stride).
struct FeedbackPassIo {
  const uint16_t* key = nullptr;
  int64_t key_stride = 0;
  const float* tri = nullptr;
  const float* vec = nullptr;
  float* starts = nullptr;
  float* coef = nullptr;
  int64_t slot_stride = 0;
};

/// Starts the cp.async loads of chunk ci's key rows (Lr of them), tri and vec into `stage`.
template <int C, int KP>
DGPS_DEV void feedback_pass_issue(unsigned char* stage, const FeedbackPassSmem& SM,
                                   const FeedbackPassIo& io, int64_t ci, int Lr, int K) {
  constexpr int PQ = launch::bf16Pitch(KP), VF = tile::feedbackVecFloats(C), TF = tile::feedbackTriFloats(C);
  dev::load_tile16<C, KP>(dev::smem_at<uint16_t>(stage, SM.key), PQ, io.key + ci * C * io.key_stride,
                          io.key_stride, Lr, K);
  dev::load_tile32<1, TF>(dev::smem_at<float>(stage, SM.tri), TF, io.tri + ci * io.slot_stride * TF, TF, 1, TF);
  dev::load_tile32<1, VF>(dev::smem_at<float>(stage, SM.vec), VF, io.vec + ci * io.slot_stride * VF, VF, 1, VF);
  dev::cp_async_commit();
}

/// The pass over the `len` tokens of one sequence (file comment).
template <int C, int K, int KP, class Codec>
DGPS_DEV void feedback_chunk_pass(unsigned char* sm, const FeedbackPassIo& io, int64_t len, const float* s0,
                                   float absent, float* fin) {
  constexpr int PQ = launch::bf16Pitch(KP);
  constexpr FeedbackPassSmem SM = feedbackPassSmem(K, C);
  // P lanes per row of the two products (a power of two <= 32: a row's lanes are adjacent in one warp), Q
  // partial sums per channel of the update
  constexpr int NT = tile::kFeedbackPassThreads, P = NT / C, Q = NT / K > 0 ? NT / K : 1;
  static_assert(NT % C == 0 && P <= 32 && (P & (P - 1)) == 0, "the pass maps its threads onto the chunk's rows");
  static_assert(K <= NT, "the update needs a thread per key channel");
  const int t = dev::tid(), nt = dev::nthreads();
  if (nt != NT) return;  // launched with the launch contract's kFeedbackPassThreads only
  const int64_t nch = (len + C - 1) / C;
  float* d = dev::smem_at<float>(sm, SM.d);
  float* w = dev::smem_at<float>(sm, SM.w);
  float* cc = dev::smem_at<float>(sm, SM.c);
  float* part = dev::smem_at<float>(sm, SM.part);
  auto rows = [&](int64_t ci) { return (int)dev::lmin(C, len - ci * C); };

  for (int x = t; x < K; x += nt) d[x] = s0 != nullptr ? s0[x] : absent;
  if (nch > 0) feedback_pass_issue<C, KP>(sm, SM, io, 0, rows(0), K);
  for (int64_t ci = 0; ci < nch; ++ci) {
    if (ci + 1 < nch) {  // the next chunk's operands do not depend on d: load them under this chunk's work
      feedback_pass_issue<C, KP>(sm + ((ci + 1) & 1) * SM.stage_bytes, SM, io, ci + 1, rows(ci + 1), K);
      dev::cp_async_wait<1>();
    } else {
      dev::cp_async_wait<0>();
    }
    dev::sync_threads();
    unsigned char* stage = sm + (ci & 1) * SM.stage_bytes;
    const uint16_t* sK = dev::smem_at<uint16_t>(stage, SM.key);
    const float* sT = dev::smem_at<float>(stage, SM.tri);
    const float* sV = dev::smem_at<float>(stage, SM.vec);
    const int L = rows(ci);
    float* const st = io.starts + ci * io.slot_stride * K;
    for (int x = t; x < K; x += nt) st[x] = d[x];
    {  // w = (x²) d: P adjacent lanes per row, each over every P-th channel
      const int m = t / P, p = t - m * P;
      float v = 0.f;
      for (int x = p; x < K; x += P) {
        const float k = Codec::load(sK[m * PQ + x]);
        v += k * k * d[x];
      }
#pragma unroll
      for (int o = P / 2; o >= 1; o >>= 1) v += dev::shfl_xor(v, o);
      if (p == 0) w[m] = v;
    }
    dev::sync_threads();
    {  // coef = a − tri·w over the lower triangle, same split; 0 for pad rows (never read)
      const int j = t / P, p = t - j * P;
      float v = 0.f;
      const float* row = sT + j * (j + 1) / 2;
      for (int m = p; m <= j; m += P) v += row[m] * w[m];
#pragma unroll
      for (int o = P / 2; o >= 1; o >>= 1) v += dev::shfl_xor(v, o);
      if (p == 0) {
        const float cj = j < L ? sV[j] - v : 0.f;
        cc[j] = sV[C + j] * cj;  // y_j coef_j: the update's weight of row j
        io.coef[ci * io.slot_stride * C + j] = cj;
      }
    }
    dev::sync_threads();
    if (t < Q * K) {  // Σ_j y_j coef_j x_j², the rows split over Q partial sums per channel
      const int x = t % K, q = t / K;
      float v = 0.f;
      for (int j = q; j < L; j += Q) {
        const float k = Codec::load(sK[j * PQ + x]);
        v += cc[j] * (k * k);
      }
      part[q * K + x] = v;
    }
    dev::sync_threads();
    const float decay = sV[2 * C];
    for (int x = t; x < K; x += nt) {  // each thread owns its channels of d
      float v = decay * d[x];
      for (int q = 0; q < Q; ++q) v += part[q * K + x];
      d[x] = v;
    }
    dev::sync_threads();  // the stage is refilled by the next iteration's issue
  }
  if (fin != nullptr)
    for (int x = t; x < K; x += nt) fin[x] = d[x];
}

}  // namespace tile
}  // namespace dgps
