// The chunked feedback scan's records and shared memory (tile/feedback_scan_summary.cuh, feedback_scan_pass.cuh):
// a plain header the host reads too (the workspace catalog sizes the records; the launch contract,
// dsl/lib/LaunchContract.cpp, declares the same layouts for the manifest and tests/runtime/test_launch_rules.cpp
// FeedbackScanLayoutsMatchTheTileLibrary checks the two agree; the manifest's device_layout fingerprint covers
// this file). No CUDA types, no includes beyond launch_rules.h.
#pragma once

#include "dgps/device/launch_rules.h"

namespace dgps {
namespace tile {

/// Floats per (chunk slot, key head) of the summary's vector record hgvec: a [C], y [C], L_n and 3 pad floats
/// (a 16-byte multiple, for cp.async).
DGPS_HD constexpr int feedbackVecFloats(int C) { return 2 * C + 4; }
/// Floats per (chunk slot, key head) of the summary's triangular record hgtri: the lower triangle of a C x C
/// block, row j at j(j+1)/2 (a 16-byte multiple for C a multiple of 16).
DGPS_HD constexpr int feedbackTriFloats(int C) { return C * (C + 1) / 2; }

/// Threads of the pass's CTA (one per (sequence, key head)): its per-chunk products are short, so more warps
/// shorten the sequential critical path.
constexpr int kFeedbackPassThreads = 256;

/// The per-chunk summary:
///   key  16-bit [C][KP+8]  the raw key tile (cp.async), rewritten in place into u = k̂²'s bf16 high part
///   ulo  bf16 [C][KP+8]    u's bf16 low part, overlaid by gt once the Gram product has read it
///   gt   f32 [C][C+4]      𝒢 (strictly lower), inverted in place into 𝒯 = (I + 𝒢)^{-1} (tri_inverse.cuh)
///   tok  f32 [8][C] + 8    per-token scalars (rk, rk², κ, β, column factor, cum [C+1])
///   bar  16 bytes          the mbarrier of the key's tensor copy (tile/chunk_rows.cuh RowCopy)
struct FeedbackSummarySmem {
  int key = 0, ulo = 0, gt = 0, tok = 0, bar = 0, total = 0;
};
DGPS_HD constexpr FeedbackSummarySmem feedbackSummarySmem(int K, int C) {
  FeedbackSummarySmem m;
  const int KP = launch::pad16(K);
  const int keyBytes = C * launch::bf16Pitch(KP) * 2, gtBytes = C * launch::f32Pitch(C) * 4;
  int off = 0;
  m.key = off;
  off += keyBytes;
  m.ulo = m.gt = off;
  off += keyBytes > gtBytes ? keyBytes : gtBytes;
  m.tok = off;
  off += (8 * C + 8) * 4;
  m.bar = off;
  off += 16;
  m.total = off;
  return m;
}

/// Cp.async stages of the pass: the operands of the two chunks after the current one load under its products (one
/// stage ahead left the pass waiting on its loads: about a fifth of its stall samples, docs/performance.md run 21).
constexpr int kFeedbackPassStages = 3;

/// The pass over chunks: kFeedbackPassStages cp.async stages of {raw key bf16 [C][KP+8], hgtri, hgvec}, then
/// d [KP] (pad channels 0), w [C], y⊙c [C] and the update's partial sums [2 * threads] (f32).
struct FeedbackPassSmem {
  int stage_bytes = 0, key = 0, tri = 0, vec = 0;  ///< offsets in a stage
  int d = 0, w = 0, c = 0, part = 0, total = 0;
};
DGPS_HD constexpr FeedbackPassSmem feedbackPassSmem(int K, int C) {
  FeedbackPassSmem m;
  const int KP = launch::pad16(K);
  m.key = 0;
  m.tri = C * launch::bf16Pitch(KP) * 2;
  m.vec = m.tri + feedbackTriFloats(C) * 4;
  m.stage_bytes = m.vec + feedbackVecFloats(C) * 4;
  m.d = kFeedbackPassStages * m.stage_bytes;
  m.w = m.d + KP * 4;
  m.c = m.w + C * 4;
  m.part = m.c + C * 4;
  m.total = m.part + 2 * kFeedbackPassThreads * 4;
  return m;
}

}  // namespace tile
}  // namespace dgps
