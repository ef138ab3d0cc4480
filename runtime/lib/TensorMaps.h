// Tensor maps (TMA descriptors) of a forward call's q and k rows: ForwardArgs::row_maps, q_rows and k_rows
// (runtime/device/dgps/device/abi.h), which chunk_local's row loads copy whole tiles with
// (runtime/device/dgps/tile/chunk_rows.cuh RowCopy).
#pragma once
#include <cstdint>

#include "dgps/device/abi.h"
#include "dgps/runtime/Validation.h"

namespace dgps {
namespace detail {

/// Sets a.row_maps (abi.h: bit 0 the chunk rows maps, bit 1 the walks' core-order maps) and encodes a.q_rows,
/// a.k_rows (launch_rules.h chunkRowsMapShape, chunk `chunk`), a.q_core and a.k_core (walkCoreMapShape)
/// when the kernels can use them: a target with tensor copies (target_sm >= 90), 16-bit rows of one step per
/// token, K a multiple of 8, q and k 16-byte aligned, and every box within the copy engine's limits. Otherwise
/// leaves a.row_maps 0 and the kernels load those rows by cp.async, with the same result. DGPS_TENSOR_COPY in the
/// environment (read once) chooses, for comparing the paths: 0 none, "rows" chunk_local's only, else both. The last encoding per thread is
/// reused when the pointers and shapes repeat, so a warm call makes no driver call for it. Throws RuntimeError
/// when the driver refuses a map it was expected to accept.
void encodeRowMaps(ForwardArgs& a, const ForwardProblem& p, int chunk, int target_sm);

/// The row_maps bits DGPS_TENSOR_COPY asks for: 0 for "0", 1 for "rows", else 3.
int tensorCopyMaps();

}  // namespace detail
}  // namespace dgps
