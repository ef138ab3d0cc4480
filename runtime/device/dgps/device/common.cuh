// Device primitives shared by the printed kernels and the tile library: sequence/chunk addressing (varlen
// without host syncs), tile loaders, the preconditioner formulas (docs/math.md §3.3, §5.2) and tensor-core
// fragment helpers. Nothing here is switched by a model kind: the tile IR passes the decisions as arguments.
#pragma once

#include "dgps/device/config.cuh"
#include "dgps/device/launch_rules.h"
#include "dgps/device/platform.cuh"

namespace dgps {

namespace dev {

using Act_t = Act<cfg::kInputF16>;

/// The launch-rules view of a forward call (must match what the runtime passed on the host). The template
/// parameter is unused (the printed kernels spell it `shape_of<void>`).
template <class Unused>
DGPS_DEV launch::ProblemShape shape_of(const ForwardArgs& a) {
  launch::ProblemShape s;
  s.B = a.batch;
  s.T = a.seq_len;
  s.N = a.num_seqs;
  s.H = a.heads_qk;
  s.HV = a.heads_v;
  s.K = cfg::K;
  s.V = cfg::V;
  s.varlen = a.cu_seqlens != nullptr ? 1 : 0;
  s.f16 = cfg::kInputF16 ? 1 : 0;
  return s;
}
DGPS_DEV launch::TileConfig tile_of() {
  launch::TileConfig t;
  t.chunk = cfg::C;
  t.block_v = DGPS_BLOCK_V;
  t.warps = cfg::WARPS;
  t.stages = cfg::STAGES;
  return t;
}

/// One sequence: rows [bos, bos + len) of the flattened [B*T] (or packed) token axis.
struct Seq {
  int64_t bos = 0;
  int64_t len = 0;
};

/// Boundary n of the packed sequences on the forward's row axis: cu_seqlens[n] counts tokens, a token spans
/// cfg::ROW_STEPS rows (config.cuh DGPS_ROW_STEPS; 1 unless the forward takes several steps per token).
DGPS_DEV int64_t row_bound(const ForwardArgs& a, int64_t n) { return a.cu_seqlens[n] * cfg::ROW_STEPS; }

DGPS_DEV Seq seq_of(const ForwardArgs& a, int64_t n) {
  Seq s;
  if (a.cu_seqlens != nullptr) {
    s.bos = row_bound(a, n);
    s.len = row_bound(a, n + 1) - s.bos;
  } else {
    s.bos = n * a.seq_len;
    s.len = a.seq_len;
  }
  return s;
}

/// Slot of chunk 0 of sequence n (launch_rules.h chunkSlots explains the varlen bound).
DGPS_DEV int64_t first_slot(const ForwardArgs& a, int64_t n, int64_t bos) {
  const int64_t C = cfg::C;
  return a.cu_seqlens != nullptr ? bos / C + n : n * ((a.seq_len + C - 1) / C);
}

/// Maps a chunk slot to (sequence n, chunk c). Returns false for slots that hold no chunk (varlen slack).
DGPS_DEV bool slot_to_chunk(const ForwardArgs& a, int64_t slot, int64_t& n, int64_t& c, Seq& s) {
  const int64_t C = cfg::C;
  if (a.cu_seqlens == nullptr) {
    const int64_t nt = (a.seq_len + C - 1) / C;
    if (nt == 0) return false;
    n = udiv(slot, a.div_chunks);  // = slot / nt (abi.h set_index_divisors)
    c = slot - n * nt;
    if (n >= a.num_seqs) return false;
  } else {
    // largest n with floor(cu[n]/C) + n <= slot (that function of n is strictly increasing)
    int64_t lo = 0, hi = a.num_seqs - 1;
    if (hi < 0) return false;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) >> 1;
      if (row_bound(a, mid) / C + mid <= slot) lo = mid; else hi = mid - 1;
    }
    n = lo;
    c = slot - (row_bound(a, n) / C + n);
    if (c < 0) return false;
  }
  s = seq_of(a, n);
  return c * C < s.len;
}

