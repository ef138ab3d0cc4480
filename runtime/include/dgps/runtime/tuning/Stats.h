// Order statistics of timing samples.
#pragma once

#include <vector>

namespace dgps::tuning {

/// The q-quantile (0 <= q <= 1) by linear interpolation between closest ranks (Hyndman-Fan type 7,
/// numpy's default): position q*(n-1) in the sorted samples. Returns NaN for an empty vector.
double quantile(std::vector<double> samples, double q);

struct SampleSummary {
  double median = 0;
  double p20 = 0;
  double p80 = 0;
  int count = 0;
};

SampleSummary summarize(const std::vector<double>& samples);

}  // namespace dgps::tuning
