// The argument block every generated DGPS kernel takes, shared by host (runtime) and device code.
// It is compiled by both the host compiler and NVRTC, so it uses only fixed-width scalar types.
//
// Layouts follow flash-linear-attention (docs/spec.md "Tensors"):
//   q, k            [B, T, H,  K]   input dtype (bf16 or fp16), contiguous
//   v               [B, T, HV, V]   input dtype
//   g               [B, T, HV] (scalar decay) or [B, T, HV, K] (diagonal decay), fp32, natural log
//   beta            [B, T, HV]      fp32
//   precond_g       [B, T, H]       fp32, natural log (accumulator gate, or OSDN's log retention)
//   precond_beta    [B, T, H]       fp32 (accumulator gain)
//   precond_center  [H]             fp32 (c_h of the squash)
//   o               [B, T, HV, V]   input dtype
//   initial_state / final_state                 [N, HV, K, V] fp32
//   initial_precond_state / final_precond_state [N, H, K]     fp32
//   cu_seqlens      [N + 1]         int64; when non-null, B == 1 and sequences are packed along T.
// With n_h Householder steps per token (spec solve.steps, docs/math.md §3.7) k, v and beta carry T·n_h rows
// (row t·n_h + j is step j of token t), q, g and o keep T rows, cu_seqlens counts tokens, and seq_len is T·n_h.
// Pointers a spec does not use are null. Index arithmetic on these pointers is 64-bit.
#pragma once

#ifndef __CUDACC_RTC__
#include <cstdint>
#endif

