// The chunk's lower-triangular [C, C] bf16 tiles of a state walk (the solve block T of residual_lower and the
// read-out block L of lower_readout), staged row-major with pitch PC. Their products read 16x16 blocks with
// ldmatrix per warp and skip the zero blocks above the diagonal (mma.sync). A warpgroup MMA over the whole
// square (the tile staged in core order) was measured slower on the H200 (docs/performance.md, run 14): it
// does 16 block products where the triangle needs 10, and each of the two products adds a wgmma wait to the
// walk's dependent chain.
#pragma once

#include "dgps/device/common.cuh"

namespace dgps {
namespace tile {

/// Stages one [C, C] tile `g` (dense, row pitch C in global memory) into `s` (row pitch PC). Only the 16x16
/// blocks on and below the diagonal are read: the chunk roles never write the blocks above it, and the stage
/// zero-fills them (cp.async with no global read).
template <int C, int PC>
DGPS_DEV void load_lower_tile(uint16_t* s, const uint16_t* g, int t, int nt) {
  constexpr int CH = C / 8;  // 16-byte pieces per row
  // A piece p lies in block column p / 2; its rows from 16·(p / 2) on are on or below the diagonal.
  if (nt % CH == 0) {
    const int r0 = t / CH, p = t % CH, step = nt / CH;
    dev::cp_async_column<C>(s + r0 * PC + 8 * p, step * PC, g + r0 * C + 8 * p, (int64_t)step * C, g, r0, step,
                            16 * (p >> 1), C);
    return;
  }
  dev::for_each_cell<C, CH>(t, nt, [&](int r, int p) {
    const bool lower = r >= 16 * (p >> 1);
    dev::cp_async16(s + r * PC + 8 * p, lower ? g + r * C + 8 * p : g, lower);
  });
}

}  // namespace tile
}  // namespace dgps
