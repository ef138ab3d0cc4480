// Rows of one chunk gated per channel, written to device memory as bf16 [C, K] rows at pitch KP = pad16(K), the
// pad zero (the workspace regions opq/opk/opw of the compiler's tile.workspace; launch_rules.h workspaceRowPitch):
// with log2 gates G [C, KP] (G_last = row C − 1), for each output n
//   forward: y_n,id = x_n,id·2^{G_id}          reverse: y_n,id = x_n,id·2^{G_last,d − G_id}
// x_n are 16-bit tiles of the input dtype (decoded by Codec). Also the last row's factors 2^{G_last,d}, and the
// ungated store of a bf16 row tile (store_rows16).
#pragma once

#include "dgps/device/launch_rules.h"
#include "dgps/tile/chunk_rows.cuh"

namespace dgps {
namespace tile {

/// Whether the 8 channels from d0 are pad channels (K..pitch−1) of a stored row, which are written as zeros. Rows
/// at pitch KP would leave a 16-byte hole per row at K = 120; a 32-byte sector that is only half written costs
/// DRAM a read-modify-write (measured on H200: kda's K = 120 forward 4.7% slower with the hole than with the row
/// written whole). The stores below select zeros for a pad lane instead of branching: a branch splits every warp
/// whose lanes cover a row's end (measured on H200, pkda K = 120: 55% more store instructions in chunk_local).
template <int K, int YP>
DGPS_DEV bool pad_channels(int d0) {
  return YP != K && d0 >= K;
}

/// Every output y_n (global, row pitch workspaceRowPitch(K); columns K..pitch−1 written as zeros, see
/// pad_channels) from x_n (shared, pitch xp) and G (shared, pitch gp, the SwizzledF32Row layout) in one pass,
/// 8 channels per step with 16-byte shared loads (G, G_last and each x; xp, gp multiples of 8 and the tiles
/// 16-byte aligned) and one 16-byte store per output: G is read once, each power of two is taken once per
/// element and direction and shared by the outputs that use it, and an x that several outputs share is loaded
/// once (the same pointer).
/// kReverse: one flag per output.
template <int C, int K, class Codec, bool... kReverse>
DGPS_DEV void store_gated_rows(uint16_t* const (&y)[sizeof...(kReverse)],
                               const uint16_t* const (&x)[sizeof...(kReverse)], int xp, const float* G, int gp) {
  constexpr int N = sizeof...(kReverse), YP = launch::workspaceRowPitch(K), CH = YP / 8;
  constexpr bool rev[N] = {kReverse...};
  constexpr bool anyFwd = (!kReverse || ...), anyRev = (kReverse || ...);
  for (int e = dev::tid(); e < C * CH; e += dev::nthreads()) {
    const int i = e / CH, d0 = (e - i * CH) * 8;
    const bool pad = pad_channels<K, YP>(d0);  // G and x have these columns (pitches >= KP): reads stay in bounds
    float gi[8], gl[8] = {}, fwd[8], bwd[8];
    load_gate8(gi, G, gp, i, d0);
    if (anyRev) load_gate8(gl, G, gp, C - 1, d0);
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      fwd[u] = anyFwd ? dev::ex2(gi[u]) : 0.f;
      bwd[u] = anyRev ? dev::ex2(gl[u] - gi[u]) : 0.f;
    }
#pragma unroll
    for (int n = 0; n < N; ++n) {
      float xv[8];
      load_x8<Codec>(xv, x[n] + i * xp + d0);
      uint32_t p[4];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        p[u] = pad      ? 0u
               : rev[n] ? dev::pack_bf16(xv[2 * u] * bwd[2 * u], xv[2 * u + 1] * bwd[2 * u + 1])
                        : dev::pack_bf16(xv[2 * u] * fwd[2 * u], xv[2 * u + 1] * fwd[2 * u + 1]);
      dev::st_global_u4(y[n] + i * YP + d0, dev::U4{p[0], p[1], p[2], p[3]});
    }
  }
}

/// y_id = x_id: a bf16 row tile (shared, pitch xp >= pad16(K), a multiple of 8, 16-byte aligned) written as it is
/// to bf16 [C, K] rows (global, pitch workspaceRowPitch(K)), 8 channels per 16-byte store, by the NT threads of
/// the CTA (a chunk role's NW · 32); the ungated form of the stores above (the stored write key pwk and query pwq
/// of the compiler's tile.workspace). NT is a constant so that the loop unrolls into stores at fixed offsets from
/// one address (with a runtime stride each 16-byte store cost about 20 instructions of index arithmetic).
template <int C, int K, int NT>
DGPS_DEV void store_rows16(uint16_t* y, const uint16_t* x, int xp) {
  constexpr int YP = launch::workspaceRowPitch(K), CH = YP / 8;
#pragma unroll
  for (int e = dev::tid(); e < C * CH; e += NT) {
    const int i = e / CH, d0 = (e - i * CH) * 8;
    const dev::U4 w = *reinterpret_cast<const dev::U4*>(x + i * xp + d0);  // in bounds: xp >= KP
    dev::st_global_u4(y + i * YP + d0, pad_channels<K, YP>(d0) ? dev::U4{0u, 0u, 0u, 0u} : w);
  }
}

/// out_d = 2^{G_last,d} for d < K (G in the SwizzledF32Row layout; out in channel order).
template <int C, int K>
DGPS_DEV void store_last_exp2(float* out, const float* G, int gp) {
  for (int d = dev::tid(); d < K; d += dev::nthreads()) out[d] = dev::ex2(gate_at(G, gp, C - 1, d));
}

}  // namespace tile
}  // namespace dgps
