// _korch: Python bindings for korch (optimize a model, save/load plans, run plans on the CPU).
//
// Design notes:
//  - An imported model (ImportedModel) lives in a shared LoadedModel; every Plan and Session that
//    refers to its graph holds a shared_ptr to it, so a plan never outlives its graph.
//  - numpy is used only through Python-level calls and the buffer protocol (no pybind11/numpy.h),
//    so the module works with numpy 1.x and 2.x alike.
//  - korch::Error becomes korch.Error, a subclass of RuntimeError, carrying korch's one-line
//    message. Input validation in Session.run raises KeyError / ValueError / TypeError.
//  - The GIL is released while importing, optimizing, compiling and running. optimize()'s progress
//    callable is called with the GIL held, from the optimizing thread; an exception it raises (or a
//    KeyboardInterrupt pending there) ends the optimisation and propagates, measurements made so far
//    staying in the profile cache.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "cost/machine.h"
#include "cost/profile_cache.h"
#include "export/export.h"
#include "fission/onnx_tensor.h"
#include "frontend/onnx_import.h"
#include "orchestrate/optimize.h"
#include "plan/plan.h"
#include "runtime/executor.h"
#include "runtime/optimize_model.h"
#include "util/error.h"

namespace py = pybind11;
namespace fs = std::filesystem;

