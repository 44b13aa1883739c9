// Shared by korch's kernel micro-benchmarks (korch_fused_bandwidth, korch_linear_limits): a
// PrimGraph made one kernel, seeded random inputs for it, and every schedule variant the CPU
// backend offers for it, compiled and run once (warm-up). With verification each variant's output
// is first compared with the reference executor's, as the profiler does (1e-4 absolute + 1e-3
// relative); a variant that is not generated or mismatches is left out, with the reason.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/compiled_kernel.h"
#include "ir/prim_graph.h"
#include "ir/tensor_data.h"
#include "plan/kernel.h"

namespace korch::bench {

struct KernelVariants {
  Kernel kernel;                   // every primitive of the graph
  std::vector<TensorData> inputs;  // for kernel.inputs (random, seeded; constants keep their values)
  std::vector<const void*> ptrs;
  TensorData output;
  std::vector<std::unique_ptr<cpu::CompiledKernel>> compiled;  // the usable variants, in schedule order
  std::vector<std::string> left_out;                           // "schedule S: why" for each other variant

  double run_seconds(size_t variant);  // one timed run of compiled[variant]
};

// Throws korch::Error when the graph is not one kernel (exactly one sink).
KernelVariants compile_variants(const PrimGraph& g, bool verify);

// A float tensor of `shape` with values uniform in [-1, 1] (random_inputs.h's), for weights.
TensorData random_tensor(const Shape& shape, uint32_t seed);

}  // namespace korch::bench
