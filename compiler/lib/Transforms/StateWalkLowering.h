// What --dgps-lower-state-output-to-tile and --dgps-lower-segment-roles-to-tile share: the launch contract read
// off a partitioned forward (tile.launch_features, DeviceFeatures.h FeatureSet), the tile function of one role,
// the tile.state_walk that expresses a chunk state pass (its delta-rule coefficient w and its gate), and the
// walk's rescale (a preconditioner's in-chunk rebuild of the write key or the query).
#pragma once

#include "dgps/Dialect/Chunk/IR/Chunk.h"
#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/dsl/LaunchContract.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Builders.h"

namespace dgps::tile {

/// Appends `func.func @<base>_<suffix>` (base: the forward's name without "_forward") to `module` with the tile
/// role and grid attributes and tile.launch_features = the forward's DeviceFeatures.h FeatureSet (PlanCost.h
/// featuresOf, read over the whole forward: it fixes the workspace and shared-memory layout every role shares)
/// with FeatureSet::write_key = `writeKey` (resolveWriteKey), and an entry block; the builder is left at its start.
mlir::func::FuncOp createRoleFunction(mlir::ModuleOp module, mlir::func::FuncOp forward, mlir::Location loc,
                                      llvm::StringRef suffix, llvm::StringRef role, Grid grid,
                                      mlir::OpBuilder& body, int writeKey = launch::kWriteKeyRebuilt);

/// The FeatureSet::write_key of a forward with features `f` for the lowerings' `write-key` option `requested`
/// (Passes.h writeKeyCode); fails with an error at `at` naming the value and why.
mlir::FailureOr<int> resolveWriteKey(llvm::StringRef requested, const launch::FeatureSet& f, mlir::Operation* at);

/// How one walk starts and what it writes (TileStateOps.td).
struct WalkEnds {
  StateStart start = StateStart::zero;
  bool writeOutput = false, writeFinal = false, zeroValues = false;
  llvm::StringRef startRegion, endRegion;  ///< empty: absent
};

/// Creates the tile.state_walk of a state pass with delta-rule coefficient `w` (null: a linear rule) and gate
/// `gate` (null, [C] or [C, K]): the operand sources and carry follow from them. Fails, with an error at
/// `at`, when the gate's rank disagrees with the forward's decay `f.decay`.
mlir::FailureOr<StateWalkOp> buildStateWalk(mlir::OpBuilder& b, mlir::Location loc, mlir::Operation* at,
                                            const launch::FeatureSet& f, mlir::Value w, mlir::Value gate,
                                            const WalkEnds& ends);

/// The preconditioner's in-chunk rebuild `apply` (chunk.accum_apply or chunk.hypergrad_apply) as the walk's
/// rescale attributes (TileStateOps.td): its result must be the state pass's write key `writeKey` or the
/// read-out's query `query`, its key the l2norm of the loaded "k" (the scan reads the raw key; chunk_local folds
/// the l2norm factor into the record's field 5), its start the precond_scan role's chunk-start states ("pst").
/// The rebuild runs in a producer warpgroup (LaunchContract.h walkProducerWarps) with the register budget
/// measured on sm_90a. A write-key rebuild sets write_key_form rebuilt, or, where `f` gives this walk the
/// stored key (DeviceFeatures.h walkRebuildsKw; `segment`: a segment walk), write_key_form stored with the key
/// chunk_local stored ("pwk", or "opw" with per-channel decay) and no rescale. Fails with an error at `apply`
/// naming what does not fit.
mlir::LogicalResult setRescale(StateWalkOp walk, mlir::Operation* apply, mlir::Value writeKey, mlir::Value query,
                               const launch::FeatureSet& f, bool segment);

/// Several steps per token (chunk.spread_steps / gather_steps in the kernel): the walk's rows are steps, and q and
/// o go through a row map (TileStateOps.td row_steps, query_phase, output_phase). `output` is the kernel's
/// read-out (null: none), `gather` the gather_steps of its result (null: none), `writesO` whether the kernel stores
/// o. Nothing to do when neither the query is spread nor o gathered; fails with an error when only one is, or when
/// their step counts differ. The state_output walk and a segment's corrected walk take the same map: its rows are
/// absolute, so it reads the same from any chunk on.
mlir::LogicalResult setRowMap(StateWalkOp walk, chunk::OutputOp output, chunk::GatherStepsOp gather, bool writesO);

}  // namespace dgps::tile
