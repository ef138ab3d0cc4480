// The function attribute tile.launch_features (Tile.h kLaunchFeaturesAttr): the launch contract a tile role shares
// with the package's other roles, a DeviceFeatures.h FeatureSet. It fixes the roles the forward runs, the
// workspace and the shared-memory layouts; the maths is in the function's body. The one reader, writer and
// checker of that attribute: the tile lowerings set it, the tile dialect verifies it, the emitters read it (the
// package prints the launch contract it selects, dsl LaunchContract.h, not the attribute).
#pragma once

#include "dgps/dsl/DeviceFeatures.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"

namespace dgps::tile {

/// Entries of tile.launch_features, in DeviceFeatures.h FeatureSet order: decay (0 none, 1 scalar, 2 per channel),
/// gain, precond, side (1 query), source (1 hypergrad_ogd), solve (1 delta), clamp (1: a clamped hypergrad_ogd
/// d-scan, which stays per token).
inline constexpr int kLaunchFeatureCount = 7;

/// `f` as array<i32: decay, gain, precond, side, source, solve, clamp>.
mlir::DenseI32ArrayAttr launchFeaturesAttr(mlir::Builder& b, const launch::FeatureSet& f);

/// Checks `value` as tile.launch_features of `op`: kLaunchFeatureCount entries, each a code of its axis, and a
/// clamp only with a hypergrad_ogd preconditioner. The error is at `op` and names the entry.
mlir::LogicalResult verifyLaunchFeatures(mlir::Operation* op, mlir::Attribute value);

/// The FeatureSet of `fn`'s tile.launch_features; an error at `fn` when it is absent or malformed.
mlir::FailureOr<launch::FeatureSet> launchFeaturesOf(mlir::Operation* fn);


}  // namespace dgps::tile
