#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "TestUtil.h"
#include "dgps/runtime/tuning/Stats.h"

namespace dgps::tuning {
namespace {

TEST(Stats, QuantilesMatchNumpyLinearInterpolation) {
  // Values numpy.percentile(x, [20, 50, 80]) gives (default "linear" method).
  EXPECT_DOUBLE_EQ(quantile({5, 1, 4, 2, 3}, 0.2), 1.8);
  EXPECT_DOUBLE_EQ(quantile({5, 1, 4, 2, 3}, 0.5), 3.0);
  EXPECT_DOUBLE_EQ(quantile({5, 1, 4, 2, 3}, 0.8), 4.2);
  EXPECT_DOUBLE_EQ(quantile({4, 3, 2, 1}, 0.5), 2.5);
  EXPECT_NEAR(quantile({4, 3, 2, 1}, 0.2), 1.6, 1e-12);
  EXPECT_NEAR(quantile({4, 3, 2, 1}, 0.8), 3.4, 1e-12);
  EXPECT_DOUBLE_EQ(quantile({7.5}, 0.8), 7.5);
  EXPECT_TRUE(std::isnan(quantile({}, 0.5)));
}

TEST(Stats, MedianOfOddSampleIsTheMiddleElement) {
  unsigned long long seed = 0;
  auto rng = test::freshRng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::uniform_real_distribution<double> u(0.1, 3.0);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> x(2 * trial + 1);
    for (double& v : x) v = u(rng);
    std::vector<double> sorted = x;
    std::nth_element(sorted.begin(), sorted.begin() + trial, sorted.end());
    const SampleSummary s = summarize(x);
    EXPECT_DOUBLE_EQ(s.median, sorted[trial]);
    EXPECT_LE(s.p20, s.median);
    EXPECT_LE(s.median, s.p80);
    EXPECT_EQ(s.count, static_cast<int>(x.size()));
  }
}

}  // namespace
}  // namespace dgps::tuning
