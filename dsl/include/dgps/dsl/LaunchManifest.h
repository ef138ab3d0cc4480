// The `launch:` section of a package manifest (dgps_package: 2; format in runtime/include/dgps/runtime/
// Package.h): for every kernel role of the compiler's plan its symbol, its grid and block as three integer
// formulas and its dynamic shared memory as one, plus the workspace buffers' sizes, all written over the
// problem shape (B, T, N, H, HV, K, V, varlen, f16) and the tile configuration (chunk, block_v, warps,
// stages) in the language of runtime/include/dgps/runtime/LaunchFormula.h. The runtime evaluates them per
// call and launches exactly that; it does not re-derive geometry.
//
// The geometry formulas are the launch contract's (LaunchContract.h), the same expressions the emitter prints into
// the package's kernels.cu; the workspace buffers are the caller's (the compiler prints them from the tile IR's
// workspace declaration). tests/runtime/test_manifest_launch.cpp checks them for every shipped package.
// No MLIR: the compiler's manifest writer and the runtime tests' package fixtures both call it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/dsl/Spec.h"

namespace dgps {

struct LaunchSectionRequest {
  std::string name;                        ///< package name: symbols are dgps_<name>_fwd_<role>, dgps_<name>_decode
  launch::FeatureSet features;             ///< the device encoding of the spec (DeviceFeatures.h)
  std::vector<std::string> forward_roles;  ///< the plan's roles in launch order; empty: no forward
  bool decode = false;                     ///< the package has a decode kernel
  /// The package also holds the sequence-parallel state pass's kernels (dgps_<name>_fwd_segment_summary,
  /// _segment_fold, _segment_state_output): write `launch.forward_segmented` (Package.h).
  bool segmented = false;
  /// launch.workspace.buffers: (name, size formula in bytes) per region in layout order. The compiler prints them
  /// from the tile IR's workspace declaration (compiler Dialect/Tile/IR/Workspace.h), the one definition of the
  /// layout the kernels index; this writer only copies them. Empty: an empty workspace.
  std::vector<std::pair<std::string, std::string>> workspace;
  /// launch.forward_segmented.buffers (with `segmented`): the segmented state pass's regions, after `workspace`.
  std::vector<std::pair<std::string, std::string>> segment_workspace;
};

/// The device layout fingerprint: the first 16 hex digits of the SHA-256 of the device library's
/// launch_rules.h this build was configured with (chunk and segment slots, value tiles and operand row pitches,
/// which the host's formulas and the kernels both read; each role's shared-memory layout travels in the package
/// itself, kernels.cu and manifest printed from one launch contract). `launch.device_layout` carries it; the
/// runtime refuses a package whose fingerprint differs from its own.
const char* deviceLayoutHash();

/// The YAML text of `launch:` (ends in a newline). Returns false and sets *error naming the role when the
/// plan holds a role whose launch formulas are not known here.
bool launchSectionYaml(const LaunchSectionRequest& request, std::string* yaml, std::string* error);

/// The manifest's `layer:` line (ends in a newline): what the runtime's tensor validation needs of the spec
/// beyond features, dims, dtypes and io, so the runtime never parses spec.yaml:
///   layer: {heads_qk: <0 = any>, gva_ratio: <HV/H>, scale: auto|<number>,
///           precond_inputs: {gate: <takes precond_g>, gain: <takes precond_beta>, center: <takes precond_center>}}
/// The scale is printed with 17 significant digits, so it reads back to the same double.
std::string layerSectionYaml(const Spec& spec);

/// The manifest format version this writer produces and the runtime reads.
constexpr int kPackageFormatVersion = 2;

}  // namespace dgps
