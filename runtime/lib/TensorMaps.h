// Tensor maps (TMA descriptors) of a forward call's q and k rows: ForwardArgs::row_maps, q_rows and k_rows
// (runtime/device/dgps/device/abi.h), which chunk_local's row loads copy whole tiles with
// (runtime/device/dgps/tile/chunk_rows.cuh RowCopy).
#pragma once
#include <cstdint>

#include "dgps/device/abi.h"
#include "dgps/runtime/Validation.h"

namespace dgps {
namespace detail {

/// Byte offsets in a.workspace of the package's bf16 operand-row regions (launch.workspace.buffers), -1 where the
/// package has none: the query rows (opq or pwq), the key rows (opk), the write-key rows (opw or pwk).
struct WorkspaceOperandRows {
  long long query = -1, key = -1, write_key = -1;
};

/// Sets a.row_maps (abi.h: bit 0 the chunk rows maps, bit 1 the walks' core-order maps of q and k, bit 2 those of
/// the workspace operand rows, bit 3 the walks' value tiles, bit 4 chunk_local's per-channel gates, bit 5
/// precond_summary's key rows by k_rows) and encodes them: a.q_rows, a.k_rows (launch_rules.h
/// chunkRowsMapShape, chunk `chunk`), a.q_core, a.k_core (walkCoreMapShape), for the regions `ws` names a.wsq_core,
/// a.wsk_core, a.wsw_core (workspaceCoreMapShape over chunkSlots x HV x C rows; a.workspace must be set), and
/// a.v_rows (chunkRowsMapShape over v with the value tile min(block_v, pad16(V)) for KP; chunk <= 32 only, where it
/// measured faster), with `channel_gate` (the spec's decay is per channel: g is [rows, HV, K] f32) a.g_rows
/// (gateRowsMapShape: 32-byte swizzled, K a multiple of 8, pad16(K) a multiple of 64). Each only where the
/// kernels can use it: a target with tensor copies (target_sm >= 90), 16-bit rows of one step per token, K (V) a
/// multiple of 8, 16-byte aligned bases, and every box within the copy engine's limits; elsewhere the kernels load
/// by cp.async, with the same result. DGPS_TENSOR_COPY in the environment (read once) chooses, for comparing the
/// paths: 0 none, "rows" chunk_local's only, "raw" also the walks' q/k, "ws" also the workspace operand tiles,
/// "values" also the value tiles, else all six. The last encoding per thread is reused when the pointers and shapes repeat, so a warm call makes no
/// driver call for it. Throws RuntimeError when the driver refuses a map it was expected to accept.
void encodeRowMaps(ForwardArgs& a, const ForwardProblem& p, int chunk, int block_v, int target_sm,
                   const WorkspaceOperandRows& ws = {}, bool channel_gate = false);

/// The row_maps bits DGPS_TENSOR_COPY asks for: 0 for "0", 1 for "rows", 3 for "raw", 7 for "ws", 15 for "values",
/// else 63.
int tensorCopyMaps();

}  // namespace detail
}  // namespace dgps
