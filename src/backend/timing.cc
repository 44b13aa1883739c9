// Medians of repeated runs (see timing.h).
#include "backend/timing.h"

#include <algorithm>
#include <chrono>

namespace korch {

double median_run_seconds(const std::function<void()>& run, int min_runs, double budget_seconds,
                          const std::function<void()>& prepare) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < 2; ++i) {  // warm-up (first-touch, JIT)
    if (prepare) prepare();
    run();
  }
  std::vector<double> times;
  auto start = Clock::now();
  while (static_cast<int>(times.size()) < min_runs ||
         (std::chrono::duration<double>(Clock::now() - start).count() < budget_seconds && times.size() < 200)) {
    if (prepare) prepare();
    auto t0 = Clock::now();
    run();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return median_of(std::move(times));
}

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace korch
