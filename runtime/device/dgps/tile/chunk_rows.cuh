// Rows of one chunk in shared memory: the CTA's chunk coordinates, loads of [C, K] row tiles and [C] per-row
// vectors, and the per-row vector type RowVec. Pad rows of a partial last chunk (i >= Lr) read as zero.
#pragma once

#include "dgps/device/common.cuh"
#include "dgps/device/tensor_copy.cuh"

namespace dgps {
namespace tile {

/// A [C] f32 vector in shared memory with element i at p[i * stride] (columns of a [C][stride] record).
struct RowVec {
  float* p;
  int stride;
  DGPS_DEV float& operator[](int i) const { return p[i * stride]; }
};

/// Eight consecutive floats of a shared row segment (16-byte aligned), with two 16-byte loads: scalar loads
/// of the same bytes cost four times the shared-memory instructions.
DGPS_DEV void load_f8(float (&x)[8], const float* p) {
  const dev::F4 lo = reinterpret_cast<const dev::F4*>(p)[0], hi = reinterpret_cast<const dev::F4*>(p)[1];
  x[0] = lo.x, x[1] = lo.y, x[2] = lo.z, x[3] = lo.w, x[4] = hi.x, x[5] = hi.y, x[6] = hi.z, x[7] = hi.w;
}

/// The smem layout of an f32 row tile [C, KP] (the per-channel gates G; load_rows32): channel d of a row sits at
/// column col(d) = d XOR (bit 5 of d, moved to bit 2), i.e. the two 16-byte halves of every 32-byte group with
/// channel bit 5 set are swapped. Why: the gate readers (gated_rows.cuh, lower_product_gated.cuh) give each lane
/// 8 consecutive channels at consecutive d0 and read them with two 16-byte loads. In place, lanes l and l + 4 of
/// a quarter-warp hit the same bank group in both loads (a 2-way conflict; measured on the H200, a quarter of
/// KDA chunk_local's shared-memory wavefronts were these replays); swizzled, each load's quarter-warp covers all
/// 32 banks. A reader that visits every channel of a row in any order (a column cumsum, a max over channels)
/// may ignore the swizzle; one that pairs a gate with an operand channel must use col() or load8().
struct SwizzledF32Row {
  DGPS_HD static constexpr int col(int d) { return d ^ ((d >> 3) & 4); }
  /// The loader's piece map (dev::load_tile): piece p (channels 4p .. 4p+3) at piece col(4p) / 4.
  DGPS_HD static constexpr int at(int p) { return p ^ ((p >> 3) & 1); }
  /// Channels d0 .. d0+7 (d0 a multiple of 8) of a swizzled row, with two 16-byte loads (scalar loads of the
  /// same bytes cost four times the shared-memory instructions).
  DGPS_DEV static void load8(float (&x)[8], const float* row, int d0) {
    const int s = (d0 >> 3) & 4;  // where channels d0 .. d0+3 start within the group: 0 or 4
    const dev::F4 lo = *reinterpret_cast<const dev::F4*>(row + d0 + s);
    const dev::F4 hi = *reinterpret_cast<const dev::F4*>(row + d0 + (s ^ 4));
    x[0] = lo.x, x[1] = lo.y, x[2] = lo.z, x[3] = lo.w, x[4] = hi.x, x[5] = hi.y, x[6] = hi.z, x[7] = hi.w;
  }
};
static_assert(SwizzledF32Row::col(36) == 32 && SwizzledF32Row::col(32) == 36 && SwizzledF32Row::col(12) == 12 &&
                  SwizzledF32Row::at(8) == 9 && SwizzledF32Row::at(9) == 8 && SwizzledF32Row::at(7) == 7,
              "the piece map and the channel map must agree");

/// Channels d0 .. d0+7 of gate row i (G: pitch gp, SwizzledF32Row layout).
DGPS_DEV void load_gate8(float (&x)[8], const float* G, int gp, int i, int d0) {
  SwizzledF32Row::load8(x, G + i * gp, d0);
}

/// Channel d of gate row i (G: pitch gp, SwizzledF32Row layout).
DGPS_DEV float gate_at(const float* G, int gp, int i, int d) { return G[i * gp + SwizzledF32Row::col(d)]; }

/// Eight consecutive 16-bit values of a shared row segment (16-byte aligned), decoded by Codec, with one
/// 16-byte load.
template <class Codec>
DGPS_DEV void load_x8(float (&x)[8], const uint16_t* p) {
  const dev::U4 w = *reinterpret_cast<const dev::U4*>(p);
  const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    x[2 * u] = Codec::load((uint16_t)(ws[u] & 0xffffu));
    x[2 * u + 1] = Codec::load((uint16_t)(ws[u] >> 16));
  }
}

/// Where the CTA's chunk lies: tokens [t0, t0 + Lr) of the flattened token axis, heads (h, hv).
struct ChunkAt {
  int64_t t0 = 0;
  int Lr = 0;
};

/// rows [0, C) x columns [0, KP) of a 16-bit tensor [tokens, heads, K] at `head` into s (pitch `pitch`), by
/// cp.async; rows >= Lr and columns >= K are zero. Completes at the next wait_rows().
template <int C, int KP>
DGPS_DEV void load_rows16(uint16_t* s, int pitch, const void* g, const ChunkAt& at, int64_t heads, int64_t head,
                          int K) {
  dev::load_tile16<C, KP>(s, pitch, static_cast<const uint16_t*>(g) + (at.t0 * heads + head) * K, heads * K, at.Lr,
                          K);
}

/// The same for an f32 tensor [tokens, heads, K] (pitch KP), into the SwizzledF32Row layout.
template <int C, int KP>
DGPS_DEV void load_rows32(float* s, int pitch, const float* g, const ChunkAt& at, int64_t heads, int64_t head,
                          int K) {
  dev::load_tile<C, KP, float, SwizzledF32Row>(s, pitch, g + (at.t0 * heads + head) * K, heads * K, at.Lr, K,
                                               dev::tid(), dev::nthreads());
}

/// Waits for this thread's row loads and publishes them to the CTA.
DGPS_DEV void wait_rows() {
  dev::cp_async_commit();
  dev::cp_async_wait<0>();
  dev::sync_threads();
}

/// How a chunk's q and k rows arrive: by one tensor copy per tile (TMA, ForwardArgs::row_maps), issued by thread
/// 0 and counted in by the mbarrier `bar`, or by every thread's cp.async. Why: the cp.async loads cost each
/// thread a loop of address arithmetic per 16-byte piece, and a row at a 16-byte offset (K = 120: 240-byte rows)
/// spans three 128-byte lines where an aligned one spans two, which doubles those loads' L1 requests; a tensor
/// copy costs one instruction per tile either way. Only a full chunk is copied so: the maps span the whole token
/// axis, so the rows past a partial chunk's sequence would be read where they must be zero.
struct RowCopy {
  uint64_t* bar;
  bool tensor;
};
/// `bit`: the ForwardArgs::row_maps bit that allows this role's copies (1: chunk_local's; 32: precond_summary's).
template <int C>
DGPS_DEV RowCopy row_copy(const ForwardArgs& a, const ChunkAt& at, uint64_t* bar, int64_t bit = 1) {
  const RowCopy rc{bar, DGPS_HAS_TMA && (a.row_maps & 1) != 0 && (a.row_maps & bit) != 0 && at.Lr == C};
  if (rc.tensor && dev::tid() == 0) dev::mbar_init(bar, 1);
  return rc;
}

/// load_rows16 of q or k (`map`: a.q_rows or a.k_rows) by a tensor copy when rc.tensor; the map's box is
/// launch::chunkRowsMapShape's, whose rows are bf16Pitch(KP) wide, so the tile's pitch must be that.
template <int C, int KP>
DGPS_DEV void load_rows16(const RowCopy& rc, const TmaDescriptor& map, uint16_t* s, int pitch, const void* g,
                          const ChunkAt& at, int64_t heads, int64_t head, int K) {
  if (rc.tensor && pitch == launch::bf16Pitch(KP)) {
    dev::announced_copy(rc.bar, (uint32_t)(C * launch::bf16Pitch(KP) * 2), dev::tid(),
                        [&] { dev::tensor_copy_3d(s, &map, 0, (int)head, (int)at.t0, rc.bar); });
    return;
  }
  load_rows16<C, KP>(s, pitch, g, at, heads, head, K);
}

/// load_rows32 of the per-channel gates g by one tensor copy (map a.g_rows, launch_rules.h gateRowsMapShape) when
/// rc.tensor and the runtime encoded that map: the copy engine's 32-byte swizzle writes the SwizzledF32Row layout
/// itself, given rows of KP floats (pitch KP, KP a multiple of 64) and a 256-byte aligned tile. Why: the per-thread
/// loads cost a loop of 16-byte pieces, and at K = 120 the 480-byte rows straddle an extra 128-byte line each.
template <int C, int KP>
DGPS_DEV void load_rows32(const RowCopy& rc, const ForwardArgs& a, float* s, int pitch, const float* g,
                          const ChunkAt& at, int64_t heads, int64_t head, int K) {
  if (KP % 64 == 0 && rc.tensor && (a.row_maps & 16) != 0 && pitch == KP && (dev::smem_u32(s) & 255u) == 0) {
    dev::announced_copy(rc.bar, (uint32_t)(C * KP * 4), dev::tid(),
                        [&] { dev::tensor_copy_4d(s, &a.g_rows, 0, 0, (int)head, (int)at.t0, rc.bar); });
    return;
  }
  load_rows32<C, KP>(s, pitch, g, at, heads, head, K);
}

/// wait_rows, and the tensor copies of rc: thread 0 arrives once its copies are issued, and every thread waits
/// for the barrier's first phase after the CTA barrier (which orders mbar_init before any wait).
DGPS_DEV void wait_rows(const RowCopy& rc) {
  if (rc.tensor && dev::tid() == 0) dev::mbar_arrive(rc.bar);
  wait_rows();
  if (rc.tensor) dev::mbar_wait(rc.bar, 0);
}

// Row-local ops: each computes row i of a [C] vector from row i of its operands. The tile emitter fuses
// consecutive row-local ops into one loop over the CTA's rows (thread t takes rows t, t + nthreads, ...), so
// every global load of a chunk's per-row scalars is issued in one iteration and their latencies overlap, as
// in a hand-written per-token loop; one loop per op would wait for each load in turn.

/// v_i = g[(t0 + i)·heads + head] for a real row, 0 for a pad row (an f32 tensor [tokens, heads]).
DGPS_DEV void load_row_scalars(RowVec v, const float* g, const ChunkAt& at, int64_t heads, int64_t head, int i) {
  v[i] = i < at.Lr ? g[(at.t0 + i) * heads + head] : 0.f;
}

/// v_i = src[i] for a real row, 0 for a pad row (a [C] slice of a workspace region in device memory).
DGPS_DEV void load_row_slice(RowVec v, const float* src, const ChunkAt& at, int i) {
  v[i] = i < at.Lr ? src[i] : 0.f;
}

/// v_d = src[d] for d < K, 0 for K <= d < KP (a [K] vector of device memory; cp.async, see wait_rows()).
template <int KP>
DGPS_DEV void load_vec32(float* v, const float* src, int K) {
  dev::load_tile32<1, KP>(v, KP, src, K, 1, K);
}

/// v_i = x on a real row, pad on a pad row.
DGPS_DEV void fill_rows(RowVec v, float x, float pad, const ChunkAt& at, int i) { v[i] = i < at.Lr ? x : pad; }

/// y_i = e^{x_i} on a real row, pad on a pad row. The exponential is taken on every row and the pad chosen
/// by a select, not a branch: a branch around it kept ptxas from issuing the row loop's next global load
/// before the exponential (precond_summary ran 7% slower on the H200 for that alone).
DGPS_DEV void exp_rows(RowVec y, RowVec x, float pad, const ChunkAt& at, int i) {
  const float e = dev::exp_(x[i]);
  y[i] = i < at.Lr ? e : pad;
}

/// y_i = a_i · b_i.
DGPS_DEV void mul_rows(RowVec y, RowVec a, RowVec b, int i) { y[i] = a[i] * b[i]; }

/// Re-encodes a 16-bit tile of the input dtype as bf16 in place (fp16 inputs feed bf16 tensor-core
/// products); a no-op for bf16 inputs. Thread t converts channels t, t + nthreads, ...
template <int C, int KP, bool kF16>
DGPS_DEV void encode_bf16(uint16_t* s, int pitch) {
  if (!kF16) return;
  for (int d = dev::tid(); d < KP; d += dev::nthreads())
    for (int i = 0; i < C; ++i) s[i * pitch + d] = dev::f32_to_bf16(dev::f16_to_f32(s[i * pitch + d]));
}

}  // namespace tile
}  // namespace dgps
