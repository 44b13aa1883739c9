// Kernel: a set of primitives executed as one fused kernel that materialises exactly one
// tensor (its sink). Plans and candidates are made of kernels.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/prim_graph.h"

namespace korch {

struct Kernel {
  std::vector<PrimId> prims;     // ascending (a topological order)
  TensorId output = kNone;       // the sink's output
  std::vector<TensorId> inputs;  // external tensors read (graph inputs, constants, other kernels' outputs)
  double cost = 0;               // seconds, from the cost model that priced it
  uint64_t hash = 0;             // structural hash of the primitive set, and small_integer_exponent()s
  int num_linear = 0;
  int schedule = 0;  // backend schedule variant chosen by profiling (0: default); not hashed
};

// Builds the kernel of a primitive set; throws korch::Error unless the set has exactly one
// sink (one primitive whose output no other member consumes).
Kernel make_kernel(const PrimGraph& g, std::vector<PrimId> prims);

// The value of a tensor that is a single floating-point constant with an integer value in [1, 4]
// (the constants code generators specialise on); nullopt for any other tensor.
std::optional<int> small_integer_constant(const TensorInfo& t);

// The exponent of a Pow primitive whose exponent is a small_integer_constant (code generators
// expand pow(x, n) into n - 1 multiplications instead of the general pow's exp and log); nullopt
// for any other primitive or exponent. Kernel hashes include it, so that kernels differing only
// in such an exponent are profiled and cached apart.
std::optional<int> small_integer_exponent(const PrimGraph& g, const Primitive& prim);

// Whether every tensor the kernel reads or computes has a type the code-generating backends
// compute on (is_kernel_dtype); false with the first other one named in *why_not. Backends refuse
// such kernels, so that the plan runs them on the reference interpreter.
bool has_kernel_dtypes(const PrimGraph& g, const Kernel& k, std::string* why_not);

// Inputs of a kernel that another kernel must materialise (not graph inputs or constants).
std::vector<TensorId> materialized_inputs(const PrimGraph& g, const Kernel& k);

}  // namespace korch
