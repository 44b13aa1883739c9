// The public C++ API (include/korch/korch.h) over korch's internals: ONNX
// import, the optimiser, plan files and the CPU executor. Internal korch::Error
// exceptions become korch::api::Error at this boundary, so consumers see one
// exception type and no internal headers.
#include <cstring>
#include <mutex>
#include <utility>

#include "cost/machine.h"
#include "fission/onnx_tensor.h"
#include "frontend/onnx_import.h"
#include "korch/korch.h"
#include "orchestrate/optimize.h"
#include "plan/plan.h"
#include "runtime/executor.h"
#include "runtime/optimize_model.h"
#include "util/error.h"

namespace korch::api {

static_assert(static_cast<int>(DType::Bool) == static_cast<int>(korch::DType::Bool) &&
                  static_cast<int>(DType::U8) == static_cast<int>(korch::DType::U8),
              "korch::api::DType mirrors korch::DType");

namespace {

korch::DType to_internal(DType t) { return static_cast<korch::DType>(t); }
DType to_public(korch::DType t) { return static_cast<DType>(t); }

// Runs f, turning internal errors into api::Error.
template <typename F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const api::Error&) {
    throw;
  } catch (const korch::Error& e) {
    throw Error(e.what());
  } catch (const std::bad_alloc&) {
    throw Error("out of memory");
  }
}

Tensor to_public(const TensorData& t) {
  Tensor out;
  out.dtype = to_public(t.dtype());
  out.shape = t.shape();
  const auto* p = static_cast<const unsigned char*>(t.raw());
  out.bytes.assign(p, p + t.byte_size());
  return out;
}

