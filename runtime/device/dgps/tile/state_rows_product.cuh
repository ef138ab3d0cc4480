// Products of the register state with the chunk's key-side rows: XAᵀ = Sᵀ Aᵀ and, when kTwo, XBᵀ = Sᵀ Bᵀ
// (A, B bf16 [C, KP] shared tiles in core-matrix order, common.cuh core_off<C>; S as in state_frag.cuh, NS
// fragments deduced). The results are [V-rows of the warp, C] accumulator fragments X[nt][e] at value row
// g + 8·(e >> 1), chunk row 8·nt + 2t + (e & 1). The state enters as bf16 (also for fp16 inputs: |S| may exceed
// 65504). With kWG (sm_90a, C = 64, whole warpgroups) one warpgroup MMA per 16 key columns reads each B tile
// once per warpgroup; otherwise mma.sync. One pass over S serves both products.
// When K is 8 mod 16 (NS odd) the last key fragment is a depth-8 step: mma.m16n8k8 on the mma.sync path, so
// the tiles' pad channels are never read; the warpgroup MMA has no 8-deep bf16 shape, so there the last step
// stays 16 deep with a zero upper A half (the tiles' pad channels must then be finite: the loaders zero them).
#pragma once

#include "dgps/tile/state_frag.cuh"

namespace dgps {
namespace tile {

template <int C, int KP, bool kWG, bool kTwo, int NS>
DGPS_DEV void state_times_rows(float (&XA)[C / 8][4], float (&XB)[C / 8][4], const float (&S)[NS][4],
                               const uint16_t* sA, const uint16_t* sB) {
  using SF = StateFrags<KP, NS>;
#pragma unroll
  for (int nt = 0; nt < C / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) XA[nt][e] = XB[nt][e] = 0.f;
  if (kWG) {
    static_assert(!kWG || C == 64, "tile: warpgroup MMA needs C = 64 (N of m64n64k16)");
    constexpr int NK = SF::kPairs + (SF::kTail ? 1 : 0);  // 16-deep steps
    // all A fragments first, so no register feeding a wgmma is written between fence and wait
    uint32_t A[NK][4];
#pragma unroll
    for (int ks = 0; ks < SF::kPairs; ++ks) dev::acc_to_a(A[ks], S[2 * ks], S[2 * ks + 1]);
    if constexpr (SF::kTail) {
      A[NK - 1][0] = dev::pack_bf16(S[NS - 1][0], S[NS - 1][1]);
      A[NK - 1][1] = dev::pack_bf16(S[NS - 1][2], S[NS - 1][3]);
      A[NK - 1][2] = A[NK - 1][3] = 0u;  // the pad channels K .. K+7
    }
    dev::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < NK; ++ks) {
      dev::wgmma_m64n64k16(&XA[0][0], A[ks], dev::wgmma_desc(sA + dev::core_off<C>(0, 16 * ks), 16 * C, 128));
      if (kTwo) dev::wgmma_m64n64k16(&XB[0][0], A[ks], dev::wgmma_desc(sB + dev::core_off<C>(0, 16 * ks), 16 * C, 128));
    }
    dev::wgmma_commit();
    dev::wgmma_wait0();
  } else {
#pragma unroll
    for (int ks = 0; ks < SF::kPairs; ++ks) {
      uint32_t A[4];
      dev::acc_to_a(A, S[2 * ks], S[2 * ks + 1]);
#pragma unroll
      for (int p = 0; p < C / 16; ++p) {
        uint32_t b[4];
        dev::lds_b_nk_core<C>(b, sA, 16 * p, 16 * ks);
        dev::mma_bf16(XA[2 * p], A, b[0], b[1]);
        dev::mma_bf16(XA[2 * p + 1], A, b[2], b[3]);
        if (kTwo) {
          dev::lds_b_nk_core<C>(b, sB, 16 * p, 16 * ks);
          dev::mma_bf16(XB[2 * p], A, b[0], b[1]);
          dev::mma_bf16(XB[2 * p + 1], A, b[2], b[3]);
        }
      }
    }
    if constexpr (SF::kTail) {  // key columns 8·(NS−1) .. 8·NS−1, depth 8
      const uint32_t a0 = dev::pack_bf16(S[NS - 1][0], S[NS - 1][1]), a1 = dev::pack_bf16(S[NS - 1][2], S[NS - 1][3]);
      constexpr int k0 = 8 * (NS - 1);
#pragma unroll
      for (int p = 0; p < C / 16; ++p) {
        uint32_t b[2];
        dev::lds_b_nk_core_k8<C>(b, sA, 16 * p, k0);
        dev::mma_bf16_k8(XA[2 * p], a0, a1, b[0]);
        dev::mma_bf16_k8(XA[2 * p + 1], a0, a1, b[1]);
        if (kTwo) {
          dev::lds_b_nk_core_k8<C>(b, sB, 16 * p, k0);
          dev::mma_bf16_k8(XB[2 * p], a0, a1, b[0]);
          dev::mma_bf16_k8(XB[2 * p + 1], a0, a1, b[1]);
        }
      }
    }
  }
}

}  // namespace tile
}  // namespace dgps
