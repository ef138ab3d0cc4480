// Host side of the launch geometry: which kernels a forward or decode call launches, with what grid,
// block, dynamic shared memory and workspace. Everything comes from the manifest's `launch` section (the
// compiler's plan as formulas, Package.h / LaunchFormula.h), evaluated for the call's shape and tile
// configuration; nothing is re-derived here, and the role names are data (a new role needs no runtime
// change). Evaluation allocates nothing, so the warm forward/decode path stays allocation-free.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
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

/// The forward's launches in the manifest's role order, without names, and the workspace layout.
using dgps::kMaxForwardKernels;

struct ForwardGeometry {
  int count = 0;
  std::array<LaunchGeometry, kMaxForwardKernels> kernels{};
  int buffers = 0;                                              ///< launch.workspace.buffers
  std::array<std::size_t, kMaxWorkspaceBuffers> buffer_offsets{};  ///< byte offset of each buffer
  std::size_t workspace_bytes = 0;                              ///< the size to allocate
};

struct ForwardPlan {
  std::vector<KernelLaunch> kernels;  ///< in launch order
  std::size_t workspace_bytes = 0;
};

/// Throws RuntimeError{InvalidArgument} when the problem exceeds a launch limit (grid.x above 2^31-1,
/// grid.y/z above 65535) or a formula overflows 64 bits for it, and RuntimeError{Package} when the
/// manifest's formulas give an impossible launch for it (a grid or block dimension below 1, more than
/// 1024 threads, negative shared memory or buffer size). Each message names the formula and the shape.
ForwardPlan planForward(const Package& package, const ForwardProblem& problem, const TileConfig& config);
KernelLaunch planDecode(const Package& package, const DecodeProblem& problem, const TileConfig& config);

/// planForward without names (the warm path: no allocation); the same errors.
ForwardGeometry forwardGeometry(const Package& package, const ForwardProblem& problem, const TileConfig& config);
/// The same for launch.forward_segmented with L chunks per segment (>= 1): its kernels in order, and the
/// workspace of launch.workspace's buffers followed by its own. Throws RuntimeError{InvalidArgument} when the
/// package has no segmented forward or L < 1, and as forwardGeometry otherwise.
ForwardGeometry forwardGeometrySegmented(const Package& package, const ForwardProblem& problem,
                                         const TileConfig& config, std::int64_t L);
ForwardPlan planForwardSegmented(const Package& package, const ForwardProblem& problem, const TileConfig& config,
                                 std::int64_t L);
/// planDecode without names; the same errors.
LaunchGeometry decodeGeometry(const Package& package, const DecodeProblem& problem, const TileConfig& config);

}  // namespace detail
}  // namespace dgps
