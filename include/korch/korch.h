// korch's public C++ API (installed as <korch/korch.h>, CMake target
// korch::korch).
//
// Import an ONNX model, optimise it into a Plan (or load a saved one), save
// plans, and run them on the CPU:
//
//   korch::api::Model model = korch::api::Model::load("model.onnx");
//   korch::api::Plan plan = korch::api::optimize(model);  // OptimizeOptions:
//   threads, cost, ... plan.save("plan.json"); korch::api::Session
//   session(model, plan, /*threads=*/2); auto outputs = session.run({{"input",
//   korch::api::Tensor::zeros(korch::api::DType::F32, {1, 3, 32, 32})}});
//
// The header depends on the standard library only: the implementation (IR,
// optimiser, oneDNN and Halide backends, ONNX import) stays inside libkorch and
// its symbols are not exported. Every failure is a korch::api::Error with a
// one-line message. Objects are cheap to copy (shared, immutable state); a
// Session runs one call at a time (run() serialises callers).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(_WIN32)
#define KORCH_API
#else
#define KORCH_API __attribute__((visibility("default")))
#endif

namespace korch::api {

// The one exception type: bad input, unsupported models, corrupt plan files.
class KORCH_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

enum class DType : uint8_t { F32, F64, I64, I32, I8, U8, Bool };
KORCH_API const char* dtype_name(DType t);
KORCH_API size_t dtype_size(DType t);

// A dense, row-major host tensor (little-endian bytes).
struct KORCH_API Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;  // num_elements() * dtype_size(dtype)

  int64_t num_elements() const;
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(bytes.data());
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes.data());
  }

  static Tensor zeros(DType dtype, std::vector<int64_t> shape);
  // Reads a serialized ONNX TensorProto (an ONNX test case's input_N.pb /
  // output_N.pb); `name` (optional) receives the tensor's name.
  static Tensor read_onnx(const std::string& path, std::string* name = nullptr);
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
};

// An imported ONNX model (its primitive graph with the weights).
class KORCH_API Model {
 public:
  // input_shapes fixes dynamic (or overrides) input dimensions: name -> full
  // shape.
  static Model load(const std::string& onnx_path, const std::map<std::string, std::vector<int64_t>>& input_shapes = {});
  const std::string& path() const;
  const std::vector<TensorSpec>& inputs() const;
  const std::vector<TensorSpec>& outputs() const;
  int num_primitives() const;

  // Internal (libkorch's implementation).
  struct Impl;
  const std::shared_ptr<const Impl>& impl() const { return impl_; }
  explicit Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<const Impl> impl_;
};

struct OptimizeOptions {
  int threads = 2;                // threads the kernels are measured / run with
  std::string cost = "analytic";  // "analytic" or "measured" (profiles kernels on `backend`)
  std::string backend = "cpu";    // the backend that measures kernels ("measured" only)
  std::string cache;              // profile cache for "measured" (empty: korch's default)
  int max_kernel_prims = 8;       // largest fused kernel, in primitives
  int max_partition_prims = 64;   // largest partition the solver sees
  double time_limit = 60;         // solver seconds per partition
  // "measured" only: time the BLP's plan and the greedy plan end to end and keep the greedy
  // plan's kernels when they are faster by more than 2% (Plan::note says which won).
  bool plan_race = true;
  // "measured" only: seconds of profiling after which the plan is chosen among the kernels
  // measured by then (0: no budget).
  double budget_seconds = 0;
};

// A kernel orchestration of one model: which primitives each kernel computes.
class KORCH_API Plan {
 public:
  // A plan file written by save() or `korch optimize -o` for this model.
  static Plan load(const Model& model, const std::string& plan_path);
  void save(const std::string& path) const;
  const std::string& strategy() const;  // "korch", "greedy", ...
  int num_kernels() const;
  const std::string& note() const;  // how the plan was chosen (plan race), or empty
  double predicted_ms() const;      // by the cost model it was optimised with
  const Model& model() const;

  // Internal (libkorch's implementation).
  struct Impl;
  const std::shared_ptr<const Impl>& impl() const { return impl_; }
  explicit Plan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<const Impl> impl_;
};

// Korch's optimal orchestration (partition, candidate kernels, binary linear
// program).
KORCH_API Plan optimize(const Model& model, const OptimizeOptions& options = {});

// A plan compiled for a backend (on "cpu": oneDNN and Halide kernels, one memory arena).
class KORCH_API Session {
 public:
  Session(const Model& model, const Plan& plan, int threads = 2, const std::string& backend = "cpu");
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // One tensor per model input, by name; dtypes and shapes must match
  // Model::inputs(). Returns the outputs by name.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs);
  // Inputs in Model::inputs() order; outputs in Model::outputs() order.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  const Model& model() const;
  const Plan& plan() const;
  int threads() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "korch 0.1.0".
KORCH_API const char* version();

}  // namespace korch::api