namespace korch::python {
namespace {

using ShapeMap = std::map<std::string, Shape>;

// ---------------------------------------------------------------------------------------------
// Models and plans

struct LoadedModel {
  std::string path;       // as given
  std::string canonical;  // absolute, normalised (identifies the file)
  ShapeMap input_shapes;  // the overrides it was imported with
  ImportedModel m;
};
using ModelPtr = std::shared_ptr<const LoadedModel>;

std::string canonical_path(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(fs::absolute(p), ec);
  return ec ? fs::absolute(p).lexically_normal().string() : c.string();
}

// Call without the GIL.
ModelPtr load_model(const fs::path& path, const ShapeMap& shapes) {
  auto lm = std::make_shared<LoadedModel>();
  lm->path = path.string();
  lm->canonical = canonical_path(path);
  lm->input_shapes = shapes;
  ImportOptions options;
  options.input_shapes = shapes;
  lm->m = import_onnx_file(lm->path, options);
  return lm;
}

struct OptimizeStats {
  int partitions = 0, unique_partitions = 0, candidates = 0, priced = 0, measured = 0, dropped = 0;
  int solve_rounds = 0;
  double solver_seconds = 0, total_seconds = 0;
  bool all_optimal = true;
  int compiled_now = 0, cache_hits = 0, mismatches = 0;
  std::string cache_path;
};

struct PyPlan {
  ModelPtr model;
  Plan plan;
  std::map<std::string, std::shared_ptr<PyPlan>> baselines;  // greedy, per-op, per-primitive
  std::optional<OptimizeStats> stats;                        // set by optimize()
};
using PlanPtr = std::shared_ptr<PyPlan>;

struct OptimizeArgs {
  int threads = 2;
  std::string cost = "analytic";
  std::string cache;  // empty: ProfileCache::default_path()
  int max_kernel_prims = 8;
  int max_partition_prims = 64;
  double time_limit = 60;
  std::string machine;  // machine figures file; empty: korch calibrate's or defaults
  py::handle progress;  // None or a callable taking one status line; the caller keeps it alive
};

// The optimizer's progress lines -> args.progress(line), with the GIL taken for the call. Pending
// signals are checked first, so Ctrl-C ends a long optimisation (as KeyboardInterrupt).
std::function<void(const std::string&)> python_progress(py::handle progress) {
  return [progress](const std::string& line) {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (!progress.is_none()) progress(line);
  };
}

// Call without the GIL; warnings are collected and issued by the caller.
OptimizeResult run_optimizer(const PrimGraph& g, const OptimizeArgs& a, OptimizeStats* stats,
                             std::vector<std::string>* warnings) {
  auto warn_mu = std::make_shared<std::mutex>();
  ModelOptimizeSettings s;
  s.cost = a.cost;
  s.threads = a.threads;
  s.cache_path = a.cache;
  s.machine = a.machine.empty() ? machine_figures_or_defaults() : load_machine_figures(a.machine);
  s.max_kernel_prims = a.max_kernel_prims;
  s.max_partition_prims = a.max_partition_prims;
  s.solver_time_limit = a.time_limit;
  s.warn = [warnings, warn_mu](const std::string& w) {
    std::lock_guard<std::mutex> lock(*warn_mu);
    warnings->push_back(w);
  };
  if (a.progress) s.progress = python_progress(a.progress);
  ModelOptimizeRun run = optimize_model(g, s);
  OptimizeResult& r = run.result;
  if (run.measured) {
    stats->cache_path = run.cache_path;
    stats->compiled_now = run.profile.measured;
    stats->cache_hits = run.profile.cache_hits;
    stats->mismatches = run.profile.mismatches;
  }
  stats->partitions = static_cast<int>(r.partitions.size());
  stats->unique_partitions = r.num_unique_partitions;
  stats->candidates = r.num_candidates;
  stats->priced = r.num_priced;
  stats->measured = r.num_measured;
  stats->dropped = r.num_dropped;
  stats->solve_rounds = r.solve_rounds;
  stats->solver_seconds = r.solver_seconds;
  stats->total_seconds = r.total_seconds;
  stats->all_optimal = r.all_optimal;
  return std::move(run.result);
}

void issue_warnings(const std::vector<std::string>& warnings) {
  if (warnings.empty()) return;
  py::object warn = py::module_::import("warnings").attr("warn");
  for (const std::string& w : warnings)
    warn(py::str("korch: " + w), py::module_::import("builtins").attr("RuntimeWarning"));
}

ShapeMap to_shape_map(const std::optional<std::map<std::string, std::vector<int64_t>>>& shapes) {
  ShapeMap out;
  if (!shapes) return out;
  for (const auto& [name, dims] : *shapes) {
    for (int64_t d : dims)
      if (d < 0) throw py::value_error("input_shapes['" + name + "'] has a negative dimension");
    out[name] = dims;
  }
  return out;
}

void check_optimize_args(const OptimizeArgs& a) {
  if (a.threads < 1) throw py::value_error("threads must be at least 1 (got " + std::to_string(a.threads) + ")");
  if (a.cost != "analytic" && a.cost != "measured")
    throw py::value_error("unknown cost model '" + a.cost + "' (available: 'analytic', 'measured')");
  if (a.max_kernel_prims < 1) throw py::value_error("max_kernel_prims must be at least 1");
  if (a.max_partition_prims < 2) throw py::value_error("max_partition_prims must be at least 2");
  if (!(a.time_limit > 0)) throw py::value_error("time_limit must be positive");
}

PlanPtr wrap(ModelPtr model, Plan plan) {
  auto p = std::make_shared<PyPlan>();
  p->model = std::move(model);
  p->plan = std::move(plan);
  return p;
}

PlanPtr py_optimize(const fs::path& path, int threads, const std::string& cost, const std::optional<fs::path>& cache,
                    int max_kernel_prims,
                    const std::optional<std::map<std::string, std::vector<int64_t>>>& input_shapes,
                    int max_partition_prims, double time_limit, const std::optional<fs::path>& machine,
                    const py::object& progress) {
  if (!progress.is_none() && !PyCallable_Check(progress.ptr()))
    throw py::type_error("progress must be a callable taking one status line (str), or None");
  OptimizeArgs a;
  a.threads = threads;
  a.cost = cost;
  a.cache = cache ? cache->string() : "";
  a.max_kernel_prims = max_kernel_prims;
  a.max_partition_prims = max_partition_prims;
  a.time_limit = time_limit;
  a.machine = machine ? machine->string() : "";
  a.progress = progress;
  check_optimize_args(a);
  ShapeMap shapes = to_shape_map(input_shapes);
  std::vector<std::string> warnings;
  PlanPtr result;
  {
    py::gil_scoped_release release;
    ModelPtr model = load_model(path, shapes);
    OptimizeStats stats;
    OptimizeResult r = run_optimizer(model->m.graph, a, &stats, &warnings);
    result = wrap(model, std::move(r.korch));
    result->stats = stats;
    for (Plan* b : {&r.greedy, &r.per_op, &r.per_primitive}) {
      std::string name = b->strategy;
      result->baselines[name] = wrap(model, std::move(*b));
    }
  }
  issue_warnings(warnings);
  return result;
}

// A plan file for `model`; a plan of another code generator adds a warning. Call without the GIL.
PlanPtr load_plan_file(const ModelPtr& model, const fs::path& plan_path, std::vector<std::string>* warnings) {
  PlanPtr plan = wrap(model, load_plan(model->m.graph, plan_path.string()));
  if (std::string w = codegen_mismatch(plan->plan, cpu::kCodegenVersion); !w.empty()) warnings->push_back(w);
  return plan;
}

PlanPtr py_load_plan(const fs::path& model_path, const fs::path& plan_path,
                     const std::optional<std::map<std::string, std::vector<int64_t>>>& input_shapes) {
  ShapeMap shapes = to_shape_map(input_shapes);
  PlanPtr plan;
  std::vector<std::string> warnings;
  {
    py::gil_scoped_release release;
    plan = load_plan_file(load_model(model_path, shapes), plan_path, &warnings);
  }
  issue_warnings(warnings);
  return plan;
}

// korch.export: the same package `korch export` writes, from a Plan object (its model is known).
py::dict py_export(const PyPlan& p, const fs::path& out_dir, int threads) {
  if (threads < 1) throw py::value_error("threads must be at least 1 (got " + std::to_string(threads) + ")");
  if (out_dir.empty()) throw py::value_error("out_dir must not be empty");
  ExportOptions options;
  options.out_dir = out_dir.string();
  options.threads = threads;
  ExportSummary s;
  std::ostringstream log;
  {
    py::gil_scoped_release release;
    s = export_package(p.model->m.graph, p.model->m.output_names, p.plan, options, log);
  }
  py::dict d;
  d["out_dir"] = out_dir.string();
  d["kernels"] = static_cast<int>(p.plan.kernels.size());
  d["halide_kernels"] = s.halide_kernels;
  d["onednn_kernels"] = s.onednn_kernels;
  d["reference_kernels"] = s.reference_kernels;
  d["target"] = s.target;
  d["cpu_features"] = s.cpu_features;
  d["weight_bytes"] = s.weight_bytes;
  d["log"] = log.str();
  return d;
}

std::string kernel_ops(const PrimGraph& g, const Kernel& k) {
  std::string ops;
  for (PrimId p : k.prims) ops += std::string(ops.empty() ? "" : "+") + prim_op_name(g.prim(p).op);
  return ops;
}

std::string plan_summary(const PyPlan& p, bool list_kernels) {
  const PrimGraph& g = p.model->m.graph;
  std::ostringstream os;
  os << std::fixed << std::setprecision(3);
  os << "plan '" << p.plan.strategy << "' for " << p.model->path << " (" << g.num_prims()
     << " primitives): " << p.plan.kernels.size() << " kernels, predicted " << p.plan.predicted_seconds() * 1e3
     << " ms (" << (p.plan.cost_model.empty() ? "unknown" : p.plan.cost_model) << " cost)\n";
  if (p.stats) {
    const OptimizeStats& s = *p.stats;
    os << "optimize: " << s.partitions << " partitions (" << s.unique_partitions << " solved), " << s.candidates
       << " candidates, " << s.priced << " priced structures, " << std::setprecision(2) << s.total_seconds << " s, "
       << (s.all_optimal ? "every partition proven optimal" : "NOT all partitions proven optimal") << "\n"
       << std::setprecision(3);
    if (!s.cache_path.empty())
      os << "profiling: " << s.measured << " structures measured (" << s.compiled_now << " compiled now, "
         << s.cache_hits << " from cache), " << s.dropped << " dropped, " << s.mismatches << " mismatches; cache "
         << s.cache_path << "\n";
  }
  for (const char* name : {"per-primitive", "per-op", "greedy"}) {
    auto it = p.baselines.find(name);
    if (it == p.baselines.end()) continue;
    os << "  baseline " << std::left << std::setw(14) << name << std::right << std::setw(5)
       << it->second->plan.kernels.size() << " kernels, predicted " << it->second->plan.predicted_seconds() * 1e3
       << " ms\n";
  }
  if (list_kernels) {
    os << "kernels:\n";
    for (size_t i = 0; i < p.plan.kernels.size(); ++i) {
      const Kernel& k = p.plan.kernels[i];
      os << "  " << std::setw(4) << i << std::setw(10) << k.cost * 1e3 << " ms  " << kernel_ops(g, k) << " -> "
         << g.tensor(k.output).name << "\n";
    }
  }
  return os.str();
}

// A plan for `model` equal to `src` (which may belong to another import of the same file, or to
// another model: then the graph-hash check in plan_from_json raises korch::Error).
Plan transfer_plan(const PyPlan& src, const LoadedModel& model) {
  std::string json = plan_to_json(src.model->m.graph, src.plan);
  return plan_from_json(model.m.graph, json, "the plan for '" + src.model->path + "'");
}

// ---------------------------------------------------------------------------------------------
// numpy conversion (Python level + buffer protocol)

const char* numpy_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::I64: return "int64";
    case DType::I32: return "int32";
    case DType::I8: return "int8";
    case DType::U8: return "uint8";
    case DType::Bool: return "bool";
    case DType::F16: return "float16";
    case DType::I16: return "int16";
    case DType::U16: return "uint16";
    case DType::U32: return "uint32";
    case DType::U64: return "uint64";
    default: break;
  }
  fail("element type ", dtype_name(t), " has no numpy equivalent");
}

