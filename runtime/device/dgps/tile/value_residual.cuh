// The value-side operand Nᵀ [16 value rows of the warp, C] of one chunk of a state walk, from the chunk's
// values V (bf16 [C, BV] shared, row pitch PV; the warp reads columns 16·w .. 16·w+15) and per-row factors
// (a column of a [C][RS] f32 record: factor of row i at col[i·RS]). Layout of N as XA in state_rows_product.cuh.
//   residual_lower:  Nᵀ = (Vᵀ − XBᵀ diag(c)) Tᵀ   (T a lower-triangular bf16 [C, C] tile staged by
//                    lower_tile.cuh load_lower_tile, pitch PC; the residual is rounded to bf16 as the
//                    tensor-core A operand)
//   scaled_values:   Nᵀ = Vᵀ diag(b)
#pragma once

#include "dgps/device/common.cuh"

namespace dgps {
namespace tile {

template <int C, int PV, int PC, int RS>
DGPS_DEV void residual_lower(float (&N)[C / 8][4], const uint16_t* sV, int w, const float* c,
                             const float (&XB)[C / 8][4], const uint16_t* sT) {
  const int t = dev::lane() & 3;
#pragma unroll
  for (int nt = 0; nt < C / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) N[nt][e] = 0.f;
  uint32_t RA[C / 16][4];
#pragma unroll
  for (int p = 0; p < C / 16; ++p) {
    uint32_t vt4[4];  // Vᵀ pairs: [0] (v g, i 16p+2t..), [1] (v g+8, ..), [2] (v g, i 16p+8+2t..), [3] (v g+8, ..)
    dev::lds_at(vt4, sV, PV, 16 * p, 16 * w);
    float R[2][4];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int i0 = 16 * p + 8 * hf + 2 * t;
      const float c0 = c[i0 * RS], c1 = c[(i0 + 1) * RS];
      R[hf][0] = dev::bf16_lo(vt4[2 * hf]) - c0 * XB[2 * p + hf][0];
      R[hf][1] = dev::bf16_hi(vt4[2 * hf]) - c1 * XB[2 * p + hf][1];
      R[hf][2] = dev::bf16_lo(vt4[2 * hf + 1]) - c0 * XB[2 * p + hf][2];
      R[hf][3] = dev::bf16_hi(vt4[2 * hf + 1]) - c1 * XB[2 * p + hf][3];
    }
    dev::acc_to_a(RA[p], R[0], R[1]);
  }
#pragma unroll
  for (int p = 0; p < C / 16; ++p)
#pragma unroll
    for (int ks = 0; ks <= p; ++ks) {
      uint32_t b[4];
      dev::lds_b_nk(b, sT, PC, 16 * p, 16 * ks);
      dev::mma_bf16(N[2 * p], RA[ks], b[0], b[1]);
      dev::mma_bf16(N[2 * p + 1], RA[ks], b[2], b[3]);
    }
}

template <int C, int PV, int RS>
DGPS_DEV void scaled_values(float (&N)[C / 8][4], const uint16_t* sV, int w, const float* b) {
  const int t = dev::lane() & 3;
#pragma unroll
  for (int p = 0; p < C / 16; ++p) {
    uint32_t vt4[4];
    dev::lds_at(vt4, sV, PV, 16 * p, 16 * w);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int i0 = 16 * p + 8 * hf + 2 * t;
      const float b0 = b[i0 * RS], b1 = b[(i0 + 1) * RS];
      N[2 * p + hf][0] = b0 * dev::bf16_lo(vt4[2 * hf]);
      N[2 * p + hf][1] = b1 * dev::bf16_hi(vt4[2 * hf]);
      N[2 * p + hf][2] = b0 * dev::bf16_lo(vt4[2 * hf + 1]);
      N[2 * p + hf][3] = b1 * dev::bf16_hi(vt4[2 * hf + 1]);
    }
  }
}

}  // namespace tile
}  // namespace dgps
