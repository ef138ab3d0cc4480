// tile.launch_features (LaunchFeatures.h): the FeatureSet <-> attribute mapping, its verifier and its printing.
#include "dgps/Dialect/Tile/IR/LaunchFeatures.h"

#include "dgps/Dialect/Tile/IR/Tile.h"

using namespace mlir;

namespace dgps::tile {

namespace {

/// One entry of the attribute: its name and its largest code (launch_rules.h FeatureSet).
struct Entry {
  const char* name;
  int max;
};
constexpr Entry kEntries[kLaunchFeatureCount] = {{"decay", 2},  {"gain", 1},  {"precond", 1}, {"side", 1},
                                                 {"source", 1}, {"solve", 1}, {"clamp", 1}};

launch::FeatureSet fromArray(ArrayRef<int32_t> v) {
  launch::FeatureSet f;
  f.decay = v[0];
  f.gain = v[1];
  f.precond = v[2];
  f.side = v[3];
  f.source = v[4];
  f.solve = v[5];
  f.clamp = v[6];
  return f;
}

}  // namespace

DenseI32ArrayAttr launchFeaturesAttr(Builder& b, const launch::FeatureSet& f) {
  return b.getDenseI32ArrayAttr({f.decay, f.gain, f.precond, f.side, f.source, f.solve, f.clamp});
}

LogicalResult verifyLaunchFeatures(Operation* op, Attribute value) {
  auto v = dyn_cast<DenseI32ArrayAttr>(value);
  if (!v || v.size() != kLaunchFeatureCount)
    return op->emitOpError() << kLaunchFeaturesAttr << " must be array<i32: decay, gain, precond, side, source, "
                             << "solve, clamp> (launch_rules.h FeatureSet), got " << value;
  for (int i = 0; i < kLaunchFeatureCount; ++i)
    if (v[i] < 0 || v[i] > kEntries[i].max)
      return op->emitOpError() << kLaunchFeaturesAttr << ": " << kEntries[i].name << " is " << v[i]
                               << "; expected 0 to " << kEntries[i].max << " (launch_rules.h FeatureSet)";
  const launch::FeatureSet f = fromArray(v.asArrayRef());
  if (f.clamp == 1 && (f.precond != 1 || f.source != 1))
    return op->emitOpError() << kLaunchFeaturesAttr
                             << ": clamp is 1 without a hypergrad_ogd preconditioner (precond 1, source 1); only "
                                "its d-scan has a clamp";
  return success();
}

FailureOr<launch::FeatureSet> launchFeaturesOf(Operation* fn) {
  Attribute value = fn->getAttr(kLaunchFeaturesAttr);
  if (!value) return fn->emitOpError() << "has no " << kLaunchFeaturesAttr << " (launch_rules.h FeatureSet)";
  if (failed(verifyLaunchFeatures(fn, value))) return failure();
  return fromArray(cast<DenseI32ArrayAttr>(value).asArrayRef());
}

std::string featureSetInitializer(const launch::FeatureSet& f) {
  std::string s = "{" + std::to_string(f.decay) + ", " + std::to_string(f.gain) + ", " + std::to_string(f.precond) +
                  ", " + std::to_string(f.side) + ", " + std::to_string(f.source) + ", " + std::to_string(f.solve);
  if (f.clamp != 0) s += ", " + std::to_string(f.clamp);
  return s + "}";
}

}  // namespace dgps::tile