namespace dgps {

/// Division of an index 0 <= n < 2^31 by a fixed divisor d >= 1 with a multiply-high and a shift instead of a
/// divide (about 22 instructions on sm_90):  n / d = (umulhi(n, mul) + n) >> shift,  with shift = ceil(log2 d) and
/// mul = floor(2^32 (2^shift − d) / d) + 1 (the rounded-up reciprocal; exact for every n < 2^31). The host forms
/// it (fast_div below); the kernels divide by it with dev::udiv (platform.cuh).
struct FastDiv {
  uint32_t mul;
  uint32_t shift;
};

/// The most workspace regions one package declares (the runtime's kMaxWorkspaceBuffers is this bound).
constexpr int kMaxWorkspaceRegions = 16;

/// A TMA tensor map (the driver's CUtensorMap: 128 opaque bytes, 64-byte aligned), encoded on the host for one
/// call (runtime/lib/TensorMaps.cpp; on the CPU emulator, tests/emu's own encoding of the same
/// launch::TensorMapShape).
struct alignas(64) TmaDescriptor {
  uint64_t opaque[16];
};

struct ForwardArgs {
  const void* q;
  const void* k;
  const void* v;
  const float* g;
  const float* beta;
  const float* precond_g;
  const float* precond_beta;
  const float* precond_center;
  const float* initial_state;
  const float* initial_precond_state;
  const int64_t* cu_seqlens;
  void* o;
  float* final_state;
  float* final_precond_state;
  void* workspace;           ///< scratch of the size the manifest's workspace rule gives; may be null if 0.
  int64_t batch;             ///< B (1 when cu_seqlens is set).
  int64_t seq_len;           ///< T (total packed tokens when cu_seqlens is set); T·n_h rows of the step axis for
                             ///< a package with n_h = DGPS_ROW_STEPS > 1 steps per token (config.cuh).
  int64_t num_seqs;          ///< N = B, or len(cu_seqlens) − 1.
  int64_t heads_qk;          ///< H.
  int64_t heads_v;           ///< HV.
  float scale;               ///< query scale.
  /// L, chunks per segment of the sequence-parallel state pass (launch_rules.h segmentSlots); 0 = the
  /// ordinary sequential state pass. Read only by the segment kernels (segment_summary, segment_fold,
  /// segment_state_output); the workspace then also holds the segment regions after the chunk regions.
  int64_t segment_chunks;
  /// Divisors of the chunk-parallel roles' block index (set_index_divisors, from the fields above and the chunk):
  /// a CTA splits blockIdx.x into (chunk slot, head) and a slot into (sequence, chunk), and a value head into its
  /// key head, which cost four integer divisions per CTA, a tenth of a short CTA's time.
  FastDiv div_heads_qk;  ///< by H
  FastDiv div_heads_v;   ///< by HV
  FastDiv div_gva;       ///< by HV / H
  FastDiv div_chunks;    ///< by ceil(seq_len / chunk), the chunks of one sequence without cu_seqlens (>= 1)
  /// Byte offset from `workspace` of each workspace region, in the package's layout order (the manifest's
  /// launch.workspace.buffers, then launch.forward_segmented.buffers when segment_chunks >= 1; kernels.cu's
  /// dgps_package::Workspace reads them with workspace_of). The host has them in its launch plan; a CTA that
  /// recomputed them from the shape spent about 40 instructions per warp in 64-bit arithmetic before its first load.
  /// Unused entries are 0.
  int64_t workspace_offsets[kMaxWorkspaceRegions];
  /// Tensor maps of q and k for tensor copies (TMA; device/tensor_copy.cuh), encoded by the runtime for devices
  /// that have them (sm_90 and later) when the rows allow it; without them every load is by cp.async, with the
  /// same result. Bit 0: q_rows and k_rows (launch_rules.h chunkRowsMapShape: a chunk's rows at the padded pitch
  /// of chunk_local's row tiles). Bit 1: q_core and k_core (walkCoreMapShape: a chunk's rows in the core-matrix
  /// order of the state walks' stage tiles). Bit 2: wsq_core, wsk_core and wsw_core, the same order over the
  /// workspace's bf16 operand rows that chunk_local writes (workspaceCoreMapShape; the query rows opq or pwq, the
  /// key rows opk, the write-key rows opw or pwk: each encoded where the package has that region). Bit 3: v_rows,
  /// the walks' value tiles (chunkRowsMapShape over v [rows, HV, V], with the value tile BV in the place of KP:
  /// boxes of C rows at pitch bf16Pitch(BV) from column v0). Bit 4: g_rows, the per-channel log-decay g
  /// [rows, HV, K] f32 (gateRowsMapShape: a chunk's rows at pitch KP in the 32-byte-swizzled gate layout of
  /// chunk_local, tile/chunk_rows.cuh SwizzledF32Row). Bit 5: precond_summary copies its key rows by k_rows too.
  /// Kernels read the maps in parameter space (DGPS_GRID_CONST).
  int64_t row_maps;
  TmaDescriptor q_rows;
  TmaDescriptor k_rows;
  TmaDescriptor q_core;
  TmaDescriptor k_core;
  TmaDescriptor wsq_core;
  TmaDescriptor wsk_core;
  TmaDescriptor wsw_core;
  TmaDescriptor v_rows;
  TmaDescriptor g_rows;
};

#ifndef __CUDACC_RTC__
/// The FastDiv of a divisor d >= 1 (d = 0 is taken as 1; the callers guard their own empty cases).
inline FastDiv fast_div(uint64_t d) {
  if (d < 1) d = 1;
  uint32_t shift = 0;
  while (shift < 32 && (uint64_t(1) << shift) < d) ++shift;
  const uint64_t mul = (((uint64_t(1) << shift) - d) << 32) / d + 1;
  return FastDiv{uint32_t(mul), shift};
}
/// Sets ForwardArgs' divisors from heads_qk, heads_v and seq_len for tiles of `chunk` rows; every host that
/// launches a forward role calls it after filling those fields (the runtime, the CPU emulator's checks).
inline void set_index_divisors(ForwardArgs& a, int64_t chunk) {
  a.div_heads_qk = fast_div(uint64_t(a.heads_qk));
  a.div_heads_v = fast_div(uint64_t(a.heads_v));
  a.div_gva = fast_div(uint64_t(a.heads_qk > 0 ? a.heads_v / a.heads_qk : 1));
  a.div_chunks = fast_div(uint64_t(chunk > 0 ? (a.seq_len + chunk - 1) / chunk : 1));
}
#endif

/// Single-token decode: q,k [B,1,H,K] (or [B,H,K]), v [B,1,HV,V]; states are updated in place. With n_h
/// Householder steps per token (DGPS_ROW_STEPS) k [B,n_h,H,K], v [B,n_h,HV,V] and beta [B,n_h,HV] hold the token's
/// steps.
struct DecodeArgs {
  const void* q;
  const void* k;
  const void* v;
  const float* g;
  const float* beta;
  const float* precond_g;
  const float* precond_beta;
  const float* precond_center;
  float* state;              ///< [B, HV, K, V] fp32, read and written.
  float* precond_state;      ///< [B, H, K] fp32, read and written; null without a preconditioner.
  void* o;                   ///< [B, 1, HV, V]
  int64_t batch;
  int64_t heads_qk;
  int64_t heads_v;
  float scale;
};

}  // namespace dgps
