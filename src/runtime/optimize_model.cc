// optimize_model() (see optimize_model.h).
#include "runtime/optimize_model.h"

#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

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
  if (s.learned_neighbours < 0) fail("the learned model's neighbour count must be >= 0 (0: off)");
}

OptimizeOptions optimize_options(const ModelOptimizeSettings& s) {
  OptimizeOptions options;
  options.candidates.max_prims = s.max_kernel_prims;
  options.partition.max_prims = s.max_partition_prims;
  options.solver_time_limit = s.solver_time_limit;
  options.budget_seconds = s.budget_seconds;
  options.learned_neighbours = s.learned_neighbours;
  options.learned_rival_ranking = s.learned_rival_ranking;
  return options;
}

// One status line: kernels measured (and the schedule variants compiled for them), taken from the
// cache and dropped; partitions done and the best plan so far.
std::string progress_line(const ProfilerStats& s, const OptimizeProgress& p) {
  std::ostringstream line;
  line << std::setprecision(3) << "profiling: " << s.measured << " measured (" << s.variants << " compiled), "
       << s.cache_hits << " cached, " << s.dropped << " dropped (" << static_cast<int>(s.seconds + s.prepare_seconds)
       << " s); ";
  if (p.partitions == 0)
    line << "baseline plans";
  else
    line << "partitions " << p.partitions_done << "/" << p.partitions << ", best plan so far "
         << p.best_plan_seconds * 1e3 << " ms predicted";
  return line.str();
}

// The backend an analytic plan is for, when it can be created here (its fused candidates are
// limited to what it generates); null where it cannot (a CUDA backend on a machine without a GPU),
// and the plan then takes every candidate to be generated.
std::shared_ptr<Backend> analytic_target(const ModelOptimizeSettings& s) {
  if (s.backend.empty()) return nullptr;
  try {
    return make_backend(s.backend, BackendOptions{s.threads, s.tf32});
  } catch (const Error&) {
    return nullptr;
  }
}

// Measured kernel times on a machine busier than it has cores include waiting for a core (a
// parallel kernel waits for its slowest thread's time slice, ~10 ms), and a plan chosen on them is
// no guide to an idle machine's: say so before profiling.
void warn_if_busy(const ModelOptimizeSettings& s) {
  double load = 0;
  unsigned cores = std::thread::hardware_concurrency();
  if (getloadavg(&load, 1) != 1 || cores == 0 || load <= 1.5 * cores) return;
  std::ostringstream msg;
  msg << std::setprecision(2) << "the machine is busy (load average " << load << " on " << cores
      << " cores): measured kernel times will include waiting for a core, and the plan may be worse than one "
         "measured on an idle machine";
  if (s.warn)
    s.warn(msg.str());
  else
    std::cerr << "korch: warning: " << msg.str() << std::endl;
}

}  // namespace

ModelOptimizeRun optimize_model(const PrimGraph& g, const ModelOptimizeSettings& settings) {
  check_settings(settings);
  AnalyticCostModel analytic(settings.machine);
  OptimizeOptions options = optimize_options(settings);
  ModelOptimizeRun run;
  if (settings.cost == "analytic") {
    if (std::shared_ptr<Backend> target = analytic_target(settings))
      options.supported = [target](const PrimGraph& graph, const Kernel& k) {
        return target->supports(graph, k, nullptr);
      };
    run.result = optimize(g, analytic, options);
    return run;
  }
  run.measured = true;
  run.backend = settings.backend;
  run.cache_path = settings.cache_path.empty() ? ProfileCache::default_path() : settings.cache_path;
  std::shared_ptr<Backend> backend = make_backend(settings.backend, BackendOptions{settings.threads, settings.tf32});
  CodegenStats codegen_before = backend->codegen_stats();
  ProfileCache cache(run.cache_path, settings.warn);
  warn_if_busy(settings);
  Profiler profiler(*backend, &cache, settings.dropped);
  OptimizeProgress where;
  if (settings.progress) {
    profiler.set_progress([&](const ProfilerStats& s) { settings.progress(progress_line(s, where)); });
    options.progress = [&](const OptimizeProgress& p) {
      where = p;
      settings.progress(progress_line(profiler.stats(), where));
    };
  }
  profiler.set_model_graph(&g);
  options.measurer = &profiler;
  options.log_round = settings.rounds;
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
