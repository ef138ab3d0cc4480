// The state walks' stage tiles by tensor copies (TMA): the raw q and k tiles (ForwardArgs::row_maps bit 1, the
// maps q_core and k_core of launch_rules.h walkCoreMapShape) and the workspace operand tiles opq/pwq, opk, opw/pwk
// (bit 2, wsq/wsk/wsw_core of workspaceCoreMapShape). Why: a stage's cp.async loads cost every thread a loop of
// 16-byte copies per tile, and their issue was the largest stall of GDN's walk (docs/performance.md, run 18); a
// tensor copy lands the whole tile in the core-matrix order (common.cuh core_off) from one instruction. Run 19
// measured the walks 10-16% faster with them.
//
// Each pipeline stage has its own mbarrier (the walk layout's `bar` region). Per use of a stage: thread 0
// announces and issues the copies in stage(c), then arrives (always, so that the stage's phase advances once per
// use even when a partial chunk went by cp.async); every thread waits for that phase after the step's CTA
// barrier. A stage's k-th use is phase k, and consecutive chunks alternate stages, so chunk c of a walk that
// starts at chunk c0 waits for parity ((c − c0) / STAGES) & 1.
#pragma once

#include "dgps/device/common.cuh"
#include "dgps/device/tensor_copy.cuh"

namespace dgps {
namespace tile {

/// Whether any of this walk's stage tiles go by tensor copies (then the stages' barriers are in use).
DGPS_DEV bool stage_copies(const ForwardArgs& a) { return DGPS_HAS_TMA && (a.row_maps & 14) != 0; }
/// Whether the raw q/k tiles do (q_core, k_core), and the workspace operand tiles (wsq/wsk/wsw_core).
DGPS_DEV bool raw_copies(const ForwardArgs& a) { return DGPS_HAS_TMA && (a.row_maps & 2) != 0; }
DGPS_DEV bool ws_copies(const ForwardArgs& a) { return DGPS_HAS_TMA && (a.row_maps & 4) != 0; }
/// Whether the value tiles do (v_rows).
DGPS_DEV bool value_copies(const ForwardArgs& a) { return DGPS_HAS_TMA && (a.row_maps & 8) != 0; }

/// Thread 0, before the first stage is issued: initialises the barriers of the `stages` stages (at `bar_off` in
/// each). The walk's first CTA barrier comes before any wait.
DGPS_DEV void stage_copy_init(bool on, unsigned char* sm, int stage_bytes, int bar_off, int stages) {
  if (!on || dev::tid() != 0) return;
  for (int s = 0; s < stages; ++s) dev::mbar_init(dev::smem_at<uint64_t>(sm + s * stage_bytes, bar_off), 1);
}

/// dev::load_tile16_core of a raw q or k tile (map: a.q_core or a.k_core; on: raw_copies): a full chunk by one
/// tensor copy from thread t == 0, chunk rows [row0, row0 + C) of head `head`; a partial chunk by every thread's
/// cp.async.
template <int C, int KP>
DGPS_DEV void load_core16(bool on, const TmaDescriptor& map, uint64_t* bar, int64_t row0, int64_t head, uint16_t* s,
                          const uint16_t* g, int64_t gstride, int valid_rows, int valid_cols, int t, int nt) {
  if (on && valid_rows == C) {
    dev::announced_copy(bar, C * KP * 2, t, [&] { dev::tensor_copy_4d(s, &map, 0, (int)row0, (int)head, 0, bar); });
    return;
  }
  dev::load_tile16_core<C, KP>(s, g, gstride, valid_rows, valid_cols, t, nt);
}

/// dev::load_tile16_core of a workspace operand tile (rows [row0, row0 + C) of a region [rows][KP]; map: a.wsq_core,
/// a.wsk_core or a.wsw_core): a full chunk by one tensor copy from thread t == 0, else by cp.async.
template <int C, int KP>
DGPS_DEV void load_ws_core16(bool on, const TmaDescriptor& map, uint64_t* bar, int64_t row0, uint16_t* s,
                             const uint16_t* g, int64_t gstride, int valid_rows, int valid_cols, int t, int nt) {
  if (on && valid_rows == C) {
    dev::announced_copy(bar, C * KP * 2, t, [&] { dev::tensor_copy_3d(s, &map, 0, (int)row0, 0, bar); });
    return;
  }
  dev::load_tile16_core<C, KP>(s, g, gstride, valid_rows, valid_cols, t, nt);
}

/// dev::load_tile16<C, BV> of a value tile (map a.v_rows): rows [row0, row0 + C) of value head hv, columns
/// [v0, v0 + bf16Pitch(BV)) (those >= V read as zero; the pitch pad is never read), a full chunk by one tensor copy
/// from thread t == 0, else by cp.async. The smem pitch must be the map's box row, bf16Pitch(BV).
template <int C, int BV>
DGPS_DEV void load_value16(bool on, const TmaDescriptor& map, uint64_t* bar, int64_t row0, int64_t hv, int v0,
                           uint16_t* s, int spitch, const uint16_t* g, int64_t gstride, int valid_rows, int valid_cols,
                           int t, int nt) {
  if (on && valid_rows == C && spitch == launch::bf16Pitch(BV)) {
    dev::announced_copy(bar, C * launch::bf16Pitch(BV) * 2, t,
                        [&] { dev::tensor_copy_3d(s, &map, v0, (int)hv, (int)row0, bar); });
    return;
  }
  dev::load_tile16<C, BV>(s, spitch, g, gstride, valid_rows, valid_cols, t, nt);
}

/// The end of stage(c): thread 0 arrives on the stage's barrier once its copies are issued.
DGPS_DEV void stage_copy_arrive(bool on, uint64_t* bar, int t) {
  if (on && t == 0) dev::mbar_arrive(bar);
}

/// After the step's CTA barrier: waits for chunk c's tensor copies (use (c − c0) / stages of its stage).
DGPS_DEV void stage_copy_wait(bool on, uint64_t* bar, int64_t c, int64_t c0, int stages) {
  if (on) dev::mbar_wait(bar, (uint32_t)(((c - c0) / stages) & 1));
}

}  // namespace tile
}  // namespace dgps
