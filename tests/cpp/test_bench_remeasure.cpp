// The bench tool's second run of a shape with an unsteady pass (tools/bench_remeasure.h).
#include <gtest/gtest.h>

#include <vector>

#include "bench_remeasure.h"

namespace {

using nktool::PassTiming;
using nktool::ShapeResult;

// A measured pass of 100 samples: `slow` at `slow_us`, the rest at `fast_us`.
PassTiming pass(int slow, double fast_us, double slow_us, const char* explain = "") {
  std::vector<double> samples(100, fast_us);
  for (int i = 0; i < slow; ++i) samples[i] = slow_us;
  PassTiming t;
  t.measured = true;
  t.us = nktool::summarize(samples);
  t.bytes = 1e6;
  t.explain = explain;
  return t;
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
