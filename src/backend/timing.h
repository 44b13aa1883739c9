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
// How precisely a median is wanted: known within +-max(relative * median, absolute_seconds).
struct MedianPrecision {
  double relative = 0;
  double absolute_seconds = 0;
  bool wanted() const { return relative > 0 || absolute_seconds > 0; }
};
// The precision profiling asks of a kernel's median: kernels whose runs agree within 2% stop
// after 9-15 runs instead of filling the timing budget (most of it went to the cache resets
// between runs). No absolute floor: with +-0.5 us as well, MobileNetV3-large's cold plan ran 8%
// slower than with relative precision alone (kernels of a few microseconds mis-ranked).
inline constexpr MedianPrecision kProfileMedianPrecision{0.02, 0};
// Whether the median of `sorted` (ascending, at least 9 values) is known within `precision`:
// the distribution-free ~95% confidence interval of the median, the order statistics
// n/2 -+ 0.98 sqrt(n), spans at most twice the precision's bound.
bool median_is_stable(const std::vector<double>& sorted, const MedianPrecision& precision);
// A run at least this long needs one warm-up run and three timed runs (below).
inline constexpr double kSlowRunSeconds = 0.02;
// A run at least this long needs one warm-up run and one timed run: timer and scheduling noise
// are far below its length, and each further run costs as much as compiling several kernels.
inline constexpr double kVerySlowRunSeconds = 0.25;
// Median seconds of `run` (two warm-up runs, then at least `min_runs` and ~`budget_seconds` of
// wall time, at most 200 runs). A run whose first warm-up took kSlowRunSeconds or more gets one
// warm-up and at most three timed runs (one from kVerySlowRunSeconds): its first-touch costs are paid by then,
// and timer and scheduling noise are small beside it (a 4096-token encoder's attention kernels take 30-300 ms). With a
// `stop_at` precision the runs stop early, once at least 9 were taken, when the median is known that precisely
// (median_is_stable). `prepare` (optional) runs untimed before every run. `stats` (optional) is added what the timing
// cost.
double median_run_seconds(const std::function<void()>& run, int min_runs = 5, double budget_seconds = 0.02,
                          const std::function<void()>& prepare = {}, TimingStats* stats = nullptr,
                          const MedianPrecision& stop_at = {});

}  // namespace korch
