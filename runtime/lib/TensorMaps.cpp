#include "TensorMaps.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "dgps/device/launch_rules.h"
#include "dgps/runtime/CudaDriver.h"
#include "dgps/runtime/Error.h"

namespace dgps {
namespace detail {
namespace {

// The device reads the map at 64-byte alignment (PTX ISA, tensor maps); the driver's struct asks more of host
// copies only, and the bytes are moved with memcpy.
static_assert(sizeof(TmaDescriptor) == sizeof(CUtensorMap) && alignof(TmaDescriptor) >= 64,
              "abi.h TmaDescriptor must hold the driver's CUtensorMap, byte for byte");

/// What one thread's last encoding was made from; a call with the same key reuses its maps.
struct RowMapKey {
  const void* q = nullptr;
  const void* k = nullptr;
  long long rows = 0, heads = 0, K = 0;
  int chunk = 0;
  bool operator==(const RowMapKey& o) const {
    return q == o.q && k == o.k && rows == o.rows && heads == o.heads && K == o.K && chunk == o.chunk;
  }
};

struct RowMapMemo {
  bool valid = false;
  RowMapKey key;
  TmaDescriptor q_rows{}, k_rows{};
};

TmaDescriptor encode(const void* base, const launch::TensorMapShape& s, const char* name) {
  CUtensorMap m;
  const cuuint64_t dims[3] = {s.dims[0], s.dims[1], s.dims[2]};
  const cuuint64_t strides[2] = {s.strides[0], s.strides[1]};
  const cuuint32_t box[3] = {s.box[0], s.box[1], s.box[2]};
  const cuuint32_t unit[3] = {1, 1, 1};
  const CUresult r = cudaDriver().cuTensorMapEncodeTiled(
      &m, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, const_cast<void*>(base), dims, strides, box, unit,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    const char* text = nullptr;
    cudaDriver().cuGetErrorString(r, &text);
    throw RuntimeError(RuntimeErrorCode::Cuda, std::string("cuTensorMapEncodeTiled (tensor '") + name +
                                                   "' rows, dims [" + std::to_string(s.dims[0]) + ", " +
                                                   std::to_string(s.dims[1]) + ", " + std::to_string(s.dims[2]) +
                                                   "]): " + (text ? text : "unknown error"));
  }
  TmaDescriptor out;
  std::memcpy(&out, &m, sizeof out);
  return out;
}

}  // namespace

bool tensorCopiesEnabled() {
  static const bool on = [] {
    const char* e = std::getenv("DGPS_TENSOR_COPY");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

void encodeRowMaps(ForwardArgs& a, const ForwardProblem& p, int chunk, int target_sm) {
  a.row_maps = 0;
  const bool is16 = p.input_dtype == ScalarType::BF16 || p.input_dtype == ScalarType::F16;
  const long long rows = p.batch * p.seq_len, K = p.key_dim, heads = p.heads_qk;
  const int KP = launch::pad16(int(K));
  if (!tensorCopiesEnabled() || target_sm < 90 || !is16 || p.row_steps != 1 || a.q == nullptr || a.k == nullptr ||
      reinterpret_cast<std::uintptr_t>(a.q) % 16 != 0 || reinterpret_cast<std::uintptr_t>(a.k) % 16 != 0 ||
      !launch::chunkRowsMapFits(rows, heads, K, chunk, KP))
    return;
  thread_local RowMapMemo memo;
  const RowMapKey key{a.q, a.k, rows, heads, K, chunk};
  if (!memo.valid || !(memo.key == key)) {
    memo.valid = false;
    const launch::TensorMapShape s = launch::chunkRowsMapShape(rows, heads, K, chunk, KP);
    memo.q_rows = encode(a.q, s, "q");
    memo.k_rows = encode(a.k, s, "k");
    memo.key = key;
    memo.valid = true;
  }
  a.q_rows = memo.q_rows;
  a.k_rows = memo.k_rows;
  a.row_maps = 1;
}

}  // namespace detail
}  // namespace dgps
