// Random inputs for a kernel or a whole graph, as the profiler, the plan race and the runtime's
// checks use them: floats uniform in [-1, 1), or in [0, 1) where the graph computes the tensor as
// never negative (never_negative), booleans 0/1, integers in [0, 3) except Gather
// indices, which stay within the gathered axis; constants keep their values. A seed gives the
// same values on every run.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/tensor_data.h"
#include "plan/kernel.h"

namespace korch {

// Whether the graph computes float tensor t as >= 0 whatever its inputs: a square (Mul(x, x), Pow
// by an even integer), Abs, Exp, Sqrt, Sigmoid or Relu, or sums, means, products, maxima, layout
// maps and pools of such values (and of small constants >= 0). A kernel reading a variance or a
// softmax denominator thus sees the values it would see in the model: uniform values in [-1, 1)
// there give a LayerNorm's mean of squares a mean near 0 and make 1/sqrt(v + eps) amplify float
// rounding until correct kernels fail their check against the reference.
bool never_negative(const PrimGraph& g, TensorId t);
// Values for k.inputs, in order.
std::vector<TensorData> random_kernel_inputs(const PrimGraph& g, const Kernel& k, uint32_t seed);
// Values for the graph's inputs, in g.inputs() order.
std::vector<TensorData> random_graph_inputs(const PrimGraph& g, uint32_t seed);

}  // namespace korch
