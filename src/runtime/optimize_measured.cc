// optimize_measured() (see optimize_measured.h).
#include "runtime/optimize_measured.h"

namespace korch {

OptimizeResult optimize_measured(const PrimGraph& g, CostModel& model, OptimizeOptions options, CpuProfiler& profiler,
                                 ProfileCache& cache, bool race, PlanRace* race_out,
                                 const std::function<void()>& before_race) {
  options.measurer = &profiler;
  cache.begin_batch();
  OptimizeResult result = optimize(g, model, options);
  if (race) {
    if (before_race) before_race();
    PlanRace r = race_against_greedy(g, result.korch, result.greedy, profiler.threads(), &cache, profiler.target(),
                                     CpuProfiler::versions());
    if (race_out) *race_out = r;
  }
  cache.commit_batch();
  return result;
}

}  // namespace korch
