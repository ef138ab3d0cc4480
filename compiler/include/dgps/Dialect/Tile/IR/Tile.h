// The `tile` dialect: typed tiles of one CTA and generic tile maths (TileOps.td, TileChunkOps.td,
// TileStateOps.td, TilePrecondOps.td). Roles lowered to it: decode (--dgps-lower-decode-to-tile), chunk_local
// (--dgps-lower-chunk-local-to-tile), state_output (--dgps-lower-state-output-to-tile) and the preconditioner
// roles precond_summary / precond_scan (--dgps-lower-precond-roles-to-tile);
// printed as CUDA by the emitters (Emit/TileEmitter.h).
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dgps/Dialect/Tile/IR/TileDialect.h.inc"
#include "dgps/Dialect/Tile/IR/TileEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dgps/Dialect/Tile/IR/TileTypes.h.inc"

#define GET_OP_CLASSES
#include "dgps/Dialect/Tile/IR/TileOps.h.inc"

namespace dgps::tile {
/// Function attribute: the kernel role a tile function implements ("decode", "chunk_local", "state_output").
inline constexpr const char* kRoleAttr = "tile.role";
/// Function attribute: the CTA grid (a Grid keyword: "value_tile" or "key_head").
inline constexpr const char* kGridAttr = "tile.grid";
/// Function attribute of a chunk role: the launch contract shared with the package's other roles,
/// array<i32: decay, gain, precond, side, source, solve, clamp> (DeviceFeatures.h FeatureSet; read, written and
/// printed by LaunchFeatures.h). It fixes the workspace and shared-memory layout only; the maths is in the body.
inline constexpr const char* kLaunchFeaturesAttr = "tile.launch_features";
/// Function attribute: the value-tile width BV the function is written for.
inline constexpr const char* kValueTileAttr = "tile.value_tile";
/// Function attribute of a decode tile function: the resident CTAs per SM its launch bound asks of ptxas
/// (__launch_bounds__'s second argument, for the decode's 128 threads: LaunchContract.h decodeGeometry), which
/// caps its registers at 65536 / (128 · n) per thread. K is fixed only at JIT time, so it holds one count per
/// key width: array<i32: dense, padded, wide> (KeyWidth; KP is K rounded up to 16, config.cuh). Each in
/// [1, kMaxCtasPerSm] (the dialect verifies it). Absent: no bound, ptxas picks the registers.
inline constexpr const char* kMinCtasPerSmAttr = "tile.min_ctas_per_sm";
/// The key widths of kMinCtasPerSmAttr, in its order: K = KP <= 128, K < KP <= 128 (pad channels masked; the
/// emitter counts a partial last value tile here too), KP > 128.
enum class KeyWidth { dense = 0, padded = 1, wide = 2 };
/// The most CTAs of 128 threads an SM holds (2048 resident threads on sm_80 and sm_90).
inline constexpr int kMaxCtasPerSm = 16;
}  // namespace dgps::tile
