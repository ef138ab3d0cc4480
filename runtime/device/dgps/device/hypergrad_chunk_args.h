// Arguments and shared-memory sizes of the chunked OSDN d-scan CTA bodies (hypergrad_chunk.cuh): a plain
// header, so host code (launchers, tests) passes the same structs by value. Layouts and formulas are in
// hypergrad_chunk.cuh.
#pragma once

#if !defined(DGPS_HD)
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define DGPS_HD __host__ __device__
#else
#define DGPS_HD
#endif
#endif

namespace dgps {
namespace dev {

/// Stage 1 (per chunk and key head): inputs k̂ [rows][H][K], beta / rlog [rows][H] (rlog null: no retention);
/// outputs per chunk slot R, Y [S][H][C][K], a [S][H][C], log_decay [S][H]. All f32.
struct HypergradChunkArgs {
  const float* khat;
  const float* beta;
  const float* rlog;
  float eta;
  int H, K, C;
  float* R;
  float* a;
  float* Y;
  float* log_decay;
};

/// Stage 2 (per sequence and key head): stage 1's outputs and the initial d [N][H][K] (null: d_init in every
/// channel) → pst [S][H][K], pcoef [S][H][C] (0 past a chunk's length), final_d [N][H][K]. All f32: the
/// device library's workspace buffers pst and pcoef (launch_rules.h), as the token scan writes them.
struct HypergradPassArgs {
  const float* R;
  const float* a;
  const float* Y;
  const float* log_decay;
  const float* init;
  float d_init;
  int H, K, C;
  float* pst;
  float* pcoef;
  float* final_d;
};

/// Dynamic shared memory (bytes) of stage 1 at chunk size C: u [C][K], 𝒢 and 𝒯 [C][C], κ, β [C], cum [C + 1].
DGPS_HD constexpr int hypergrad_chunk_summary_smem(int C, int K) { return (C * K + 2 * C * C + 3 * C + 1) * 4; }
/// Dynamic shared memory (bytes) of stage 2: d [K], the chunk's coefficients [C].
DGPS_HD constexpr int hypergrad_chunk_pass_smem(int C, int K) { return (K + C) * 4; }

}  // namespace dev
}  // namespace dgps
