// Plan: a topologically ordered list of kernels that together compute a graph's outputs.
// Plans are validated (every kernel input materialised by an earlier kernel or a graph
// input/constant; every graph output materialised), saved/loaded as JSON, and can be
// executed kernel by kernel by the reference executor.
#pragma once
#include <string>
#include <vector>

#include "plan/kernel.h"

namespace korch {

struct Plan {
  std::string strategy;    // korch | greedy | per-op | per-primitive
  std::string cost_model;  // what priced the kernels
  std::vector<Kernel> kernels;
  // Seconds of layout conversions the kernels' costs include but the plan does not run: tensors
  // handed from one kernel to the next in the backend's internal layout (layout linking).
  double link_savings_seconds = 0;
  std::string note;  // how the plan was chosen, where more than the BLP decided (plan race)
  // The backend code generator whose schedule variants the kernels' `schedule` indices name
  // (Backend::codegen() of the backend that measured the plan; "" for analytic plans and for
  // plan files that do not say).
  std::string codegen;
  double predicted_seconds() const;  // kernel costs less link_savings_seconds
};

// A warning when the plan's schedule variants may not be the ones korch optimize chose for a
// backend whose code generator is `codegen` (Backend::codegen()): the plan names another one, or
// none while a kernel has a non-default variant. "" otherwise.
std::string codegen_mismatch(const Plan& plan, const std::string& codegen);

// Orders kernels topologically (by output primitive) and drops exact duplicates.
void sort_plan(const PrimGraph& g, Plan& plan);
// Problems that make a plan non-executable; empty means valid.
std::vector<std::string> validate_plan(const PrimGraph& g, const Plan& plan);
void validate_plan_or_throw(const PrimGraph& g, const Plan& plan);

// JSON: kernels with primitive ids, input/output tensor ids and names, predicted cost, plus the
// graph's structural hash so that a plan is never applied to another graph.
std::string plan_to_json(const PrimGraph& g, const Plan& plan);
Plan plan_from_json(const PrimGraph& g, const std::string& json, const std::string& what);
void save_plan(const PrimGraph& g, const Plan& plan, const std::string& path);
Plan load_plan(const PrimGraph& g, const std::string& path);

// Colour map for print_dot: kernel index of each primitive (first kernel containing it).
std::vector<int> kernel_of_prim(const PrimGraph& g, const Plan& plan);

}  // namespace korch
