// The korch command line: inspect | check | optimize | calibrate. Every korch::Error becomes one "error: ..." line
// on stderr and exit status 1; usage errors exit with 2.
#include <malloc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "backend/cpu/calibrate.h"
#include "check/test_case.h"
#include "cost/profiler.h"
#include "export_command.h"
#include "fission/fission.h"
#include "fission/onnx_tensor.h"
#include "fission/onnx_versions.h"
#include "frontend/onnx_import.h"
#include "ir/printer.h"
#include "orchestrate/optimize.h"
#include "plan/run_plan.h"
#include "reference/reference.h"
#include "runtime/executor.h"
#include "runtime/optimize_model.h"
#include "util/error.h"

namespace korch {
namespace {

ImportOptions import_options(const std::vector<std::string>& shapes) {
  ImportOptions options;
  for (const std::string& s : shapes) options.input_shapes.insert(parse_input_shape(s));
  return options;
}

int run_inspect(const std::string& model_path, const std::vector<std::string>& shapes, const std::string& dot_path,
                bool print) {
  ImportedModel m = import_onnx_file(model_path, import_options(shapes));
  const PrimGraph& g = m.graph;
  std::cout << "model: " << model_path << "\nopset: " << m.opset << "   producer: " << m.producer
            << "\nparameters: " << m.num_parameters << "\n\ninputs:\n";
  for (TensorId t : g.inputs())
    std::cout << "  " << g.tensor(t).name << ": " << dtype_name(g.tensor(t).dtype) << shape_str(g.tensor(t).shape)
              << "\n";
  std::cout << "outputs:\n";
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const TensorInfo& info = g.tensor(g.outputs()[i]);
    std::cout << "  " << m.output_names[i] << ": " << dtype_name(info.dtype) << shape_str(info.shape) << "\n";
  }
  int total_ops = 0;
  for (const auto& [op, n] : m.op_histogram) total_ops += n;
  std::cout << "\nONNX operators (" << total_ops << "):\n";
  for (const auto& [op, n] : m.op_histogram) std::cout << "  " << std::left << std::setw(24) << op << n << "\n";
  int by_kind[kNumPrimKinds] = {};
  std::map<std::string, int> by_op;
  for (const Primitive& p : g.prims()) {
    by_kind[static_cast<int>(prim_kind(p.op))]++;
    by_op[prim_op_name(p.op)]++;
  }
  std::cout << "\nprimitives (" << g.num_prims() << ") by kind:\n";
  for (int k = 0; k < kNumPrimKinds; ++k)
    std::cout << "  " << std::left << std::setw(24) << prim_kind_name(static_cast<PrimKind>(k)) << by_kind[k] << "\n";
  std::cout << "primitives by op:\n";
  for (const auto& [op, n] : by_op) std::cout << "  " << std::left << std::setw(24) << op << n << "\n";
  std::cout << "algebraic rewrites (" << m.rewrites.total()
            << (rewrites_enabled_by_default() ? "" : ", KORCH_REWRITE=off") << "):\n";
  for (const auto& [rule, n] : m.rewrites.fired) std::cout << "  " << std::left << std::setw(36) << rule << n << "\n";
  std::cout << "structural hash: " << std::hex << structural_hash(g) << std::dec << "\n";
  if (print) {
    std::cout << "\n";
    print_graph(std::cout, g);
  }
  if (!dot_path.empty()) {
    std::ofstream f(dot_path);
    if (!f) fail("cannot write '", dot_path, "'");
    print_dot(f, g);
    std::cout << "wrote " << dot_path << "\n";
  }
  return 0;
}

struct OptimizeFlags {
  std::string cost;  // empty: analytic for optimize / reference checks, measured for the CPU backend
  std::string machine_file;
  int max_kernel_prims = 8;
  int max_partition_prims = 64;
  double time_limit = 60;
  int threads = 2;
  bool tf32 = false;  // GPU linear kernels may round operands to TF32
  std::string cache_path;
  bool verbose = false;
  bool plan_race = true;         // measured costs: race the BLP's plan against greedy end to end
  std::string backend = "cpu";   // what measures kernels and runs plans
  double budget = 0;             // measured costs: seconds of profiling (0: no budget)
  int learned_neighbours = 8;    // measured costs: neighbours of the learned cost model (0: none)
  bool learned_ranking = false;  // measured costs: rank rivals by the learned model
};

// --machine names a file or a built-in figure set; without it the CUDA backend is priced with the
// H200's figures and the CPU backends with `korch calibrate`'s (or defaults).
MachineFigures machine_from(const OptimizeFlags& f) {
  if (is_builtin_machine(f.machine_file)) return builtin_machine_figures(f.machine_file, f.tf32);
  if (!f.machine_file.empty()) return load_machine_figures(f.machine_file);
  if (f.backend == "cuda") return builtin_machine_figures("h200", f.tf32);
  return machine_figures_or_defaults();
}

BackendOptions backend_options(const OptimizeFlags& f) { return BackendOptions{f.threads, f.tf32}; }

// Progress on a terminal: one rewritten line on stderr.
struct Progress {
  bool tty = isatty(STDERR_FILENO) != 0;
  void update(const std::string& line) {
    if (tty) std::cerr << "\r\033[K" << line << std::flush;
  }
  void done() {
    if (tty) std::cerr << "\r\033[K" << std::flush;
  }
};

using OptimizeRun = ModelOptimizeRun;

OptimizeRun run_optimizer(const PrimGraph& g, OptimizeFlags f, const std::string& default_cost = "analytic") {
  ModelOptimizeSettings s;
  s.cost = f.cost.empty() ? default_cost : f.cost;
  s.backend = f.backend;
  s.threads = f.threads;
  s.tf32 = f.tf32;
  s.cache_path = f.cache_path;
  s.machine = machine_from(f);
  s.max_kernel_prims = f.max_kernel_prims;
  s.max_partition_prims = f.max_partition_prims;
  s.solver_time_limit = f.time_limit;
  s.plan_race = f.plan_race;
  s.budget_seconds = f.budget;
  s.learned_neighbours = f.learned_neighbours;
  s.learned_rival_ranking = f.learned_ranking;
  Progress progress;
  s.warn = [](const std::string& w) { std::cerr << "warning: " << w << "\n"; };
  s.dropped = [&](const std::string& line) {
    progress.done();
    if (f.verbose) std::cerr << line << "\n";
  };
  if (f.verbose) s.rounds = s.dropped;  // only --verbose prints them: no work per solve otherwise
  s.progress = [&](const std::string& line) { progress.update(line); };
  OptimizeRun run = optimize_model(g, s);
  progress.done();
  return run;
}

// Shared by print_summary() and summary_json().
int reused_partitions(const OptimizeResult& r) {
  int reused = 0;
  for (const auto& p : r.partitions) reused += p.same_as >= 0;
  return reused;
}
// The partitions the summary names: those neither proven optimal (exactly or within the lazy
// profiling gap) nor reused.
bool noteworthy(const PartitionReport& p) {
  return p.status != "optimal" && p.status != "reused" && p.status != "optimal (stored solution)" &&
         p.status.rfind("optimal within ", 0) != 0;
}
std::array<const Plan*, 4> summary_plans(const OptimizeResult& r) {
  return {&r.per_primitive, &r.per_op, &r.greedy, &r.korch};
}
double predicted_speedup_vs_greedy(const OptimizeResult& r) {
  return r.greedy.predicted_seconds() / std::max(r.korch.predicted_seconds(), 1e-12);
}

void print_summary(const OptimizeRun& run, const MachineFigures& m) {
  const OptimizeResult& r = run.result;
  int reused = reused_partitions(r);
  std::cout << "machine: " << m.bandwidth_gbs << " GB/s, " << m.gemm_gflops << " GFLOP/s GEMM, " << m.vector_gops
            << " Gop/s vector, " << m.kernel_overhead_us << " us/kernel (" << m.source << ")\n";
  std::cout << "partitions: " << r.partitions.size() << " (" << r.num_unique_partitions << " solved, " << reused
            << " reused)   candidates: " << r.num_candidates << "   priced structures: " << r.num_priced << "\n";
  int within_gap = 0;
  for (const auto& p : r.partitions) within_gap += p.status.rfind("optimal within ", 0) == 0;
  std::cout << "solver: " << std::fixed << std::setprecision(2) << r.solver_seconds << " s, "
            << (r.all_optimal ? "every partition proven optimal" : "NOT all partitions proven optimal")
            << (within_gap > 0 ? str_cat(" (", within_gap, " within the lazy-profiling gap)") : "")
            << "   total optimize time: " << r.total_seconds << " s\n";
  if (run.measured)
    std::cout << "profiling: " << r.num_measured << " kernel structures measured of " << r.num_priced << " priced ("
              << r.num_candidates << " candidates enumerated), " << run.profile.measured << " compiled+timed now, "
              << run.profile.cache_hits << " from cache, " << r.num_dropped << " dropped, " << run.profile.mismatches
              << " mismatches, " << r.solve_rounds << " BLP solves, " << std::fixed << std::setprecision(1)
              << run.profile.seconds + run.profile.prepare_seconds << " s (" << run.profile.precompiled
              << " kernels compiled ahead on " << run.profile.compile_threads << " threads in "
              << run.profile.prepare_seconds << " s), " << r.num_stored_solutions
              << " partitions took a stored solution\n  cache: " << run.cache_path << "\n"
              << std::defaultfloat;
  if (run.measured && r.price_errors.kernels > 0) {
    auto percent = [](double log2_error) { return (std::exp2(log2_error) - 1) * 100; };
    std::cout << std::fixed << std::setprecision(0) << "  predictions of the " << r.price_errors.kernels
              << " kernels then measured: median error " << percent(r.price_errors.learned_median_log2)
              << "% (learned model), " << percent(r.price_errors.roofline_median_log2)
              << "% (prices: roofline x smallest measured ratio)\n"
              << std::defaultfloat;
  }
  if (run.measured) {
    const ProfilerStats& s = run.profile;
    std::cout << std::fixed << std::setprecision(1) << "  where the profiling seconds went: inputs " << s.inputs_seconds
              << " s, compiling " << s.compile_seconds << " s (+ " << s.prepare_seconds << " s ahead), verifying "
              << s.verify_seconds << " s, timing " << s.timing.seconds() << " s (" << s.timing.timed_runs << " runs + "
              << s.timing.warmup_runs << " warm-ups: " << s.timing.timed_seconds << " + " << s.timing.warmup_seconds
              << " s, " << s.timing.prepares << " cache resets: " << s.timing.prepare_seconds << " s), link savings of "
              << s.link_timed << " kernels " << s.link_timing.seconds() << " s (" << s.link_timing.timed_runs
              << " runs, " << s.link_timing.prepares << " cache resets: " << s.link_timing.prepare_seconds << " s)\n"
              << "  verified on the model's values: " << s.model_value_kernels << " of " << s.measured + s.dropped
              << " kernels (reference evaluations: " << s.model_values_evaluated << " primitives, "
              << s.model_values_reevaluated << " again; " << s.model_value_retries
              << " checked again on random inputs)\n"
              << std::defaultfloat;
    const CodegenStats& c = run.codegen;
    std::cout << std::fixed << std::setprecision(1) << "  pipelines: " << c.requested << " requested, " << c.compiled
              << " compiled (" << c.compile_seconds << " s over all threads), " << c.reused << " reused ("
              << c.reused_other_extents << " from other extents); " << c.same_structure
              << " repeat a structure up to extents\n"
              << std::defaultfloat;
  }
  for (const auto& p : r.partitions)
    if (noteworthy(p))
      std::cout << "  partition " << p.index << " (" << p.num_prims << " primitives): " << p.status << "\n";
  if (r.budget_spent)
    std::cout << "profiling budget spent: the partitions listed above chose among the kernels measured by then\n";
  std::cout << "\n"
            << std::left << std::setw(16) << "plan" << std::setw(10) << "kernels"
            << "predicted (ms)\n";
  for (const Plan* plan : summary_plans(r))
    std::cout << std::setw(16) << plan->strategy << std::setw(10) << plan->kernels.size() << std::setprecision(3)
              << plan->predicted_seconds() * 1e3 << "\n";
  std::cout << "korch vs greedy: " << std::setprecision(3) << predicted_speedup_vs_greedy(r) << "x (predicted)\n"
            << std::defaultfloat;
  if (run.race.greedy_kept)
    std::cout << "(the BLP's plan: " << run.race.blp_kernels << " kernels, predicted " << std::setprecision(3)
              << run.race.blp_predicted_seconds * 1e3 << " ms, "
              << r.greedy.predicted_seconds() / std::max(run.race.blp_predicted_seconds, 1e-12)
              << "x vs greedy predicted)\n"
              << std::defaultfloat;
  if (run.race.raced) std::cout << "plan race: " << r.korch.note << "\n";
}

// The facts print_summary() prints, as JSON (korch optimize --json).
nlohmann::json summary_json(const std::string& model_path, const PrimGraph& g, const OptimizeRun& run,
                            const MachineFigures& m) {
  const OptimizeResult& r = run.result;
  nlohmann::json j;
  j["model"] = model_path;
  j["primitives"] = g.num_prims();
  j["cost_model"] = run.measured ? "measured" : "analytic";
  j["backend"] = run.backend;  // the measuring backend ("" with analytic costs)
  j["machine"] = {{"bandwidth_gbs", m.bandwidth_gbs},
                  {"gemm_gflops", m.gemm_gflops},
                  {"vector_gops", m.vector_gops},
                  {"kernel_overhead_us", m.kernel_overhead_us},
                  {"source", m.source}};
  j["partitions"] = {
      {"total", r.partitions.size()}, {"solved", r.num_unique_partitions}, {"reused", reused_partitions(r)}};
  j["candidates"] = r.num_candidates;
  j["priced"] = r.num_priced;
  j["measured"] = r.num_measured;
  j["dropped"] = r.num_dropped;
  j["price_errors"] = {{"kernels", r.price_errors.kernels},
                       {"learned_median_log2", r.price_errors.learned_median_log2},
                       {"roofline_median_log2", r.price_errors.roofline_median_log2}};
  j["mismatches"] = run.profile.mismatches;
  j["solver_seconds"] = r.solver_seconds;
  j["total_seconds"] = r.total_seconds;
  j["all_optimal"] = r.all_optimal;
  j["budget_spent"] = r.budget_spent;
  j["not_optimal_partitions"] = nlohmann::json::array();
  for (const auto& p : r.partitions)
    if (noteworthy(p))
      j["not_optimal_partitions"].push_back(
          {{"index", p.index}, {"primitives", p.num_prims}, {"solves", p.solves}, {"status", p.status}});
  // Measured costs only (null with analytic costs): the profiler's side of the run.
  j["profiling"] = nullptr;
  auto timing_json = [](const TimingStats& t) {
    return nlohmann::json{{"seconds", t.seconds()},
                          {"timed_runs", t.timed_runs},
                          {"timed_seconds", t.timed_seconds},
                          {"warmup_runs", t.warmup_runs},
                          {"warmup_seconds", t.warmup_seconds},
                          {"cache_resets", t.prepares},
                          {"cache_reset_seconds", t.prepare_seconds}};
  };
  if (run.measured)
    j["profiling"] = {{"timed_now", run.profile.measured},
                      {"from_cache", run.profile.cache_hits},
                      {"blp_solves", r.solve_rounds},
                      {"seconds", run.profile.seconds + run.profile.prepare_seconds},
                      {"compiled_ahead", run.profile.precompiled},
                      {"compile_ahead_seconds", run.profile.prepare_seconds},
                      {"compile_threads", run.profile.compile_threads},
                      {"stored_solutions", r.num_stored_solutions},
                      {"split",
                       {{"inputs_seconds", run.profile.inputs_seconds},
                        {"compile_seconds", run.profile.compile_seconds},
                        {"verify_seconds", run.profile.verify_seconds},
                        {"model_value_kernels", run.profile.model_value_kernels},
                        {"model_values_evaluated", run.profile.model_values_evaluated},
                        {"model_values_reevaluated", run.profile.model_values_reevaluated},
                        {"model_value_retries", run.profile.model_value_retries},
                        {"timing", timing_json(run.profile.timing)},
                        {"link_savings_kernels", run.profile.link_timed},
                        {"link_savings_timing", timing_json(run.profile.link_timing)}}},
                      {"pipelines",
                       {{"requested", run.codegen.requested},
                        {"compiled", run.codegen.compiled},
                        {"compile_seconds", run.codegen.compile_seconds},
                        {"reused", run.codegen.reused},
                        {"reused_other_extents", run.codegen.reused_other_extents},
                        {"same_structure", run.codegen.same_structure}}}};
  j["plans"] = nlohmann::json::array();
  for (const Plan* plan : summary_plans(r))
    j["plans"].push_back({{"strategy", plan->strategy},
                          {"kernels", plan->kernels.size()},
                          {"predicted_seconds", plan->predicted_seconds()}});
  j["predicted_speedup_vs_greedy"] = predicted_speedup_vs_greedy(r);
  j["plan_race"] = {{"raced", run.race.raced},
                    {"greedy_kept", run.race.greedy_kept},
                    {"note", r.korch.note},
                    {"korch_seconds", run.race.korch_seconds},
                    {"greedy_seconds", run.race.greedy_seconds},
                    {"rounds", run.race.rounds},
                    {"blp_kernels", run.race.blp_kernels},
                    {"blp_predicted_seconds", run.race.blp_predicted_seconds}};
  j["cache"] = run.measured ? nlohmann::json(run.cache_path) : nlohmann::json(nullptr);
  return j;
}

void write_json(const nlohmann::json& j, const std::string& path) {
  std::ofstream f(path);
  if (!f) fail("cannot write '", path, "'");
  f << j.dump(2) << "\n";
  if (!f.flush()) fail("cannot write '", path, "'");
  std::cout << "wrote " << path << "\n";
}

int run_optimize(const std::string& model_path, const std::vector<std::string>& shapes, const std::string& out,
                 const std::string& dot_path, const std::string& baseline_dir, const std::string& json_path,
                 const OptimizeFlags& flags) {
  ImportedModel m = import_onnx_file(model_path, import_options(shapes));
  std::cout << "model: " << model_path << "  (" << m.graph.num_prims() << " primitives)\n";
  OptimizeRun run = run_optimizer(m.graph, flags, "measured");
  const OptimizeResult& r = run.result;
  MachineFigures machine = machine_from(flags);
  print_summary(run, machine);
  if (!json_path.empty()) write_json(summary_json(model_path, m.graph, run, machine), json_path);
  if (!out.empty()) {
    save_plan(m.graph, r.korch, out);
    std::cout << "wrote " << out << "\n";
  }
  if (!baseline_dir.empty()) {
    std::filesystem::create_directories(baseline_dir);
    for (const Plan* p : {&r.greedy, &r.per_op, &r.per_primitive}) {
      std::string path = baseline_dir + "/" + p->strategy + ".json";
      save_plan(m.graph, *p, path);
      std::cout << "wrote " << path << "\n";
    }
  }
  if (!dot_path.empty()) {
    std::ofstream f(dot_path);
    if (!f) fail("cannot write '", dot_path, "'");
    print_dot(f, m.graph, kernel_of_prim(m.graph, r.korch));
    std::cout << "wrote " << dot_path << "\n";
  }
  return 0;
}

// This process's resident memory in MiB (/proc/self/status VmRSS; -1 where there is none).
double resident_mib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      double kib = -1;
      status >> kib;
      return kib < 0 ? -1 : kib / 1024;
    }
    status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return -1;
}

