// Executes a plan kernel by kernel with the reference executor: each kernel sees only its
// external inputs (graph inputs, constants, earlier kernels' outputs) and materialises only
// its output, so a plan that computes the wrong thing or reads an unmaterialised tensor fails.
#pragma once
#include <vector>

#include "plan/plan.h"

namespace korch::reference {

std::vector<TensorData> run_plan(const PrimGraph& g, const Plan& plan, const std::vector<TensorData>& inputs);

}  // namespace korch::reference
