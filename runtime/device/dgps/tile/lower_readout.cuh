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

/// Oᵀ (this warp's 16 value columns x C rows, accumulator fragments: O[n8] holds value columns 16w + g and
/// 16w + 8 + g of rows 8·n8 + 2t, +1) into the row-major staging tile sStage[row][16w + ...] (pitch PV, a
/// multiple of 8; the tile 16-byte aligned). With stmatrix .trans (sm_90) one instruction writes four 8x8
/// blocks, where element stores take 16 per 16 rows.
template <int C, int PV, class Codec>
DGPS_DEV void stage_rows(const float (&O)[C / 8][4], uint16_t* sStage, int w) {
  const int l = dev::lane();
  auto pack = [](float lo, float hi) { return (uint32_t)Codec::store(lo) | ((uint32_t)Codec::store(hi) << 16); };
#if DGPS_HAS_STMATRIX
  static_assert(C % 16 == 0, "stmatrix stages two 8-row blocks at a time");
  // matrix i of a group: rows 8·(n8 + (i & 1)), value columns 16w + 8·(i >> 1); lane l addresses matrix l / 8, row l % 8
  const int mi = l >> 3, rr = l & 7;
#pragma unroll
  for (int n8 = 0; n8 < C / 8; n8 += 2) {
    const uint32_t r[4] = {pack(O[n8][0], O[n8][1]), pack(O[n8 + 1][0], O[n8 + 1][1]), pack(O[n8][2], O[n8][3]),
                           pack(O[n8 + 1][2], O[n8 + 1][3])};
    dev::stsm_x4_trans(sStage + (8 * (n8 + (mi & 1)) + rr) * PV + 16 * w + 8 * (mi >> 1), r);
  }
#else
  const int g = l >> 2, t = l & 3;
  (void)pack;
#pragma unroll
  for (int n8 = 0; n8 < C / 8; ++n8)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = 8 * n8 + 2 * t + (e & 1), vl = 16 * w + g + 8 * (e >> 1);
      sStage[i * PV + vl] = Codec::store(O[n8][e]);
    }
#endif
}

/// The chunk's rows i < Lr of Oᵀ to `out` (row i at out + i·stride, value columns v0.. < V), through the
/// staging tile: each warp stages its 16 columns (stage_rows); kWholeRows: the CTA then stores whole 16-byte
/// pieces of each row after group_sync (rows of V·2 bytes that are not a multiple of 32 leave no half-written
/// sector), else each warp stores its own 16 columns.
template <int C, int PV, int BV, bool kWholeRows, class Codec, class GroupSync>
DGPS_DEV void store_rows(const float (&O)[C / 8][4], uint16_t* sStage, int w, uint16_t* out, int64_t stride, int v0,
                         int V, int Lr, int ct, int nt, GroupSync group_sync) {
  const int l = dev::lane();
  dev::sync_warp();
  stage_rows<C, PV, Codec>(O, sStage, w);
  if constexpr (!kWholeRows) {
    dev::sync_warp();
    // lane l: the 16-byte piece l % 2 of the warp's 16 columns, rows l / 2, l / 2 + 16, ...
    const int i0 = l >> 1, vl = 16 * w + 8 * (l & 1);
    if (v0 + vl >= V) return;
    const uint16_t* src = sStage + i0 * PV + vl;
    uint16_t* dst = out + i0 * stride + v0 + vl;
    for (int i = i0; i < Lr; i += 16, src += 16 * PV, dst += 16 * stride)
      *reinterpret_cast<dev::U4*>(dst) = *reinterpret_cast<const dev::U4*>(src);
  } else {
    group_sync();
    constexpr int CPR = BV / 8;  // 16-byte pieces per row of the staging tile
    if (nt % CPR == 0) {
      // the thread's piece column, walked by pointer steps (the cells of the flat order below; see
      // dev::cp_async_column)
      const int p = ct % CPR, step = nt / CPR, i0 = ct / CPR;
      if (v0 + 8 * p >= V) return;
      const uint16_t* src = sStage + i0 * PV + 8 * p;
      uint16_t* dst = out + i0 * stride + v0 + 8 * p;
      for (int i = i0; i < Lr; i += step, src += step * PV, dst += step * stride)
        *reinterpret_cast<dev::U4*>(dst) = *reinterpret_cast<const dev::U4*>(src);
      return;
    }
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
