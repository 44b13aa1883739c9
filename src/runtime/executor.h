// Runtime: executes a plan on the CPU backend. Every plan kernel is compiled once (oneDNN or
// Halide; the reference interpreter only where neither can generate it). Materialised tensors
// live in one arena whose offsets come from liveness-based reuse: two tensors share bytes
// only when their lifetimes (producing kernel .. last reading kernel) do not overlap. Tensors
// between oneDNN kernels stay in oneDNN's internal layout where cpu::link_layouts allows.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/compiled_kernel.h"
#include "ir/tensor_data.h"
#include "orchestrate/plan.h"

namespace korch {

struct ArenaPlan {
  std::vector<int64_t> offset;  // per tensor id: byte offset in the arena, -1 if not in it
  int64_t arena_bytes = 0;      // peak
  int64_t total_bytes = 0;      // sum of all arena tensors' sizes (no reuse)
};

// Liveness-based first-fit placement of every kernel output (graph outputs included).
// bytes: per tensor id, the bytes its buffer needs (e.g. a blocked internal layout with padded
// channels); nullptr: every tensor's dense size.
ArenaPlan plan_arena(const PrimGraph& g, const Plan& plan, const std::vector<int64_t>* bytes = nullptr);

struct KernelTiming {
  std::string description;
  double seconds = 0;
};

class Executor {
 public:
  Executor(const PrimGraph& g, Plan plan, int threads);
  // Inputs follow g.inputs(); dtypes and shapes must match (korch::Error otherwise).
  std::vector<TensorData> run(const std::vector<TensorData>& inputs);
  // Per-kernel wall time of the last run (when profiling is enabled).
  void set_profiling(bool on) { profiling_ = on; }
  const std::vector<KernelTiming>& last_timings() const { return timings_; }
  const ArenaPlan& arena() const { return arena_; }
  const Plan& plan() const { return plan_; }
  int num_fallback_kernels() const { return fallbacks_; }
  // Tensors handed from one oneDNN kernel to the next in oneDNN's internal layout (no
  // reorders through a dense buffer; cpu::link_layouts).
  int num_linked_tensors() const { return linked_; }
  // Why each Halide kernel whose strided build differed from its dense one keeps its tensors
  // dense (link_verification.h); empty when every verified link held.
  const std::vector<std::string>& unlinked_kernels() const { return unlinked_; }

 private:
  const PrimGraph& g_;
  Plan plan_;
  int threads_;
  ArenaPlan arena_;
  std::vector<std::unique_ptr<cpu::CompiledKernel>> kernels_;
  std::vector<unsigned char, CacheLineAllocator<unsigned char>> storage_;  // the arena
  bool profiling_ = false;
  std::vector<KernelTiming> timings_;
  int fallbacks_ = 0;
  int linked_ = 0;
  std::vector<std::string> unlinked_;
};

}  // namespace korch
