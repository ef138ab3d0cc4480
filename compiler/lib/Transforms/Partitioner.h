// Partitioning a chunk-IR function into chunk.kernel regions (Partitioner.cpp): every op with a role
// is a root of that role's kernel; ops without one (kRecompute: loads, normalisation, gate cumsums,
// preconditioner applies, ...) are cloned into every kernel that uses them; a value one kernel
// produces and a later one uses becomes a kernel result of `global` type (a device-memory buffer).
// Internal to dgps_transforms.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dgps {

/// The role index of an op that is recomputed wherever it is used.
inline constexpr int kRecompute = -1;

/// The kernel roles of a partition, in launch order, and where each op runs.
struct RoleTable {
  std::vector<std::string> names;
  std::function<int(mlir::Operation*)> roleOf;  ///< index into names, or kRecompute
  /// Role of a store whose value is recomputed (e.g. a sum of cotangents); kRecompute: an error.
  int storeFallback = kRecompute;
};

/// The default point of the tuning space for `fn` (its chunk size and the tuning attribute).
chunk::TileAttr defaultTile(mlir::func::FuncOp fn);

/// Replaces the flat body of `fn` by one chunk.kernel per non-empty role. Fails (with an error on the
/// offending op) if the function is already partitioned, an op needs a value of a later kernel, or a
/// store has no kernel.
mlir::LogicalResult partitionFunction(mlir::func::FuncOp fn, const RoleTable& roles);

}  // namespace dgps
