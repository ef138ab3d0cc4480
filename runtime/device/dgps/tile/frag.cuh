// A K x BV f32 tile in registers (RowFrag) and its column vectors (Quad).
//
// FragLayout<BV, NT>: the NT threads form RG = NT / (BV/4) row groups of BV/4 column groups; thread
// (g, c) = (tid / (BV/4), tid % (BV/4)) holds rows g, g + RG, g + 2·RG, ... and columns 4c .. 4c+3 of the
// window, so each row is read with one 16-byte access per thread and a warp covers whole rows.
// A Quad holds the same 4 columns (one value per column, replicated over row groups).
#pragma once

#include "dgps/device/platform.cuh"

namespace dgps {
namespace tile {

template <int BV, int NT>
struct FragLayout {
  static_assert(BV % 4 == 0 && 32 % (BV / 4) == 0, "tile: BV/4 must divide a warp");
  static constexpr int kColGroups = BV / 4;
  static constexpr int kRowGroups = NT / kColGroups;
  DGPS_DEV static int row_group() { return dev::tid() / kColGroups; }
  DGPS_DEV static int col_group() { return dev::tid() % kColGroups; }
  /// First of this thread's 4 columns within the window.
  DGPS_DEV static int col() { return 4 * col_group(); }
};

template <int KP, int BV, int NT>
struct RowFrag {
  using Layout = FragLayout<BV, NT>;
  static_assert(KP % Layout::kRowGroups == 0, "tile: K (padded) must be a multiple of the row groups");
  static constexpr int kRows = KP / Layout::kRowGroups;  ///< rows per thread
  static constexpr int kN = 4 * kRows;
  float x[kN];  ///< row j of this thread: x[4j .. 4j+3]
  DGPS_DEV static int row(int j) { return Layout::row_group() + Layout::kRowGroups * j; }
};

template <int BV, int NT>
struct Quad {
  using Layout = FragLayout<BV, NT>;
  static constexpr int kN = 4;
  float x[4];
};

/// S = p[k * pitch + col] for k < rows, col < cols (p: the window's first column), 0 elsewhere.
/// p + pitch·k + col must be 16-byte aligned (pitch and the window start multiples of 4).
template <int KP, int BV, int NT>
DGPS_DEV RowFrag<KP, BV, NT> load_frag(const float* p, int64_t pitch, int rows, int cols) {
  using F = RowFrag<KP, BV, NT>;
  F s;
  const int c = F::Layout::col();
#pragma unroll
  for (int j = 0; j < F::kRows; ++j) {
    const int k = F::row(j);
    dev::F4 v;
    v.x = v.y = v.z = v.w = 0.f;
    if (k < rows && c < cols) v = *reinterpret_cast<const dev::F4*>(p + (int64_t)k * pitch + c);
    s.x[4 * j + 0] = v.x;
    s.x[4 * j + 1] = v.y;
    s.x[4 * j + 2] = v.z;
    s.x[4 * j + 3] = v.w;
  }
  return s;
}

/// The inverse of load_frag (p in global memory, one 16-byte store per row); nothing outside rows x cols
/// is written.
template <int KP, int BV, int NT>
DGPS_DEV void store_frag(const RowFrag<KP, BV, NT>& s, float* p, int64_t pitch, int rows, int cols) {
  using F = RowFrag<KP, BV, NT>;
  const int c = F::Layout::col();
#pragma unroll
  for (int j = 0; j < F::kRows; ++j) {
    const int k = F::row(j);
    if (k < rows && c < cols) {
      const dev::F4 v{s.x[4 * j + 0], s.x[4 * j + 1], s.x[4 * j + 2], s.x[4 * j + 3]};
      dev::st_global_f4(p + (int64_t)k * pitch + c, v);  // one 16-byte store per row
    }
  }
}

/// q_c = p[col + c] (16-bit through Codec) for the thread's 4 columns when col < cols, else 0: one 8-byte
/// global read (p 8-byte aligned, cols a multiple of 4).
template <int BV, int NT, class Codec>
DGPS_DEV Quad<BV, NT> load_quad(const uint16_t* p, int cols) {
  Quad<BV, NT> q;
  const int c = Quad<BV, NT>::Layout::col();
  dev::H4 h{0, 0, 0, 0};
  if (c < cols) h = dev::ld_global_h4(p + c);
  const bool in = c < cols;
  q.x[0] = in ? Codec::load(h.x) : 0.f;
  q.x[1] = in ? Codec::load(h.y) : 0.f;
  q.x[2] = in ? Codec::load(h.z) : 0.f;
  q.x[3] = in ? Codec::load(h.w) : 0.f;
  return q;
}

/// p[col + c] = q_c, written once (by row group 0) with one 8-byte global store (p 8-byte aligned, cols a
/// multiple of 4).
template <int BV, int NT, class Codec>
DGPS_DEV void store_quad(const Quad<BV, NT>& q, uint16_t* p, int cols) {
  const int c = Quad<BV, NT>::Layout::col();
  if (Quad<BV, NT>::Layout::row_group() != 0 || c >= cols) return;
  dev::st_global_h4(p + c, dev::H4{Codec::store(q.x[0]), Codec::store(q.x[1]), Codec::store(q.x[2]),
                                   Codec::store(q.x[3])});
}

}  // namespace tile
}  // namespace dgps
