// The spec's axes in the launch contract's encoding: the launch_rules.h FeatureSet that selects the forward
// roles, their launch geometry and workspace (the kernels printed from tile IR spell it in their prologue). The one
// Spec -> FeatureSet mapping: the CUDA emitter, the manifest writer, the runtime's launch plan and the tests
// all call deviceFeatures().
#pragma once

#include "dgps/device/launch_rules.h"
#include "dgps/dsl/Spec.h"

namespace dgps {

/// decay none/scalar/diagonal -> 0/1/2; gain scalar -> 1 else 0; precond diagonal -> 1; side query -> 1;
/// source hypergrad_ogd -> 1; solve delta -> 1, linear -> 0; clamp 1 for a hypergrad_ogd spec with clamp_min or
/// clamp_max (its d-scan stays per token). Explicit, so reordering a dsl enum cannot
/// shift the codes the kernels were compiled against.
launch::FeatureSet deviceFeatures(const Spec& spec);

}  // namespace dgps
