// Tensor maps (TMA descriptors) of a forward call's q and k rows: ForwardArgs::row_maps, q_rows and k_rows
// (runtime/device/dgps/device/abi.h), which chunk_local's row loads copy whole tiles with
// (runtime/device/dgps/tile/chunk_rows.cuh RowCopy).
#pragma once
#include <cstdint>

#include "dgps/device/abi.h"
#include "dgps/runtime/Validation.h"

namespace dgps {
namespace detail {

/// Sets a.row_maps to 1 and encodes a.q_rows and a.k_rows (launch_rules.h chunkRowsMapShape, chunk `chunk`)
/// when the kernels can use them: a target with tensor copies (target_sm >= 90), 16-bit rows of one step per
/// token, K a multiple of 8, q and k 16-byte aligned, and every box within the copy engine's limits. Otherwise
/// leaves a.row_maps 0 and the kernels load those rows by cp.async, with the same result. DGPS_TENSOR_COPY=0 in
/// the environment (read once) turns the copies off, for comparing both paths. The last encoding per thread is
/// reused when the pointers and shapes repeat, so a warm call makes no driver call for it. Throws RuntimeError
/// when the driver refuses a map it was expected to accept.
void encodeRowMaps(ForwardArgs& a, const ForwardProblem& p, int chunk, int target_sm);

/// Whether DGPS_TENSOR_COPY leaves the tensor copies on (unset, or anything but "0").
bool tensorCopiesEnabled();

}  // namespace detail
}  // namespace dgps
