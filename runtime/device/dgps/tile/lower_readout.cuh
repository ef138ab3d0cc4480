// The read-out of one chunk of a state walk, in the fragment layout of state_rows_product.cuh:
//   lower_readout:    Oᵀ = XAᵀ diag(a) + Nᵀ Lᵀ    (in place over XA; L a lower-triangular bf16 [C, C] tile
//                     staged by lower_tile.cuh load_lower_tile, pitch PC; a a column of a [C][RS] f32
//                     record). NA receives N as bf16 A fragments, which the caller may reuse as scratch afterwards.
//   store_rows:       rows i < Lr of Oᵀ to global memory through a 16-bit [C, BV] staging tile (pitch PV; each
//                     warp w writes its 16 columns 16w .. 16w+15), 16 bytes per access: dst(i, v) = out[i·stride + v]
//                     for value columns v0 + 16w + .. below V. With 32-byte aligned rows (kWholeRows false) each warp
//                     stores its own 32-byte slice of every row, with no group barrier. When a row of `out` is not
//                     32-byte aligned (V·2 bytes not a multiple of 32, e.g. V = 120) such a slice would straddle two
//                     sectors, so the group's nt threads store whole rows together after group_sync(); the staging
//                     tile must then stay untouched until the caller's next group barrier.
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

template <int C, int PV, int BV, bool kWholeRows, class Codec, class GroupSync>
DGPS_DEV void store_rows(const float (&O)[C / 8][4], uint16_t* sStage, int w, uint16_t* out, int64_t stride, int v0,
                         int V, int Lr, int ct, int nt, GroupSync group_sync) {
  const int l = dev::lane(), g = l >> 2, t = l & 3;
  dev::sync_warp();
#pragma unroll
  for (int n8 = 0; n8 < C / 8; ++n8)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = 8 * n8 + 2 * t + (e & 1), vl = 16 * w + g + 8 * (e >> 1);
      sStage[i * PV + vl] = Codec::store(O[n8][e]);
    }
  if constexpr (!kWholeRows) {
    dev::sync_warp();
    for (int e = l; e < Lr * 2; e += 32) {
      const int i = e >> 1, vl = 16 * w + 8 * (e & 1);
      if (v0 + vl < V)
        *reinterpret_cast<dev::U4*>(out + i * stride + v0 + vl) =
            *reinterpret_cast<const dev::U4*>(sStage + i * PV + vl);
    }
  } else {
    group_sync();
    constexpr int CPR = BV / 8;  // 16-byte pieces per row of the staging tile
    for (int e = ct; e < Lr * CPR; e += nt) {
      const int i = e / CPR, vl = 8 * (e - i * CPR);
      if (v0 + vl < V)
        *reinterpret_cast<dev::U4*>(out + i * stride + v0 + vl) =
            *reinterpret_cast<const dev::U4*>(sStage + i * PV + vl);
    }
  }
}

}  // namespace tile
}  // namespace dgps
