#include "dgps/runtime/tuning/Stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dgps::tuning {

double quantile(std::vector<double> samples, double q) {
  if (samples.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(samples.begin(), samples.end());
  q = std::clamp(q, 0.0, 1.0);
  const double pos = q * static_cast<double>(samples.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, samples.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return samples[lo] + frac * (samples[hi] - samples[lo]);
}

SampleSummary summarize(const std::vector<double>& samples) {
  SampleSummary s;
  s.count = static_cast<int>(samples.size());
  s.median = quantile(samples, 0.5);
  s.p20 = quantile(samples, 0.2);
  s.p80 = quantile(samples, 0.8);
  return s;
}

}  // namespace dgps::tuning
