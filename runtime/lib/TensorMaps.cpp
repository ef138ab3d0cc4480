#include "TensorMaps.h"

#include <algorithm>
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
  const void* workspace = nullptr;
  long long rows = 0, heads = 0, K = 0, wsRows = 0;
  int chunk = 0;
  WorkspaceOperandRows ws;
  const void* v = nullptr;
  int BV = 0;
  const void* g = nullptr;
  long long headsV = 0;
  bool operator==(const RowMapKey& o) const {
    return q == o.q && k == o.k && workspace == o.workspace && rows == o.rows && heads == o.heads && K == o.K &&
           wsRows == o.wsRows && chunk == o.chunk && ws.query == o.ws.query && ws.key == o.ws.key &&
           ws.write_key == o.ws.write_key && v == o.v && BV == o.BV && g == o.g && headsV == o.headsV;
  }
};

struct RowMapMemo {
  bool valid = false;
  RowMapKey key;
  TmaDescriptor q_rows{}, k_rows{}, q_core{}, k_core{}, wsq_core{}, wsk_core{}, wsw_core{}, v_rows{}, g_rows{};
};

/// One tensor map of rank R (dims and box innermost first; strides in bytes of dims 1..R-1): 16-bit elements
/// unswizzled, or with `f32` f32 elements and the copy engine's 32-byte swizzle (launch_rules.h gateRowsMapShape).
template <int R>
TmaDescriptor encode(const void* base, const unsigned long long (&d)[R], const unsigned long long (&st)[R - 1],
                     const unsigned (&b)[R], const char* name, bool f32 = false) {
  CUtensorMap m;
  cuuint64_t dims[R], strides[R - 1];
  cuuint32_t box[R], unit[R];
  for (int i = 0; i < R; ++i) {
    dims[i] = d[i];
    box[i] = b[i];
    unit[i] = 1;
    if (i + 1 < R) strides[i] = st[i];
  }
  const CUresult r = cudaDriver().cuTensorMapEncodeTiled(
      &m, f32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_UINT16, R, const_cast<void*>(base), dims,
      strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, f32 ? CU_TENSOR_MAP_SWIZZLE_32B : CU_TENSOR_MAP_SWIZZLE_NONE,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    const char* text = nullptr;
    cudaDriver().cuGetErrorString(r, &text);
    std::string shown;
    for (int i = 0; i < R; ++i) shown += (i ? ", " : "") + std::to_string(d[i]);
    throw RuntimeError(RuntimeErrorCode::Cuda, std::string("cuTensorMapEncodeTiled (tensor '") + name + "', dims [" +
                                                   shown + "]): " + (text ? text : "unknown error"));
  }
  TmaDescriptor out;
  std::memcpy(&out, &m, sizeof out);
  return out;
}

}  // namespace

int tensorCopyMaps() {
  static const int maps = [] {
    const char* e = std::getenv("DGPS_TENSOR_COPY");
    const std::string v = e ? e : "";
    return v == "0" ? 0 : v == "rows" ? 1 : v == "raw" ? 3 : v == "ws" ? 7 : v == "values" ? 15 : 63;
  }();
  return maps;
}

