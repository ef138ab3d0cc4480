// The tile emitter: prints a function of the tile dialect (a kernel role lowered by
// --dgps-lower-decode-to-tile) as a CUDA __global__ kernel whose body calls the typed tile library
// (runtime/device/dgps/tile/*.cuh). One C++ statement per tile op; SSA values become `const` locals.
//
// The kernel keeps the role's ABI (the one the deleted hand-written roles had): symbol, argument struct (runtime/device/dgps/device/abi.h)
// and launch geometry (LaunchContract.h decodeGeometry: 128 threads, grid from tile.grid, shared memory
// LaunchContract.h decodeLaunch's layout = four [KP] f32 vectors + (4 warps x 2 x 32) reduction floats + 32 scalars).
#pragma once

#include <string>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LogicalResult.h"

namespace dgps {

/// `extern "C" __global__ void <symbol>(dgps::DecodeArgs a) { ... }` for a decode tile function.
/// Emits an error at the offending op and fails if the function is not a decode tile function, names
/// a tensor that DecodeArgs lacks (or with another dtype), or needs more shared vectors than the
/// launch geometry provides.
mlir::FailureOr<std::string> emitTileKernel(mlir::func::FuncOp fn, const std::string& symbol);

/// `extern "C" __global__ void <symbol>(dgps::ForwardArgs a) { ... }` for a chunk_local tile function
/// (--dgps-lower-chunk-local-to-tile; TileChunkEmitter.cpp). It keeps the launch contract role's ABI and
/// launch geometry (LaunchContract.h forwardGeometry: grid = chunk slots x HV, WARPS warps, shared memory
/// LaunchContract.h chunkLocalLayout of the function's tile.launch_features) and writes the same workspace (the module's tile.workspace).
/// Emits an error at the offending op and fails on an op it cannot print, a tensor ForwardArgs lacks,
/// or more shared tiles than that layout provides.
mlir::FailureOr<std::string> emitTileChunkKernel(mlir::func::FuncOp fn, const std::string& symbol);

/// `extern "C" __global__ void <symbol>(dgps::ForwardArgs a) { ... }` for a state_output tile function
/// (--dgps-lower-state-output-to-tile; TileStateEmitter.cpp): the function's tile.state_walk printed as the
/// sequential chunk walk over runtime/device/dgps/tile. It keeps the launch contract role's ABI and launch
/// geometry (LaunchContract.h forwardGeometry: one CTA per sequence, value head and value tile, BV/16 warps,
/// shared memory LaunchContract.h walkLayout of tile.launch_features) and reads the workspace chunk_local wrote. Emits an
/// error at the walk and fails when it reads a tile that layout lacks, or for a preconditioned forward (its
/// producer warpgroup is not printed yet).
mlir::FailureOr<std::string> emitTileStateKernel(mlir::func::FuncOp fn, const std::string& symbol);

/// The kernels of the sequence-parallel state pass (--dgps-lower-segment-roles-to-tile; TileStateEmitter.cpp),
/// launched with ForwardArgs::segment_chunks = L >= 1 and the geometry of LaunchContract.h segmentGeometry:
///   segment_summary       (grid segment) each tile.state_walk as a device function over its own range of
///                         CTAs, E into seg_ext and M into seg_trans;
///   segment_state_output  (grid segment) the walk from seg_start, writing o;
///   segment_fold          (emitTileFoldKernel) tile::state_fold per (sequence, value head, value tile).
/// A slot that holds no segment returns at once. Emits an error at the op and fails as emitTileStateKernel does,
/// and for a walk that reads initial_state or writes final_state in a segment grid.
mlir::FailureOr<std::string> emitTileSegmentKernel(mlir::func::FuncOp fn, const std::string& symbol);
mlir::FailureOr<std::string> emitTileFoldKernel(mlir::func::FuncOp fn, const std::string& symbol);

/// `extern "C" __global__ void <symbol>(dgps::ForwardArgs a) { ... }` for a preconditioner role's tile function
/// (--dgps-lower-precond-roles-to-tile; TilePrecondEmitter.cpp): precond_summary (grid chunk_key_head, one CTA
/// per chunk slot and key head, WARPS warps, shared memory C·bf16Pitch(KP)·2 + C·16) writes the workspace
/// regions "psum" and "pgam"; precond_scan (grid sequence_key_head, one CTA per sequence and key head,
/// max(32, align_up(KP, 32)) threads, no shared memory) writes "pst" and final_precond_state. Both keep the
/// launch contract role's symbol, ForwardArgs and launch geometry (LaunchContract.h forwardGeometry). Emits an
/// error at the offending op and fails on an op it cannot print or more shared tiles than that layout holds.
mlir::FailureOr<std::string> emitTilePrecondKernel(mlir::func::FuncOp fn, const std::string& symbol);

}  // namespace dgps
