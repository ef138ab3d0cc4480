// The lower products of lower_product.cuh with per-channel log2 gates G [C, KP] inside the sum
// (docs/math.md §4.3 "Factorisation on the tensor cores"):
//   P_p[i, j] = (a_p,i·b_p,i)·c_j·Σ_d R_p[i, d] Kc[j, d]·2^{G_id − G_jd}
// For i in block row I (reference row r = 16I) and j in block column J <= I (reference e = 16J + 15):
//   2^{G_i − G_j} = 2^{G_i − G_r} · 2^{G_r − G_e} · 2^{G_e − G_j}
// The first factor scales the rows ONCE, in place; the last the columns ONCE (in place, or into the copy kc
// when the columns are also a row operand); the middle one is a per-(I, J) channel multiplier, a bf16 table
// [NB(NB+1)/2][KP] applied to the column fragments in registers. Every factor is <= 1 except the diagonal
// block's multiplier, <= 2^{span} with span = max_d (G_rd − G_{r+15,d}); a diagonal block with span > 100 is
// evaluated directly (exponents <= 0 only) BEFORE the operands are scaled. Then all NP · NB(NB+1)/2 blocks
// run in one phase spread over the NW warps.
//
// In place: rows[p] and (when kc is null) cols are overwritten with their scaled values; kc must be non-null
// when cols is also one of the rows (the two scalings differ). Scratch (shared): kc bf16 [C][PITCH] or null,
// mul bf16 [NB(NB+1)/2][KP], span NB floats; all 16-byte aligned, like rows, cols and G (PITCH, gp multiples
// of 8, PITCH <= 2·gp). G is in the SwizzledF32Row layout of chunk_rows.cuh (load_rows32).
// Two overlays, each a template flag the emitter prints from the chunk_local layout (dsl/lib/LaunchContract.cpp
// chunkLocalLayout; KDA takes both, so that three CTAs fit on an SM):
//   kOutOverOperands  out_s overlays the operand tiles: every strict value is held in registers until all warps
//                     finished their products (else each warp stores its blocks as it finishes them);
//   kKcOverG          kc starts at G: scale_operands reads a row block's gates before any thread writes its kc
//                     rows, and a kc row block never reaches a later block's gates (else kc has its own region).
#pragma once

#include "dgps/tile/lower_product.cuh"