void encodeRowMaps(ForwardArgs& a, const ForwardProblem& p, int chunk, int block_v, int target_sm,
                   const WorkspaceOperandRows& ws, bool channel_gate) {
  a.row_maps = 0;
  const bool is16 = p.input_dtype == ScalarType::BF16 || p.input_dtype == ScalarType::F16;
  const long long rows = p.batch * p.seq_len, K = p.key_dim, heads = p.heads_qk;
  const int KP = launch::pad16(int(K));
  int wanted = tensorCopyMaps();
  if (wanted == 0 || target_sm < 90 || !is16 || p.row_steps != 1 || a.q == nullptr || a.k == nullptr ||
      reinterpret_cast<std::uintptr_t>(a.q) % 16 != 0 || reinterpret_cast<std::uintptr_t>(a.k) % 16 != 0 ||
      !launch::chunkRowsMapFits(rows, heads, K, chunk, KP))
    return;
  // the workspace operand regions: [chunk slots x HV x C][KP] bf16 each, 16-byte aligned for the copy engine
  launch::ProblemShape shape;
  shape.B = p.batch;
  shape.T = p.seq_len;
  shape.N = p.num_seqs;
  shape.varlen = p.varlen ? 1 : 0;
  const long long wsRows = launch::chunkSlots(shape, chunk) * p.heads_v * chunk;
  const bool wsOk = a.workspace != nullptr && reinterpret_cast<std::uintptr_t>(a.workspace) % 16 == 0 &&
                    wsRows < (1LL << 31) && (ws.query >= 0 || ws.key >= 0 || ws.write_key >= 0);
  if (!wsOk) wanted &= ~4;
  // the value tiles: v [rows, HV, V] at the walks' tile BV (config.cuh), 16-byte rows; only at chunks of up to 32
  // rows, where they were measured faster (GDN, DeltaNet, GDN-GVA: 1.4-1.7%); at C = 64 they made KDA and PKDA
  // 1.7% slower (docs/performance.md, run 19, call 5)
  const int BV = std::min(block_v, launch::pad16(int(p.value_dim)));
  const bool vOk = chunk <= 32 && a.v != nullptr && reinterpret_cast<std::uintptr_t>(a.v) % 16 == 0 &&
                   launch::chunkRowsMapFits(rows, p.heads_v, p.value_dim, chunk, BV);
  if (!vOk) wanted &= ~8;
  // the per-channel gates g [rows, HV, K] f32, in chunk_local's swizzled gate layout (gateRowsMapShape)
  const bool gOk = channel_gate && a.g != nullptr && reinterpret_cast<std::uintptr_t>(a.g) % 16 == 0 &&
                   launch::gateRowsMapFits(rows, p.heads_v, K, chunk, KP);
  if (!gOk) wanted &= ~16;
  thread_local RowMapMemo memo;
  RowMapKey key{a.q, a.k, a.workspace, rows, heads, K, wsRows, chunk, ws, vOk ? a.v : nullptr, vOk ? BV : 0,
                gOk ? a.g : nullptr, gOk ? p.heads_v : 0};
  if (!wsOk) key.workspace = nullptr, key.ws = WorkspaceOperandRows{};
  if (!memo.valid || !(memo.key == key)) {
    memo.valid = false;
    const launch::TensorMapShape s = launch::chunkRowsMapShape(rows, heads, K, chunk, KP);
    memo.q_rows = encode<3>(a.q, s.dims, s.strides, s.box, "q");
    memo.k_rows = encode<3>(a.k, s.dims, s.strides, s.box, "k");
    const launch::TensorMapShape4 c = launch::walkCoreMapShape(rows, heads, K, chunk, KP);
    memo.q_core = encode<4>(a.q, c.dims, c.strides, c.box, "q");
    memo.k_core = encode<4>(a.k, c.dims, c.strides, c.box, "k");
    memo.g_rows = memo.v_rows = memo.wsq_core = memo.wsk_core = memo.wsw_core = TmaDescriptor{};  // none left over
    if (vOk) {
      const launch::TensorMapShape v = launch::chunkRowsMapShape(rows, p.heads_v, p.value_dim, chunk, BV);
      memo.v_rows = encode<3>(a.v, v.dims, v.strides, v.box, "v");
    }
    if (gOk) {
      const launch::TensorMapShape4 g = launch::gateRowsMapShape(rows, p.heads_v, K, chunk, KP);
      memo.g_rows = encode<4>(a.g, g.dims, g.strides, g.box, "g", true);
    }
    if (wsOk) {
      const launch::TensorMapShape w = launch::workspaceCoreMapShape(wsRows, chunk, KP);
      auto region = [&](long long off, const char* name) {
        return off < 0 ? TmaDescriptor{}
                       : encode<3>(static_cast<const unsigned char*>(a.workspace) + off, w.dims, w.strides, w.box, name);
      };
      memo.wsq_core = region(ws.query, "workspace query rows");
      memo.wsk_core = region(ws.key, "workspace key rows");
      memo.wsw_core = region(ws.write_key, "workspace write-key rows");
    }
    memo.key = key;
    memo.valid = true;
  }
  a.q_rows = memo.q_rows;
  a.k_rows = memo.k_rows;
  a.q_core = memo.q_core;
  a.k_core = memo.k_core;
  a.wsq_core = memo.wsq_core;
  a.wsk_core = memo.wsk_core;
  a.wsw_core = memo.wsw_core;
  a.v_rows = memo.v_rows;
  a.g_rows = memo.g_rows;
  a.row_maps = wanted;
}

}  // namespace detail
}  // namespace dgps
