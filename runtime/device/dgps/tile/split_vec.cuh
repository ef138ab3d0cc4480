// SplitVec<N, NT>: a length-N f32 vector held by the NT threads of a CTA, element d in thread d % NT,
// slot d / NT. Loaded from / stored to global memory with masking past `valid`, and published to shared
// memory so that every thread can read every element.
#pragma once

#include "dgps/device/platform.cuh"

namespace dgps {
namespace tile {

template <int N, int NT>
struct SplitVec {
  static constexpr int kN = (N + NT - 1) / NT;  ///< slots per thread
  float x[kN];
  /// The element index of slot s in the calling thread.
  DGPS_DEV static int index(int s) { return dev::tid() + NT * s; }
};

/// v_d = p[d] for d < valid, 0 otherwise (16-bit elements through Codec).
template <int N, int NT, class Codec>
DGPS_DEV SplitVec<N, NT> load_split(const uint16_t* p, int valid) {
  SplitVec<N, NT> v;
#pragma unroll
  for (int s = 0; s < SplitVec<N, NT>::kN; ++s) {
    const int d = SplitVec<N, NT>::index(s);
    v.x[s] = d < valid ? Codec::load(p[d]) : 0.f;
  }
  return v;
}
template <int N, int NT, class Codec>
DGPS_DEV SplitVec<N, NT> load_split(const float* p, int valid) {
  SplitVec<N, NT> v;
#pragma unroll
  for (int s = 0; s < SplitVec<N, NT>::kN; ++s) {
    const int d = SplitVec<N, NT>::index(s);
    v.x[s] = d < valid ? p[d] : 0.f;
  }
  return v;
}

/// p[d] = v_d for d < valid.
template <int N, int NT>
DGPS_DEV void store_split(const SplitVec<N, NT>& v, float* p, int valid) {
#pragma unroll
  for (int s = 0; s < SplitVec<N, NT>::kN; ++s) {
    const int d = SplitVec<N, NT>::index(s);
    if (d < valid) p[d] = v.x[s];
  }
}

/// s[d] = v_d for every d < N (pad elements included); visible to all threads after the next barrier.
template <int N, int NT>
DGPS_DEV void to_smem(const SplitVec<N, NT>& v, float* s) {
#pragma unroll
  for (int j = 0; j < SplitVec<N, NT>::kN; ++j) {
    const int d = SplitVec<N, NT>::index(j);
    if (d < N) s[d] = v.x[j];
  }
}

}  // namespace tile
}  // namespace dgps
