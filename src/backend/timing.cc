// Medians of repeated runs (see timing.h).
#include "backend/timing.h"

#include <algorithm>
#include <chrono>

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

double median_run_seconds(const std::function<void()>& run, int min_runs, double budget_seconds,
                          const std::function<void()>& prepare, TimingStats* stats) {
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
    local.warmup_seconds += seconds_since(t0);
    ++local.warmup_runs;
  }
  std::vector<double> times;
  auto start = Clock::now();
  while (static_cast<int>(times.size()) < min_runs || (seconds_since(start) < budget_seconds && times.size() < 200)) {
    prepare_timed();
    auto t0 = Clock::now();
    run();
    times.push_back(seconds_since(t0));
    local.timed_seconds += times.back();
  }
  local.timed_runs = static_cast<int>(times.size());
  if (stats) *stats += local;
  return median_of(std::move(times));
}

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace korch
