// The plain launch vocabulary the host and the kernels share: the problem shape and tile configuration of a call,
// chunk and segment slots, value tiles, operand row pitches and a few small integer helpers. Compiled by the host
// compiler (runtime, compiler) and by NVRTC/nvcc, so it holds only plain structs and constexpr functions; no CUDA
// types, no includes.
//
// What a package's kernels launch with (its roles, each role's grid, threads and shared-memory layout) is not
// here: the compiler's launch contract (dsl/include/dgps/dsl/LaunchContract.h) decides it per package and prints
// it into the package's kernels.cu and manifest.yaml; the runtime evaluates the manifest's formulas. Nothing here
// knows a spec's decay, gain, preconditioner or solve.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define DGPS_HD __host__ __device__
#else
#define DGPS_HD
#endif

namespace dgps {
namespace launch {

/// Sizes of one call. For decode, T and N are ignored (one token per batch row).
struct ProblemShape {
  long long B = 1;    ///< batch (1 with varlen)
  long long T = 0;    ///< tokens per sequence, or total packed tokens with varlen
  long long N = 1;    ///< sequences: B, or len(cu_seqlens) - 1
  long long H = 1;    ///< key/query heads
  long long HV = 1;   ///< value heads (multiple of H)
  long long K = 128;  ///< key head dim (must equal the DGPS_K the kernels were compiled with)
  long long V = 128;  ///< value head dim (DGPS_V)
  int varlen = 0;     ///< cu_seqlens given
  int f16 = 0;        ///< q, k, v, o are fp16 (DGPS_INPUT_F16); bf16 otherwise
};

/// A tile configuration: one point of a package's tuning space, baked into a kernel variant as the
/// NVRTC macros DGPS_CHUNK, DGPS_BLOCK_V, DGPS_WARPS, DGPS_STAGES (config.cuh, whose defaults these are).
/// The one definition of the concept: the host side (runtime, tuner, tuning DB, compiler plan) uses this
/// struct too (runtime/include/dgps/runtime/TileConfig.h adds its text form "chunk=64,block_v=64,...").
struct TileConfig {
  /// Chunk length C in tokens (chunkwise WY/UT-transform form, docs/math.md §2). A plan-global parameter:
  /// every role of a forward shares it. Irrelevant to decode.
  int chunk = 64;
  /// Value columns of the state one state_output CTA owns (the value tile); also decode's value tile.
  int block_v = 64;
  /// Warps per chunk_local / precond_summary CTA (32 threads each).
  int warps = 4;
  /// Shared-memory stages of state_output's prefetch pipeline (1 or 2).
  int stages = 2;
  /// Chunks per segment of the forward's state pass (the segmented pass, docs/architecture.md "Long
  /// sequences"): -1 = not chosen (the runtime's rule decides), 0 = the plain sequential pass, L >= 1 =
  /// segments of L chunks. A launch parameter, not compiled in (no NVRTC macro): the autotuner searches it
  /// for long shapes and the tuning record carries it.
  int segment_chunks = -1;
};

/// The values of chunk, warps and stages the kernels compile for. config.cuh asserts the NVRTC macros against
/// these lists and the spec validator (dsl/lib/SpecValidate.cpp) offers exactly them, so a spec's tuning space
/// never holds a configuration that NVRTC refuses. (block_v: any multiple of 16 in [16, 128] compiles; specs
/// offer the powers of two.)
constexpr int kChunkChoices[] = {16, 32, 64};
constexpr int kWarpChoices[] = {2, 4, 8};
constexpr int kStageChoices[] = {1, 2};
template <int N>
DGPS_HD constexpr bool isChoice(const int (&choices)[N], int v) {
  for (int i = 0; i < N; ++i)
    if (choices[i] == v) return true;
  return false;
}

DGPS_HD constexpr bool operator==(const TileConfig& a, const TileConfig& b) {
  return a.chunk == b.chunk && a.block_v == b.block_v && a.warps == b.warps && a.stages == b.stages &&
         a.segment_chunks == b.segment_chunks;
}
DGPS_HD constexpr bool operator!=(const TileConfig& a, const TileConfig& b) { return !(a == b); }

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct Geometry {
  Dim3 grid;
  Dim3 block;
  unsigned long long smem_bytes = 0;  ///< dynamic shared memory
};

// ---- small arithmetic ----------------------------------------------------------------------------------
DGPS_HD constexpr long long cdiv(long long a, long long b) { return (a + b - 1) / b; }
DGPS_HD constexpr long long align_up(long long a, long long b) { return cdiv(a, b) * b; }
DGPS_HD constexpr int pad16(int x) { return (x + 15) / 16 * 16; }
DGPS_HD constexpr long long imax(long long a, long long b) { return a > b ? a : b; }

// ---- value tiles --------------------------------------------------------------------------------------
/// block_v values the kernels compile: a multiple of 16 (one consumer warp per 16 value columns) in
/// [16, 128] (config.cuh static_asserts the same).
DGPS_HD constexpr bool blockVCompiles(int block_v) { return block_v >= 16 && block_v <= 128 && block_v % 16 == 0; }
/// The value tile a state_output CTA really covers for `block_v`: block_v clipped to V rounded up to 16
/// (config.cuh cfg::BV). Any V that is a multiple of 8 runs with any compilable block_v: the last tile's
/// columns >= V are masked (loads zero-fill them, stores skip them in 8-column steps), so block_v need not
/// divide V, and block_v > V runs as valueTile = pad16(V) (e.g. V = 120: block_v 128 is one masked tile).
DGPS_HD constexpr int valueTile(int V, int block_v) { return block_v < pad16(V) ? block_v : pad16(V); }

// ---- CTAs per SM -------------------------------------------------------------------------------------------
/// Segment-summary CTAs per SM: 2 where `pairs` is on and the summary fits twice, else 1. The summary walks have
/// no output and are bound by the latency of their chunk-after-chunk steps, not by bandwidth, so a second CTA on
/// the SM fills the first one's waits. Two fit where the walk has no producer warpgroup, KP <= 128, C <= 32, two
/// stages, bf16 inputs and a 128-column value tile (`BV`, config.cuh cfg::BV = valueTile(V, block_v): 256 threads in
/// two warpgroups, whose warpgroup MMA the split product below needs): under the launch bound's 128 registers per
/// thread the walk holds the state with tile/state_rows_product.cuh's split product, and two CTAs' shared memory
/// (2 x 61 KiB for gdn, 2 x 77 KiB for pgdn at C = 32) fits in one SM's. Elsewhere ptxas spills under that cap (NVRTC
/// 13.0): fp16 inputs 12 bytes at K = 128 (their in-place conversion of the k and v tiles), a value tile of 112
/// columns (V = 112, no warpgroup MMA) 16 bytes. `pairs` is the variant's switch: NVRTC macro DGPS_SUMMARY_PAIRS
/// (config.cuh cfg::kSummaryPairs) on an sm_90a target; the runtime sets it from the environment variable
/// DGPS_SUMMARY_PAIRS=1 and counts the same CTAs per SM in its segment-length rule (dsl SegmentScan.h
/// kSummaryShareCost).
DGPS_HD constexpr int segmentSummaryCtasPerSm(bool pairs, bool producers, int KP, int C, int stages, bool f16, int BV) {
  return pairs && !producers && KP <= 128 && C <= 32 && stages == 2 && !f16 && BV == 128 ? 2 : 1;
}

/// Number of chunk slots: B·ceil(T/C), or with varlen the device-side bound ceil(T/C) + N. With varlen,
/// sequence n's chunk c lives in slot floor(cu[n]/C) + n + c (injective and below this bound), so no
/// host sync is needed to read cu_seqlens.
DGPS_HD constexpr long long chunkSlots(const ProblemShape& s, int C) {
  return s.varlen ? cdiv(s.T, C) + s.N : s.B * cdiv(s.T, C);
}

// ---- workspace -------------------------------------------------------------------------------------------
/// The workspace's layout is not here: the compiler declares it per package in the tile IR (the module attribute
/// tile.workspace, compiler/include/dgps/Dialect/Tile/IR/Workspace.h) from the regions the roles read and
/// write, and prints it into the package's kernels.cu (dgps_package::workspace_layout, the offsets the kernels
/// index) and its manifest (launch.workspace.buffers, the sizes the runtime allocates). Regions are 256-byte
/// aligned, per chunk slot (chunkSlots) and head; docs/architecture.md "The workspace" lists them.
/// The bf16 [C][KP] operand rows (opq, opk, opw, pwk, pwq) are written and read only by our own kernels, so
/// their row pitch is KP = pad16(K) elements (workspaceRowPitch), not K: at K = 120 every row starts 256 bytes
/// after the last (not 240), so the walks' 16-byte cp.async pieces of a row are aligned as at K = 128; columns
/// K..KP−1 are written as zeros (a half-written 32-byte sector costs DRAM a read-modify-write: tile/gated_rows.cuh).
/// Row pitch (elements) of the bf16 [C][KP] operand regions opq, opk, opw, pwk and pwq: KP = pad16(K).
DGPS_HD constexpr int workspaceRowPitch(int K) { return pad16(K); }
// ---- shared-memory tiles ------------------------------------------------------------------------------------
/// Row pitch (elements) of a bf16 tile with `cols` columns: +8 elements (16 bytes) against bank conflicts
/// of ldmatrix.
DGPS_HD constexpr int bf16Pitch(int cols) { return cols + 8; }
DGPS_HD constexpr int f32Pitch(int cols) { return cols + 4; }

// ---- tensor copies (TMA) of input rows -----------------------------------------------------------------------
/// The tensor-map view behind ForwardArgs::q_rows and k_rows (abi.h): a 16-bit tensor [rows, heads, K] seen as
/// dims {K, heads, rows} (innermost first; strides in bytes of dims 1 and 2), copied as boxes of
/// {bf16Pitch(KP), 1, C}. One copy lands a chunk's C rows of one head at chunk_local's row pitch bf16Pitch(KP),
/// with every column >= K (the key pad and the pitch pad) zero-filled by the copy as out of bounds.
struct TensorMapShape {
  unsigned long long dims[3];
  unsigned long long strides[2];
  unsigned box[3];
};
DGPS_HD constexpr TensorMapShape chunkRowsMapShape(long long rows, long long heads, long long K, int C, int KP) {
  return TensorMapShape{{(unsigned long long)K, (unsigned long long)heads, (unsigned long long)rows},
                        {(unsigned long long)(K * 2), (unsigned long long)(heads * K * 2)},
                        {(unsigned)bf16Pitch(KP), 1u, (unsigned)C}};
}
/// The view behind ForwardArgs::q_core and k_core: the same tensor as dims {8, rows, heads, cdiv(K, 8)} (a 16-byte
/// piece, then rows, heads and piece columns; strides in bytes of dims 1..3), copied as boxes of {8, C, 1, KP / 8}.
/// A box lands piece column by piece column, C rows of 16 bytes each: the core-matrix order of common.cuh core_off
/// that the walks' stage tiles use, with the pieces past K zero-filled.
struct TensorMapShape4 {
  unsigned long long dims[4];
  unsigned long long strides[3];
  unsigned box[4];
};
DGPS_HD constexpr TensorMapShape4 walkCoreMapShape(long long rows, long long heads, long long K, int C, int KP) {
  return TensorMapShape4{{8ull, (unsigned long long)rows, (unsigned long long)heads, (unsigned long long)((K + 7) / 8)},
                         {(unsigned long long)(heads * K * 2), (unsigned long long)(K * 2), 16ull},
                         {8u, (unsigned)C, 1u, (unsigned)(KP / 8)}};
}
/// The view behind ForwardArgs::wsq_core, wsk_core and wsw_core: a workspace region of bf16 operand rows
/// [rows][KP] (rows = chunk slots x HV x C, pitch workspaceRowPitch) as dims {8, rows, KP / 8}, copied as boxes of
/// {8, C, KP / 8}: one chunk's tile in the core-matrix order, as walkCoreMapShape.
DGPS_HD constexpr TensorMapShape workspaceCoreMapShape(long long rows, int C, int KP) {
  return TensorMapShape{{8ull, (unsigned long long)rows, (unsigned long long)(KP / 8)},
                        {(unsigned long long)(KP * 2), 16ull},
                        {8u, (unsigned)C, (unsigned)(KP / 8)}};
}
/// The view behind ForwardArgs::g_rows: the per-channel log-decay g, an f32 tensor [rows, heads, K], as dims
/// {8, K / 8, heads, rows} (a 32-byte group of channels, then groups, heads and rows; strides in bytes of dims
/// 1..3), copied as boxes of {8, KP / 8, 1, C} with the copy engine's 32-byte swizzle. The box lands densely, so
/// row i starts at byte i·KP·4 with the groups past K zero-filled, and the swizzle (byte-address bit 4 ^= bit 7)
/// swaps the two 16-byte halves of every group whose channel bit 5 is set: with rows a multiple of 256 bytes long
/// (gateRowsMapFits) and a 256-byte aligned tile, exactly chunk_local's gate layout (tile/chunk_rows.cuh
/// SwizzledF32Row) at pitch KP.
DGPS_HD constexpr TensorMapShape4 gateRowsMapShape(long long rows, long long heads, long long K, int C, int KP) {
  return TensorMapShape4{{8ull, (unsigned long long)(K / 8), (unsigned long long)heads, (unsigned long long)rows},
                         {32ull, (unsigned long long)(K * 4), (unsigned long long)(heads * K * 4)},
                         {8u, (unsigned)(KP / 8), 1u, (unsigned)C}};
}
/// Whether gateRowsMapShape describes the gate tile: K a multiple of 8 (whole 32-byte groups), rows of KP floats a
/// multiple of 256 bytes (so the swizzle's bit 7 is the channel's bit 5 on every row), box sides of at most 256.
DGPS_HD constexpr bool gateRowsMapFits(long long rows, long long heads, long long K, int C, int KP) {
  return K > 0 && K % 8 == 0 && KP % 64 == 0 && KP >= K && KP / 8 <= 256 && heads > 0 && rows > 0 &&
         rows < (1LL << 31) && heads < (1LL << 31) && C > 0 && C <= 256;
}
/// Whether a tensor copy can carry such rows: strides must be multiples of 16 bytes (K a multiple of 8), a box
/// side at most 256 elements, and coordinates fit in int32.
DGPS_HD constexpr bool chunkRowsMapFits(long long rows, long long heads, long long K, int C, int KP) {
  return K > 0 && K % 8 == 0 && heads > 0 && rows > 0 && rows < (1LL << 31) && heads < (1LL << 31) &&
         bf16Pitch(KP) <= 256 && C > 0 && C <= 256;
}

/// Largest dynamic shared memory per CTA on sm_90 (H100/H200): 227 KiB. Candidates above the device's
/// limit (cudaDevAttrMaxSharedMemoryPerBlockOptin) must be pruned by the tuner.
constexpr unsigned long long kSm90MaxDynamicSmem = 232448;

// ---- the sequence-parallel state pass (docs/architecture.md, "Long sequences: the segmented state pass") ---
/// Segment slots for segments of L chunks (tile/segment_slots.cuh segment_slots): N·⌈⌈T/C⌉/L⌉, or with varlen
/// ⌊T/(C·L)⌋ + N. Sequence n's segment j is slot first_segment_slot(n) + j; the bound needs no host sync.
DGPS_HD constexpr long long segmentSlots(const ProblemShape& s, int C, long long L) {
  return s.varlen ? s.T / (C * L) + s.N : s.N * cdiv(cdiv(s.T, C), L);
}

/// A segment_fold CTA (tile/state_fold.cuh, whose kFoldThreads / kFoldCols these mirror): kSegmentFoldThreads
/// threads fold kSegmentFoldCols value columns (columns fold independently, so the fold's grid is finer than the
/// walk's value tile: the fold is the segmented pass's sequential critical path). Dynamic shared memory: two
/// stages of M_s [K][K + 4] and two h slabs [K][kSegmentFoldCols], f32.
constexpr int kSegmentFoldThreads = 128;
constexpr int kSegmentFoldCols = 16;
}  // namespace launch
}  // namespace dgps
