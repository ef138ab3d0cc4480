// The tuner's name for the tile configuration: the same type as the runtime's (dgps/runtime/TileConfig.h,
// defined once in the device library's launch_rules.h). The allowed values of each axis come from the
// package manifest (`tuning:` in the spec, dsl/include/dgps/dsl/Spec.h TuningSpace).
#pragma once

#include "dgps/runtime/TileConfig.h"

namespace dgps::tuning {

using dgps::TileConfig;
using dgps::launch::simplerThan;
using dgps::launch::toString;

}  // namespace dgps::tuning
