// The CUDA + manifest emitter: a kernel plan (chunk IR after --chunk-partition-kernels) and its spec
// become a generated package directory that the runtime loads (runtime/include/dgps/runtime/Package.h):
//
//   kernels.cu     the spec's axes as a Traits struct and one extern "C" kernel per forward role of
//                  the plan, plus decode; the kernels themselves are the device header library's
//                  (runtime/device/dgps/device/README.md, "Contract with the emitter").
//   spec.yaml      the canonical form of the spec (dsl/Canonical.h).
//   manifest.yaml  package format 1: features, dims, dtypes, io, kernel roles and symbols, tunables,
//                  the default tile configuration and the plan's cost estimate.
//
// Output is byte-for-byte deterministic: it depends only on the spec and the plan.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "dgps/device/launch_rules.h"
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
  /// launch_rules.h FeatureSet::write_key of the tile chunk roles (0 without them): the workspace's pwk region
  /// and the walks' threads and shared memory follow it.
  int write_key = 0;
};

/// Reads the partitioned forward function of `plan`. Emits an error at the offending op and fails if
/// the module is not a kernel plan, or if its roles are not the device library's roles for `spec`
/// (launch_rules.h forwardRoles).
mlir::FailureOr<PlanSummary> summarizePlan(const Spec& spec, mlir::ModuleOp plan);

/// kernels.cu text (see the file comment of this header). With `tileDecode`, that text (the decode kernel
/// printed from tile IR by emitTileKernel) replaces the device library's decode entry point; with
/// `tileChunkLocal` (emitTileChunkKernel) likewise the forward chunk_local entry point, and with
/// `tileStateOutput` (emitTileStateKernel) the forward state_output entry point.
/// `tileSegment` (emitTileSegmentKernel, the three kernels of the sequence-parallel state pass) is appended
/// after the forward roles as extra entry points; the roles themselves are unchanged.
/// `tileRoles` maps further forward roles (precond_summary, precond_scan: emitTilePrecondKernel) to the kernel
/// text that replaces the device library's entry point of that role.
std::string emitKernelsCu(const Spec& spec, const PlanSummary& plan, const std::string* tileDecode = nullptr,
                          const std::string* tileChunkLocal = nullptr, const std::string* tileStateOutput = nullptr,
                          const std::string* tileSegment = nullptr,
                          const std::map<std::string, std::string>* tileRoles = nullptr);
/// The shortest CUDA float literal that reads back to `x` rounded to float ("1.5f", "1e-06f").
std::string cudaFloatLiteral(double x);
/// manifest.yaml text (format: runtime/include/dgps/runtime/Package.h), its `launch` section written from
/// the plan's roles by dsl/LaunchManifest.h. Fails, setting *error, for a role without launch formulas.
mlir::FailureOr<std::string> emitManifest(const Spec& spec, const PlanSummary& plan, std::string* error);

/// All three files. With `tileModule` (the output of --dgps-lower-decode-to-tile and/or
/// --dgps-lower-chunk-local-to-tile), the decode kernel is printed from its `@<name>_decode` tile function
/// and the chunk_local kernel from `@<name>_chunk_local` and the state_output kernel from `@<name>_state_output`
/// when present (--dgps-lower-state-output-to-tile), instead of calling the device library. With
/// `@<name>_segment_summary`, `_segment_fold` and `_segment_state_output` (--dgps-lower-segment-roles-to-tile)
/// the kernels dgps_<name>_fwd_segment_summary, _segment_fold and _segment_state_output are added. With
/// `@<name>_precond_summary` and `@<name>_precond_scan` (--dgps-lower-precond-roles-to-tile) those two roles.
mlir::FailureOr<PackageFiles> emitPackage(const Spec& spec, mlir::ModuleOp plan,
                                          mlir::ModuleOp tileModule = nullptr);

/// Writes the files into `dir` (created if missing). Returns false and sets `error` on I/O failure.
bool writePackage(const PackageFiles& files, const std::string& dir, std::string& error);

}  // namespace dgps
