// The emulated fold kernel of TileFoldEmuCheck.cpp: one CTA per (sequence, value head, value tile of
// kFoldBV columns) calling runtime/device/dgps/tile/state_fold.cuh. Plain host types only, so the check's
// main file does not see the emulator prelude (TileFoldKernel.cpp is compiled with it).
#pragma once
#include <cstddef>
#include <cstdint>

namespace dgps_fold_check {

constexpr int kFoldCols = 16;     // state_fold.cuh kFoldCols (static_assert in TileFoldKernel.cpp)
constexpr int kFoldThreads = 128;  // state_fold.cuh kFoldThreads

/// Arguments of one launch; layouts as state_fold.cuh documents, indexed by its segment slots
/// (first_segment_slot): cu the packed batch's cu_seqlens [N + 1] or null for N rows of seqLen tokens,
/// segments of L chunks of C tokens.
struct FoldArgs {
  const float *trans, *ext, *init;
  float *start, *final;
  const int64_t* cu;
  int64_t seqLen, C, L, N, HV;
  int K, V;
};

/// state_fold.cuh's slot layout for `a`: the first segment slot and the segment count of sequence n, and the
/// slot bound (the length of the start / trans / ext buffers in segments).
int64_t firstSlot(const FoldArgs& a, int64_t n);
int64_t segmentCount(const FoldArgs& a, int64_t n);
int64_t slotBound(const FoldArgs& a, int64_t T);

/// The kernel body run by every emulated thread (grid N·HV·⌈V / kFoldCols⌉, kFoldThreads threads, dynamic
/// smem foldSmemBytes(K)), for a.K with foldSupports (the head dims compiled here: 16, 32, 120, 128).
void foldKernel(const FoldArgs& a);
bool foldSupports(int K);
size_t foldSmemBytes(int K);

}  // namespace dgps_fold_check
