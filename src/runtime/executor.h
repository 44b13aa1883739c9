// Runtime: executes a plan on a backend. Every plan kernel is compiled once (the backend's
// code generators; its reference fallback only where it cannot generate a kernel). Materialised
// tensors live in one arena in the backend's memory whose offsets come from liveness-based reuse
// (arena.h). A backend with a layout-linking part keeps tensors between its kernels in internal
// layouts where it decides so. On a backend with its own memory, constants are uploaded once and
// only the model's inputs and outputs cross to and from the host at each run; there, the plan's
// launches are recorded after the first run where the backend can (Backend::record) and replayed.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "ir/tensor_data.h"
#include "plan/plan.h"
#include "runtime/arena.h"

namespace korch {

struct KernelTiming {
  std::string description;
  double seconds = 0;
};

class Executor {
 public:
  Executor(std::shared_ptr<Backend> backend, const PrimGraph& g, Plan plan);
  // Inputs follow g.inputs(); dtypes and shapes must match (korch::Error otherwise).
  std::vector<TensorData> run(const std::vector<TensorData>& inputs);
  // Per-kernel wall time of the last run (when profiling is enabled).
  void set_profiling(bool on) { profiling_ = on; }
  const std::vector<KernelTiming>& last_timings() const { return timings_; }
  const ArenaPlan& arena() const { return arena_; }
  const Plan& plan() const { return plan_; }
  Backend& backend() const { return *backend_; }
  int num_fallback_kernels() const { return fallbacks_; }
  // Whether runs replay launches the backend recorded (CUDA graphs); why not, when they do not.
  bool replays_recorded_launches() const { return recorded_ != nullptr; }
  const std::string& why_not_recorded() const { return record_why_; }
  // Tensors handed from one kernel to the next in the backend's internal layout (LayoutLinker).
  int num_linked_tensors() const { return links_.num_linked; }
  // Why kernels that could have linked keep their tensors in the dense layout; empty when every
  // link the backend verified held.
  const std::vector<std::string>& unlinked_kernels() const { return links_.unlinked; }

 private:
  std::vector<std::unique_ptr<CompiledKernel>> compile_kernels();

  std::shared_ptr<Backend> backend_;
  const PrimGraph& g_;
  Plan plan_;
  ArenaPlan arena_;
  LinkedPlan links_;
  std::vector<std::unique_ptr<CompiledKernel>> kernels_;
  std::unique_ptr<BackendBuffer> storage_;                      // the arena
  std::vector<std::unique_ptr<BackendBuffer>> device_tensors_;  // constants and inputs, where memory is not the host's
  std::vector<void*> device_at_;                                // per tensor id: its buffer there, or null
  bool profiling_ = false;
  std::vector<KernelTiming> timings_;
  int fallbacks_ = 0;
  std::unique_ptr<RecordedLaunches> recorded_;
  bool record_tried_ = false;
  std::string record_why_;
};

}  // namespace korch
