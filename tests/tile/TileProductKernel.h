// The emulated product kernels of TileProductEmuCheck.cpp: one CTA calls one tensor-core product header of
// runtime/device/dgps/tile on operands the check places in shared memory. Plain host types only, so the check's
// main file does not see the emulator prelude (TileProductKernel.cpp is compiled with it).
//
// Operands are bf16 bit patterns, row-major on the host: [rows][K] key-side tiles; register operands (the state
// Sᵀ, the value-side N) are f32 [value rows][columns]. The kernels copy the real channels only: shared memory
// starts as 0xFF (NaN in bf16 and f32), so a product that reads a pad channel K .. KP−1 returns NaN, except
// where a caller zero-fills the pads (`zeroPads`), as the warpgroup-MMA path requires.
#pragma once
#include <cstddef>
#include <cstdint>

namespace dgps_product_check {

/// The key dims the kernels are instantiated for (each multiple of 8 in (0, 256] works; these cover the
/// 8-deep tail once, twice ... and K a multiple of 16).
constexpr int kDims[] = {24, 120, 128};

/// out[i][j] = Σ_{d<K} rows[i][d]·cols[j][d] (16 x 16), lower_product.cuh mma_block, one warp.
bool mmaBlock(int K, const uint16_t* rows, const uint16_t* cols, float* out, char* err, size_t errlen);

/// XA[v][j] = Σ_{d<K} bf16(S[v][d])·A[j][d] and XB likewise with B (v < 16·warps, j < C), state_rows_product.cuh
/// state_times_rows: mma.sync with C = 32 and one warp, or the warpgroup MMA with C = 64 and four warps (wg).
bool stateTimesRows(int K, bool wg, const float* S, const uint16_t* A, const uint16_t* B, float* XA, float* XB,
                    char* err, size_t errlen);

/// S1[v][d] = S0[v][d] + Σ_{j<C} bf16(N[v][j]·w[j])·Kw[j][d] (v < 16, C = 32), state_rank_update.cuh, one
/// warp; the state round-trips through state_frag.cuh's register layout.
bool rankUpdate(int K, const float* S0, const float* N, const float* w, const uint16_t* Kw, float* S1, char* err,
                size_t errlen);

}  // namespace dgps_product_check
