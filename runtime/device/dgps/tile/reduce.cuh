// CTA-wide reductions over register tiles. reduce_sum (of one or two vectors at once) synchronises the CTA
// twice (before writing its shared scratch, so back-to-back calls may share it, and before reading it); contract
// once (between writing and reading its scratch): the caller keeps two contracts on one scratch apart by a
// barrier (the decode's value tiles are), which saves a barrier per value tile.
#pragma once

#include "dgps/device/platform.cuh"
#include "dgps/tile/frag.cuh"
#include "dgps/tile/split_vec.cuh"

namespace dgps {
namespace tile {

/// Σ_d v_d over all elements; every thread gets the result. scratch: NT/32 floats of shared memory.
template <int N, int NT>
DGPS_DEV float reduce_sum(const SplitVec<N, NT>& v, float* scratch) {
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < SplitVec<N, NT>::kN; ++j) s += v.x[j];
  s = dev::warp_sum(s);
  dev::sync_threads();
  if (dev::lane() == 0) scratch[dev::warp()] = s;
  dev::sync_threads();
  float t = 0.f;
#pragma unroll
  for (int w = 0; w < NT / 32; ++w) t += scratch[w];
  return t;
}

namespace detail {
/// out[i] = Σ over the CTA of part[i] (each thread's partial sum), M sums in one exchange: two barriers for all
/// of them. scratch: M·NT/32 floats of shared memory.
template <int NT, int M>
DGPS_DEV void cta_sums(float (&part)[M], float* scratch, float (&out)[M]) {
#pragma unroll
  for (int i = 0; i < M; ++i) part[i] = dev::warp_sum(part[i]);
  dev::sync_threads();
  if (dev::lane() == 0)
#pragma unroll
    for (int i = 0; i < M; ++i) scratch[i * (NT / 32) + dev::warp()] = part[i];
  dev::sync_threads();
#pragma unroll
  for (int i = 0; i < M; ++i) {
    float t = 0.f;
#pragma unroll
    for (int w = 0; w < NT / 32; ++w) t += scratch[i * (NT / 32) + w];
    out[i] = t;
  }
}

/// The calling thread's part of Σ_d v_d.
template <int N, int NT>
DGPS_DEV float thread_sum(const SplitVec<N, NT>& v) {
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < SplitVec<N, NT>::kN; ++j) s += v.x[j];
  return s;
}
}  // namespace detail

/// ra = Σ_d a_d and rb = Σ_d b_d in one exchange (two barriers for both sums, not two each); every thread
/// gets both. scratch: 2·NT/32 floats of shared memory.
template <int N, int NT>
DGPS_DEV void reduce_sum(const SplitVec<N, NT>& a, const SplitVec<N, NT>& b, float* scratch, float& ra, float& rb) {
  float part[2] = {detail::thread_sum(a), detail::thread_sum(b)}, out[2];
  detail::cta_sums<NT, 2>(part, scratch, out);
  ra = out[0];
  rb = out[1];
}

namespace detail {
/// Column sums of NV partial quads over the row groups: first inside the warp (lanes that share a
/// column group), then across warps through scratch [NT/32][NV][BV]. No thread may still be reading scratch
/// (one barrier, between the writes and the reads).
template <int BV, int NT, int NV>
DGPS_DEV void column_sums(float (&p)[NV][4], float* scratch, Quad<BV, NT>* out[NV]) {
  using L = FragLayout<BV, NT>;
#pragma unroll
  for (int m = L::kColGroups; m < 32; m *= 2)
#pragma unroll
    for (int i = 0; i < NV; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) p[i][c] += dev::shfl_xor(p[i][c], m);
  if (dev::lane() < L::kColGroups)
#pragma unroll
    for (int i = 0; i < NV; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) scratch[(dev::warp() * NV + i) * BV + L::col() + c] = p[i][c];
  dev::sync_threads();
#pragma unroll
  for (int i = 0; i < NV; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      float t = 0.f;
#pragma unroll
      for (int w = 0; w < NT / 32; ++w) t += scratch[(w * NV + i) * BV + L::col() + c];
      out[i]->x[c] = t;
    }
}
}  // namespace detail

/// y = Sᵀx (y_c = Σ_k S_kc x_k), x a [KP] shared vector. scratch: (NT/32)·BV floats, not in use.
template <int KP, int BV, int NT>
DGPS_DEV void contract(const RowFrag<KP, BV, NT>& s, const float* x, float* scratch, Quad<BV, NT>& y) {
  float p[1][4] = {{0.f, 0.f, 0.f, 0.f}};
#pragma unroll
  for (int j = 0; j < RowFrag<KP, BV, NT>::kRows; ++j) {
    const float xk = x[RowFrag<KP, BV, NT>::row(j)];
#pragma unroll
    for (int c = 0; c < 4; ++c) p[0][c] += s.x[4 * j + c] * xk;
  }
  Quad<BV, NT>* out[1] = {&y};
  detail::column_sums<BV, NT, 1>(p, scratch, out);
}

/// y = Sᵀx and z = Sᵀw in one pass over S and one exchange. scratch: (NT/32)·2·BV floats, not in use.
template <int KP, int BV, int NT>
DGPS_DEV void contract(const RowFrag<KP, BV, NT>& s, const float* x, const float* w, float* scratch,
                       Quad<BV, NT>& y, Quad<BV, NT>& z) {
  float p[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
  for (int j = 0; j < RowFrag<KP, BV, NT>::kRows; ++j) {
    const int k = RowFrag<KP, BV, NT>::row(j);
    const float xk = x[k], wk = w[k];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      p[0][c] += s.x[4 * j + c] * xk;
      p[1][c] += s.x[4 * j + c] * wk;
    }
  }
  Quad<BV, NT>* out[2] = {&y, &z};
  detail::column_sums<BV, NT, 2>(p, scratch, out);
}

}  // namespace tile
}  // namespace dgps
