// The korch command line: inspect | check | optimize | calibrate. Every korch::Error becomes one "error: ..." line
// on stderr and exit status 1; usage errors exit with 2.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iomanip>
#include <iostream>

#include "check/test_case.h"
#include "frontend/onnx_import.h"
#include "cost/analytic.h"
#include "cost/calibrate.h"
#include "ir/printer.h"
#include "orchestrate/optimize.h"
#include "reference/reference.h"
#include "reference/run_plan.h"
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
    std::cout << "  " << g.tensor(t).name << ": " << dtype_name(g.tensor(t).dtype) << shape_str(g.tensor(t).shape) << "\n";
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
  std::string cost = "analytic";
  std::string machine_file;
  int max_kernel_prims = 8;
  int max_partition_prims = 64;
  double time_limit = 60;
};

MachineFigures machine_from(const OptimizeFlags& f) {
  return f.machine_file.empty() ? machine_figures_or_defaults() : load_machine_figures(f.machine_file);
}

OptimizeResult run_optimizer(const PrimGraph& g, const OptimizeFlags& f) {
  if (f.cost != "analytic") fail("unknown cost model '", f.cost, "' (available: analytic)");
  if (f.max_kernel_prims < 1 || f.max_partition_prims < 2) fail("kernel and partition bounds must be positive");
  AnalyticCostModel model(machine_from(f));
  OptimizeOptions options;
  options.candidates.max_prims = f.max_kernel_prims;
  options.partition.max_prims = f.max_partition_prims;
  options.solver_time_limit = f.time_limit;
  return optimize(g, model, options);
}

void print_summary(const OptimizeResult& r, const MachineFigures& m) {
  int reused = 0;
  for (const auto& p : r.partitions) reused += p.same_as >= 0;
  std::cout << "machine: " << m.bandwidth_gbs << " GB/s, " << m.gemm_gflops << " GFLOP/s GEMM, " << m.vector_gops
            << " Gop/s vector, " << m.kernel_overhead_us << " us/kernel (" << m.source << ")\n";
  std::cout << "partitions: " << r.partitions.size() << " (" << r.num_unique_partitions << " solved, " << reused
            << " reused)   candidates: " << r.num_candidates << "   priced structures: " << r.num_priced << "\n";
  std::cout << "solver: " << std::fixed << std::setprecision(2) << r.solver_seconds << " s, "
            << (r.all_optimal ? "every partition proven optimal" : "NOT all partitions proven optimal")
            << "   total optimize time: " << r.total_seconds << " s\n";
  for (const auto& p : r.partitions)
    if (p.status != "optimal" && p.status != "reused")
      std::cout << "  partition " << p.index << " (" << p.num_prims << " primitives): " << p.status << "\n";
  std::cout << "\n" << std::left << std::setw(16) << "plan" << std::setw(10) << "kernels" << "predicted (ms)\n";
  for (const Plan* plan : {&r.per_primitive, &r.per_op, &r.greedy, &r.korch})
    std::cout << std::setw(16) << plan->strategy << std::setw(10) << plan->kernels.size() << std::setprecision(3)
              << plan->predicted_seconds() * 1e3 << "\n";
  std::cout << "korch vs greedy: " << std::setprecision(3)
            << r.greedy.predicted_seconds() / std::max(r.korch.predicted_seconds(), 1e-12) << "x (predicted)\n"
            << std::defaultfloat;
}

int run_optimize(const std::string& model_path, const std::vector<std::string>& shapes, const std::string& out,
                 const std::string& dot_path, const OptimizeFlags& flags) {
  ImportedModel m = import_onnx_file(model_path, import_options(shapes));
  std::cout << "model: " << model_path << "  (" << m.graph.num_prims() << " primitives)\n";
  OptimizeResult r = run_optimizer(m.graph, flags);
  print_summary(r, machine_from(flags));
  if (!out.empty()) {
    save_plan(m.graph, r.korch, out);
    std::cout << "wrote " << out << "\n";
  }
  if (!dot_path.empty()) {
    std::ofstream f(dot_path);
    if (!f) fail("cannot write '", dot_path, "'");
    print_dot(f, m.graph, kernel_of_prim(m.graph, r.korch));
    std::cout << "wrote " << dot_path << "\n";
  }
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
  if (backend != "reference") fail("unknown backend '", backend, "' (available: reference)");
  Executor exec = [&](const ImportedModel& m, const std::vector<TensorData>& inputs) {
    if (plan_spec.empty()) return reference::run_graph(m.graph, inputs);
    Plan plan;
    if (plan_spec == "korch" || plan_spec == "greedy" || plan_spec == "per-op" || plan_spec == "per-primitive") {
      OptimizeResult r = run_optimizer(m.graph, flags);
      plan = plan_spec == "korch" ? r.korch : plan_spec == "greedy" ? r.greedy : plan_spec == "per-op" ? r.per_op : r.per_primitive;
    } else {
      plan = load_plan(m.graph, plan_spec);
    }
    std::cout << "  plan: " << plan.strategy << ", " << plan.kernels.size() << " kernels, predicted "
              << plan.predicted_seconds() * 1e3 << " ms\n";
    return reference::run_plan(m.graph, plan, inputs);
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
  check->add_option("--backend", backend, "reference");
  check->add_option("--input-shape", shapes, "Fix an input shape: NAME=D0,D1,...");
  check->add_option("--atol", tol.atol, "Absolute tolerance (default 1e-4)");
  check->add_option("--rtol", tol.rtol, "Relative tolerance (default 1e-3)");

  std::string plan_spec, out_path, machine_out;
  int threads = 2;
  korch::OptimizeFlags flags;
  auto add_optimize_flags = [&](CLI::App* cmd) {
    cmd->add_option("--cost", flags.cost, "Cost model: analytic");
    cmd->add_option("--machine", flags.machine_file, "Machine figures file (default: korch calibrate's)");
    cmd->add_option("--max-kernel-prims", flags.max_kernel_prims, "Primitives per candidate kernel (default 8)");
    cmd->add_option("--max-partition-prims", flags.max_partition_prims, "Primitives per partition (default 64, max 128)");
    cmd->add_option("--time-limit", flags.time_limit, "Solver time limit per partition, seconds (default 60)");
  };
  check->add_option("--plan", plan_spec, "Execute a plan: FILE | korch | greedy | per-op | per-primitive");
  add_optimize_flags(check);

  CLI::App* opt = app.add_subcommand("optimize", "Find the optimal kernel orchestration of a model");
  opt->add_option("model", model_path, "ONNX model file")->required();
  opt->add_option("-o,--output", out_path, "Write the plan as JSON");
  opt->add_option("--dot", dot_path, "Write the primitive graph coloured by kernel");
  opt->add_option("--input-shape", shapes, "Fix an input shape: NAME=D0,D1,...");
  add_optimize_flags(opt);

  CLI::App* cal = app.add_subcommand("calibrate", "Measure memory bandwidth and GEMM rate for the cost model");
  cal->add_option("--threads", threads, "Threads (default 2)");
  cal->add_option("-o,--output", machine_out, "Where to write the figures (default: the user cache)");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*inspect) return korch::run_inspect(model_path, shapes, dot_path, print);
    if (*check) return korch::run_check(case_dir, backend, shapes, tol, plan_spec, flags);
    if (*opt) return korch::run_optimize(model_path, shapes, out_path, dot_path, flags);
    if (*cal) return korch::run_calibrate(threads, machine_out);
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
