// Row maps: a per-token tensor read or written on a row axis with several rows per token. Row r of the axis
// belongs to token r / steps at phase r mod steps; a map {steps, phase} reads token row r / steps on the rows
// of that phase and a fill value on the others, and writes only the rows of that phase back to their token
// row. With steps = 1 every row maps to itself. Rows are absolute rows of the flattened row axis (the chunk's
// first row is ChunkAt::t0), so a packed sequence's rows map to its own tokens.
#pragma once

#include "dgps/device/common.cuh"
#include "dgps/tile/chunk_rows.cuh"
#include "dgps/tile/lower_readout.cuh"  // stage_rows

namespace dgps {
namespace tile {

struct RowMap {
  int steps = 1;  ///< rows per token
  int phase = 0;  ///< the rows r with r mod steps == phase carry the token's row
};

/// The token row of row r under m, or -1 when r is not of m's phase.
DGPS_DEV int64_t mapped_row(const RowMap& m, int64_t r) { return r % m.steps == m.phase ? r / m.steps : -1; }

/// Rows [0, ROWS) x columns [0, PAD_COLS) of a 16-bit per-token tensor into s (pitch spitch, or the
/// tensor-core "core" layout of dev::core_off when kCore): row i reads token row mapped_row(m, r0 + i) of
/// `g` (token row 0 at the head; row stride gstride elements); rows i >= valid_rows, rows of another phase and
/// columns >= valid_cols are zero. cp.async: completes at the caller's next wait.
template <int ROWS, int PAD_COLS, bool kCore>
DGPS_DEV void load_rows16_mapped(uint16_t* s, int spitch, const uint16_t* g, int64_t gstride, int64_t r0,
                                 int valid_rows, int valid_cols, const RowMap& m, int t = dev::tid(),
                                 int nt = dev::nthreads()) {
  constexpr int CH = PAD_COLS / 8;  // 16-byte chunks per row
  dev::for_each_cell<ROWS, CH>(t, nt, [&](int r, int ch) {
    const int64_t src = r < valid_rows ? mapped_row(m, r0 + r) : -1;
    const bool ok = src >= 0 && ch * 8 < valid_cols;
    uint16_t* dst = kCore ? s + dev::core_off<ROWS>(r, ch * 8) : s + r * spitch + ch * 8;
    dev::cp_async16(dst, ok ? g + src * gstride + ch * 8 : g, ok);
  });
}

/// load_rows16 of chunk_rows.cuh through a row map: the chunk's [C, KP] rows of a tensor [tokens, heads, K].
template <int C, int KP>
DGPS_DEV void load_rows16_mapped(uint16_t* s, int pitch, const void* g, const ChunkAt& at, int64_t heads,
                                 int64_t head, int K, const RowMap& m) {
  load_rows16_mapped<C, KP, false>(s, pitch, static_cast<const uint16_t*>(g) + head * K, heads * K, at.t0, at.Lr, K,
                                   m);
}

/// load_row_scalars of chunk_rows.cuh through a row map: v_i = g[token·heads + head] on a real row of m's
/// phase, `fill` on a real row of another phase, 0 on a pad row.
DGPS_DEV void load_row_scalars_mapped(RowVec v, const float* g, const ChunkAt& at, int64_t heads, int64_t head,
                                      const RowMap& m, float fill, int i) {
  const int64_t src = i < at.Lr ? mapped_row(m, at.t0 + i) : -1;
  v[i] = i >= at.Lr ? 0.f : src >= 0 ? g[src * heads + head] : fill;
}

/// store_rows of lower_readout.cuh through a row map: rows i < Lr of Oᵀ whose row r0 + i is of m's phase go to
/// token row mapped_row(m, r0 + i) of `out` (token row 0 at the head, row stride `stride`); the others are not
/// written. The staging and the whole-row rule are store_rows's.
template <int C, int PV, int BV, bool kWholeRows, class Codec, class GroupSync>
DGPS_DEV void store_rows_mapped(const float (&O)[C / 8][4], uint16_t* sStage, int w, uint16_t* out, int64_t stride,
                                int64_t r0, const RowMap& m, int v0, int V, int Lr, int ct, int nt,
                                GroupSync group_sync) {
  const int l = dev::lane();
  dev::sync_warp();
  stage_rows<C, PV, Codec>(O, sStage, w);
  if constexpr (!kWholeRows) {
    dev::sync_warp();
    for (int e = l; e < Lr * 2; e += 32) {
      const int i = e >> 1, vl = 16 * w + 8 * (e & 1);
      const int64_t dst = mapped_row(m, r0 + i);
      if (dst >= 0 && v0 + vl < V)
        *reinterpret_cast<dev::U4*>(out + dst * stride + v0 + vl) =
            *reinterpret_cast<const dev::U4*>(sStage + i * PV + vl);
    }
  } else {
    group_sync();
    constexpr int CPR = BV / 8;  // 16-byte pieces per row of the staging tile
    for (int e = ct; e < Lr * CPR; e += nt) {
      const int i = e / CPR, vl = 8 * (e - i * CPR);
      const int64_t dst = mapped_row(m, r0 + i);
      if (dst >= 0 && v0 + vl < V)
        *reinterpret_cast<dev::U4*>(out + dst * stride + v0 + vl) =
            *reinterpret_cast<const dev::U4*>(sStage + i * PV + vl);
    }
  }
}

}  // namespace tile
}  // namespace dgps
