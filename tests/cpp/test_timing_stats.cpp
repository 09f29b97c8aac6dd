// The bench tool's order statistics (tools/timing.h) and its test of a spread-out pass.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "timing.h"

namespace {

using nktool::spread_too_wide_us;
using nktool::summarize;

TEST(TimingStats, MedianMinAndNearestRankP90) {
  const auto s = summarize({5, 1, 4, 2, 3, 10, 9, 8, 7, 6});
  EXPECT_EQ(s.count, 10);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.median, 5.5);
  EXPECT_DOUBLE_EQ(s.p90, 9);
  EXPECT_DOUBLE_EQ(summarize({3, 1, 2}).median, 2);
  EXPECT_THROW(summarize({}), std::invalid_argument);
}

// 100 samples: `slow` of them at `slow_us`, the rest at `fast_us`.
nktool::TimingStats two_levels(int slow, double fast_us, double slow_us) {
  std::vector<double> samples(100, fast_us);
  for (int i = 0; i < slow; ++i) samples[i] = slow_us;
  return summarize(samples);
}

TEST(TimingStats, SpreadTooWideWhenTheMedianLeavesTheMinimumFarBehind) {
  // 2026-11-27 (T2023): 1024x32768's forward, a stretch of samples ~15 us slow.
  EXPECT_TRUE(spread_too_wide_us(two_levels(60, 49.6, 64.4)));
  // A steady large pass: its median ~2% over its minimum.
  EXPECT_FALSE(spread_too_wide_us(two_levels(60, 91.5, 93.2)));
  // A launch-bound small pass: 20% over, but by about a microsecond.
  EXPECT_FALSE(spread_too_wide_us(two_levels(60, 5.4, 6.6)));
  // A few slow samples leave the median alone.
  EXPECT_FALSE(spread_too_wide_us(two_levels(10, 49.6, 64.4)));
  // Both bounds must be passed: 3 us over 50 (6%) is not too wide.
  EXPECT_FALSE(spread_too_wide_us(two_levels(60, 50, 53)));
  EXPECT_FALSE(spread_too_wide_us(nktool::TimingStats{}));
}

}  // namespace
