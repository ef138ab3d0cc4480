// What the emulator checks of a package's roles (tests/tile, tests/device_emu) share: the loaded package, its
// launch features, and the error measures they compare with the float64 reference by.
#pragma once
#include <string>
#include <vector>

#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/dsl/Spec.h"
#include "dgps/dsl/Tensor.h"

namespace dgps_emu {

/// A package's kernels.cu compiled for the emulator and loaded.
struct LoadedPackage {
  void* tile = nullptr;  ///< the package's kernels (openEmuModule)
  int writeKey = 0;      ///< the package's FeatureSet::write_key (the compile chose it; not in the spec)
  std::string dir;       ///< the package directory (its manifest sizes the workspace)
  int warps = 4;         ///< chunk_local's warps (DGPS_WARPS) the kernels were compiled with, where a check varies it
  int chunk = 64;        ///< the chunk C (DGPS_CHUNK) the kernels were compiled with, where a check varies it
};

/// The launch contract's features of `spec` as `pkg` was compiled (its write-key form).
dgps::launch::FeatureSet featuresOf(const dgps::Spec& spec, const LoadedPackage& pkg);

/// ‖got − ref‖₂ / ‖ref‖₂ over all elements (‖ref‖ taken as 1 when it is 0); infinite when any `got` is not finite.
double relErr(const std::vector<double>& got, const dgps::Tensor& ref);

/// The tensor's elements as f32, in order (the kernels' f32 inputs and initial states).
std::vector<float> f32Of(const dgps::Tensor& t);

/// `x` with 3 significant digits, for the checks' report lines.
std::string fmtG(double x);

}  // namespace dgps_emu