/// Varlen with a token buffer longer than the packed sequences (cu_seqlens[N] < T): rows t >= cu[N] of `o`
/// belong to no sequence, and the contract is that they read back as zeros. The chunk slots after the last
/// sequence's, floor(cu[N]/C) + N + j for j = 0, 1, ..., hold no chunk and stay below the chunkSlots bound
/// (floor(cu[N]/C) + ceil((T - cu[N])/C) <= ceil(T/C)), so chunk_local's CTA of such a slot and value head
/// zeroes rows [cu[N] + jC, cu[N] + (j+1)C) ∩ [0, T) of that head. cu[N] is read on the device: no host sync.
/// A no-op without cu_seqlens, for slots that are not tail slots, and for cu[N] outside [0, T].
DGPS_DEV void zero_output_tail(const ForwardArgs& a, int64_t slot, int64_t hv) {
  if (a.cu_seqlens == nullptr) return;
  const int64_t C = cfg::C, N = a.num_seqs, end = row_bound(a, N), S = cfg::ROW_STEPS;
  if (end < 0 || end >= a.seq_len) return;
  const int64_t j = slot - (end / C + N);
  if (j < 0) return;
  // the slot's step rows [end + jC, ...) hold the o rows of the tokens that start in them (o has one row per
  // token: row r / S of a step row r; with S = 1 the two coincide)
  const int64_t r0 = (end + j * C + S - 1) / S, r1 = (lmin(end + (j + 1) * C, a.seq_len) + S - 1) / S;
  constexpr int kChunksPerRow = cfg::V / 8;  // 16-byte stores (V % 8 == 0; o rows are 16-byte aligned)
  uint16_t* o = static_cast<uint16_t*>(a.o);
  const U4 zero = {0u, 0u, 0u, 0u};
  for (int64_t e = tid(); e < (r1 - r0) * kChunksPerRow; e += nthreads()) {
    const int64_t r = r0 + e / kChunksPerRow;
    const int ch = (int)(e % kChunksPerRow);
    *reinterpret_cast<U4*>(o + (r * a.heads_v + hv) * cfg::V + 8 * ch) = zero;
  }
}

/// Loaders and re-encoders take the calling thread group (index t of nt threads; default the whole CTA). The
/// loader loops stay rolled: cp.async issue is cheap, and unrolled address arithmetic would not fit the
/// register budget of state_output's producer warpgroup.
///
/// A loader's cells are the 16-byte pieces (row r, piece p) of a ROWS x CH tile, dealt out in the flat order
/// e = t, t + nt, ... (r = e / CH, p = e % CH; for_each_cell). When nt is a multiple of CH (every state walk:
/// whole warps over a power-of-two piece count) e + nt keeps the piece and adds nt / CH to the row, so the
/// thread owns one piece column and steps down it: cp_async_column walks both addresses by a fixed step, a cell
/// costing two adds and a predicate where the flat order paid a division and two address products. The stage
/// loads sit on every warp's path at the top of each chunk of a state walk (docs/performance.md, run 15).
template <int ROWS, int CH, class F>
DGPS_DEV void for_each_cell(int t, int nt, F&& f) {
#pragma unroll 1
  for (int e = t; e < ROWS * CH; e += nt) f(e / CH, e % CH);
}

/// The column walk: rows r = r0, r0 + step, ... < ROWS, the destination advancing dst_step and the source
/// src_step elements per row. A row outside [row_lo, row_hi) is zero-filled (no global read; `safe` stands in
/// for its address).
template <int ROWS, class T>
DGPS_DEV void cp_async_column(T* dst, int dst_step, const T* src, int64_t src_step, const T* safe, int r0, int step,
                              int row_lo, int row_hi) {
#pragma unroll 1
  for (int r = r0; r < ROWS; r += step, dst += dst_step, src += src_step) {
    const bool ok = r >= row_lo && r < row_hi;
    cp_async16(dst, ok ? src : safe, ok);
  }
}

