// The rank-C update of the register state (state_frag.cuh layout) by one chunk:
//   Sᵀ ← Sᵀ + (Nᵀ diag(w)) Kw
// N the value-side operand (value_residual.cuh layout), w a column of a [C][RS] f32 record, Kw a bf16
// [C, KP] shared tile in core-matrix order (common.cuh core_off<C>). Nᵀ diag(w) enters the tensor cores as
// bf16 through NA (scratch of C/16 A fragments, overwritten).
// With kWG (sm_90a, whole warpgroups) and KP of 64 or 128 the state is the accumulator of one warpgroup MMA per
// 16 chunk rows: Kw is read once per warpgroup as an MN-major B operand (a core matrix of Kw holds 8 chunk rows
// of 8 contiguous key columns, which is the transposed layout), instead of once per warp through ldmatrix.
// The register state's layout (state_frag.cuh) is the wgmma accumulator's.
#pragma once

#include "dgps/device/common.cuh"

namespace dgps {
namespace tile {

template <int C, int KP, int RS, bool kWG = false>
DGPS_DEV void state_rank_update(float (&S)[KP / 8][4], uint32_t (&NA)[C / 16][4], const float (&N)[C / 8][4],
                                const float* w, const uint16_t* sKw) {
  const int t = dev::lane() & 3;
#pragma unroll
  for (int ks = 0; ks < C / 16; ++ks) {
    const int j0 = 16 * ks + 2 * t, j1 = j0 + 8;
    const float w00 = w[j0 * RS], w01 = w[(j0 + 1) * RS];
    const float w10 = w[j1 * RS], w11 = w[(j1 + 1) * RS];
    NA[ks][0] = dev::pack_bf16(N[2 * ks][0] * w00, N[2 * ks][1] * w01);
    NA[ks][1] = dev::pack_bf16(N[2 * ks][2] * w00, N[2 * ks][3] * w01);
    NA[ks][2] = dev::pack_bf16(N[2 * ks + 1][0] * w10, N[2 * ks + 1][1] * w11);
    NA[ks][3] = dev::pack_bf16(N[2 * ks + 1][2] * w10, N[2 * ks + 1][3] * w11);
  }
  if constexpr (kWG && (KP == 64 || KP == 128)) {
    dev::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < C / 16; ++ks) {
      // K steps over chunk rows (8 rows = one 128-byte core matrix), N over key columns (8 columns = 16·C bytes)
      const uint64_t desc = dev::wgmma_desc(sKw + dev::core_off<C>(16 * ks, 0), 128, 16 * C);
      dev::wgmma_n<KP, 1>(&S[0][0], NA[ks], desc);  // B MN-major
    }
    dev::wgmma_commit();
    dev::wgmma_wait0();
  } else {
#pragma unroll
    for (int qd = 0; qd < KP / 16; ++qd)
#pragma unroll
      for (int ks = 0; ks < C / 16; ++ks) {
        uint32_t b[4];
        dev::lds_b_kn_core<C>(b, sKw, 16 * ks, 16 * qd);
        dev::mma_bf16(S[2 * qd], NA[ks], b[0], b[1]);
        dev::mma_bf16(S[2 * qd + 1], NA[ks], b[2], b[3]);
      }
  }
}

}  // namespace tile
}  // namespace dgps
