// The bench tool's timing statistics (tools/timing.h): order statistics, the test of a pass
// whose samples spread too widely, and the second run of such a pass (tools/bench_remeasure.h).
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "bench_remeasure.h"
#include "timing.h"

namespace {

using nktool::PassTiming;
using nktool::ShapeResult;
using nktool::spread_too_wide_us;
using nktool::summarize;

// 100 samples: `slow` of them at `slow_us`, the rest at `fast_us`.
nktool::TimingStats two_levels(int slow, double fast_us, double slow_us) {
  std::vector<double> samples(100, fast_us);
  for (int i = 0; i < slow; ++i) samples[i] = slow_us;
  return summarize(samples);
}

// A measured pass timed as two_levels.
PassTiming pass(int slow, double fast_us, double slow_us, const char* explain = "") {
  PassTiming t;
  t.measured = true;
  t.us = two_levels(slow, fast_us, slow_us);
  t.bytes = 1e6;
  t.explain = explain;
  return t;
}

TEST(TimingStats, MedianMinAndNearestRankP90) {
  const auto s = summarize({5, 1, 4, 2, 3, 10, 9, 8, 7, 6});
  EXPECT_EQ(s.count, 10);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.median, 5.5);
  EXPECT_DOUBLE_EQ(s.p90, 9);
  EXPECT_DOUBLE_EQ(summarize({3, 1, 2}).median, 2);
  EXPECT_THROW(summarize({}), std::invalid_argument);
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

TEST(BenchRemeasure, OnlyTheUnsteadyPassTakesTheSecondRun) {
  ShapeResult row;
  row.fwd = pass(60, 47.9, 63.1, "first");  // T2007's 8192x4096 forward
  row.bwd = pass(60, 76.0, 77.0, "first");  // steady
  ASSERT_TRUE(nktool::any_unsteady(row));
  ShapeResult again;
  again.fwd = pass(60, 48.5, 49.4, "second");
  again.bwd = pass(60, 75.0, 76.0, "second");
  nktool::take_remeasured(row, again);

  EXPECT_TRUE(row.fwd.remeasured);
  EXPECT_DOUBLE_EQ(row.fwd.us.median, 49.4);
  EXPECT_EQ(row.fwd.explain, "second");
  EXPECT_DOUBLE_EQ(row.fwd.first_us.median, 63.1);
  EXPECT_DOUBLE_EQ(row.fwd.first_us.min, 47.9);
  EXPECT_FALSE(nktool::unsteady(row.fwd));

  EXPECT_FALSE(row.bwd.remeasured);  // steady the first time: its figures stay
  EXPECT_DOUBLE_EQ(row.bwd.us.median, 77.0);
  EXPECT_EQ(row.bwd.explain, "first");
  EXPECT_FALSE(nktool::any_unsteady(row));

  const auto counts = nktool::count_remeasure({row, again});
  EXPECT_EQ(counts.remeasured, 1);
  EXPECT_EQ(counts.unsteady, 0);
}

TEST(BenchRemeasure, UnsteadyTwiceStaysUnsteady) {
  ShapeResult row;
  row.fwd = pass(60, 25.6, 30.3);  // a plan whose time varies by nature
  ShapeResult again;
  again.fwd = pass(60, 25.5, 30.2);
  nktool::take_remeasured(row, again);
  EXPECT_TRUE(row.fwd.remeasured);
  EXPECT_TRUE(nktool::unsteady(row.fwd));
  EXPECT_DOUBLE_EQ(row.fwd.first_us.median, 30.3);
  const auto counts = nktool::count_remeasure({row});
  EXPECT_EQ(counts.remeasured, 1);
  EXPECT_EQ(counts.unsteady, 1);
}

TEST(BenchRemeasure, PassesNotMeasuredAreNeitherUnsteadyNorReplaced) {
  ShapeResult row;  // e.g. --fwd-only: bwd not measured
  row.fwd = pass(0, 10, 10);
  EXPECT_FALSE(nktool::any_unsteady(row));
  ShapeResult again;
  again.bwd = pass(0, 5, 5);
  nktool::take_remeasured(row, again);
  EXPECT_FALSE(row.bwd.measured);
  EXPECT_FALSE(row.bwd.remeasured);
}

}  // namespace
