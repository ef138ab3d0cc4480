// Products of the register state with the chunk's key-side rows: XAᵀ = Sᵀ Aᵀ and, when kTwo, XBᵀ = Sᵀ Bᵀ
// (A, B bf16 [C, KP] shared tiles in core-matrix order, common.cuh core_off<C>; S as in state_frag.cuh). The
// results are [V-rows of the warp, C] accumulator fragments X[nt][e] at value row g + 8·(e >> 1), chunk row
// 8·nt + 2t + (e & 1). The state enters as bf16 (also for fp16 inputs: |S| may exceed 65504). With kWG
// (sm_90a, C = 32 or 64, whole warpgroups) one warpgroup MMA (m64nCk16) per 16 key columns reads each B tile
// once per warpgroup; otherwise mma.sync. One pass over S serves both products.
// kSplit (warpgroup MMA only) forms the bf16 A fragments of S a quarter of the key columns at a time (16 columns
// at a time below KP = 128) and waits for each part's MMAs before forming the next: at KP = 128 that keeps 8
// fragment registers live instead of 32, for three more waits. It is how a walk under a 128-register cap (two
// 256-thread CTAs per SM, launch_rules.h segmentSummaryCtasPerSm) holds S, the fragments and the products without
// spilling.
#pragma once

#include "dgps/device/common.cuh"

namespace dgps {
namespace tile {

template <int C, int KP, bool kWG, bool kTwo, bool kSplit = false>
DGPS_DEV void state_times_rows(float (&XA)[C / 8][4], float (&XB)[C / 8][4], const float (&S)[KP / 8][4],
                               const uint16_t* sA, const uint16_t* sB) {
#pragma unroll
  for (int nt = 0; nt < C / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) XA[nt][e] = XB[nt][e] = 0.f;
  if constexpr (kWG) {
    static_assert(!kWG || C == 32 || C == 64, "tile: warpgroup MMA needs C = 32 or 64 (N of m64nCk16)");
    // A fragments of kPer key-column steps per part; within a part all of them are formed first, so no register
    // feeding a wgmma is written between fence and wait
    constexpr int kSteps = KP / 16, kPer = kSplit && kSteps >= 4 ? kSteps / 4 : kSplit ? 1 : kSteps;
    static_assert(kSteps % kPer == 0, "tile: the key-column steps split into whole parts");
#pragma unroll
    for (int p0 = 0; p0 < kSteps; p0 += kPer) {
      uint32_t A[kPer][4];
#pragma unroll
      for (int i = 0; i < kPer; ++i) dev::acc_to_a(A[i], S[2 * (p0 + i)], S[2 * (p0 + i) + 1]);
      dev::wgmma_fence();
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int ks = p0 + i;
        dev::wgmma_n<C>(&XA[0][0], A[i], dev::wgmma_desc(sA + dev::core_off<C>(0, 16 * ks), 16 * C, 128));
        if (kTwo) dev::wgmma_n<C>(&XB[0][0], A[i], dev::wgmma_desc(sB + dev::core_off<C>(0, 16 * ks), 16 * C, 128));
      }
      dev::wgmma_commit();
      dev::wgmma_wait0();
    }
  } else {
#pragma unroll
    for (int ks = 0; ks < KP / 16; ++ks) {
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
  }
}

}  // namespace tile
}  // namespace dgps
