// One point of a generated package's tuning space: the tile configuration NVRTC bakes into a kernel
// as compile-time constants. The allowed values of each axis come from the package manifest
// (`tuning:` in the spec, dsl/include/dgps/dsl/Spec.h TuningSpace).
#pragma once

#include <string>

namespace dgps::tuning {

struct TileConfig {
  /// Chunk length BT in tokens (chunkwise WY form, docs/math.md §2). A *global* plan parameter: every
  /// kernel of a forward plan (KKT, UT-transform solve, state pass, output) and any backward that
  /// reuses the saved intermediates must share it, so it is tuned per plan, never
  /// per kernel. Irrelevant to decode kernels, whose manifests list a single value.
  int chunk = 64;
  /// Columns of V owned by one thread block (the value tile), elements.
  int block_v = 64;
  /// Warps per thread block (32 threads each).
  int warps = 4;
  /// Software-pipeline depth of the global->shared copies.
  int stages = 1;

  int threads() const { return warps * 32; }
  /// "chunk=64 block_v=32 warps=4 stages=2": stable, human-readable, used in tables and messages.
  std::string str() const;
};

bool operator==(const TileConfig& a, const TileConfig& b);
inline bool operator!=(const TileConfig& a, const TileConfig& b) { return !(a == b); }

/// The fixed "simplicity" order used to break ties between configurations whose times are equal
/// within noise: fewer pipeline stages, then fewer warps, then a narrower value tile, then a shorter
/// chunk. Smaller means simpler (less shared memory, fewer registers in flight, fewer ways to go
/// wrong), so a tie always resolves to the same, cheaper configuration whatever the input order.
bool simplerThan(const TileConfig& a, const TileConfig& b);

}  // namespace dgps::tuning