int run_model(const std::string& model_path, const std::vector<std::string>& shapes, const std::string& plan_path,
              const std::vector<std::string>& input_specs, const std::string& out_dir, bool profile, bool serve,
              bool random, const OptimizeFlags& flags) {
  const double resident_before_model = resident_mib();
  ImportedModel m = import_onnx_file(model_path, import_options(shapes));
  Plan plan =
      plan_path.empty() ? run_optimizer(m.graph, flags, "measured").result.korch : load_plan(m.graph, plan_path);
  std::map<std::string, TensorData> given;
  for (const std::string& spec : input_specs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos) fail("--input expects NAME=FILE.pb (got '", spec, "')");
    given[spec.substr(0, eq)] = read_tensor_file(spec.substr(eq + 1));
  }
  std::vector<TensorData> inputs = random ? random_graph_inputs(m.graph, 1) : std::vector<TensorData>{};
  for (size_t i = 0; i < m.graph.inputs().size() && !random; ++i) {
    const std::string& name = m.graph.tensor(m.graph.inputs()[i]).name;
    auto it = given.find(name);
    if (it == given.end())
      fail("no value for input '", name, "': pass --input ", name, "=FILE.pb (an ONNX TensorProto) or --random-inputs");
    inputs.push_back(it->second);
    given.erase(it);
  }
  if (!given.empty()) fail("--input names '", given.begin()->first, "', which is not an input of the model");
  std::shared_ptr<Backend> backend = make_backend(flags.backend, backend_options(flags));
  if (std::string w = codegen_mismatch(plan, backend->codegen()); !w.empty()) std::cerr << "warning: " << w << "\n";
  Executor runtime(backend, m.graph, plan);
  runtime.set_profiling(profile);
  if (runtime.num_fallback_kernels() > 0)
    std::cerr << "warning: " << runtime.num_fallback_kernels()
              << " kernel(s) of the plan could not be generated and run on the slow reference executor "
              << (plan.cost_model == "analytic"
                      ? "(the analytic cost model does not check what the backends generate: optimise with "
                        "--cost measured)\n"
                      : "(a plan written by another korch version? re-run korch optimize)\n");
  if (serve) {
    // Benchmark peer mode: one run per line on stdin, its wall time (ms) on stdout. The ready line's
    // resident memory before the model was read lets a benchmark tell the model's memory from the
    // process's own.
    nlohmann::json ready = {{"kernels", plan.kernels.size()}, {"rss_base_mib", resident_before_model}};
    std::cout << "ready " << ready.dump() << std::endl;
    std::string line;
    while (std::getline(std::cin, line) && line != "quit") {
      auto s0 = std::chrono::steady_clock::now();
      runtime.run(inputs);
      std::cout << std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count() * 1e3 << std::endl;
    }
    return 0;
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<TensorData> outputs = runtime.run(inputs);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string& name = m.output_names[i];
    std::cout << "output '" << name << "': " << dtype_name(outputs[i].dtype()) << shape_str(outputs[i].shape());
    if (!out_dir.empty()) {
      std::filesystem::create_directories(out_dir);
      std::string path = out_dir + "/output_" + std::to_string(i) + ".pb";
      write_tensor_file(path, outputs[i], name);
      std::cout << " -> " << path;
    }
    std::cout << "\n";
  }
  std::cout << "ran " << plan.kernels.size() << " kernels in " << seconds * 1e3 << " ms (" << flags.threads
            << " threads, first run; `korch bench` measures steady state)\n";
  if (profile) {
    // Steady state: the median of each kernel's time over kProfileRuns runs after a warm-up,
    // next to the time the plan predicted for it (measured alone, before layout links).
    constexpr int kProfileRuns = 10;
    runtime.run(inputs);
    std::vector<std::vector<double>> samples(plan.kernels.size());
    std::vector<std::string> descriptions(plan.kernels.size());
    std::vector<double> run_seconds;  // end to end, the kernels' timers included
    for (int r = 0; r < kProfileRuns; ++r) {
      auto r0 = std::chrono::steady_clock::now();
      runtime.run(inputs);
      run_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count());
      const auto& t = runtime.last_timings();
      for (size_t i = 0; i < t.size() && i < samples.size(); ++i) {
        samples[i].push_back(t[i].seconds);
        descriptions[i] = t[i].description;
      }
    }
    double total = 0, total_predicted = 0;
    std::cout << "\nper-kernel profile (median of " << kProfileRuns
              << " runs after a warm-up; predicted: measured alone, before layout links):\n"
              << "     #  median ms  predicted ms  kernel\n";
    for (size_t i = 0; i < samples.size(); ++i) {
      double median = samples[i].empty() ? 0 : median_of(samples[i]);
      total += median;
      total_predicted += plan.kernels[i].cost;
      std::string ops;
      for (PrimId p : plan.kernels[i].prims)
        ops += std::string(ops.empty() ? "" : "+") + prim_op_name(m.graph.prim(p).op);
      std::cout << "  " << std::setw(4) << i << std::setw(11) << std::fixed << std::setprecision(3) << median * 1e3
                << std::setw(14) << plan.kernels[i].cost * 1e3 << "  " << ops << "  [" << descriptions[i] << "]\n"
                << std::defaultfloat;
    }
    std::cout << "  sum of the kernels' medians " << std::fixed << std::setprecision(3) << total * 1e3
              << " ms, predicted " << total_predicted * 1e3 << " ms less " << plan.link_savings_seconds * 1e3
              << " ms of layout links\n  end to end (median of the same runs, buffers and timers included) "
              << median_of(run_seconds) * 1e3 << " ms\n"
              << std::defaultfloat;
  }
  return 0;
}

