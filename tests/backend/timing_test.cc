// Repeated timing: the median's stability rule on fixed samples, and the run counts it leads to
// (no wall time decides a result: the tolerances are 0 and infinity, the budget generous).
#include "backend/timing.h"

#include <gtest/gtest.h>

#include <limits>

namespace korch {
namespace {

TEST(Timing, MedianIsStableWhenItsNeighboursAreClose) {
  EXPECT_TRUE(median_is_stable({0.5, 1.02, 1.03, 1.04, 5.0}, 0.03));  // an outlier on each side
  EXPECT_FALSE(median_is_stable({1.0, 1.02, 1.03, 1.5, 1.6}, 0.03));  // upper neighbour 1.5
  EXPECT_TRUE(median_is_stable({0.9, 1.0, 1.01, 1.02, 3.0}, 0.03));
  EXPECT_FALSE(median_is_stable({0.9, 1.0, 1.01, 1.02, 3.0}, 0.005));
  EXPECT_FALSE(median_is_stable({1.0, 1.0}, 1.0));  // too few samples
}

TEST(Timing, StableMediansStopAtTheMinimumRuns) {
  for (double within : {std::numeric_limits<double>::infinity(), 0.0}) {
    TimingStats stats;
    int runs = 0, prepares = 0;
    double median = median_run_seconds([&] { ++runs; }, 5, 60.0, [&] { ++prepares; }, &stats, within);
    EXPECT_GE(median, 0.0);
    int timed = within > 0 ? 5 : 200;  // stable at once, or until the 200-run cap (the budget is a minute)
    EXPECT_EQ(stats.timed_runs, timed) << within;
    EXPECT_EQ(stats.warmup_runs, 2);
    EXPECT_EQ(runs, timed + 2);
    EXPECT_EQ(prepares, runs);
    EXPECT_EQ(stats.prepares, prepares);
  }
}

}  // namespace
}  // namespace korch
