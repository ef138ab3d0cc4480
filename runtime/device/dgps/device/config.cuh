// Compile-time configuration of one kernel variant: head dims, input dtype and tile parameters.
//
// The runtime passes these as -D macros at JIT time (every tuning candidate is the same generated source
// compiled with other macros). Defaults make a lone `#include "dgps/tile/tile.cuh"` compile.
//   DGPS_K, DGPS_V         key / value head dims; multiples of 8 (16-byte rows), 8..256.
//   DGPS_INPUT_BF16=1 | DGPS_INPUT_F16=1   dtype of q, k, v, o (default bf16).
//   DGPS_CHUNK             chunk length C of the chunked forward: 16, 32 or 64.
//   DGPS_BLOCK_V           value columns per state_output CTA: a multiple of 16, at most 128 (one warp per
//                          16 columns). Also the value tile of the decode kernel (a multiple of 16, <= 128).
//   DGPS_WARPS             warps of the chunk_local / precond_summary CTAs: 2, 4 or 8.
//   DGPS_STAGES            shared-memory stages of the state_output prefetch pipeline: 1 or 2.
//   DGPS_SUMMARY_PAIRS     1: two segment-summary CTAs share an SM where they fit (launch_rules.h
//                          segmentSummaryCtasPerSm); 0 (default): one.
//   DGPS_ROW_STEPS         rows of the step axis per token (default 1). A package whose forward runs over
//                          several steps per token (solve.steps = n_h, docs/math.md §3.7) defines it in its
//                          kernels.cu: seq_len and the chunk rows then count steps, cu_seqlens still counts
//                          tokens, and sequence n's steps are [n_h·cu_seqlens[n], n_h·cu_seqlens[n + 1]).
// Invalid combinations fail with a static_assert naming the macro.
#pragma once

#include "dgps/device/launch_rules.h"  // the supported chunk, warps and stages (kChunkChoices, ...)

#ifndef DGPS_K
#define DGPS_K 128
#endif
#ifndef DGPS_V
#define DGPS_V 128
#endif
#ifndef DGPS_CHUNK
#define DGPS_CHUNK 64
#endif
#ifndef DGPS_BLOCK_V
#define DGPS_BLOCK_V 64
#endif
#ifndef DGPS_WARPS
#define DGPS_WARPS 4
#endif
#ifndef DGPS_STAGES
#define DGPS_STAGES 2
#endif
#ifndef DGPS_ROW_STEPS
#define DGPS_ROW_STEPS 1
#endif
#ifndef DGPS_SUMMARY_PAIRS
#define DGPS_SUMMARY_PAIRS 0
#endif
#if defined(DGPS_INPUT_BF16) && defined(DGPS_INPUT_F16)
#error "define only one of DGPS_INPUT_BF16 and DGPS_INPUT_F16"
#endif

namespace dgps {
namespace cfg {

constexpr int K = DGPS_K;
constexpr int V = DGPS_V;
constexpr int C = DGPS_CHUNK;
constexpr int WARPS = DGPS_WARPS;
constexpr int STAGES = DGPS_STAGES;
/// Step rows per token of the forward's row axis (DGPS_ROW_STEPS): cu_seqlens entries are scaled by it.
constexpr int ROW_STEPS = DGPS_ROW_STEPS;
/// Two segment-summary CTAs may share an SM (DGPS_SUMMARY_PAIRS; launch_rules.h segmentSummaryCtasPerSm).
constexpr bool kSummaryPairs = DGPS_SUMMARY_PAIRS != 0;
/// K and V rounded up to the 16-wide k-step of the tensor-core products; pad channels are zero.
constexpr int KP = (K + 15) / 16 * 16;
constexpr int VP = (V + 15) / 16 * 16;
/// Value tile of one state_output CTA, clipped to the padded value dim.
constexpr int BV = DGPS_BLOCK_V < VP ? DGPS_BLOCK_V : VP;
#if defined(DGPS_INPUT_F16)
constexpr bool kInputF16 = true;
#else
constexpr bool kInputF16 = false;
#endif

static_assert(K >= 8 && K <= 256 && K % 8 == 0, "DGPS_K must be a multiple of 8 in [8, 256]");
static_assert(V >= 8 && V <= 256 && V % 8 == 0, "DGPS_V must be a multiple of 8 in [8, 256]");
static_assert(launch::isChoice(launch::kChunkChoices, C), "DGPS_CHUNK must be 16, 32 or 64");
static_assert(DGPS_BLOCK_V % 16 == 0 && DGPS_BLOCK_V >= 16 && DGPS_BLOCK_V <= 128,
              "DGPS_BLOCK_V must be a multiple of 16 in [16, 128]");
static_assert(launch::isChoice(launch::kWarpChoices, WARPS), "DGPS_WARPS must be 2, 4 or 8");
static_assert(launch::isChoice(launch::kStageChoices, STAGES), "DGPS_STAGES must be 1 or 2");
static_assert(DGPS_SUMMARY_PAIRS == 0 || DGPS_SUMMARY_PAIRS == 1, "DGPS_SUMMARY_PAIRS must be 0 or 1");
static_assert(ROW_STEPS >= 1 && ROW_STEPS <= 4, "DGPS_ROW_STEPS must be in [1, 4]");

}  // namespace cfg
}  // namespace dgps