// Side-by-side measurement of plans: every plan compiled once, warm-up, then interleaved
// rounds (one run of each plan per round) so that machine noise hits all plans alike.
int run_bench(const std::string& model_path, const std::vector<std::string>& shapes, int rounds,
              const std::string& json_path, const OptimizeFlags& flags) {
  ImportedModel m = import_onnx_file(model_path, import_options(shapes));
  OptimizeRun opt = run_optimizer(m.graph, flags, "measured");
  const OptimizeResult& r = opt.result;
  std::vector<const Plan*> plans = {&r.per_op, &r.greedy, &r.korch};
  std::shared_ptr<Backend> backend = make_backend(flags.backend, backend_options(flags));
  std::vector<std::unique_ptr<Executor>> runtimes;
  for (const Plan* p : plans) runtimes.push_back(std::make_unique<Executor>(backend, m.graph, *p));
  std::vector<TensorData> inputs = random_graph_inputs(m.graph, 1);
  std::vector<std::vector<double>> times(plans.size());
  std::vector<std::vector<TensorData>> outputs(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) outputs[i] = runtimes[i]->run(inputs);  // warm-up
  for (int round = 0; round < rounds; ++round)
    for (size_t i = 0; i < plans.size(); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      runtimes[i]->run(inputs);
      times[i].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  // Outputs of every plan agree with the reference executor.
  std::vector<TensorData> expected = reference::run_graph(m.graph, inputs);
  nlohmann::json j;
  j["model"] = model_path;
  j["threads"] = flags.threads;
  j["rounds"] = rounds;
  j["cost_model"] = r.korch.cost_model;
  std::cout << "model: " << model_path << "  threads: " << flags.threads << "  rounds: " << rounds << " (interleaved)\n"
            << std::left << std::setw(10) << "plan" << std::setw(9) << "kernels" << std::setw(14) << "median (ms)"
            << std::setw(18) << "p10-p90 (ms)" << std::setw(16) << "predicted (ms)" << std::setw(12) << "pred/meas"
            << "outputs\n";
  double korch_median = 0, greedy_median = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    std::vector<double> t = times[i];
    std::sort(t.begin(), t.end());
    double median = t[t.size() / 2], p10 = t[t.size() / 10], p90 = t[(t.size() * 9) / 10];
    bool ok = true;
    for (size_t o = 0; o < expected.size(); ++o)
      ok = ok && compare_tensors(outputs[i][o], expected[o], Tolerance{}).pass;
    double predicted = plans[i]->predicted_seconds();
    std::cout << std::setw(10) << plans[i]->strategy << std::setw(9) << plans[i]->kernels.size() << std::fixed
              << std::setprecision(3) << std::setw(14) << median * 1e3 << std::setw(18)
              << str_cat(std::fixed, std::setprecision(3), p10 * 1e3, "-", p90 * 1e3) << std::setw(16)
              << predicted * 1e3 << std::setw(12) << std::setprecision(2) << predicted / median
              << (ok ? "match" : "MISMATCH") << "\n"
              << std::defaultfloat;
    if (plans[i]->strategy == "korch") korch_median = median;
    if (plans[i]->strategy == "greedy") greedy_median = median;
    j["plans"][plans[i]->strategy] = {{"kernels", plans[i]->kernels.size()},
                                      {"median_ms", median * 1e3},
                                      {"p10_ms", p10 * 1e3},
                                      {"p90_ms", p90 * 1e3},
                                      {"predicted_ms", predicted * 1e3},
                                      {"outputs_match_reference", ok},
                                      {"fallback_kernels", runtimes[i]->num_fallback_kernels()}};
  }
  std::cout << "korch vs greedy (measured): " << std::setprecision(3) << greedy_median / korch_median << "x\n";
  if (opt.race.raced) std::cout << "plan race (during optimize): " << opt.result.korch.note << "\n";
  j["korch_speedup_over_greedy"] = greedy_median / korch_median;
  j["optimize_seconds"] = r.total_seconds;
  j["candidates"] = r.num_candidates;
  j["measured_kernels"] = r.num_measured;
  if (!json_path.empty()) write_json(j, json_path);
  return 0;
}