std::string describe(DType t, const Shape& s) {
  std::string out = std::string(numpy_dtype_name(t)) + "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

py::tuple shape_tuple(const Shape& s) {
  py::tuple t(s.size());
  for (size_t i = 0; i < s.size(); ++i) t[i] = py::int_(s[i]);
  return t;
}

py::object to_numpy(const TensorData& t) {
  py::module_ np = py::module_::import("numpy");
  py::object arr = np.attr("empty")(shape_tuple(t.shape()), py::arg("dtype") = numpy_dtype_name(t.dtype()));
  py::buffer_info info = py::buffer(arr).request(true);
  size_t bytes = static_cast<size_t>(info.size) * static_cast<size_t>(info.itemsize);
  if (bytes != t.byte_size()) throw std::runtime_error("korch: output size mismatch while converting to numpy");
  if (bytes) std::memcpy(info.ptr, t.raw(), bytes);
  return arr;
}

// value -> TensorData of exactly (dtype, shape); raises ValueError / TypeError otherwise.
TensorData from_numpy(const py::handle& value, const std::string& name, DType dtype, const Shape& shape) {
  py::module_ np = py::module_::import("numpy");
  py::object arr;
  try {
    arr = np.attr("asarray")(value);
  } catch (py::error_already_set& e) {
    throw py::type_error("input '" + name + "' cannot be converted to a numpy array: " + std::string(e.what()));
  }
  py::object want = np.attr("dtype")(numpy_dtype_name(dtype));
  py::object got_dtype = arr.attr("dtype");
  Shape got_shape;
  for (py::handle d : py::tuple(arr.attr("shape"))) got_shape.push_back(d.cast<int64_t>());
  bool dtype_ok = got_dtype.equal(want);
  if (!dtype_ok || got_shape != shape) {
    std::string got = py::str(got_dtype).cast<std::string>() + "[";
    for (size_t i = 0; i < got_shape.size(); ++i) got += (i ? "," : "") + std::to_string(got_shape[i]);
    got += "]";
    std::string msg = "input '" + name + "' must be " + describe(dtype, shape) + ", got " + got;
    if (!dtype_ok) msg += std::string(" (convert with .astype(numpy.") + numpy_dtype_name(dtype) + "))";
    throw py::value_error(msg);
  }
  arr = np.attr("ascontiguousarray")(arr);
  py::buffer_info info = py::buffer(arr).request();
  TensorData t(dtype, shape);
  size_t bytes = static_cast<size_t>(info.size) * static_cast<size_t>(info.itemsize);
  if (bytes != t.byte_size())
    throw py::value_error("input '" + name + "' has " + std::to_string(bytes) + " bytes, expected " +
                          std::to_string(t.byte_size()));
  if (bytes) std::memcpy(t.raw(), info.ptr, bytes);
  return t;
}

// ---------------------------------------------------------------------------------------------
// Session

std::string quoted_list(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s.empty() ? "(none)" : s;
}

class Session {
 public:
  Session(const fs::path& model_path, const py::object& plan, int threads,
          const std::optional<std::map<std::string, std::vector<int64_t>>>& input_shapes)
      : threads_(threads) {
    if (threads < 1) throw py::value_error("threads must be at least 1 (got " + std::to_string(threads) + ")");
    std::optional<ShapeMap> shapes;
    if (input_shapes) shapes = to_shape_map(input_shapes);
    PlanPtr given;
    std::optional<fs::path> plan_file;
    if (!plan.is_none()) {
      if (py::isinstance<PyPlan>(plan)) {
        given = plan.cast<PlanPtr>();
      } else if (py::isinstance<py::str>(plan) || py::hasattr(plan, "__fspath__")) {
        plan_file = fs::path(py::module_::import("os").attr("fspath")(plan).cast<std::string>());
      } else {
        throw py::type_error("plan must be a korch.Plan, a plan file path, or None");
      }
    }
    std::vector<std::string> warnings;
    {
      py::gil_scoped_release release;
      if (given) {
        // Reuse the plan's imported model when it is the same file with the same shapes.
        if (given->model->canonical == canonical_path(model_path) &&
            (!shapes || *shapes == given->model->input_shapes)) {
          model_ = given->model;
          plan_ = given;
        } else {
          model_ = load_model(model_path, shapes.value_or(given->model->input_shapes));
          plan_ = wrap(model_, transfer_plan(*given, *model_));
        }
      } else {
        model_ = load_model(model_path, shapes.value_or(ShapeMap{}));
        if (plan_file) {
          plan_ = load_plan_file(model_, *plan_file, &warnings);
        } else {
          OptimizeArgs a;
          a.threads = threads;
          OptimizeStats stats;
          OptimizeResult r = run_optimizer(model_->m.graph, a, &stats, &warnings);
          plan_ = wrap(model_, std::move(r.korch));
          plan_->stats = stats;
        }
      }
      exec_ = std::make_unique<Executor>(make_backend("cpu", BackendOptions{threads}), model_->m.graph, plan_->plan);
    }
    issue_warnings(warnings);
    const PrimGraph& g = model_->m.graph;
    for (TensorId t : g.inputs()) input_names_.push_back(g.tensor(t).name);
    output_names_ = model_->m.output_names;
    if (output_names_.size() != g.outputs().size()) {
      output_names_.clear();
      for (TensorId t : g.outputs()) output_names_.push_back(g.tensor(t).name);
    }
  }

  py::dict run(const py::object& feeds) {
    if (!py::isinstance(feeds, py::module_::import("collections.abc").attr("Mapping")))
      throw py::type_error("Session.run expects a dict {input name: numpy array}");
    const PrimGraph& g = model_->m.graph;
    py::dict items;  // name -> value, keys checked
    for (py::handle item : feeds.attr("items")()) {
      py::tuple kv = py::reinterpret_borrow<py::tuple>(item);
      if (!py::isinstance<py::str>(kv[0]))
        throw py::type_error("input names must be str, got " + py::repr(kv[0]).cast<std::string>());
      std::string name = kv[0].cast<std::string>();
      if (std::find(input_names_.begin(), input_names_.end(), name) == input_names_.end())
        throw py::key_error("unknown input '" + name + "'; the model's inputs are " + quoted_list(input_names_));
      items[kv[0]] = kv[1];
    }
    std::vector<TensorData> inputs;
    for (size_t i = 0; i < input_names_.size(); ++i) {
      const std::string& name = input_names_[i];
      const TensorInfo& info = g.tensor(g.inputs()[i]);
      if (!items.contains(name))
        throw py::key_error("missing input '" + name + "' (" + describe(info.dtype, info.shape) +
                            "); the model's inputs are " + quoted_list(input_names_));
      inputs.push_back(from_numpy(items[py::str(name)], name, info.dtype, info.shape));
    }
    std::vector<TensorData> outputs;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      outputs = exec_->run(inputs);
    }
    py::dict result;
    for (size_t i = 0; i < outputs.size(); ++i) result[py::str(output_names_[i])] = to_numpy(outputs[i]);
    return result;
  }

  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  py::dict input_shapes() const {
    py::dict d;
    const PrimGraph& g = model_->m.graph;
    for (size_t i = 0; i < input_names_.size(); ++i)
      d[py::str(input_names_[i])] = shape_tuple(g.tensor(g.inputs()[i]).shape);
    return d;
  }
  py::dict input_dtypes() const {
    py::dict d;
    const PrimGraph& g = model_->m.graph;
    for (size_t i = 0; i < input_names_.size(); ++i)
      d[py::str(input_names_[i])] = py::str(numpy_dtype_name(g.tensor(g.inputs()[i]).dtype));
    return d;
  }
  py::dict output_shapes() const {
    py::dict d;
    const PrimGraph& g = model_->m.graph;
    for (size_t i = 0; i < output_names_.size(); ++i)
      d[py::str(output_names_[i])] = shape_tuple(g.tensor(g.outputs()[i]).shape);
    return d;
  }
  py::dict output_dtypes() const {
    py::dict d;
    const PrimGraph& g = model_->m.graph;
    for (size_t i = 0; i < output_names_.size(); ++i)
      d[py::str(output_names_[i])] = py::str(numpy_dtype_name(g.tensor(g.outputs()[i]).dtype));
    return d;
  }
  PlanPtr plan() const { return plan_; }
  int threads() const { return threads_; }
  int num_fallback_kernels() const { return exec_->num_fallback_kernels(); }
  int64_t arena_bytes() const { return exec_->arena().arena_bytes; }

 private:
  int threads_;
  ModelPtr model_;  // declared before exec_: the executor refers to its graph
  PlanPtr plan_;
  std::unique_ptr<Executor> exec_;
  std::mutex mu_;
  std::vector<std::string> input_names_, output_names_;
};

}  // namespace
}  // namespace korch::python

