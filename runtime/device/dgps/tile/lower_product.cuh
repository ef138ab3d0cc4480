// Lower-triangular products of one chunk on tensor cores, over 16x16 blocks (bf16 operands, fp32 accumulate):
// for parts p = 0 .. NP−1 with row operands R_p [C, KP], one column operand Kc [C, KP], per-row factors
// a_p (vector or uniform), b_p, per-column factor c and optional log2 gates G [C]:
//   P_p[i, j] = (a_p,i·b_p,i)·c_j·2^{G_i − G_j}·Σ_d R_p[i, d] Kc[j, d]
// masked to j < i for the parts p < NP − 1 (fp32 to shared memory, row pitch lda) and to j <= i for the last
// part (bf16 to device memory, row pitch C). Blocks above the diagonal are not written. The exponent is
// masked by a select before the exponential (docs/math.md §7.5).
#pragma once

#include "dgps/tile/chunk_rows.cuh"

namespace dgps {
namespace tile {

/// A per-row factor that is either a shared vector (p != null) or a uniform value s.
struct RowFactor {
  const float* p;
  int stride;
  float s;
  DGPS_DEV float operator[](int i) const { return p ? p[i * stride] : s; }
};

/// Part p's entry of a per-part array of NP <= 2 entries, by a select: a runtime index into a register array
/// would put the array in local memory.
template <int NP, class T>
DGPS_DEV T part_of(const T (&x)[NP], int p) {
  static_assert(NP == 1 || NP == 2, "one or two parts");
  return (NP == 1 || p == 0) ? x[0] : x[NP - 1];
}

/// Row i's factor a_p,i·b_p,i of part p. Every part's factor is evaluated with its own compile-time operands
/// and the value is selected: selecting the RowFactor first would mix a shared-memory pointer with a uniform's
/// null pointer, and the loads through it become generic loads (measured on the H200: deltanet's chunk_local
/// 3% slower).
template <int NP>
DGPS_DEV float part_factor(const RowFactor (&a)[NP], const RowVec (&b)[NP], int p, int i) {
  const float f0 = a[0][i] * b[0][i];
  if constexpr (NP == 1) {
    return f0;
  } else {
    const float f1 = a[NP - 1][i] * b[NP - 1][i];
    return p == 0 ? f0 : f1;
  }
}

/// One 16x16 output block: acc += rows[r0..r0+16) · cols[c0..c0+16)ᵀ over all KP channels.
template <int KP, int PITCH>
DGPS_DEV void mma_block(float acc[2][4], const uint16_t* rows, int r0, const uint16_t* cols, int c0) {
#pragma unroll
  for (int ks = 0; ks < KP / 16; ++ks) {
    uint32_t A[4], B[4];
    dev::lds_a(A, rows, PITCH, r0, 16 * ks);
    dev::lds_b_nk(B, cols, PITCH, c0, 16 * ks);
    dev::mma_bf16(acc[0], A, B[0], B[1]);
    dev::mma_bf16(acc[1], A, B[2], B[3]);
  }
}

/// Epilogue of block (I, J) of a part: factors, optional gate, mask; fp32 to shared (strict) or bf16 to global.
template <int C, int NP, bool kGate>
DGPS_DEV void store_block(int p, int I, int J, const float acc[2][4], const RowFactor (&a)[NP],
                          const RowVec (&b)[NP], RowVec c, RowVec G, float* out_s, int lda, uint16_t* out_g) {
  const bool strict = p < NP - 1;
  const int g = dev::lane() >> 2, t = dev::lane() & 3;
  float rf[2], rg[2], cf[4], cg[4];
#pragma unroll
  for (int h8 = 0; h8 < 2; ++h8) {
    const int i = 16 * I + g + 8 * h8;
    rf[h8] = part_factor(a, b, p, i);
    rg[h8] = kGate ? G[i] : 0.f;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int j = 16 * J + 8 * (k >> 1) + 2 * t + (k & 1);
    cf[k] = c[j];
    cg[k] = kGate ? G[j] : 0.f;
  }
#pragma unroll
  for (int h8 = 0; h8 < 2; ++h8) {
    const int i = 16 * I + g + 8 * h8;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const int j = 16 * J + 8 * nt + 2 * t;
      float v[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int k = 2 * nt + e;
        const bool keep = strict ? i > j + e : i >= j + e;
        float f = rf[h8] * cf[k];
        if (kGate) f *= dev::ex2(keep ? rg[h8] - cg[k] : -1e30f);
        v[e] = keep ? acc[nt][2 * h8 + e] * f : 0.f;
      }
      if (strict) {
        out_s[i * lda + j] = v[0];
        out_s[i * lda + j + 1] = v[1];
      } else {
        *reinterpret_cast<uint32_t*>(out_g + i * C + j) = dev::pack_bf16(v[0], v[1]);
      }
    }
  }
}

/// One 16x16 block's accumulator (two n8 tiles of m16n8 fragments) set to zero.
DGPS_DEV void zero_block(float (&acc)[2][4]) {
#pragma unroll
  for (int x = 0; x < 2; ++x)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[x][e] = 0.f;
}

/// Block index tt of NP · NB(NB+1)/2 lower blocks -> (part, I, J), row-major within a part.
template <int NB>
DGPS_DEV void lower_block_of(int tt, int& part, int& I, int& J) {
  constexpr int NTRI = NB * (NB + 1) / 2;
  part = tt >= NTRI ? 1 : 0;  // NP <= 2 (part_of): a compare, not a division
  int idx = tt - part * NTRI;
  I = 0;
  while (idx > I) {
    idx -= I + 1;
    ++I;
  }
  J = idx;
}

/// Every part's blocks spread over the NW warps, accumulated in registers; then a CTA barrier (out_s may alias
/// the operands) and the epilogues. G may be {nullptr, 0} when kGate is false. Row: uint16_t* or
/// const uint16_t* (the rows are only read).
template <int C, int KP, int PITCH, int NW, int NP, bool kGate, class Row>
DGPS_DEV void lower_products(Row const (&rows)[NP], const RowFactor (&a)[NP], const RowVec (&b)[NP],
                             const uint16_t* cols, RowVec c, RowVec G, float* out_s, int lda, uint16_t* out_g) {
  constexpr int NB = C / 16, NTILE = NP * NB * (NB + 1) / 2, PER = (NTILE + NW - 1) / NW;
  float acc[PER][2][4];
#pragma unroll
  for (int u = 0; u < PER; ++u) {
    const int tt = dev::warp() + NW * u;
    zero_block(acc[u]);
    if (tt < NTILE) {
      int p, I, J;
      lower_block_of<NB>(tt, p, I, J);
      mma_block<KP, PITCH>(acc[u], part_of(rows, p), 16 * I, cols, 16 * J);
    }
  }
  dev::sync_threads();
#pragma unroll
  for (int u = 0; u < PER; ++u) {
    const int tt = dev::warp() + NW * u;
    if (tt < NTILE) {
      int p, I, J;
      lower_block_of<NB>(tt, p, I, J);
      store_block<C, NP, kGate>(p, I, J, acc[u], a, b, c, G, out_s, lda, out_g);
    }
  }
}

}  // namespace tile
}  // namespace dgps