namespace dgps {
namespace tile {

/// Eight bf16 values (one 16-byte word) times eight f32 factors, rounded once to bf16.
DGPS_DEV dev::U4 scale_bf16x8(dev::U4 x, const float (&f)[8]) {
  const uint32_t xs[4] = {x.x, x.y, x.z, x.w};
  uint32_t y[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) y[u] = dev::pack_bf16(dev::bf16_lo(xs[u]) * f[2 * u], dev::bf16_hi(xs[u]) * f[2 * u + 1]);
  return dev::U4{y[0], y[1], y[2], y[3]};
}

/// One 16x16 block acc += R[r0..r0+16) · (Kc[c0..c0+16) ⊙ m)ᵀ: the column fragments are multiplied by the
/// channel multiplier m [KP] (bf16) in registers. In the B fragment (lds_b_nk) lane l holds channels
/// 16ks + 2(l%4) + {0, 1} in b[0], b[2] and those + 8 in b[1], b[3].
template <int KP, int PITCH>
DGPS_DEV void mma_block_channel_scaled(float acc[2][4], const uint16_t* rows, int r0, const uint16_t* cols, int c0,
                                       const uint16_t* m) {
  const int t2 = 2 * (dev::lane() & 3);
#pragma unroll
  for (int ks = 0; ks < KP / 16; ++ks) {
    uint32_t A[4], B[4];
    dev::lds_a(A, rows, PITCH, r0, 16 * ks);
    dev::lds_b_nk(B, cols, PITCH, c0, 16 * ks);
    const uint32_t m0 = *reinterpret_cast<const uint32_t*>(m + 16 * ks + t2);
    const uint32_t m1 = *reinterpret_cast<const uint32_t*>(m + 16 * ks + 8 + t2);
    dev::mma_bf16(acc[0], A, dev::mul_bf16x2(B[0], m0), dev::mul_bf16x2(B[1], m1));
    dev::mma_bf16(acc[1], A, dev::mul_bf16x2(B[2], m0), dev::mul_bf16x2(B[3], m1));
  }
}

/// span[I] = max_d (G_{16I,d} − G_{16I+15,d}) by warp 0; then a CTA barrier. Returns the blocks whose span
/// exceeds `limit` as a bit mask (the same in every thread). A max over every column of both rows, so the
/// SwizzledF32Row layout needs no mapping here.
template <int C, int KP>
DGPS_DEV unsigned unsafe_diagonal_blocks(const float* G, int gp, float* span, float limit) {
  constexpr int NB = C / 16;
  if (dev::tid() < 32) {
    for (int I = 0; I < NB; ++I) {
      float m = 0.f;
      for (int d = dev::lane(); d < KP; d += 32) m = dev::fmax_(m, G[(16 * I) * gp + d] - G[(16 * I + 15) * gp + d]);
      m = dev::warp_max(m);
      if (dev::lane() == 0) span[I] = m;
    }
  }
  dev::sync_threads();
  unsigned unsafe = 0;
  for (int I = 0; I < NB; ++I) unsafe |= (span[I] <= limit ? 0u : 1u) << I;
  return unsafe;
}

/// Diagonal block I of every part by direct per-element evaluation (exponents G_i − G_j <= 0 only), from the
/// unscaled operands. The last part goes to out_g; the strict part to out_s, or with kHold (out_s overlays the
/// operands) into `held` (thread t's elements t, t + nt, ...) for store_held_diagonal after the products.
template <int C, int K, int PITCH, int NP, bool kHold, int NH>
DGPS_DEV void diagonal_block_direct(int I, uint16_t* const (&rows)[NP], const RowFactor (&a)[NP],
                                    const RowVec (&b)[NP], const uint16_t* cols, RowVec c, const float* G, int gp,
                                    float (&held)[NH], float* out_s, int lda, uint16_t* out_g) {
  const int nt = dev::nthreads();
#pragma unroll
  for (int u = 0; u < NH; ++u) held[u] = 0.f;
  for (int e = dev::tid(), u = 0; e < NP * 256; e += nt, ++u) {
    const int p = e >> 8, i = 16 * I + ((e >> 4) & 15), j = 16 * I + (e & 15);
    const bool strict = p < NP - 1;
    float s = 0.f;
    if (j <= i) {
      const uint16_t* ri = part_of(rows, p) + i * PITCH;
      for (int d = 0; d < K; ++d)
        s += dev::bf16_to_f32(ri[d]) * dev::bf16_to_f32(cols[j * PITCH + d]) * dev::ex2(gate_at(G, gp, i, d) - gate_at(G, gp, j, d));
    }
    if (strict) {
      const float v = i > j ? s * part_factor(a, b, p, i) * c[j] : 0.f;
      if constexpr (kHold) {
#pragma unroll
        for (int w = 0; w < NH; ++w)
          if (w == u) held[w] = v;  // a select: no local memory
      } else {
        out_s[i * lda + j] = v;
      }
    } else {
      out_g[i * C + j] = dev::f32_to_bf16(i >= j ? s * part_factor(a, b, p, i) * c[j] : 0.f);
    }
  }
}

/// The strict values diagonal_block_direct held for block I, into out_s.
template <int NP, int NH>
DGPS_DEV void store_held_diagonal(int I, const float (&held)[NH], float* out_s, int lda) {
  const int nt = dev::nthreads();
  int u = 0;
  for (int e = dev::tid(); e < (NP - 1) * 256; e += nt, ++u) {
    const int i = 16 * I + ((e >> 4) & 15), j = 16 * I + (e & 15);
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < NH; ++w)
      if (w == u) v = held[w];
    out_s[i * lda + j] = v;
  }
}

/// mul[pair(I, J)][d] = bf16(2^{G_{16I,d} − G_{16J+15,d}}) for the NB(NB+1)/2 lower pairs (lower_block_of's
/// order). The exponent is capped at 100: only an unsafe diagonal block (evaluated directly) can exceed it.
template <int C, int KP>
DGPS_DEV void channel_multipliers(uint16_t* mul, const float* G, int gp) {
  constexpr int NB = C / 16, NPAIR = NB * (NB + 1) / 2, CK = KP / 8;
  for (int e = dev::tid(); e < NPAIR * CK; e += dev::nthreads()) {
    const int pair = e / CK, d0 = 8 * (e - pair * CK);
    int p, I, J;
    lower_block_of<NB>(pair, p, I, J);
    float gr[8], ge[8], f[8];
    load_gate8(gr, G, gp, 16 * I, d0);
    load_gate8(ge, G, gp, 16 * J + 15, d0);
#pragma unroll
    for (int u = 0; u < 8; ++u) f[u] = dev::ex2(dev::fmin_(gr[u] - ge[u], 100.f));
    const dev::U4 one{0x3f803f80u, 0x3f803f80u, 0x3f803f80u, 0x3f803f80u};  // bf16 1.0 x 8
    *reinterpret_cast<dev::U4*>(mul + pair * KP + d0) = scale_bf16x8(one, f);
  }
}

/// The scaled operands of row j, channels d0 .. d0+7, each handed to `put` as it is ready: put(p, y) with
/// y = rows[p][j] · 2^{G_j − G_r} (r = 16⌊j/16⌋) for p < NP, then put(NP, y) with y = cols[j] · 2^{G_e − G_j}
/// (e = r + 15), the column copy. Every operand word is read before `put` is first called; kOperandsFirst
/// issues the operand loads before the gate loads (the order is a measured choice of each caller).
template <int PITCH, int NP, bool kOperandsFirst, class Put>
DGPS_DEV void scaled_row_piece(uint16_t* const (&rows)[NP], const uint16_t* cols, const float* G, int gp, int j,
                               int d0, Put put) {
  const int r = j & ~15;
  dev::U4 x[NP], xc;
  auto load_operands = [&] {
#pragma unroll
    for (int p = 0; p < NP; ++p) x[p] = *reinterpret_cast<const dev::U4*>(rows[p] + j * PITCH + d0);
    xc = *reinterpret_cast<const dev::U4*>(cols + j * PITCH + d0);
  };
  if constexpr (kOperandsFirst) load_operands();
  float gj[8], gr[8], ge[8], fr[8], fc[8];
  load_gate8(gj, G, gp, j, d0);
  load_gate8(gr, G, gp, r, d0);
  load_gate8(ge, G, gp, r + 15, d0);
#pragma unroll
  for (int u = 0; u < 8; ++u) {
    fr[u] = dev::ex2(gj[u] - gr[u]);
    fc[u] = dev::ex2(ge[u] - gj[u]);
  }
  if constexpr (!kOperandsFirst) load_operands();
#pragma unroll
  for (int p = 0; p < NP; ++p) put(p, scale_bf16x8(x[p], fr));
  put(NP, scale_bf16x8(xc, fc));
}

/// scale_operands when kc starts at G: one 16-row block at a time, the block's pieces computed in registers, a CTA
/// barrier, then the writes (a kc row block lies at or below its own gates, never over a later block's).
template <int C, int KP, int PITCH, int NP, int NW>
DGPS_DEV void scale_operands_staged(uint16_t* const (&rows)[NP], const uint16_t* cols, uint16_t* kc, const float* G,
                                    int gp) {
  constexpr int CK = KP / 8;
  static_assert(PITCH <= 2 * KP, "a kc row block over G must end before the next block's gates");
  constexpr int PER = (16 * CK + 32 * NW - 1) / (32 * NW);  // pieces of one 16-row block per thread
  for (int I = 0; I < C / 16; ++I) {
    dev::U4 yr[PER][NP], yc[PER];
#pragma unroll
    for (int u = 0; u < PER; ++u) {
      const int e = dev::tid() + 32 * NW * u;
      if (e < 16 * CK)
        scaled_row_piece<PITCH, NP, false>(rows, cols, G, gp, 16 * I + e / CK, 8 * (e % CK), [&](int p, dev::U4 y) {
          if (p < NP)
            yr[u][p] = y;
          else
            yc[u] = y;
        });
    }
    dev::sync_threads();  // the block's gates and unscaled operands are read; kc may now overwrite them
#pragma unroll
    for (int u = 0; u < PER; ++u) {
      const int e = dev::tid() + 32 * NW * u, j = 16 * I + e / CK, d0 = 8 * (e % CK);
      if (e >= 16 * CK) continue;
#pragma unroll
      for (int p = 0; p < NP; ++p) *reinterpret_cast<dev::U4*>(rows[p] + j * PITCH + d0) = yr[u][p];
      *reinterpret_cast<dev::U4*>(kc + j * PITCH + d0) = yc[u];
    }
  }
}

/// Every row: rows[p][j] *= 2^{G_j − G_r} in place, and 2^{G_e − G_j}·cols[j] into kc, or in place when kc is
/// null; one pass, each step reading all its operand words before it writes any (so cols may alias a row
/// operand when kc is not null). Pad channels are scaled too (their operands and gates are zero). kStaged: kc
/// starts at G (scale_operands_staged).
template <int C, int KP, int PITCH, int NP, int NW, bool kStaged>
DGPS_DEV void scale_operands(uint16_t* const (&rows)[NP], uint16_t* cols, uint16_t* kc, const float* G, int gp) {
  constexpr int CK = KP / 8;
  if constexpr (!kStaged) {
    uint16_t* const kdst = kc ? kc : cols;
    for (int e = dev::tid(); e < C * CK; e += dev::nthreads()) {
      const int j = e / CK, d0 = 8 * (e - j * CK);
      scaled_row_piece<PITCH, NP, true>(rows, cols, G, gp, j, d0, [&](int p, dev::U4 y) {
        *reinterpret_cast<dev::U4*>((p < NP ? part_of(rows, p) : kdst) + j * PITCH + d0) = y;
      });
    }
  } else {
    scale_operands_staged<C, KP, PITCH, NP, NW>(rows, cols, kc, G, gp);
  }
}

/// The lower products of the file header; NW warps, every thread of the CTA calls it (it holds CTA barriers).
template <int C, int K, int KP, int PITCH, int NW, int NP, bool kOutOverOperands = false, bool kKcOverG = false>
DGPS_DEV void lower_products_channel_gated(uint16_t* const (&rows)[NP], const RowFactor (&a)[NP],
                                           const RowVec (&b)[NP], uint16_t* cols, RowVec c, const float* G,
                                           int gp, uint16_t* kc, uint16_t* mul, float* span, float* out_s,
                                           int lda, uint16_t* out_g) {
  constexpr int NB = C / 16, NTILE = NP * NB * (NB + 1) / 2, PER = (NTILE + NW - 1) / NW;
  constexpr int NH = kOutOverOperands ? (256 + 32 * NW - 1) / (32 * NW) : 1;  // held strict direct values
  const unsigned unsafe = unsafe_diagonal_blocks<C, KP>(G, gp, span, 100.f);
  float held[NB][NH];
  if (unsafe) {
    if constexpr (kOutOverOperands) {
#pragma unroll
      for (int I = 0; I < NB; ++I)  // unrolled: held[I] stays in registers
        if ((unsafe >> I) & 1u)
          diagonal_block_direct<C, K, PITCH, NP, true>(I, rows, a, b, cols, c, G, gp, held[I], out_s, lda, out_g);
    } else {
      for (int I = 0; I < NB; ++I)
        if ((unsafe >> I) & 1u)
          diagonal_block_direct<C, K, PITCH, NP, false>(I, rows, a, b, cols, c, G, gp, held[0], out_s, lda, out_g);
    }
    dev::sync_threads();  // the direct blocks read the operands unscaled
  }
  channel_multipliers<C, KP>(mul, G, gp);  // (with kKcOverG, scale_operands' first barrier orders these reads)
  scale_operands<C, KP, PITCH, NP, NW, kKcOverG>(rows, cols, kc, G, gp);
  dev::sync_threads();
  const uint16_t* const kcol = kc ? kc : cols;
  if constexpr (!kOutOverOperands) {  // each warp stores a block as soon as it has it
    for (int tt = dev::warp(); tt < NTILE; tt += NW) {
      int p, I, J;
      lower_block_of<NB>(tt, p, I, J);
      if (I == J && ((unsafe >> I) & 1u)) continue;
      float acc[2][4];
      zero_block(acc);
      const int pair = tt - p * (NTILE / NP);
      mma_block_channel_scaled<KP, PITCH>(acc, part_of(rows, p), 16 * I, kcol, 16 * J, mul + pair * KP);
      store_block<C, NP, false>(p, I, J, acc, a, b, c, RowVec{nullptr, 0}, out_s, lda, out_g);
    }
  } else {  // every block in registers until all warps have read the operands that out_s overlays
    float acc[PER][2][4];
#pragma unroll
    for (int u = 0; u < PER; ++u) {
      const int tt = dev::warp() + NW * u;
      zero_block(acc[u]);
      if (tt >= NTILE) continue;
      int p, I, J;
      lower_block_of<NB>(tt, p, I, J);
      if (I == J && ((unsafe >> I) & 1u)) continue;
      const int pair = tt - p * (NTILE / NP);
      mma_block_channel_scaled<KP, PITCH>(acc[u], part_of(rows, p), 16 * I, kcol, 16 * J, mul + pair * KP);
    }
    dev::sync_threads();
#pragma unroll
    for (int u = 0; u < PER; ++u) {
      const int tt = dev::warp() + NW * u;
      if (tt >= NTILE) continue;
      int p, I, J;
      lower_block_of<NB>(tt, p, I, J);
      if (I == J && ((unsafe >> I) & 1u)) continue;
      store_block<C, NP, false>(p, I, J, acc[u], a, b, c, RowVec{nullptr, 0}, out_s, lda, out_g);
    }
    if (unsafe) {
#pragma unroll
      for (int I = 0; I < NB; ++I)
        if ((unsafe >> I) & 1u) store_held_diagonal<NP>(I, held[I], out_s, lda);
    }
  }
}

}  // namespace tile
}  // namespace dgps
