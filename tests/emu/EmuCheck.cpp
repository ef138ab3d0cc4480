// The emulator checks' shared measures (EmuCheck.h).
#include "EmuCheck.h"

#include <cmath>
#include <cstdio>

namespace dgps_emu {

dgps::launch::FeatureSet featuresOf(const dgps::Spec& spec, const LoadedPackage& pkg) {
  dgps::launch::FeatureSet f = dgps::deviceFeatures(spec);
  f.write_key = pkg.writeKey;
  return f;
}

double relErr(const std::vector<double>& got, const dgps::Tensor& ref) {
  double num = 0, den = 0;
  for (std::int64_t i = 0; i < ref.numel(); ++i) {
    if (!std::isfinite(got[(size_t)i])) return INFINITY;
    const double d = got[(size_t)i] - ref.get(i);
    num += d * d;
    den += ref.get(i) * ref.get(i);
  }
  return std::sqrt(num / (den > 0 ? den : 1.0));
}

std::vector<float> f32Of(const dgps::Tensor& t) {
  std::vector<float> v((size_t)t.numel());
  for (std::int64_t i = 0; i < t.numel(); ++i) v[(size_t)i] = (float)t.get(i);
  return v;
}

std::string fmtG(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", x);
  return b;
}

}  // namespace dgps_emu
