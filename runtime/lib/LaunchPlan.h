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

struct KernelLaunch {
  std::string role;
  std::string symbol;
  std::array<unsigned, 3> grid{1, 1, 1};
  std::array<unsigned, 3> block{1, 1, 1};
  std::size_t shared_bytes = 0;  ///< dynamic shared memory
};

struct ForwardPlan {
  std::vector<KernelLaunch> kernels;  ///< in launch order
  std::size_t workspace_bytes = 0;
};

/// Throws RuntimeError{InvalidArgument} when the problem exceeds a launch limit (grid dims) and
/// RuntimeError{Package} when the manifest lists a role the rules do not know.
ForwardPlan planForward(const Package& package, const ForwardProblem& problem, const TileConfig& config);
KernelLaunch planDecode(const Package& package, const DecodeProblem& problem, const TileConfig& config);

}  // namespace detail
}  // namespace dgps
