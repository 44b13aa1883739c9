// Features of a kernel that predict its measured time, computed from the primitive graph alone
// (nothing compiled): the roofline's terms (bytes, flops, other work, its estimate), the kernel's
// primitives by kind, and the shape facts that decide how well a schedule vectorises (output
// rank, innermost extent, transposes of the innermost axis, gathers). The learned cost model
// (learned_cost.h) is fitted on them.
#pragma once
#include <vector>

#include "ir/prim_graph.h"
#include "plan/kernel.h"

namespace korch {

constexpr int kNumKernelFeatures = 16;

// The features of kernel k priced `estimate` seconds by the analytic model; logarithms of sizes
// (base 2) and plain counts.
std::vector<double> kernel_features(const PrimGraph& g, const Kernel& k, double estimate);

}  // namespace korch
