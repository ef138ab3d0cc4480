// Launch geometry of the DGPS kernels: which forward roles run, in what order, and each role's grid,
// block, dynamic shared memory and the one workspace buffer they share. Compiled by the host compiler
// (runtime) and by NVRTC/nvcc (the kernels use the same layout functions), so it holds only plain structs
// and constexpr functions; no CUDA types, no includes.
//
// How the runtime uses it (README.md beside this file has the full contract):
//   int roles[kMaxRoles]; int n = forwardRoles(features, roles);
//   for i < n: g = forwardGeometry(roles[i], features, shape, tile);
//              launch dgps_<name>_fwd_<roleName(roles[i])> with g.grid, g.block, g.smem_bytes on one stream;
//   workspace: one buffer sized by the package manifest's launch.workspace (the compiler's tile.workspace; 256-byte
//              aligned regions; no zeroing needed).
//   decode:    g = decodeGeometry(features, shape, tile); launch dgps_<name>_decode.
// Kernels with smem_bytes > 48 KiB need CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES raised first.
// Grid counts are in grid.x only (2^31 - 1 limit); grid.y = grid.z = 1.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define DGPS_HD __host__ __device__
#else
#define DGPS_HD
#endif

namespace dgps {
namespace launch {

// ---- inputs -----------------------------------------------------------------------------------------
/// The spec's axes as the launch contract codes them (dsl Spec.h enums in this order; dsl DeviceFeatures.h).
struct FeatureSet {
  int decay = 0;    ///< 0 none, 1 scalar (g [B,T,HV]), 2 diagonal (g [B,T,HV,K])
  int gain = 0;     ///< 0 gain 1, 1 beta [B,T,HV]
  int precond = 0;  ///< 0 none, 1 diagonal
  int side = 0;     ///< 0 key (ATK), 1 query (ATQ)
  int source = 0;   ///< 0 ema_sq_squash, 1 hypergrad_ogd
  int solve = 1;    ///< 0 linear (Hebbian), 1 delta
  int clamp = 0;    ///< hypergrad_ogd: 1 when the d update is clamped (clamp_min or clamp_max set)
  /// The walks' preconditioned operand, a tile-IR decision (docs/math.md §4.3): a key-side preconditioner's
  /// write key P⊙k̂ or a query-side one's read query P⊙q̂. 0 every walk that reads it rebuilds it from pst (a
  /// producer warpgroup); 1 chunk_local stores it (pwk, or inside opw with per-channel decay; the query in pwq)
  /// and every walk loads it; 2 (write key only, scalar decay) chunk_local stores it, the segment walks load it
  /// and state_output rebuilds it.
  int write_key = 0;
};

/// The write-key codes of FeatureSet::write_key.
constexpr int kWriteKeyRebuilt = 0, kWriteKeyStored = 1, kWriteKeyStoredSegments = 2;

/// OSDN's d-scan runs in its chunked form (docs/math.md §5.2 "Chunked form"): a fully parallel per-chunk
/// summary (role precond_summary) and a short pass over chunks (role precond_scan). A clamp is a projection,
/// not affine in d, so a clamped scan keeps the per-token warp scan (precond_scan alone).
DGPS_HD constexpr bool hypergradChunked(const FeatureSet& f) {
  return f.precond == 1 && f.source == 1 && f.clamp == 0;
}

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

// ---- roles -----------------------------------------------------------------------------------------------
enum Role : int {
  kPrecondSummary = 0,  ///< per-chunk summary, fully parallel: ema_sq_squash's accumulator, or the chunked
                        ///< hypergrad_ogd d-scan's triangular block (hypergradChunked)
  kPrecondScan = 1,     ///< preconditioner state at every chunk start (sequential per sequence and key head)
  kChunkLocal = 2,      ///< per chunk: norms, gate cumsum, write key, KKT, triangular inverse, masked Q·Kᵀ
  kStateOutput = 3,     ///< per (sequence, value head, value tile): sequential state pass and output
};
constexpr int kMaxRoles = 4;

DGPS_HD inline const char* roleName(int role) {
  return role == kPrecondSummary ? "precond_summary"
         : role == kPrecondScan  ? "precond_scan"
         : role == kChunkLocal   ? "chunk_local"
         : role == kStateOutput  ? "state_output"
                                 : "unknown";
}

/// The forward roles of `f`, in launch order; returns their count.
DGPS_HD inline int forwardRoles(const FeatureSet& f, int roles[kMaxRoles]) {
  int n = 0;
  if (f.precond == 1) {
    if (f.source == 0 || hypergradChunked(f)) roles[n++] = kPrecondSummary;
    roles[n++] = kPrecondScan;
  }
  roles[n++] = kChunkLocal;
  roles[n++] = kStateOutput;
  return n;
}

// ---- small arithmetic ----------------------------------------------------------------------------------
DGPS_HD constexpr long long cdiv(long long a, long long b) { return (a + b - 1) / b; }
DGPS_HD constexpr long long align_up(long long a, long long b) { return cdiv(a, b) * b; }
DGPS_HD constexpr int pad16(int x) { return (x + 15) / 16 * 16; }

// ---- value tiles --------------------------------------------------------------------------------------
/// block_v values the kernels compile: a multiple of 16 (one consumer warp per 16 value columns) in
/// [16, 128] (config.cuh static_asserts the same).
DGPS_HD constexpr bool blockVCompiles(int block_v) { return block_v >= 16 && block_v <= 128 && block_v % 16 == 0; }
/// The value tile a state_output CTA really covers for `block_v`: block_v clipped to V rounded up to 16
/// (config.cuh cfg::BV). Any V that is a multiple of 8 runs with any compilable block_v: the last tile's
/// columns >= V are masked (loads zero-fill them, stores skip them in 8-column steps), so block_v need not
/// divide V, and block_v > V runs as valueTile = pad16(V) (e.g. V = 120: block_v 128 is one masked tile).
DGPS_HD constexpr int valueTile(int V, int block_v) { return block_v < pad16(V) ? block_v : pad16(V); }

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
/// The sizes of the chunked hypergrad_ogd scan's records, which the shared-memory layouts below use too:
/// Floats per (chunk slot, key head) of the chunked hypergrad_ogd's hgvec: a [C], y [C], L_n and 3 pad floats
/// (a 16-byte multiple, for cp.async).
DGPS_HD constexpr int hypergradVecFloats(int C) { return 2 * C + 4; }
/// Row pitch (elements) of the bf16 [C][KP] operand regions opq, opk, opw, pwk and pwq: KP = pad16(K).
DGPS_HD constexpr int workspaceRowPitch(int K) { return pad16(K); }
/// Floats per (chunk slot, key head) of hgtri: the lower triangle of a C x C block, row j at j(j+1)/2 (a
/// 16-byte multiple for C a multiple of 16).
DGPS_HD constexpr int hypergradTriFloats(int C) { return C * (C + 1) / 2; }

/// Which prepared operand tiles a spec needs (the workspace regions opq, opk, opw that chunk_local writes and the
/// walks stage in shared memory).
DGPS_HD constexpr bool needOpQ(const FeatureSet& f) { return f.decay == 2; }
DGPS_HD constexpr bool needOpK(const FeatureSet& f) { return f.solve == 1 && f.decay == 2; }
DGPS_HD constexpr bool needOpW(const FeatureSet& f) { return f.decay == 2; }
/// The preconditioner's side: the walks need the preconditioned write key (ATK) or read query (ATQ), rebuilt
/// in shared memory or stored by chunk_local (FeatureSet::write_key; walkRebuildsKw, walkRebuildsQ).
DGPS_HD constexpr bool rebuildsKw(const FeatureSet& f) { return f.precond == 1 && f.side == 0; }
DGPS_HD constexpr bool rebuildsQ(const FeatureSet& f) { return f.precond == 1 && f.side == 1; }
/// state_output's k tile holds the raw key when no opk takes its place and something reads it: the delta
/// read key, the write key (no per-channel decay), or the preconditioner's input.
DGPS_HD constexpr bool rawKInKTile(const FeatureSet& f) {
  return !needOpK(f) && (f.solve == 1 || !needOpW(f) || f.precond == 1);
}
/// chunk_local writes the preconditioned write key P⊙k̂ once (FeatureSet::write_key 1 or 2).
DGPS_HD constexpr bool storesKw(const FeatureSet& f) { return rebuildsKw(f) && f.write_key != kWriteKeyRebuilt; }
/// A walk rebuilds the write key: a state_output walk (`segment` false) or a segment walk (segment_summary,
/// segment_state_output) of a key-side preconditioner whose FeatureSet::write_key does not give it the stored one.
DGPS_HD constexpr bool walkRebuildsKw(const FeatureSet& f, bool segment) {
  return rebuildsKw(f) && !(f.write_key == kWriteKeyStored || (f.write_key == kWriteKeyStoredSegments && segment));
}
/// chunk_local writes the preconditioned query P⊙q̂ once into pwq (FeatureSet::write_key 1, a query-side
/// preconditioner with scalar or no decay) and the walks that write o (state_output, segment_state_output) load it.
DGPS_HD constexpr bool needPwq(const FeatureSet& f) {
  return rebuildsQ(f) && !needOpQ(f) && f.write_key == kWriteKeyStored;
}
/// A walk that reads the query (one that writes o) rebuilds P⊙q̂ (a query-side preconditioner without pwq).
DGPS_HD constexpr bool walkRebuildsQ(const FeatureSet& f) { return rebuildsQ(f) && !needPwq(f); }
/// A walk runs the producer warpgroup: it rebuilds the write key, or the query (a query-side preconditioner; the
/// segment summary reads no query and has its own rule, segmentSummaryThreads).
DGPS_HD constexpr bool walkRebuilds(const FeatureSet& f, bool segment) {
  return walkRebuildsKw(f, segment) || walkRebuildsQ(f);
}
/// With opk in the k tile, a walk's rebuild reads the raw key from a tile of its own.
DGPS_HD constexpr bool rawKOwnTile(const FeatureSet& f, bool segment = false) {
  return f.precond == 1 && needOpK(f) && walkRebuilds(f, segment);
}

// ---- shared-memory layouts (byte offsets; the kernels carve their dynamic smem with these) --------------
/// Row pitch (elements) of a bf16 tile with `cols` columns: +8 elements (16 bytes) against bank conflicts
/// of ldmatrix.
DGPS_HD constexpr int bf16Pitch(int cols) { return cols + 8; }
DGPS_HD constexpr int f32Pitch(int cols) { return cols + 4; }

struct ChunkLocalSmem {
  int q = 0, k = 0, kw = 0;   ///< bf16 [C][KP+8]: query (or P⊙q), key, write-key operand (P⊙k)
  int mul = 0;                ///< diagonal decay: bf16 [NB(NB+1)/2][KP] per-block-pair channel multipliers
                              ///< (NB = C/16; tile/lower_product_gated.cuh)
  int kcol = -1;              ///< diagonal decay with the key both a row and the column operand (delta rule,
                              ///< no write key): bf16 [C][KP+8] gated column copy; -1 when absent (the
                              ///< columns are then gated in place)
  int G = 0;                  ///< f32 [C][KP]: diagonal decay: per-channel log2 cumsum
  int A = 0;                  ///< f32 [C][C+4]: KKT block, inverted in place into T
  int tok = 0;                ///< f32 [C][8] per-token scalars; [C][4] preconditioner inputs; 16 spare floats
  int pstate = 0;             ///< f32 [KP]: preconditioner state at the chunk start
  int total = 0;
};

DGPS_HD constexpr ChunkLocalSmem chunkLocalSmem(const FeatureSet& f, int K, int C) {
  ChunkLocalSmem m;
  const int KP = pad16(K);
  const int tile = C * bf16Pitch(KP) * 2;
  int off = 0;
  m.q = off;
  off += tile;
  m.k = off;
  off += tile;
  const bool asym = f.precond == 1 && f.side == 0;
  m.kw = asym ? off : m.k;
  off += asym ? tile : 0;
  if (f.decay == 2) {
    const int nb = C / 16;
    m.mul = off;
    off += nb * (nb + 1) / 2 * KP * 2;
    const bool copy = !asym && f.solve == 1;  // the KKT's rows are the key itself
    m.kcol = copy ? off : -1;
    off += copy ? tile : 0;
    m.G = off;
    off += C * KP * 4;
    m.A = off;  // separate: each warp stores its blocks while others still read the operands
    off += C * f32Pitch(C) * 4;
  } else {
    m.A = 0;  // aliases q/k: written only after every warp finished its tensor-core products
    const int a_end = C * f32Pitch(C) * 4;
    off = off > a_end ? off : a_end;
  }
  m.tok = off;
  off += C * 8 * 4 + C * 4 * 4 + 16 * 4;
  m.pstate = off;
  off += f.precond == 1 ? KP * 4 : 0;
  m.total = off;
  return m;
}

/// state_output, one pipeline stage (offsets relative to the stage) and the stage-independent parts.
struct StateOutputSmem {
  int q = 0, k = 0, kw = 0, kraw = 0, v = 0, tb = 0, aqk = 0, tok = 0, pst = 0, dec = 0;  ///< offsets in a stage
  int stage_bytes = 0;
  int stages = 1;
  int total = 0;
};

/// state_output: per pipeline stage the q (or opq) and k (or opk) tiles in the core-matrix layout, the write-key
/// tile (opw, the stored pwk, or P⊙k rebuilt here), the raw key where opk takes the k slot and the walk's rebuild
/// needs it, the value tile, 𝒯·diag(β), Aqk, per-token factors, the preconditioner state at the chunk start
/// (where the walk rebuilds an operand) and, for diagonal decay, the per-channel chunk decay. `segment`: the
/// layout of a segment walk (segment_summary, segment_state_output), which differs only where
/// FeatureSet::write_key gives the segment walks the stored write key and state_output not.
DGPS_HD constexpr StateOutputSmem stateOutputSmem(const FeatureSet& f, int K, int V, int C, int BV, int stages,
                                                  bool f16, bool segment = false) {
  StateOutputSmem m;
  (void)V;
  (void)f16;
  const int KP = pad16(K);
  const int tile = C * KP * 2;
  int off = 0;
  m.q = off;
  off += tile;
  m.k = off;
  off += tile;
  const bool kw = needOpW(f) || rebuildsKw(f);
  m.kw = kw ? off : m.k;
  off += kw ? tile : 0;
  m.kraw = rawKOwnTile(f, segment) ? off : m.k;
  off += rawKOwnTile(f, segment) ? tile : 0;
  m.v = off;
  off += C * bf16Pitch(BV) * 2;
  m.tb = off;
  off += f.solve == 1 ? C * bf16Pitch(C) * 2 : 0;
  m.aqk = off;
  off += C * bf16Pitch(C) * 2;
  m.tok = off;
  off += (C + 1) * 8 * 4;
  m.pst = off;
  off += walkRebuilds(f, segment) ? KP * 4 : 0;
  m.dec = off;
  off += f.decay == 2 ? KP * 4 : 0;
  off = (int)align_up(off, 128);
  m.stage_bytes = off;
  m.stages = stages;
  m.total = off * stages;
  return m;
}

/// precond_summary of the chunked hypergrad_ogd scan (tile/feedback_scan_summary.cuh), f32 unless noted:
///   uT   [KP][C+4]   u = k̂² transposed (the Gram matrix's 4x4 register tiles read float4 columns)
///   key  bf16 [C][KP+8]  the raw key tile (cp.async), aliased by gt: dead once uT is built
///   gt   [C][C+4]    𝒢 (strictly lower), inverted in place into 𝒯 = (I + 𝒢)^{-1} (tri_inverse.cuh)
///   tok  [8][C] + 8  per-token scalars (rk, rk², κ, β, column factor, cum [C+1])
struct HypergradSummarySmem {
  int uT = 0, key = 0, gt = 0, tok = 0, total = 0;
};
DGPS_HD constexpr HypergradSummarySmem hypergradSummarySmem(int K, int C) {
  HypergradSummarySmem m;
  const int KP = pad16(K);
  const int keyBytes = C * bf16Pitch(KP) * 2, gtBytes = C * f32Pitch(C) * 4;
  int off = 0;
  m.uT = off;
  off += KP * (C + 4) * 4;
  m.key = m.gt = off;
  off += keyBytes > gtBytes ? keyBytes : gtBytes;
  m.tok = off;
  off += (8 * C + 8) * 4;
  m.total = off;
  return m;
}

/// Threads of the chunked pass's CTA (one per (sequence, key head)): its per-chunk products are short, so
/// more warps shorten the sequential critical path.
constexpr int kHypergradPassThreads = 256;

/// precond_scan of the chunked hypergrad_ogd scan: two cp.async stages of {raw key bf16 [C][KP+8], hgtri
/// [C(C+1)/2], hgvec [2C+4]}, then d [KP], w [C], y⊙c [C] and the update's partial sums [threads] (f32).
struct HypergradPassSmem {
  int stage_bytes = 0, key = 0, tri = 0, vec = 0;  ///< offsets in a stage
  int d = 0, w = 0, c = 0, part = 0, total = 0;
};
DGPS_HD constexpr HypergradPassSmem hypergradPassSmem(int K, int C) {
  HypergradPassSmem m;
  const int KP = pad16(K);
  m.key = 0;
  m.tri = C * bf16Pitch(KP) * 2;
  m.vec = m.tri + hypergradTriFloats(C) * 4;
  m.stage_bytes = m.vec + hypergradVecFloats(C) * 4;
  m.d = 2 * m.stage_bytes;
  m.w = m.d + KP * 4;
  m.c = m.w + C * 4;
  m.part = m.c + C * 4;
  m.total = m.part + kHypergradPassThreads * 4;
  return m;
}

/// state_output warps: one consumer warp per 16 value columns, plus, where the walk rebuilds a preconditioned
/// operand (walkRebuilds), one producer warpgroup that loads the next chunk's key and rebuilds it while the
/// consumers run the current chunk (the rebuild then stays off the sequential critical path). `segment`: the
/// corrected walk of the segmented pass (segment_state_output), whose CTA is state_output's.
DGPS_HD constexpr int stateOutputConsumerWarps(int BV) { return BV / 16; }
DGPS_HD constexpr int stateOutputProducerWarps(const FeatureSet& f, bool segment = false) {
  return walkRebuilds(f, segment) ? 4 : 0;
}
DGPS_HD constexpr int stateOutputThreads(const FeatureSet& f, int BV, bool segment = false) {
  return (stateOutputConsumerWarps(BV) + stateOutputProducerWarps(f, segment)) * 32;
}

/// Largest dynamic shared memory per CTA on sm_90 (H100/H200): 227 KiB. Candidates above the device's
/// limit (cudaDevAttrMaxSharedMemoryPerBlockOptin) must be pruned by the tuner.
constexpr unsigned long long kSm90MaxDynamicSmem = 232448;

// ---- geometry ----------------------------------------------------------------------------------------------
DGPS_HD constexpr int precondScanThreads(const FeatureSet& f, int K) {
  // ema_sq_squash: one thread per channel; hypergrad_ogd: the chunked pass's CTA, or (with a clamp) one warp
  // per (sequence, key head), 4 per CTA.
  return f.source == 1 ? (hypergradChunked(f) ? kHypergradPassThreads : 128)
                       : (pad16(K) <= 32 ? 32 : (pad16(K) + 31) / 32 * 32);
}

DGPS_HD inline Geometry forwardGeometry(int role, const FeatureSet& f, const ProblemShape& s, const TileConfig& t) {
  Geometry g;
  const long long slots = chunkSlots(s, t.chunk);
  const int KP = pad16((int)s.K);
  const int BV = valueTile((int)s.V, t.block_v);
  switch (role) {
    case kPrecondSummary:
      g.grid.x = (unsigned)(slots * s.H);
      g.block.x = (unsigned)(t.warps * 32);
      g.smem_bytes = hypergradChunked(f) ? (unsigned long long)hypergradSummarySmem((int)s.K, t.chunk).total
                                         : (unsigned long long)(t.chunk * bf16Pitch(KP) * 2 + t.chunk * 4 * 4);
      break;
    case kPrecondScan:
      if (hypergradChunked(f)) {
        g.grid.x = (unsigned)(s.N * s.H);
        g.block.x = (unsigned)precondScanThreads(f, (int)s.K);
        g.smem_bytes = (unsigned long long)hypergradPassSmem((int)s.K, t.chunk).total;
      } else if (f.source == 1) {
        g.grid.x = (unsigned)cdiv(s.N * s.H, 4);
        g.block.x = (unsigned)precondScanThreads(f, (int)s.K);
        g.smem_bytes = (unsigned long long)(4 * 32 * bf16Pitch(KP) * 2);  // 32 key rows per warp
      } else {
        g.grid.x = (unsigned)(s.N * s.H);
        g.block.x = (unsigned)precondScanThreads(f, (int)s.K);
        g.smem_bytes = 0;
      }
      break;
    case kChunkLocal:
      g.grid.x = (unsigned)(slots * s.HV);
      g.block.x = (unsigned)(t.warps * 32);
      g.smem_bytes = (unsigned long long)chunkLocalSmem(f, (int)s.K, t.chunk).total;
      break;
    case kStateOutput:
    default:
      g.grid.x = (unsigned)(s.N * s.HV * cdiv(s.V, BV));
      g.block.x = (unsigned)stateOutputThreads(f, BV);
      g.smem_bytes = (unsigned long long)stateOutputSmem(f, (int)s.K, (int)s.V, t.chunk, BV, t.stages, s.f16 != 0).total;
      break;
  }
  return g;
}

// ---- the sequence-parallel state pass (docs/architecture.md, "Long sequences: the segmented state pass") ---
/// Segment slots for segments of L chunks (tile/segment_slots.cuh segment_slots): N·⌈⌈T/C⌉/L⌉, or with varlen
/// ⌊T/(C·L)⌋ + N. Sequence n's segment j is slot first_segment_slot(n) + j; the bound needs no host sync.
DGPS_HD constexpr long long segmentSlots(const ProblemShape& s, int C, long long L) {
  return s.varlen ? s.T / (C * L) + s.N : s.N * cdiv(cdiv(s.T, C), L);
}

/// The kernels of the segmented state pass, in launch order after chunk_local (they replace state_output).
enum SegmentRole : int {
  kSegmentSummary = 0,      ///< per (slot, value head): E over value tiles, then M over tiles of M's columns
  kSegmentFold = 1,         ///< per (sequence, value head, value tile): the fp32 fold over the segments
  kSegmentStateOutput = 2,  ///< per (slot, value head, value tile): the walk from the folded start, writes o
};
constexpr int kSegmentRoles = 3;

DGPS_HD inline const char* segmentRoleName(int role) {
  return role == kSegmentSummary ? "segment_summary" : role == kSegmentFold ? "segment_fold" : "segment_state_output";
}

/// A segment_fold CTA (tile/state_fold.cuh, whose kFoldThreads / kFoldCols these mirror): kSegmentFoldThreads
/// threads fold kSegmentFoldCols value columns (columns fold independently, so the fold's grid is finer than the
/// walk's value tile: the fold is the segmented pass's sequential critical path). Dynamic shared memory: two
/// stages of M_s [K][K + 4] and two h slabs [K][kSegmentFoldCols], f32.
constexpr int kSegmentFoldThreads = 128;
constexpr int kSegmentFoldCols = 16;
DGPS_HD constexpr long long segmentFoldSmem(long long K) { return (2 * K * (K + 4) + 2 * K * kSegmentFoldCols) * 4; }

/// Threads of a segment_summary CTA: state_output's consumer warps, plus its producer warpgroup when the walks
/// rebuild the write key (a key-side preconditioner). The summary's walks read no query, so a query-side
/// preconditioner's summary has nothing to rebuild and no producers (its shared-memory stage stays
/// stateOutputSmem's).
DGPS_HD constexpr int segmentSummaryThreads(const FeatureSet& f, int BV) {
  return (stateOutputConsumerWarps(BV) + (walkRebuildsKw(f, true) ? stateOutputProducerWarps(f, true) : 0)) * 32;
}

/// Launch geometry of a segment kernel. The summary's grid is S·HV·⌈V/BV⌉ CTAs of E (value tiles) followed by
/// S·HV·⌈K/BV⌉ CTAs of M (tiles of M's K columns, BV wide); both walks use state_output's stages and shared
/// memory, and segmentSummaryThreads; the corrected walk is state_output's CTA.
DGPS_HD inline Geometry segmentGeometry(int role, const FeatureSet& f, const ProblemShape& s, const TileConfig& t,
                                        long long L) {
  Geometry g;
  const long long slots = segmentSlots(s, t.chunk, L);
  const int BV = valueTile((int)s.V, t.block_v);
  const unsigned long long walkSmem =
      (unsigned long long)stateOutputSmem(f, (int)s.K, (int)s.V, t.chunk, BV, t.stages, s.f16 != 0, true).total;
  switch (role) {
    case kSegmentSummary:
      g.grid.x = (unsigned)(slots * s.HV * (cdiv(s.V, BV) + cdiv(s.K, BV)));
      g.block.x = (unsigned)segmentSummaryThreads(f, BV);
      g.smem_bytes = walkSmem;
      break;
    case kSegmentFold:
      g.grid.x = (unsigned)(s.N * s.HV * cdiv(s.V, kSegmentFoldCols));
      g.block.x = kSegmentFoldThreads;
      g.smem_bytes = (unsigned long long)segmentFoldSmem(s.K);
      break;
    case kSegmentStateOutput:
    default:
      g.grid.x = (unsigned)(slots * s.HV * cdiv(s.V, BV));
      g.block.x = (unsigned)stateOutputThreads(f, BV, true);
      g.smem_bytes = walkSmem;
      break;
  }
  return g;
}

/// Decode (128 threads): one CTA per (batch row, key head) when preconditioned (the CTA owns the key head's
/// preconditioner state and loops over its value heads and value tiles), otherwise one CTA per
/// (batch row, value head, value tile of block_v columns).
/// Decode value tile: 32 columns (8 threads x float4 per row, 16 row groups of 128 threads).
DGPS_HD constexpr int decodeTile(const ProblemShape& s, const TileConfig& t) {
  (void)s;
  (void)t;
  return 32;
}
/// f32 smem of decode: k̂, write key, read query, per-channel decay [KP each], cross-warp partial sums
/// [4 warps][2][32], scalars [32].
DGPS_HD constexpr int decodeSmemBytes(int K) { return (4 * pad16(K) + 4 * 2 * 32 + 32) * 4; }
DGPS_HD inline Geometry decodeGeometry(const FeatureSet& f, const ProblemShape& s, const TileConfig& t) {
  Geometry g;
  const long long tiles = cdiv(s.V, decodeTile(s, t));
  g.grid.x = (unsigned)(f.precond == 1 ? s.B * s.H : s.B * s.HV * tiles);
  g.block.x = 128;
  g.smem_bytes = (unsigned long long)decodeSmemBytes((int)s.K);
  return g;
}

}  // namespace launch
}  // namespace dgps
