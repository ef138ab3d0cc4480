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
// feedbackPassSmem(K, C) at `sm`: kFeedbackPassStages cp.async stages of {rows [C][bf16Pitch(KP)], tri, vec}, so
// the next chunks' operands (which do not depend on d) load under the current chunk's products. The products read
// the rows by 16-byte pieces (w) and channel pairs (the update): the pass is the sequential critical path, and
// per-element reads made its chains twice as long.
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

/// w_m = Σ_x x_mx² d_x by P adjacent lanes per row, each over every P-th 16-byte piece (8 channels) of the row.
template <int C, int KP, int P, class Codec>
DGPS_DEV void feedback_pass_w(float* w, const uint16_t* sK, const float* d, int t) {
  constexpr int PQ = launch::bf16Pitch(KP), CH = KP / 8;
  const int m = t / P, p = t - m * P;
  float v = 0.f;
  for (int pc = p; pc < CH; pc += P) {
    const dev::U4 x = *reinterpret_cast<const dev::U4*>(sK + m * PQ + 8 * pc);
    const dev::F4 d0 = *reinterpret_cast<const dev::F4*>(d + 8 * pc), d1 = *reinterpret_cast<const dev::F4*>(d + 8 * pc + 4);
    const uint32_t wv[4] = {x.x, x.y, x.z, x.w};
    const float dv[8] = {d0.x, d0.y, d0.z, d0.w, d1.x, d1.y, d1.z, d1.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float a0 = Codec::load((uint16_t)(wv[e] & 0xffffu)), a1 = Codec::load((uint16_t)(wv[e] >> 16));
      v += a0 * a0 * dv[2 * e] + a1 * a1 * dv[2 * e + 1];
    }
  }
#pragma unroll
  for (int o = P / 2; o >= 1; o >>= 1) v += dev::shfl_xor(v, o);
  if (p == 0) w[m] = v;
}

/// part[q][x] = Σ_{j ≡ q (mod Q), j < L} cc_j x_jx² for a channel pair per thread and Q = threads / (KP/2) row
/// classes (the caller adds the Q partial sums).
template <int KP, int NT, class Codec>
DGPS_DEV void feedback_pass_update(float* part, const uint16_t* sK, const float* cc, int L, int t) {
  constexpr int PQ = launch::bf16Pitch(KP), KH = KP / 2, Q = NT / KH;
  static_assert(Q >= 1 && Q * KP <= 2 * NT, "the partial sums fit their region");
  if (t >= Q * KH) return;
  const int xp = t % KH, q = t / KH;
  float v0 = 0.f, v1 = 0.f;
  for (int j = q; j < L; j += Q) {
    const uint32_t kk = *reinterpret_cast<const uint32_t*>(sK + j * PQ + 2 * xp);
    const float k0 = Codec::load((uint16_t)(kk & 0xffffu)), k1 = Codec::load((uint16_t)(kk >> 16)), cj = cc[j];
    v0 += cj * (k0 * k0);
    v1 += cj * (k1 * k1);
  }
  part[q * KP + 2 * xp] = v0;
  part[q * KP + 2 * xp + 1] = v1;
}

/// The pass over the `len` tokens of one sequence (file comment).
template <int C, int K, int KP, class Codec>
DGPS_DEV void feedback_chunk_pass(unsigned char* sm, const FeedbackPassIo& in, int64_t len, const float* s0,
                                   float absent, float* fin) {
  // the pointers as registers: ptxas would otherwise rebuild them from the kernel's parameters at every chunk
  FeedbackPassIo io = in;
  io.key = dev::opaque(io.key);
  io.tri = dev::opaque(io.tri);
  io.vec = dev::opaque(io.vec);
  io.starts = dev::opaque(io.starts);
  io.coef = dev::opaque(io.coef);
  constexpr FeedbackPassSmem SM = feedbackPassSmem(K, C);
  // P lanes per row of the two products (a power of two <= 32: a row's lanes are adjacent in one warp), Q
  // partial sums per channel pair of the update
  constexpr int NT = tile::kFeedbackPassThreads, P = NT / C, NS = kFeedbackPassStages, Q = NT / (KP / 2);
  static_assert(NT % C == 0 && P <= 32 && (P & (P - 1)) == 0, "the pass maps its threads onto the chunk's rows");
  static_assert(KP / 2 <= NT, "the update needs a thread per channel pair");
  static_assert(NS == 3, "the waits below count three stages");
  const int t = dev::tid(), nt = dev::nthreads();
  if (nt != NT) return;  // launched with the launch contract's kFeedbackPassThreads only
  const int64_t nch = (len + C - 1) / C;
  float* d = dev::smem_at<float>(sm, SM.d);
  float* w = dev::smem_at<float>(sm, SM.w);
  float* cc = dev::smem_at<float>(sm, SM.c);
  float* part = dev::smem_at<float>(sm, SM.part);
  auto rows = [&](int64_t ci) { return (int)dev::lmin(C, len - ci * C); };
  auto issue = [&](int64_t ci) { feedback_pass_issue<C, KP>(sm + (ci % NS) * SM.stage_bytes, SM, io, ci, rows(ci), K); };

  for (int x = t; x < KP; x += nt) d[x] = x >= K ? 0.f : s0 != nullptr ? s0[x] : absent;  // pad channels stay 0
  for (int64_t ci = 0; ci < nch && ci < NS - 1; ++ci) issue(ci);
  for (int64_t ci = 0; ci < nch; ++ci) {
    // the stage of chunk ci + 2 held chunk ci − 1, whose readers passed the barrier ending that iteration
    if (ci + 2 < nch) {
      issue(ci + 2);
      dev::cp_async_wait<2>();
    } else if (ci + 1 < nch) {
      dev::cp_async_wait<1>();
    } else {
      dev::cp_async_wait<0>();
    }
    dev::sync_threads();
    unsigned char* stage = sm + (ci % NS) * SM.stage_bytes;
    const uint16_t* sK = dev::smem_at<uint16_t>(stage, SM.key);
    const float* sT = dev::smem_at<float>(stage, SM.tri);
    const float* sV = dev::smem_at<float>(stage, SM.vec);
    const int L = rows(ci);
    float* const st = io.starts + ci * io.slot_stride * K;
    for (int x = t; x < K; x += nt) st[x] = d[x];
    feedback_pass_w<C, KP, P, Codec>(w, sK, d, t);
    dev::sync_threads();
    {  // coef = a − tri·w over the lower triangle, P lanes per row; 0 for pad rows (never read)
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
    feedback_pass_update<KP, NT, Codec>(part, sK, cc, L, t);  // Σ_j y_j coef_j x_j²
    dev::sync_threads();
    const float decay = sV[2 * C];
    for (int x = t; x < K; x += nt) {  // each thread owns its channels of d
      float v = decay * d[x];
      for (int q = 0; q < Q; ++q) v += part[q * KP + x];
      d[x] = v;
    }
    dev::sync_threads();  // the stage is refilled two iterations on
  }
  if (fin != nullptr)
    for (int x = t; x < K; x += nt) fin[x] = d[x];
}

}  // namespace tile
}  // namespace dgps
