// Medians of repeated runs (see timing.h).
#include "backend/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace korch {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

TimingStats& TimingStats::operator+=(const TimingStats& other) {
  warmup_runs += other.warmup_runs;
  timed_runs += other.timed_runs;
  prepares += other.prepares;
  warmup_seconds += other.warmup_seconds;
  timed_seconds += other.timed_seconds;
  prepare_seconds += other.prepare_seconds;
  return *this;
}

bool median_is_stable(const std::vector<double>& sorted, const MedianPrecision& precision) {
  const int n = static_cast<int>(sorted.size());
  if (n < 9) return false;
  const double half_width = 0.98 * std::sqrt(static_cast<double>(n));
  const int lo = std::max(0, static_cast<int>(std::floor(n / 2.0 - half_width)));
  const int hi = std::min(n - 1, static_cast<int>(std::ceil(n / 2.0 + half_width)));
  const double median = sorted[n / 2];
  return sorted[hi] - sorted[lo] <= 2 * std::max(precision.relative * median, precision.absolute_seconds);
}

double median_run_seconds(const std::function<void()>& run, int min_runs, double budget_seconds,
                          const std::function<void()>& prepare, TimingStats* stats, const MedianPrecision& stop_at) {
  TimingStats local;
  auto prepare_timed = [&] {
    if (!prepare) return;
    auto t0 = Clock::now();
    prepare();
    local.prepare_seconds += seconds_since(t0);
    ++local.prepares;
  };
  for (int i = 0; i < 2; ++i) {  // warm-up (first-touch, JIT)
    prepare_timed();
    auto t0 = Clock::now();
    run();
    double seconds = seconds_since(t0);
    local.warmup_seconds += seconds;
    ++local.warmup_runs;
    if (i == 0 && seconds >= kSlowRunSeconds) {
      min_runs = std::min(min_runs, seconds >= kVerySlowRunSeconds ? 1 : 3);
      break;
    }
  }
  std::vector<double> sorted;  // the timed runs' seconds, ascending
  auto start = Clock::now();
  while (static_cast<int>(sorted.size()) < min_runs || (seconds_since(start) < budget_seconds && sorted.size() < 200)) {
    prepare_timed();
    auto t0 = Clock::now();
    run();
    double seconds = seconds_since(t0);
    sorted.insert(std::upper_bound(sorted.begin(), sorted.end(), seconds), seconds);
    local.timed_seconds += seconds;
    if (stop_at.wanted() && static_cast<int>(sorted.size()) >= min_runs && median_is_stable(sorted, stop_at)) break;
  }
  local.timed_runs = static_cast<int>(sorted.size());
  if (stats) *stats += local;
  return sorted[sorted.size() / 2];
}

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace korch