std::string describe(DType dtype, const std::vector<int64_t>& shape) {
  std::string s = std::string(dtype_name(dtype)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Tensors

const char* dtype_name(DType t) { return korch::dtype_name(to_internal(t)); }
size_t dtype_size(DType t) { return korch::dtype_size(to_internal(t)); }

int64_t Tensor::num_elements() const { return korch::num_elements(shape); }

Tensor Tensor::zeros(DType dtype, std::vector<int64_t> shape) {
  return guarded([&] { return to_public(TensorData(to_internal(dtype), std::move(shape))); });
}

Tensor Tensor::read_onnx(const std::string& path, std::string* name) {
  return guarded([&] { return to_public(read_tensor_file(path, name)); });
}

// ---------------------------------------------------------------------------------------------
// Models

struct Model::Impl {
  std::string path;
  ImportedModel m;
  std::vector<TensorSpec> inputs, outputs;
};

Model Model::load(const std::string& onnx_path, const std::map<std::string, std::vector<int64_t>>& input_shapes) {
  return guarded([&] {
    auto impl = std::make_shared<Impl>();
    impl->path = onnx_path;
    ImportOptions options;
    for (const auto& [name, dims] : input_shapes) options.input_shapes[name] = dims;
    impl->m = import_onnx_file(onnx_path, options);
    const PrimGraph& g = impl->m.graph;
    for (TensorId t : g.inputs())
      impl->inputs.push_back({g.tensor(t).name, to_public(g.tensor(t).dtype), g.tensor(t).shape});
    const std::vector<TensorId>& outs = g.outputs();
    for (size_t i = 0; i < outs.size(); ++i) {
      const TensorInfo& info = g.tensor(outs[i]);
      // The ONNX output names (the graph may rename a tensor that is also an
      // input or constant).
      std::string name = impl->m.output_names.size() == outs.size() ? impl->m.output_names[i] : info.name;
      impl->outputs.push_back({name, to_public(info.dtype), info.shape});
    }
    return Model(std::shared_ptr<const Impl>(std::move(impl)));
  });
}

const std::string& Model::path() const { return impl_->path; }
const std::vector<TensorSpec>& Model::inputs() const { return impl_->inputs; }
const std::vector<TensorSpec>& Model::outputs() const { return impl_->outputs; }
int Model::num_primitives() const { return static_cast<int>(impl_->m.graph.num_prims()); }

// ---------------------------------------------------------------------------------------------
// Plans

struct Plan::Impl {
  Model model;  // the plan refers to its graph
  korch::Plan plan;
};

Plan Plan::load(const Model& model, const std::string& plan_path) {
  return guarded([&] {
    return Plan(std::make_shared<const Impl>(Impl{model, load_plan(model.impl()->m.graph, plan_path)}));
  });
}

void Plan::save(const std::string& path) const {
  guarded([&] { save_plan(impl_->model.impl()->m.graph, impl_->plan, path); });
}

const std::string& Plan::strategy() const { return impl_->plan.strategy; }
const std::string& Plan::note() const { return impl_->plan.note; }
int Plan::num_kernels() const { return static_cast<int>(impl_->plan.kernels.size()); }
double Plan::predicted_ms() const { return impl_->plan.predicted_seconds() * 1e3; }
const Model& Plan::model() const { return impl_->model; }

Plan optimize(const Model& model, const OptimizeOptions& o) {
  if (o.threads < 1) throw Error("threads must be at least 1 (got " + std::to_string(o.threads) + ")");
  if (o.cost != "analytic" && o.cost != "measured")
    throw Error("unknown cost model '" + o.cost + "' (available: 'analytic', 'measured')");
  if (o.max_kernel_prims < 1) throw Error("max_kernel_prims must be at least 1");
  if (o.max_partition_prims < 2) throw Error("max_partition_prims must be at least 2");
  if (!(o.time_limit > 0)) throw Error("time_limit must be positive");
  return guarded([&] {
    ModelOptimizeSettings s;
    s.cost = o.cost;
    s.backend = o.backend;
    s.threads = o.threads;
    s.cache_path = o.cache;
    s.machine = machine_figures_or_defaults();
    s.max_kernel_prims = o.max_kernel_prims;
    s.max_partition_prims = o.max_partition_prims;
    s.solver_time_limit = o.time_limit;
    s.plan_race = o.plan_race;
    s.budget_seconds = o.budget_seconds;
    ModelOptimizeRun run = optimize_model(model.impl()->m.graph, s);
    return Plan(std::make_shared<const Plan::Impl>(Plan::Impl{model, std::move(run.result.korch)}));
  });
}

// ---------------------------------------------------------------------------------------------
// Sessions

struct Session::Impl {
  Impl(Model m, Plan p, int t) : model(std::move(m)), plan(std::move(p)), threads(t) {}
  Model model;
  Plan plan;
  int threads;
  std::unique_ptr<Executor> exec;  // refers to model's graph
  std::mutex mu;
};

Session::Session(const Model& model, const Plan& plan, int threads, const std::string& backend) {
  if (threads < 1) throw Error("threads must be at least 1 (got " + std::to_string(threads) + ")");
  if (plan.model().impl() != model.impl())
    throw Error("the plan was made for another Model object (" + plan.model().path() + ")");
  impl_ = guarded([&] {
    auto impl = std::make_unique<Impl>(model, plan, threads);
    impl->exec = std::make_unique<Executor>(make_backend(backend, BackendOptions{threads}), model.impl()->m.graph,
                                            plan.impl()->plan);
    return impl;
  });
}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

std::vector<Tensor> Session::run(const std::vector<Tensor>& inputs) {
  const std::vector<TensorSpec>& specs = impl_->model.inputs();
  if (inputs.size() != specs.size())
    throw Error("the model has " + std::to_string(specs.size()) + " inputs, run() got " +
                std::to_string(inputs.size()));
  std::vector<TensorData> data;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (t.dtype != specs[i].dtype || t.shape != specs[i].shape)
      throw Error("input '" + specs[i].name + "' is " + describe(t.dtype, t.shape) + ", the model needs " +
                  describe(specs[i].dtype, specs[i].shape));
    TensorData d = guarded([&] { return TensorData(to_internal(t.dtype), t.shape); });
    if (t.bytes.size() != d.byte_size())
      throw Error("input '" + specs[i].name + "' has " + std::to_string(t.bytes.size()) + " bytes, " +
                  describe(t.dtype, t.shape) + " needs " + std::to_string(d.byte_size()));
    if (!t.bytes.empty()) std::memcpy(d.raw(), t.bytes.data(), t.bytes.size());
    data.push_back(std::move(d));
  }
  std::vector<TensorData> out;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    out = guarded([&] { return impl_->exec->run(data); });
  }
  std::vector<Tensor> result;
  for (const TensorData& t : out) result.push_back(to_public(t));
  return result;
}

std::map<std::string, Tensor> Session::run(const std::map<std::string, Tensor>& inputs) {
  const std::vector<TensorSpec>& specs = impl_->model.inputs();
  std::string names;
  for (const TensorSpec& s : specs) names += (names.empty() ? "'" : ", '") + s.name + "'";
  for (const auto& [name, t] : inputs) {
    bool known = false;
    for (const TensorSpec& s : specs) known |= s.name == name;
    if (!known) throw Error("unknown input '" + name + "'; the model's inputs are " + names);
  }
  std::vector<Tensor> ordered;
  for (const TensorSpec& s : specs) {
    auto it = inputs.find(s.name);
    if (it == inputs.end())
      throw Error("missing input '" + s.name + "' (" + describe(s.dtype, s.shape) + "); the model's inputs are " +
                  names);
    ordered.push_back(it->second);
  }
  std::vector<Tensor> out = run(ordered);
  std::map<std::string, Tensor> result;
  const std::vector<TensorSpec>& out_specs = impl_->model.outputs();
  for (size_t i = 0; i < out.size(); ++i) result[out_specs[i].name] = std::move(out[i]);
  return result;
}

const Model& Session::model() const { return impl_->model; }
const Plan& Session::plan() const { return impl_->plan; }
int Session::threads() const { return impl_->threads; }

const char* version() { return "korch " KORCH_VERSION; }

}  // namespace korch::api
