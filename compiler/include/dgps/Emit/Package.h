// The CUDA + manifest emitter: a kernel plan (chunk IR after --chunk-partition-kernels) and its spec
// become a generated package directory that the runtime loads (runtime/include/dgps/runtime/Package.h):
//
//   kernels.cu     one extern "C" kernel per forward role of the plan, the sequence-parallel state pass's
//                  kernels and decode, each printed from its tile IR function (TileEmitter.h) as calls into
//                  the tile library runtime/device/dgps/tile (runtime/device/dgps/tile/README.md).
//   spec.yaml      the canonical form of the spec (dsl/Canonical.h).
//   manifest.yaml  package format 1: features, dims, dtypes, io, kernel roles and symbols, tunables,
//                  the default tile configuration and the plan's cost estimate.
//
// Output is byte-for-byte deterministic: it depends only on the spec and the plan.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "dgps/Dialect/Tile/IR/Workspace.h"
#include "dgps/dsl/LaunchContract.h"
#include "dgps/dsl/Spec.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

namespace dgps {

/// Version of the generated code's shape; part of the header line and the manifest.
inline constexpr int kCodegenVersion = 1;

struct PackageFiles {
  std::string kernels_cu;
  std::string spec_yaml;
  std::string manifest_yaml;
};

/// What the emitter reads off the plan.
struct PlanSummary {
  std::vector<std::string> roles;  ///< forward kernel roles, in launch order
  launch::TileConfig tile;          ///< default tile configuration (the first kernel's chunk.tile)
  int64_t bytes_per_token_head = 0, flops_per_token_head = 0;
  /// The package also holds the segmented state pass's kernels (manifest launch.forward_segmented).
  bool segmented = false;
  /// DeviceFeatures.h FeatureSet::write_key of the tile chunk roles (0 without them): the workspace's pwk region
  /// and the walks' threads and shared memory follow it.
  int write_key = 0;
  /// The workspace regions in layout order (the tile module's tile.workspace; empty without a chunk forward):
  /// printed into kernels.cu as the kernels' offsets and into the manifest as launch.workspace.buffers (chunk
  /// regions) and launch.forward_segmented.buffers (the segmented pass's).
  std::vector<tile::WorkspaceRegion> workspace;
};

/// Reads the partitioned forward function of `plan`. Emits an error at the offending op and fails if
/// the module is not a kernel plan, or if its roles are not the launch contract's roles for `spec`
/// (LaunchContract.h forwardRoles).
mlir::FailureOr<PlanSummary> summarizePlan(const Spec& spec, mlir::ModuleOp plan);

/// kernels.cu text (see the file comment of this header): the header line, DGPS_ROW_STEPS for a spec with several
/// Householder steps per token, the tile library's include, `layouts` (the package's workspace layout printed from
/// tile.workspace, Dialect/Tile/IR/Workspace.h workspaceLayoutCuda, and the roles' shared-memory layouts and threads
/// printed from the launch contract, dsl LaunchContract.h; empty for a package without a chunk forward), then
/// `kernels` (the printed kernels, in launch order).
std::string emitKernelsCu(const Spec& spec, const std::string& layouts, const std::vector<std::string>& kernels);
/// The shortest CUDA float literal that reads back to `x` rounded to float ("1.5f", "1e-06f").
std::string cudaFloatLiteral(double x);
/// manifest.yaml text (format: runtime/include/dgps/runtime/Package.h), its `launch` section written from
/// the plan's roles by dsl/LaunchManifest.h. Fails, setting *error, for a role without launch formulas.
mlir::FailureOr<std::string> emitManifest(const Spec& spec, const PlanSummary& plan, std::string* error);

/// All three files. `tileModule` holds one tile function per kernel: `@<name>_<role>` for every forward role of
/// the plan (chunk_local: --dgps-lower-chunk-local-to-tile, state_output: --dgps-lower-state-output-to-tile,
/// precond_summary / precond_scan: --dgps-lower-precond-roles-to-tile) and `@<name>_decode` when the spec has
/// decode (--dgps-lower-decode-to-tile); each becomes the kernel dgps_<name>_fwd_<role> / dgps_<name>_decode.
/// With `@<name>_segment_summary`, `_segment_fold` and `_segment_state_output` (--dgps-lower-segment-roles-to-tile)
/// the sequence-parallel state pass's kernels are added. A missing tile function is one error naming the
/// function and the pass that writes it; nothing is written.
mlir::FailureOr<PackageFiles> emitPackage(const Spec& spec, mlir::ModuleOp plan,
                                          mlir::ModuleOp tileModule = nullptr);

/// Writes the files into `dir` (created if missing). Returns false and sets `error` on I/O failure.
bool writePackage(const PackageFiles& files, const std::string& dir, std::string& error);

}  // namespace dgps
