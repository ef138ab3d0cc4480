// Host side of the launch geometry: which kernels a forward or decode call launches, with what grid,
// block, dynamic shared memory and workspace. The rules themselves live in the device library's
// launch_rules.h (host+device compilable, written with the kernels), so host and device agree by
// construction; this file adapts them to the runtime's ForwardProblem / DecodeProblem.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "dgps/runtime/Package.h"
#include "dgps/runtime/Validation.h"

namespace dgps {
namespace detail {

/// Grid, block and dynamic shared memory of one launch, without names (the warm path's form: no allocation).
struct LaunchGeometry {
  std::array<unsigned, 3> grid{1, 1, 1};
  std::array<unsigned, 3> block{1, 1, 1};
  std::size_t shared_bytes = 0;  ///< dynamic shared memory
};

struct KernelLaunch {
  std::string role;
  std::string symbol;
  std::array<unsigned, 3> grid{1, 1, 1};
  std::array<unsigned, 3> block{1, 1, 1};
  std::size_t shared_bytes = 0;  ///< dynamic shared memory
};

/// The most forward kernels one package launches (launch_rules.h's kMaxRoles).
constexpr int kMaxForwardKernels = 4;

/// The forward's launches in the manifest's role order, without names.
struct ForwardGeometry {
  int count = 0;
  std::array<LaunchGeometry, kMaxForwardKernels> kernels{};
  std::size_t workspace_bytes = 0;
};

struct ForwardPlan {
  std::vector<KernelLaunch> kernels;  ///< in launch order
  std::size_t workspace_bytes = 0;
};

/// Throws RuntimeError{InvalidArgument} when the problem exceeds a launch limit (grid dims) and
/// RuntimeError{Package} when the manifest lists a role the rules do not know.
ForwardPlan planForward(const Package& package, const ForwardProblem& problem, const TileConfig& config);
KernelLaunch planDecode(const Package& package, const DecodeProblem& problem, const TileConfig& config);

/// RuntimeError{Package} unless the manifest's forward roles are the ones the launch rules run for the
/// package's features (depends on the package only: the runtime checks it once per resolved variant).
void checkForwardRoles(const Package& package);
/// planForward's geometry without the role check and without names; the same grid-limit errors.
ForwardGeometry forwardGeometry(const Package& package, const ForwardProblem& problem, const TileConfig& config);
/// planDecode's geometry without names; the same grid-limit error.
LaunchGeometry decodeGeometry(const Package& package, const DecodeProblem& problem, const TileConfig& config);

}  // namespace detail
}  // namespace dgps
