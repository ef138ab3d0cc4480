#include "LaunchPlan.h"

#include "dgps/runtime/Error.h"

namespace dgps {
namespace detail {

// Placeholder until runtime/device/dgps/device/launch_rules.h (the kernels' geometry rules) lands.
ForwardPlan planForward(const Package& package, const ForwardProblem&, const TileConfig&) {
  throw RuntimeError(RuntimeErrorCode::Package,
                     "package " + package.name() + ": no launch rules in this build (runtime/device/dgps/device/launch_rules.h missing)");
}

KernelLaunch planDecode(const Package& package, const DecodeProblem&, const TileConfig&) {
  throw RuntimeError(RuntimeErrorCode::Package,
                     "package " + package.name() + ": no launch rules in this build (runtime/device/dgps/device/launch_rules.h missing)");
}

}  // namespace detail
}  // namespace dgps
