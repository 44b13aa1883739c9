// optimize_model(): the one optimisation pipeline the CLI, the C++ API and the Python module run.
// With analytic costs it is optimize() with the analytic model, over the fused candidates the
// backend generates (when it can be created here). With measured costs it opens the
// profile cache, builds the backend, profiles lazily through a Profiler on it with every cache
// write in one batch, then (when plan_race is set) races the BLP's plan against the greedy plan
// end to end (plan_race.h), whose medians go into the same batch. Bad settings (unknown cost
// model or backend, non-positive bounds) throw korch::Error before anything runs.
#pragma once
#include <functional>
#include <string>

#include "cost/machine.h"
#include "cost/profiler.h"
#include "orchestrate/optimize.h"
#include "runtime/plan_race.h"

namespace korch {

struct ModelOptimizeSettings {
  std::string cost = "measured";  // measured | analytic
  std::string backend = "cpu";    // measured costs: the backend that measures; analytic: the one
                                  // whose structural check limits the fused candidates ("": none)
  int threads = 2;
  bool tf32 = false;       // GPU linear kernels may round operands to TF32 (BackendOptions::tf32)
  std::string cache_path;  // measured costs: the profile cache ("": ProfileCache::default_path())
  MachineFigures machine;  // the analytic model's figures (also the lower bound with measured costs)
  int max_kernel_prims = 8;
  int max_partition_prims = 64;
  double solver_time_limit = 60;
  bool plan_race = true;
  double budget_seconds = 0;                         // measured costs: stop profiling after this long (0: no budget)
  int learned_neighbours = 8;                        // measured costs: OptimizeOptions::learned_neighbours
  bool learned_rival_ranking = false;                // measured costs: OptimizeOptions::learned_rival_ranking
  std::function<void(const std::string&)> warn;      // profile-cache warnings (empty: to stderr)
  std::function<void(const std::string&)> dropped;   // one line per dropped kernel
  std::function<void(const std::string&)> rounds;    // one line per BLP solve (OptimizeOptions::log_round)
  std::function<void(const std::string&)> progress;  // one status line at a time
};

struct ModelOptimizeRun {
  OptimizeResult result;
  ProfilerStats profile;  // measured costs only
  CodegenStats codegen;   // the backend's compilations during profiling and the race
  PlanRace race;
  bool measured = false;
  std::string backend;     // the measuring backend ("" with analytic costs)
  std::string cache_path;  // the profile cache used ("" with analytic costs)
};

ModelOptimizeRun optimize_model(const PrimGraph& g, const ModelOptimizeSettings& settings);

}  // namespace korch