PYBIND11_MODULE(_korch, m) {
  using namespace korch;
  using namespace korch::python;
  m.doc() = "korch: optimal kernel orchestration for tensor programs (native module)";

  // korch::Error (and subclasses) -> korch.Error, a RuntimeError with korch's one-line message.
  py::register_exception<korch::Error>(m, "Error", PyExc_RuntimeError);

  py::class_<PyPlan, PlanPtr>(m, "Plan", "A kernel orchestration of one imported model.")
      .def_property_readonly(
          "kernels", [](const PyPlan& p) { return p.plan.kernels.size(); }, "Number of kernels.")
      .def_property_readonly(
          "predicted_ms", [](const PyPlan& p) { return p.plan.predicted_seconds() * 1e3; },
          "Predicted run time (sum of kernel costs), milliseconds.")
      .def_property_readonly(
          "strategy", [](const PyPlan& p) { return p.plan.strategy; }, "korch | greedy | per-op | per-primitive")
      .def_property_readonly(
          "note", [](const PyPlan& p) { return p.plan.note; },
          "how the plan was chosen: with measured costs, the end-to-end race of the BLP's plan against greedy")
      .def_property_readonly("cost_model", [](const PyPlan& p) { return p.plan.cost_model; })
      .def_property_readonly(
          "codegen", [](const PyPlan& p) { return p.plan.codegen; },
          "the kernel code generator whose schedule variants the plan names (\"\" when a plan file does not say)")
      .def_property_readonly("model_path", [](const PyPlan& p) { return p.model->path; })
      .def_property_readonly("input_shapes",
                             [](const PyPlan& p) {
                               py::dict d;
                               const PrimGraph& g = p.model->m.graph;
                               for (TensorId t : g.inputs())
                                 d[py::str(g.tensor(t).name)] = shape_tuple(g.tensor(t).shape);
                               return d;
                             })
      .def_property_readonly(
          "baselines",
          [](const PyPlan& p) {
            py::dict d;
            for (const auto& [name, plan] : p.baselines) d[py::str(name)] = plan;
            return d;
          },
          "Baseline plans under the same cost model (greedy, per-op, per-primitive); empty "
          "for loaded plans.")
      .def_property_readonly(
          "kernel_ops",
          [](const PyPlan& p) {
            std::vector<std::string> out;
            for (const Kernel& k : p.plan.kernels) out.push_back(kernel_ops(p.model->m.graph, k));
            return out;
          },
          "Primitive ops of every kernel, e.g. 'conv+add+max'.")
      .def_property_readonly(
          "stats",
          [](const PyPlan& p) -> py::object {
            if (!p.stats) return py::none();
            const OptimizeStats& s = *p.stats;
            py::dict d;
            d["partitions"] = s.partitions;
            d["unique_partitions"] = s.unique_partitions;
            d["candidates"] = s.candidates;
            d["priced"] = s.priced;
            d["measured"] = s.measured;
            d["dropped"] = s.dropped;
            d["solve_rounds"] = s.solve_rounds;
            d["solver_seconds"] = s.solver_seconds;
            d["optimize_seconds"] = s.total_seconds;
            d["all_optimal"] = s.all_optimal;
            if (!s.cache_path.empty()) {
              d["compiled_now"] = s.compiled_now;
              d["cache_hits"] = s.cache_hits;
              d["mismatches"] = s.mismatches;
              d["cache"] = s.cache_path;
            }
            return d;
          },
          "Optimizer statistics (None for loaded plans).")
      .def(
          "save",
          [](const PyPlan& p, const fs::path& path) {
            py::gil_scoped_release release;
            save_plan(p.model->m.graph, p.plan, path.string());
          },
          py::arg("path"), "Write the plan as JSON (korch optimize -o format).")
      .def("to_json", [](const PyPlan& p) { return plan_to_json(p.model->m.graph, p.plan); })
      .def("summary", &plan_summary, py::arg("kernels") = true,
           "Human-readable summary: kernels, predicted time, optimizer statistics, baselines and (by default) "
           "one line per kernel.")
      .def("__repr__", [](const PyPlan& p) {
        std::ostringstream os;
        os << "<korch.Plan " << p.plan.strategy << ": " << p.plan.kernels.size() << " kernels, predicted " << std::fixed
           << std::setprecision(3) << p.plan.predicted_seconds() * 1e3 << " ms, model '" << p.model->path << "'>";
        return os.str();
      });

  m.def("optimize", &py_optimize, py::arg("path"), py::arg("threads") = 2, py::arg("cost") = "analytic",
        py::arg("cache") = py::none(), py::arg("max_kernel_prims") = 8, py::arg("input_shapes") = py::none(),
        py::arg("max_partition_prims") = 64, py::arg("time_limit") = 60.0, py::arg("machine") = py::none(),
        py::kw_only(), py::arg("progress") = py::none(),
        "Import an ONNX model and find its optimal kernel orchestration. progress: a callable given one\n"
        "status line (str) at a time while kernels are measured (cost='measured').");
  m.def("load_plan", &py_load_plan, py::arg("model_path"), py::arg("plan_path"), py::arg("input_shapes") = py::none(),
        "Import a model and load a plan file for it (korch.Error if the plan was made for another model).");
  m.def("export", &py_export, py::arg("plan"), py::arg("out_dir"), py::arg("threads") = 2,
        "Write a deployable package of plan's model (as `korch export`): model.kpkg, weights.bin, AOT Halide\n"
        "kernels, the C API header and a CMake project; build it with `cmake -S OUT -B OUT/build && cmake\n"
        "--build OUT/build`. Returns a summary dict (kernel counts, target, cpu_features, weight_bytes).");
  m.def(
      "read_tensor",
      [](const fs::path& path) {
        TensorData t;
        {
          py::gil_scoped_release release;
          t = read_tensor_file(path.string());
        }
        return to_numpy(t);
      },
      py::arg("path"), "Read a serialized ONNX TensorProto (.pb) as a numpy array.");
  m.def("default_cache_path", &ProfileCache::default_path, "Where measured costs are cached by default.");
  m.attr("codegen_version") = std::string(cpu::kCodegenVersion);  // the CPU backend's kernel code generator

  py::class_<Session>(m, "Session", "Runs a model with a plan on the CPU backend.")
      .def(py::init<const fs::path&, const py::object&, int,
                    const std::optional<std::map<std::string, std::vector<int64_t>>>&>(),
           py::arg("model_path"), py::arg("plan") = py::none(), py::arg("threads") = 2, py::kw_only(),
           py::arg("input_shapes") = py::none())
      .def("run", &Session::run, py::arg("inputs"),
           "Run the model: {input name: numpy array} -> {output name: numpy array}.")
      .def_property_readonly("input_names", &Session::input_names)
      .def_property_readonly("output_names", &Session::output_names)
      .def_property_readonly("input_shapes", &Session::input_shapes)
      .def_property_readonly("input_dtypes", &Session::input_dtypes)
      .def_property_readonly("output_shapes", &Session::output_shapes)
      .def_property_readonly("output_dtypes", &Session::output_dtypes)
      .def_property_readonly("plan", &Session::plan)
      .def_property_readonly("threads", &Session::threads)
      .def_property_readonly("num_fallback_kernels", &Session::num_fallback_kernels)
      .def_property_readonly("arena_bytes", &Session::arena_bytes);
}
