// optimize_model() (see optimize_model.h).
#include "runtime/optimize_model.h"

#include <memory>

#include "cost/analytic.h"
#include "util/error.h"

namespace korch {

namespace {

void check_settings(const ModelOptimizeSettings& s) {
  if (s.cost != "analytic" && s.cost != "measured")
    fail("unknown cost model '", s.cost, "' (available: analytic, measured)");
  if (s.threads < 1) fail("thread count must be positive, got ", s.threads);
  if (s.max_kernel_prims < 1) fail("the kernel bound (max kernel primitives) must be at least 1");
  if (s.max_partition_prims < 2) fail("the partition bound (max partition primitives) must be at least 2");
  if (!(s.solver_time_limit > 0)) fail("the solver time limit must be positive");
  if (!(s.budget_seconds >= 0)) fail("the profiling budget must be a number of seconds >= 0 (0: none)");
}

OptimizeOptions optimize_options(const ModelOptimizeSettings& s) {
  OptimizeOptions options;
  options.candidates.max_prims = s.max_kernel_prims;
  options.partition.max_prims = s.max_partition_prims;
  options.solver_time_limit = s.solver_time_limit;
  options.budget_seconds = s.budget_seconds;
  return options;
}

std::string profiling_line(const ProfilerStats& s) {
  return str_cat("profiling: ", s.measured, " measured, ", s.cache_hits, " cached, ", s.dropped, " dropped (",
                 static_cast<int>(s.seconds + s.prepare_seconds), " s)");
}

}  // namespace

ModelOptimizeRun optimize_model(const PrimGraph& g, const ModelOptimizeSettings& settings) {
  check_settings(settings);
  AnalyticCostModel analytic(settings.machine);
  OptimizeOptions options = optimize_options(settings);
  ModelOptimizeRun run;
  if (settings.cost == "analytic") {
    run.result = optimize(g, analytic, options);
    return run;
  }
  run.measured = true;
  run.backend = settings.backend;
  run.cache_path = settings.cache_path.empty() ? ProfileCache::default_path() : settings.cache_path;
  std::shared_ptr<Backend> backend = make_backend(settings.backend, BackendOptions{settings.threads, settings.tf32});
  CodegenStats codegen_before = backend->codegen_stats();
  ProfileCache cache(run.cache_path, settings.warn);
  Profiler profiler(*backend, &cache, settings.dropped);
  if (settings.progress) profiler.set_progress([&](const ProfilerStats& s) { settings.progress(profiling_line(s)); });
  options.measurer = &profiler;
  cache.begin_batch();
  run.result = optimize(g, analytic, options);
  if (settings.plan_race) {
    if (settings.progress) settings.progress("timing the BLP's plan and the greedy plan end to end");
    run.race = race_against_greedy(g, run.result.korch, run.result.greedy, backend, &cache);
  }
  cache.commit_batch();
  run.profile = profiler.stats();  // the race measures no kernels
  run.codegen = backend->codegen_stats() - codegen_before;
  return run;
}

}  // namespace korch
