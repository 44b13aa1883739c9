// Wall-clock medians of repeated runs, as the profiler, the plan race and the benchmarks take
// them: a warm-up first (first touch, JIT), then at least `min_runs` timed runs and more while a
// time budget lasts, the median reported. TimingStats says where the seconds went.
#pragma once
#include <functional>
#include <vector>

namespace korch {

// What repeated timing cost: runs and untimed preparations (cache resets), and their seconds.
struct TimingStats {
  int warmup_runs = 0;
  int timed_runs = 0;
  int prepares = 0;
  double warmup_seconds = 0;
  double timed_seconds = 0;
  double prepare_seconds = 0;
  TimingStats& operator+=(const TimingStats& other);
  double seconds() const { return warmup_seconds + timed_seconds + prepare_seconds; }
};

// The median of `values` (the upper one of an even count); values must not be empty.
double median_of(std::vector<double> values);
// Median seconds of `run` (two warm-up runs, then at least `min_runs` and ~`budget_seconds` of
// wall time, at most 200 runs). `prepare` (optional) runs untimed before every run. `stats`
// (optional) is added what the timing cost.
double median_run_seconds(const std::function<void()>& run, int min_runs = 5, double budget_seconds = 0.02,
                          const std::function<void()>& prepare = {}, TimingStats* stats = nullptr);

}  // namespace korch
