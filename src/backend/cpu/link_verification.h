// Layout links never change a value. Before a Halide kernel reads and writes its linked tensors
// in an activation layout (nhwc, nChw8c, nChw16c) through strides, the Executor runs it once on
// random inputs in that layout and compares with its dense build on the same inputs (the build
// the profiler checked against the reference executor); a kernel that differs keeps every tensor
// dense and the plan runs unlinked there. Verifying here, for the few kernels a plan links,
// instead of for every profiled candidate, saves the profiler two JIT compilations per candidate.
#pragma once
#include <string>

#include "backend/cpu/compiled_kernel.h"
#include "ir/prim_graph.h"
#include "plan/kernel.h"

namespace korch {

// Runs `compiled` (built for `k`, nothing kept, its formats chosen by link_layouts) dense and with
// every candidate tensor kept in its own format, on the same random inputs, and compares the outputs
// (|a-b| <= 1e-4 + 1e-3 |b|). Leaves the kernel with nothing kept; its strided build is kept for a
// later link of the same tensors. False with `why` set when they differ or the run fails.
bool strided_layout_matches_dense(const PrimGraph& g, const Kernel& k, cpu::CompiledKernel& compiled, std::string* why);

}  // namespace korch