/// Where a row's 16-byte piece p lands in a smem row: in place (the default), or permuted within the row by a
/// swizzle (tile/chunk_rows.cuh SwizzledF32Row).
struct PieceInPlace {
  DGPS_HD static constexpr int at(int p) { return p; }
};

/// cp.async of ROWS rows of T elements (cols a multiple of one 16-byte piece, 16 / sizeof(T) elements) from
/// global rows spaced `gstride` elements into a smem tile with pitch `spitch`, piece p of a row at piece
/// Piece::at(p) of its smem row; rows >= valid_rows and columns >= valid_cols are zero-filled. The smem tile
/// has PAD_COLS columns in total (>= cols), all written.
template <int ROWS, int PAD_COLS, class T, class Piece = PieceInPlace>
DGPS_DEV void load_tile(T* s, int spitch, const T* g, int64_t gstride, int valid_rows, int valid_cols, int t, int nt) {
  constexpr int EP = 16 / sizeof(T), CH = PAD_COLS / EP;  // elements per piece, pieces per row
  if (nt % CH == 0) {
    const int r0 = t / CH, p = t % CH, step = nt / CH;
    cp_async_column<ROWS>(s + r0 * spitch + EP * Piece::at(p), step * spitch, g + r0 * gstride + EP * p,
                          step * gstride, g, r0, step, 0, EP * p < valid_cols ? valid_rows : 0);
    return;
  }
  for_each_cell<ROWS, CH>(t, nt, [&](int r, int p) {
    const bool ok = r < valid_rows && EP * p < valid_cols;
    cp_async16(s + r * spitch + EP * Piece::at(p), ok ? g + r * gstride + EP * p : g, ok);
  });
}
/// load_tile of 16-bit elements (bf16/fp16 operand tiles).
template <int ROWS, int PAD_COLS>
DGPS_DEV void load_tile16(uint16_t* s, int spitch, const uint16_t* g, int64_t gstride, int valid_rows, int valid_cols,
                          int t = tid(), int nt = nthreads()) {
  load_tile<ROWS, PAD_COLS>(s, spitch, g, gstride, valid_rows, valid_cols, t, nt);
}
/// load_tile of 32-bit elements (f32 records and gates).
template <int ROWS, int PAD_COLS>
DGPS_DEV void load_tile32(float* s, int spitch, const float* g, int64_t gstride, int valid_rows, int valid_cols,
                          int t = tid(), int nt = nthreads()) {
  load_tile<ROWS, PAD_COLS>(s, spitch, g, gstride, valid_rows, valid_cols, t, nt);
}

/// In-place fp16 -> bf16 re-encoding of a smem tile (fp16 inputs feed bf16 tensor-core products).
template <int ROWS, int COLS>
DGPS_DEV void f16_to_bf16_tile(uint16_t* s, int spitch, int t = tid(), int nt = nthreads()) {
  for (int e = t; e < ROWS * COLS / 2; e += nt) {
    const int r = e / (COLS / 2), c2 = e - r * (COLS / 2);
    uint32_t* p = reinterpret_cast<uint32_t*>(s + r * spitch + 2 * c2);
    const uint32_t x = *p;
    *p = pack_bf16(f16_to_f32((uint16_t)(x & 0xffffu)), f16_to_f32((uint16_t)(x >> 16)));
  }
}

