// median_run_seconds: the median, the run bounds, the early stop once the median is stable, and
// fewer runs of a slow run.
#include "backend/timing.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace korch {
namespace {

TEST(Timing, MedianIsTheMiddleValue) {
  EXPECT_EQ(median_of({3, 1, 2}), 2);
  EXPECT_EQ(median_of({4, 1, 3, 2}), 3);  // the upper one of an even count
}

TEST(Timing, StableNeedsNineValuesAndANarrowInterval) {
  std::vector<double> agree(8, 1.0);
  EXPECT_FALSE(median_is_stable(agree, {0.02}));  // too few to bound the median
  agree.push_back(1.0);
  EXPECT_TRUE(median_is_stable(agree, {0.02}));
  // Nine values 1.00, 1.01, ... 1.08: the interval (2nd to 9th smallest) spans 7% of the median.
  std::vector<double> spread;
  for (int i = 0; i < 9; ++i) spread.push_back(1.0 + 0.01 * i);
  EXPECT_FALSE(median_is_stable(spread, {0.02}));
  EXPECT_TRUE(median_is_stable(spread, {0.04}));
  // An outlier at either end does not move the interval of 25 values.
  std::vector<double> outliers(23, 1.0);
  outliers.insert(outliers.begin(), 0.1);
  outliers.push_back(50.0);
  EXPECT_TRUE(median_is_stable(outliers, {0.02}));
  // An absolute bound: 1.00 .. 1.08 us agree within half a microsecond, not within 2%.
  std::vector<double> microseconds;
  for (double v : spread) microseconds.push_back(v * 1e-6);
  EXPECT_FALSE(median_is_stable(microseconds, {0.02}));
  EXPECT_TRUE(median_is_stable(microseconds, {0.02, 0.5e-6}));
}

TEST(Timing, StopsEarlyOnlyWhenAskedAndStable) {
  // The same work every run: the runs agree within 25% long before the cap of 200.
  int runs = 0;
  TimingStats stats;
  median_run_seconds(
      [&] {
        ++runs;
        volatile double x = 0;
        for (int i = 0; i < 20000; ++i) x = x + 1;
      },
      5, 10.0, {}, &stats, {0.25});
  EXPECT_GE(stats.timed_runs, 9);
  EXPECT_LT(stats.timed_runs, 200);
  // Without a tolerance the budget (here 0) and min_runs decide.
  TimingStats fixed;
  median_run_seconds([] {}, 7, 0.0, {}, &fixed);
  EXPECT_EQ(fixed.timed_runs, 7);
  EXPECT_EQ(fixed.warmup_runs, 2);
  // Runs alternating 1x and 3x a unit never agree within 2%: the run cap ends them.
  int calls = 0;
  TimingStats unstable;
  median_run_seconds(
      [&] {
        const int n = calls++ % 2 ? 30000 : 10000;
        volatile double x = 0;
        for (int i = 0; i < n; ++i) x = x + 1;
      },
      5, 10.0, {}, &unstable, {0.02});
  EXPECT_EQ(unstable.timed_runs, 200);
  EXPECT_EQ(runs, stats.warmup_runs + stats.timed_runs);
}

// A run whose first warm-up takes kSlowRunSeconds or more: one warm-up and three timed runs.
TEST(Timing, SlowRunsWarmUpOnceAndTimeThreeRuns) {
  TimingStats slow;
  auto sleep = [] { std::this_thread::sleep_for(std::chrono::duration<double>(kSlowRunSeconds * 1.2)); };
  median_run_seconds(sleep, 5, 0.02, {}, &slow);
  EXPECT_EQ(slow.warmup_runs, 1);
  EXPECT_EQ(slow.timed_runs, 3);  // fast runs: two warm-ups and min_runs (StopsEarlyOnlyWhenAskedAndStable)
}

// From kVerySlowRunSeconds: one warm-up and one timed run.
TEST(Timing, VerySlowRunsWarmUpOnceAndTimeOneRun) {
  TimingStats slow;
  auto sleep = [] { std::this_thread::sleep_for(std::chrono::duration<double>(kVerySlowRunSeconds * 1.1)); };
  double median = median_run_seconds(sleep, 5, 0.02, {}, &slow);
  EXPECT_EQ(slow.warmup_runs, 1);
  EXPECT_EQ(slow.timed_runs, 1);
  EXPECT_GE(median, kVerySlowRunSeconds);
}

}  // namespace
}  // namespace korch
