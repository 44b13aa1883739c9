// Random inputs for a kernel or a whole graph, as the profiler, the plan race and the runtime's
// checks use them: floats uniform in [-1, 1], booleans 0/1, integers in [0, 3) except Gather
// indices, which stay within the gathered axis; constants keep their values. A seed gives the
// same values on every run.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/tensor_data.h"
#include "plan/kernel.h"

namespace korch {

// Values for k.inputs, in order.
std::vector<TensorData> random_kernel_inputs(const PrimGraph& g, const Kernel& k, uint32_t seed);
// Values for the graph's inputs, in g.inputs() order.
std::vector<TensorData> random_graph_inputs(const PrimGraph& g, uint32_t seed);

}  // namespace korch
