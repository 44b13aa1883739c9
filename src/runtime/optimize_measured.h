// optimize_measured(): the optimisation pipeline with kernel costs measured on this CPU, as the
// CLI, the C++ API and the Python module run it: lazy profiling through `profiler` with every
// cache write in one batch, then (when `race` is set) the plan race of the BLP's plan against
// the greedy plan (plan_race.h), whose medians go into the same batch.
#pragma once
#include <functional>

#include "cost/profiler.h"
#include "orchestrate/optimize.h"
#include "runtime/plan_race.h"

namespace korch {

// `options.measurer` is set to `profiler`. `before_race` (optional) runs between the two steps
// (e.g. a progress line); `race_out` (optional) receives the race's result.
OptimizeResult optimize_measured(const PrimGraph& g, CostModel& model, OptimizeOptions options, CpuProfiler& profiler,
                                 ProfileCache& cache, bool race, PlanRace* race_out = nullptr,
                                 const std::function<void()>& before_race = {});

}  // namespace korch
