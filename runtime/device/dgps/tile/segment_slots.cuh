// The slot layout of the sequence-parallel state pass's segments (docs/architecture.md, "Long sequences: the
// segmented state pass"): every sequence is cut into segments of L chunks of C rows from its start, and each
// segment gets a slot s that indexes the per-segment workspace regions (E, M, start: launch_rules.h
// the seg_* regions of the compiler's tile.workspace) without a host sync on cu_seqlens, as dev::first_slot does for chunks. Segment j of sequence n
// is slot first_segment_slot(n) + j; slots below segment_slots() that hold no segment are slack (their CTAs
// return at once, their regions are never written).
#pragma once

#include "dgps/device/platform.cuh"

namespace dgps {
namespace tile {

/// Segments of a sequence of `len` rows in segments of L chunks of C rows: ⌈⌈len / C⌉ / L⌉ (0 when empty).
DGPS_DEV int64_t segment_count(int64_t len, int64_t C, int64_t L) { return ((len + C - 1) / C + L - 1) / L; }

/// Slot of the first segment of sequence n without a host sync, as dev::first_slot does for chunks:
/// n · ⌈⌈T/C⌉/L⌉ for a fixed-length batch (cu null, sequences of seq_len rows), ⌊bos_n / (C·L)⌋ + n for a
/// packed batch (each sequence adds at most one partial segment, so the slots of sequence n never reach those
/// of n + 1). Slots stay below segment_slots(); those between sequences hold no segment and are never written.
/// Rows are the kernels' row axis: `steps` rows per token (config.cuh ROW_STEPS: Householder steps per token,
/// 1 for a one-step rule), so bos_n = steps · cu[n] while seq_len already counts rows (abi.h).
DGPS_DEV int64_t first_segment_slot(const int64_t* cu, int64_t n, int64_t seq_len, int64_t C, int64_t L,
                                    int64_t steps) {
  return cu != nullptr ? cu[n] * steps / (C * L) + n : n * segment_count(seq_len, C, L);
}

/// The slot bound: N · ⌈⌈T/C⌉/L⌉ (fixed length, T = seq_len) or ⌊T/(C·L)⌋ + N (packed, T the rows of the batch).
DGPS_DEV int64_t segment_slots(bool packed, int64_t N, int64_t T, int64_t C, int64_t L) {
  return packed ? T / (C * L) + N : N * segment_count(T, C, L);
}

/// The (sequence n, segment j) of slot `slot`, or false for a slack slot. Fixed length: n = slot / ⌈⌈T/C⌉/L⌉;
/// packed: the largest n with first_segment_slot(n) <= slot (strictly increasing in n: binary search over the
/// N + 1 entries of cu), then slack when j is past the sequence's segment count. `steps` as first_segment_slot.
DGPS_DEV bool slot_to_segment(const int64_t* cu, int64_t N, int64_t seq_len, int64_t C, int64_t L, int64_t steps,
                              int64_t slot, int64_t& n, int64_t& j) {
  if (N < 1 || L < 1) return false;
  if (cu == nullptr) {
    const int64_t ns = segment_count(seq_len, C, L);
    if (ns == 0) return false;
    n = slot / ns;
    j = slot - n * ns;
    return n < N;
  }
  int64_t lo = 0, hi = N - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) >> 1;
    if (first_segment_slot(cu, mid, seq_len, C, L, steps) <= slot) lo = mid; else hi = mid - 1;
  }
  n = lo;
  j = slot - first_segment_slot(cu, n, seq_len, C, L, steps);
  return j >= 0 && j < segment_count((cu[n + 1] - cu[n]) * steps, C, L);
}

}  // namespace tile
}  // namespace dgps