// ---- "core matrix" tiles: 8 rows x 8 bf16 (16 bytes) contiguous, core matrices ordered column-block major ----
// Element (r, c) of an R-row tile sits at core_off<R>(r, c). This is the no-swizzle K-major layout of wgmma B
// operands (LBO = 16·R bytes between column blocks, SBO = 128 bytes between row blocks) and every ldmatrix
// 8x8 matrix is one contiguous, bank-conflict-free core matrix.
template <int R>
DGPS_DEV int core_off(int r, int c) {
  return ((c >> 3) * (R >> 3) + (r >> 3)) * 64 + (r & 7) * 8 + (c & 7);
}
/// The cells go in row order, as in load_tile: a quarter-warp's 8 pieces of one row land in 8 core matrices
/// ROWS·16 bytes apart, on the same 4 banks (an 8-way conflict on the shared side of each cp.async). Orders with
/// fewer conflicts (8 rows x 4 pieces, 4 rows x 8 pieces per warp) were measured slower on the H200: 1.4-2% on the
/// scalar-decay forwards (docs/performance.md, run 18).
template <int ROWS, int PAD_COLS>
DGPS_DEV void load_tile16_core(uint16_t* s, const uint16_t* g, int64_t gstride, int valid_rows, int valid_cols,
                               int t = tid(), int nt = nthreads()) {
  constexpr int CH = PAD_COLS / 8;
  // A row step that is a whole number of 8-row core matrices moves the destination by step·8 elements.
  if (nt % CH == 0 && (nt / CH) % 8 == 0) {
    const int r0 = t / CH, p = t % CH, step = nt / CH;
    cp_async_column<ROWS>(s + core_off<ROWS>(r0, 8 * p), step * 8, g + r0 * gstride + 8 * p, step * gstride, g, r0,
                          step, 0, 8 * p < valid_cols ? valid_rows : 0);
    return;
  }
  for_each_cell<ROWS, CH>(t, nt, [&](int r, int p) {
    const bool ok = r < valid_rows && 8 * p < valid_cols;
    cp_async16(s + core_off<ROWS>(r, 8 * p), ok ? g + r * gstride + 8 * p : g, ok);
  });
}
/// In-place fp16 -> bf16 re-encoding of `n` contiguous elements (n even).
DGPS_DEV void f16_to_bf16_lin(uint16_t* s, int n, int t = tid(), int nt = nthreads()) {
  for (int e = t; e < n / 2; e += nt) {
    uint32_t* p = reinterpret_cast<uint32_t*>(s + 2 * e);
    const uint32_t x = *p;
    *p = pack_bf16(f16_to_f32((uint16_t)(x & 0xffffu)), f16_to_f32((uint16_t)(x >> 16)));
  }
}

// ---- preconditioner formulas -------------------------------------------------------------------------------
// One definition each, for the read-out functors the emitter prints for the in-chunk channel scan
// (tile/channel_scan.cuh) that every forward kernel runs. (The printed decode forms its multiplier from
// elementwise tile ops.)
/// The soft-power read-out of an accumulator A: base^(−s), s = r/(1+|r|), r = ln(A + eps) − center
/// (ema_sq_squash, docs/math.md §3.3), for base > 1 (the spec validator's bound). Evaluated as
///   u = −log2(base)·r = lg2(A + eps)·scale + offset,   P = 2^(u / (1 + |u|·inv)),   inv = 1/|log2(base)|
/// so that the constants fold into two FMAs: a log, a reciprocal and an exp2 plus four FMA-pipe instructions per
/// element (the in-chunk channel scan runs it for every row and channel).
struct SoftPower {
  float scale, offset, inv, eps;
  /// neg_log2_base = −log2(base); base = 1 (neg_log2_base = 0) gives P = 1.
  DGPS_DEV static SoftPower of(float neg_log2_base, float eps, float center) {
    const float inv = neg_log2_base != 0.f ? rcp(fabs_(neg_log2_base)) : 0.f;
    return SoftPower{neg_log2_base * kLn2, -center * neg_log2_base, inv, eps};
  }
  DGPS_DEV float operator()(float A) const {
    const float u = lg2(A + eps) * scale + offset;
    return ex2(u * rcp(1.f + fabs_(u) * inv));
  }
};
/// x limited to [lo, hi], each bound optional (hypergrad_ogd's projection after each update, docs/math.md §5.2).
DGPS_DEV float clamp_bounds(float x, bool has_lo, float lo, bool has_hi, float hi) {
  if (has_lo) x = fmax_(x, lo);
  if (has_hi) x = fmin_(x, hi);
  return x;
}