int run_calibrate(int threads, const std::string& out) {
  MachineFigures m = calibrate_machine(threads);
  std::string path = out.empty() ? default_machine_file() : out;
  save_machine_figures(m, path);
  std::cout << "threads: " << m.threads << "\nmemory bandwidth: " << m.bandwidth_gbs << " GB/s\nGEMM: " << m.gemm_gflops
            << " GFLOP/s\nvector ops: " << m.vector_gops << " Gop/s\nkernel overhead: " << m.kernel_overhead_us
            << " us\nwrote " << path << "\n";
  return 0;
}

int run_check(const std::string& case_dir, const std::string& backend, const std::vector<std::string>& shapes,
              const Tolerance& tol, const std::string& plan_spec, const OptimizeFlags& flags) {
  // The reference backend checks plans with the reference executor (plan/run_plan.h) and prices
  // them analytically; every other backend measures its kernels and runs the plan.
  OptimizeFlags measuring = flags;
  measuring.backend = backend;
  std::shared_ptr<Backend> runtime_backend = make_backend(backend, backend_options(measuring));
  const std::string default_cost = backend == "reference" ? "analytic" : "measured";
  ModelRunner exec = [&](const ImportedModel& m, const std::vector<TensorData>& inputs) {
    if (plan_spec.empty() && backend == "reference") return reference::run_graph(m.graph, inputs);
    Plan plan;
    if (plan_spec == "korch" || plan_spec == "greedy" || plan_spec == "per-op" || plan_spec == "per-primitive") {
      OptimizeResult r = run_optimizer(m.graph, measuring, default_cost).result;
      plan = plan_spec == "korch"    ? r.korch
             : plan_spec == "greedy" ? r.greedy
             : plan_spec == "per-op" ? r.per_op
                                     : r.per_primitive;
    } else if (plan_spec.empty()) {
      plan = run_optimizer(m.graph, measuring, default_cost).result.korch;
    } else {
      plan = load_plan(m.graph, plan_spec);
    }
    std::cout << "  plan: " << plan.strategy << ", " << plan.kernels.size() << " kernels, predicted "
              << plan.predicted_seconds() * 1e3 << " ms\n";
    if (backend == "reference") return reference::run_plan(m.graph, plan, inputs);
    Executor runtime(runtime_backend, m.graph, plan);
    std::cout << "  " << backend << ": " << plan.kernels.size() - runtime.num_fallback_kernels()
              << " generated kernels, " << runtime.num_fallback_kernels() << " reference fallbacks, arena "
              << runtime.arena().arena_bytes << " bytes (" << runtime.arena().total_bytes << " without reuse)\n";
    return runtime.run(inputs);
  };
  std::cout << "case: " << case_dir << "  backend: " << backend << (plan_spec.empty() ? "" : "  plan: " + plan_spec)
            << "  tolerance: |a-b| <= " << tol.atol << " + " << tol.rtol << "*|b|\n";
  bool ok = check_case(case_dir, import_options(shapes), exec, tol, std::cout);
  std::cout << (ok ? "PASS" : "FAIL") << "\n";
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace korch

int main(int argc, char** argv) {
  // Large buffers (kernel inputs and outputs while profiling, the model's reference values, tens of
  // MB each) come from the heap and stay there when freed: above glibc's mmap threshold (at most
  // 32 MB) each one is mapped fresh from the OS and its pages are faulted in and cleared again.
  // Cold EfficientViT-B1 at 2 threads: verification 19.7 -> 14.5 s, optimise 63.4 -> 57.4 s.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 256 << 20);
  CLI::App app{"korch: optimal kernel orchestration for tensor programs"};
  app.require_subcommand(1);

  std::string model_path, dot_path, case_dir, backend = "reference";
  std::vector<std::string> shapes;
  bool print = false;
  korch::Tolerance tol;

  CLI::App* inspect = app.add_subcommand("inspect", "Import a model and summarise its operators and primitives");
  inspect->add_option("model", model_path, "ONNX model file")->required();
  inspect->add_option("--input-shape", shapes, "Fix an input shape: NAME=D0,D1,...");
  inspect->add_option("--dot", dot_path, "Write the primitive graph as Graphviz DOT");
  inspect->add_flag("--print", print, "Print the primitive graph");

  CLI::App* check = app.add_subcommand("check", "Run an ONNX test case and compare with its expected outputs");
  check->add_option("case_dir", case_dir, "Folder with model.onnx and test_data_set_N/")->required();
  std::string backends;
  for (const std::string& name : korch::backend_names()) backends += (backends.empty() ? "" : " | ") + name;
  check->add_option("--backend", backend, "Where to run the case: " + backends + " (default reference)");
  check->add_option("--input-shape", shapes, "Fix an input shape: NAME=D0,D1,...");
  check->add_option("--atol", tol.atol, "Absolute tolerance (default 1e-4)");
  check->add_option("--rtol", tol.rtol, "Relative tolerance (default 1e-3)");

  std::string plan_spec, out_path, machine_out, json_path;
  int threads = 2;
  korch::OptimizeFlags flags;
  auto add_optimize_flags = [&](CLI::App* cmd) {
    cmd->add_option("--cost", flags.cost,
                    "Cost model: analytic | measured (profile on this CPU; the default where the CPU backend runs)");
    cmd->add_option("--machine", flags.machine_file,
                    "Machine figures: a file, or h200 (built-in; the default with --backend cuda); default: korch "
                    "calibrate's");
    cmd->add_flag("--tf32", flags.tf32,
                  "GPU linear kernels may round operands to TF32 (faster, results differ from fp32); default off");
    cmd->add_option("--max-kernel-prims", flags.max_kernel_prims, "Primitives per candidate kernel (default 8)");
    cmd->add_option("--max-partition-prims", flags.max_partition_prims,
                    "Primitives per partition (default 64, max 128)");
    cmd->add_option("--time-limit", flags.time_limit, "Solver time limit per BLP solve, seconds (default 60)");
    cmd->add_option("--threads", flags.threads, "CPU threads (default 2)");
    cmd->add_option("--cache", flags.cache_path, "Profile cache file (default: the user cache)");
    cmd->add_flag("--verbose", flags.verbose, "Log every dropped kernel and every BLP solve (lazy profiling's rounds)");
    cmd->add_option("--budget", flags.budget,
                    "With measured costs, stop profiling after this many seconds and choose among the kernels "
                    "measured by then (default 0: no budget)");
    cmd->add_option("--learned-neighbours", flags.learned_neighbours,
                    "With measured costs, the learned cost model predicts a kernel from this many nearest measured "
                    "ones (its error is reported; default 8, 0: no model)");
    cmd->add_flag("--learned-ranking", flags.learned_ranking,
                  "With measured costs, measure the rivals the learned model ranks likeliest to win (default: the "
                  "cheapest priced)");
    if (cmd != check)
      cmd->add_option("--backend", flags.backend,
                      "Backend that measures and runs kernels: " + backends + " (default cpu)");
    cmd->add_flag("--no-plan-race{false}", flags.plan_race,
                  "With measured costs, keep the BLP's plan without timing it against the greedy plan end to end");
  };
  check->add_option("--plan", plan_spec, "Execute a plan: FILE | korch | greedy | per-op | per-primitive");
  add_optimize_flags(check);

  CLI::App* opt = app.add_subcommand("optimize", "Find the optimal kernel orchestration of a model");
  opt->add_option("model", model_path, "ONNX model file")->required();
  opt->add_option("-o,--output", out_path, "Write the plan as JSON");
  opt->add_option("--dot", dot_path, "Write the primitive graph coloured by kernel");
  std::string baseline_dir;
  opt->add_option("--baselines", baseline_dir,
                  "Also write greedy.json, per-op.json, per-primitive.json into this folder");
  opt->add_option("--json", json_path, "Write the summary as JSON");
  opt->add_option("--input-shape", shapes, "Fix an input shape: NAME=D0,D1,...");
  add_optimize_flags(opt);

  std::vector<std::string> input_specs;
  std::string out_dir;
  bool profile = false;
  CLI::App* runc = app.add_subcommand("run", "Run a model with a plan on the CPU");
  runc->add_option("model", model_path, "ONNX model file")->required();
  runc->add_option("--plan", plan_spec, "Plan file (default: optimize now)");
  runc->add_option("--input", input_specs, "NAME=FILE.pb (ONNX TensorProto), one per input");
  runc->add_option("--output", out_dir, "Write output_K.pb files into this folder");
  runc->add_option("--input-shape", shapes, "Fix an input shape: NAME=D0,D1,...");
  runc->add_flag("--profile", profile, "Print per-kernel times");
  bool serve = false, random = false;
  runc->add_flag("--serve", serve, "Benchmark peer mode: run once per line read from stdin, print ms");
  runc->add_flag("--random-inputs", random, "Use random inputs instead of --input files");
  add_optimize_flags(runc);

  int rounds = 20;
  CLI::App* bench = app.add_subcommand("bench", "Measure per-op, greedy and korch plans side by side");
  bench->add_option("model", model_path, "ONNX model file")->required();
  bench->add_option("--rounds", rounds, "Interleaved rounds (default 20)");
  bench->add_option("--json", json_path, "Write the results as JSON");
  bench->add_option("--input-shape", shapes, "Fix an input shape: NAME=D0,D1,...");
  add_optimize_flags(bench);

  std::string export_plan, export_out;
  CLI::App* exp =
      app.add_subcommand("export", "Write a deployable package (C API, AOT Halide kernels) of a model + plan");
  exp->add_option("model", model_path, "ONNX model file")->required();
  exp->add_option("--input-shape", shapes, "Fix an input shape: NAME=D0,D1,...");
  exp->add_option("--plan", export_plan, "Plan file (korch optimize -o)")->required();
  exp->add_option("-o,--output", export_out, "Package folder")->required();
  exp->add_option("--threads", threads, "Package default threads (default 2)");

  CLI::App* cal = app.add_subcommand("calibrate", "Measure memory bandwidth and GEMM rate for the cost model");
  cal->add_option("--threads", threads, "Threads (default 2)");
  cal->add_option("-o,--output", machine_out, "Where to write the figures (default: the user cache)");

  CLI::App* ops = app.add_subcommand("ops", "List the ONNX operators korch imports, with the versions it implements");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*ops) {
      // A Markdown table (the README's operator table is this output, scripts/update_readme_ops.sh).
      std::cout << "| operator | versions (since_version) implemented |\n|---|---|\n";
      const auto& control_flow = korch::control_flow_ops();
      for (const std::string& op : korch::importable_onnx_ops()) {
        std::cout << "| " << op << " |";
        if (std::find(control_flow.begin(), control_flow.end(), op) != control_flow.end())
          std::cout << " every version, unrolled at import (constant condition, trip count or scan length)";
        auto it = korch::rule_handled_versions().find(op);
        if (it != korch::rule_handled_versions().end())
          for (size_t i = 0; i < it->second.size(); ++i) std::cout << (i ? ", " : " ") << it->second[i];
        std::cout << " |\n";
      }
      return 0;
    }
    if (*inspect) return korch::run_inspect(model_path, shapes, dot_path, print);
    if (*check) return korch::run_check(case_dir, backend, shapes, tol, plan_spec, flags);
    if (*opt) return korch::run_optimize(model_path, shapes, out_path, dot_path, baseline_dir, json_path, flags);
    if (*cal) return korch::run_calibrate(threads, machine_out);
    if (*exp) return korch::run_export(model_path, shapes, export_plan, export_out, threads);
    if (*bench) return korch::run_bench(model_path, shapes, std::max(rounds, 3), json_path, flags);
    if (*runc)
      return korch::run_model(model_path, shapes, plan_spec, input_specs, out_dir, profile, serve, random, flags);
  } catch (const korch::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
