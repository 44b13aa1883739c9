// make_kernel: sink, external inputs and structural hash of a primitive set; the small integer
// constants code generators specialise on; has_kernel_dtypes.
#include "plan/kernel.h"

#include <algorithm>
#include <cmath>

#include "ir/printer.h"
#include "util/error.h"

namespace korch {

Kernel make_kernel(const PrimGraph& g, std::vector<PrimId> prims) {
  std::sort(prims.begin(), prims.end());
  prims.erase(std::unique(prims.begin(), prims.end()), prims.end());
  KORCH_CHECK(!prims.empty(), "empty kernel");
  Kernel k;
  k.prims = prims;
  std::vector<char> produced_inside(g.num_tensors(), 0), consumed_inside(g.num_tensors(), 0);
  for (PrimId p : prims) produced_inside[g.prim(p).output] = 1;
  for (PrimId p : prims) {
    if (prim_kind(g.prim(p).op) == PrimKind::Linear) ++k.num_linear;
    for (TensorId t : g.prim(p).inputs) {
      if (produced_inside[t]) {
        consumed_inside[t] = 1;
      } else if (std::find(k.inputs.begin(), k.inputs.end(), t) == k.inputs.end()) {
        k.inputs.push_back(t);
      }
    }
  }
  int sinks = 0;
  for (PrimId p : prims)
    if (!consumed_inside[g.prim(p).output]) {
      ++sinks;
      k.output = g.prim(p).output;
    }
  if (sinks != 1) fail("a kernel must have exactly one sink, this set of ", prims.size(), " primitives has ", sinks);
  k.hash = structural_hash(g, prims);
  for (size_t i = 0; i < k.prims.size(); ++i)  // the position in the set, as structural_hash numbers them
    if (std::optional<int> n = small_integer_exponent(g, g.prim(k.prims[i])))
      k.hash = (k.hash ^ (static_cast<uint64_t>(i) << 8 | static_cast<uint64_t>(*n))) *
               1099511628211ULL;  // FNV-1a's prime: mixes in the position and the exponent
  return k;
}

std::optional<int> small_integer_constant(const TensorInfo& t) {
  if (!t.is_constant() || num_elements(t.shape) != 1 || !is_floating(t.dtype)) return std::nullopt;
  const double v = t.constant->get_f64(0);
  if (v < 1 || v > 4 || v != std::floor(v)) return std::nullopt;
  return static_cast<int>(v);
}

std::optional<int> small_integer_exponent(const PrimGraph& g, const Primitive& prim) {
  if (prim.op != PrimOp::Pow || prim.inputs.size() != 2) return std::nullopt;
  return small_integer_constant(g.tensor(prim.inputs[1]));
}

bool has_kernel_dtypes(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  std::vector<TensorId> tensors = k.inputs;
  for (PrimId p : k.prims) tensors.push_back(g.prim(p).output);
  for (TensorId t : tensors) {
    if (is_kernel_dtype(g.tensor(t).dtype)) continue;
    if (why_not) *why_not = str_cat("tensor '", g.tensor(t).name, "' has element type ", dtype_name(g.tensor(t).dtype));
    return false;
  }
  return true;
}

std::vector<TensorId> materialized_inputs(const PrimGraph& g, const Kernel& k) {
  std::vector<TensorId> out;
  for (TensorId t : k.inputs)
    if (g.tensor(t).producer != kNone) out.push_back(t);
  return out;
}

}  // namespace korch