// ---- tensor-core fragments (mma.m16n8k16, bf16) ------------------------------------------------------------
// Accumulator tile 16x8 per lane: c[0],c[1] at (row g, cols 2t, 2t+1), c[2],c[3] at (row g+8, same cols),
// g = lane/4, t = lane%4. An A fragment (16x16) packs rows g/g+8 and cols 2t.. / 8+2t.. of two adjacent
// accumulator tiles, so accumulators become A operands in registers.
DGPS_DEV void acc_to_a(uint32_t a[4], const float c0[4], const float c1[4]) {
  a[0] = pack_bf16(c0[0], c0[1]);
  a[1] = pack_bf16(c0[2], c0[3]);
  a[2] = pack_bf16(c1[0], c1[1]);
  a[3] = pack_bf16(c1[2], c1[3]);
}

/// A fragment of a row-major [m][k] bf16 smem tile at (row0, col0).
DGPS_DEV void lds_a(uint32_t a[4], const uint16_t* s, int pitch, int row0, int col0) {
  const int l = lane(), mi = l >> 3, rr = l & 7;
  ldsm_x4(a, s + (row0 + (mi & 1) * 8 + rr) * pitch + col0 + (mi >> 1) * 8);
}
/// B fragments of two adjacent n-tiles (n0..n0+15) from an [n][k] (k contiguous) smem tile:
/// b[0],b[1] for n-tile n0, b[2],b[3] for n0+8.
DGPS_DEV void lds_b_nk(uint32_t b[4], const uint16_t* s, int pitch, int n0, int k0) {
  const int l = lane(), mi = l >> 3, rr = l & 7;
  ldsm_x4(b, s + (n0 + (mi >> 1) * 8 + rr) * pitch + k0 + (mi & 1) * 8);
}
/// B fragments of two adjacent n-tiles from a [k][n] (n contiguous) smem tile (transposing load).
DGPS_DEV void lds_b_kn(uint32_t b[4], const uint16_t* s, int pitch, int k0, int n0) {
  const int l = lane(), mi = l >> 3, rr = l & 7;
  ldsm_x4_trans(b, s + (k0 + (mi & 1) * 8 + rr) * pitch + n0 + (mi >> 1) * 8);
}
/// B fragments of two n-tiles from an [n][k] core tile with R rows (n = row).
template <int R>
DGPS_DEV void lds_b_nk_core(uint32_t b[4], const uint16_t* s, int n0, int k0) {
  const int l = lane(), mi = l >> 3, rr = l & 7;
  ldsm_x4(b, s + core_off<R>(n0 + (mi >> 1) * 8 + rr, k0 + (mi & 1) * 8));
}
/// B fragments of two n-tiles from a [k][n] core tile with R rows (k = row), transposing load.
template <int R>
DGPS_DEV void lds_b_kn_core(uint32_t b[4], const uint16_t* s, int k0, int n0) {
  const int l = lane(), mi = l >> 3, rr = l & 7;
  ldsm_x4_trans(b, s + core_off<R>(k0 + (mi & 1) * 8 + rr, n0 + (mi >> 1) * 8));
}
/// A fragment of the transpose of a row-major [k][m] smem tile, i.e. A(m, k) = s[k][m] (transposing load).
DGPS_DEV void lds_at(uint32_t a[4], const uint16_t* s, int pitch, int k0, int m0) {
  const int l = lane(), mi = l >> 3, rr = l & 7;
  ldsm_x4_trans(a, s + (k0 + (mi >> 1) * 8 + rr) * pitch + m0 + (mi & 1) * 8);
}

}  // namespace dev
}  // namespace dgps
