// The read-out of one chunk of a state walk, in the fragment layout of state_rows_product.cuh:
//   lower_readout:    Oᵀ = XAᵀ diag(a) + Nᵀ Lᵀ    (in place over XA; L a lower-triangular bf16 [C, C] tile,
//                     pitch PC; a a column of a [C][RS] f32 record). NA receives N as bf16 A fragments, which
//                     the caller may reuse as scratch afterwards.
//   store_warp_rows:  rows i < Lr of Oᵀ's 16 value columns to global memory through the warp's 16 columns of a
//                     16-bit [C, ·] staging tile (pitch PV; only this warp touches them), 16 bytes per access:
//                     dst(i, v) = out[i·stride + v] for value columns vw .. vw+15 below V.
#pragma once

#include "dgps/device/common.cuh"

namespace dgps {
namespace tile {

template <int C, int PC, int RS>
DGPS_DEV void lower_readout(float (&XA)[C / 8][4], uint32_t (&NA)[C / 16][4], const float (&N)[C / 8][4],
                            const float* a, const uint16_t* sL) {
  const int t = dev::lane() & 3;
#pragma unroll
  for (int ks = 0; ks < C / 16; ++ks) dev::acc_to_a(NA[ks], N[2 * ks], N[2 * ks + 1]);
#pragma unroll
  for (int nt = 0; nt < C / 8; ++nt) {
    const int i0 = 8 * nt + 2 * t;
    const float c0 = a[i0 * RS], c1 = a[(i0 + 1) * RS];
    XA[nt][0] *= c0;
    XA[nt][1] *= c1;
    XA[nt][2] *= c0;
    XA[nt][3] *= c1;
  }
#pragma unroll
  for (int p = 0; p < C / 16; ++p)
#pragma unroll
    for (int ks = 0; ks <= p; ++ks) {
      uint32_t b[4];
      dev::lds_b_nk(b, sL, PC, 16 * p, 16 * ks);
      dev::mma_bf16(XA[2 * p], NA[ks], b[0], b[1]);
      dev::mma_bf16(XA[2 * p + 1], NA[ks], b[2], b[3]);
    }
}

template <int C, int PV, class Codec>
DGPS_DEV void store_warp_rows(const float (&O)[C / 8][4], uint16_t* sStage, int w, uint16_t* out, int64_t stride,
                              int vw, int V, int Lr) {
  const int l = dev::lane(), g = l >> 2, t = l & 3;
  dev::sync_warp();
#pragma unroll
  for (int nt = 0; nt < C / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = 8 * nt + 2 * t + (e & 1), vl = 16 * w + g + 8 * (e >> 1);
      sStage[i * PV + vl] = Codec::store(O[nt][e]);
    }
  dev::sync_warp();
  for (int e = l; e < Lr * 2; e += 32) {
    const int i = e >> 1, half = e & 1;
    const int vcol = vw + 8 * half;
    if (vcol < V) {
      const dev::U4 x = *reinterpret_cast<const dev::U4*>(sStage + i * PV + 16 * w + 8 * half);
      *reinterpret_cast<dev::U4*>(out + i * stride + vcol) = x;
    }
  }
}

}  // namespace tile
}  // namespace dgps
