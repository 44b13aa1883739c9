// Kernel-by-kernel reference execution of a plan.
#include "plan/run_plan.h"

#include <memory>
#include <unordered_map>

#include "reference/reference.h"
#include "util/error.h"

namespace korch::reference {

std::vector<TensorData> run_plan(const PrimGraph& g, const Plan& plan, const std::vector<TensorData>& inputs) {
  validate_plan_or_throw(g, plan);
  if (inputs.size() != g.inputs().size())
    fail("the model has ", g.inputs().size(), " inputs but ", inputs.size(), " were given");
  std::vector<std::shared_ptr<const TensorData>> materialized(g.num_tensors());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo& info = g.tensor(g.inputs()[i]);
    if (inputs[i].dtype() != info.dtype || inputs[i].shape() != info.shape)
      fail("input '", info.name, "' must be ", dtype_name(info.dtype), shape_str(info.shape), ", got ",
           dtype_name(inputs[i].dtype()), shape_str(inputs[i].shape()));
    materialized[g.inputs()[i]] = std::make_shared<TensorData>(inputs[i]);
  }
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).is_constant()) materialized[t] = g.tensor(t).constant;
  for (const Kernel& k : plan.kernels) {
    std::unordered_map<TensorId, std::shared_ptr<const TensorData>> local;
    for (TensorId t : k.inputs) {
      KORCH_CHECK(materialized[t] != nullptr, "kernel input %", t, " not materialised");
      local[t] = materialized[t];
    }
    for (PrimId p : k.prims) {
      const Primitive& prim = g.prim(p);
      std::vector<const TensorData*> args;
      for (TensorId t : prim.inputs) {
        auto it = local.find(t);
        KORCH_CHECK(it != local.end(), "kernel reads %", t, " which is neither an input nor computed inside");
        args.push_back(it->second.get());
      }
      const TensorInfo& out = g.tensor(prim.output);
      local[prim.output] = std::make_shared<TensorData>(evaluate(prim, args, out.dtype, out.shape));
    }
    materialized[k.output] = local.at(k.output);
  }
  std::vector<TensorData> results;
  for (TensorId t : g.outputs()) {
    KORCH_CHECK(materialized[t] != nullptr, "output %", t, " not materialised");
    results.push_back(*materialized[t]);
  }
  return results;
}

}  // namespace korch::reference
