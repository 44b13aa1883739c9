// The model's tensor values, evaluated on demand (see model_values.h).
#include "cost/model_values.h"

#include <unistd.h>

#include <algorithm>

#include "plan/random_inputs.h"
#include "reference/reference.h"

namespace korch {

ModelValues::ModelValues(const PrimGraph& g, uint32_t seed, int64_t budget_bytes)
    : g_(g), budget_bytes_(budget_bytes), graph_inputs_(g.num_tensors()), evaluated_once_(g.num_prims(), false) {
  std::vector<TensorData> inputs = random_graph_inputs(g, seed);
  for (size_t i = 0; i < inputs.size(); ++i)
    graph_inputs_[g.inputs()[i]] = std::make_shared<const TensorData>(std::move(inputs[i]));
}

int64_t ModelValues::default_budget_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  int64_t memory = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{8} << 30;
  return std::min<int64_t>(memory / 8, int64_t{4} << 30);
}

// A value that needs no evaluation (a constant, a graph input, a kept value), or null.
std::shared_ptr<const TensorData> ModelValues::known(TensorId t) {
  const TensorInfo& info = g_.tensor(t);
  if (info.is_constant()) return info.constant;
  if (graph_inputs_[t]) return graph_inputs_[t];
  auto it = kept_.find(t);
  if (it == kept_.end()) return nullptr;
  recent_.splice(recent_.begin(), recent_, it->second.position);
  return it->second.value;
}

void ModelValues::keep(TensorId t, std::shared_ptr<const TensorData> value) {
  int64_t bytes = static_cast<int64_t>(value->byte_size());
  if (bytes > budget_bytes_) return;
  while (kept_bytes_ + bytes > budget_bytes_ && !recent_.empty()) {
    auto last = kept_.find(recent_.back());
    kept_bytes_ -= static_cast<int64_t>(last->second.value->byte_size());
    kept_.erase(last);
    recent_.pop_back();
  }
  recent_.push_front(t);
  kept_.emplace(t, Kept{std::move(value), recent_.begin()});
  kept_bytes_ += bytes;
}

std::shared_ptr<const TensorData> ModelValues::value(TensorId t) {
  if (std::shared_ptr<const TensorData> v = known(t)) return v;
  if (g_.tensor(t).producer == kNone) {
    ++stats_.refused;
    return nullptr;
  }
  // The primitives to evaluate: t's producer and, transitively, the producers of every input
  // without a value. Primitive ids are a topological order.
  std::vector<PrimId> todo;
  std::unordered_map<TensorId, std::shared_ptr<const TensorData>> local;  // values this call holds
  std::vector<TensorId> stack = {t};
  std::vector<bool> queued(g_.num_prims(), false);
  int again = 0;
  while (!stack.empty()) {
    TensorId x = stack.back();
    stack.pop_back();
    PrimId p = g_.tensor(x).producer;
    if (queued[p]) continue;
    queued[p] = true;
    todo.push_back(p);
    again += evaluated_once_[p];
    for (TensorId in : g_.prim(p).inputs) {
      if (local.count(in)) continue;
      if (std::shared_ptr<const TensorData> v = known(in)) {
        local.emplace(in, std::move(v));
      } else if (g_.tensor(in).producer == kNone) {
        ++stats_.refused;
        return nullptr;
      } else {
        stack.push_back(in);
      }
    }
  }
  if (again > kMaxReevaluated) {
    ++stats_.refused;
    return nullptr;
  }
  std::sort(todo.begin(), todo.end());
  // Each evaluated value is released after its last use in this call (t's is kept).
  std::unordered_map<TensorId, PrimId> last_use;
  for (PrimId p : todo)
    for (TensorId in : g_.prim(p).inputs) last_use[in] = p;
  std::shared_ptr<const TensorData> result;
  try {
    for (PrimId p : todo) {
      const Primitive& prim = g_.prim(p);
      std::vector<const TensorData*> args;
      for (TensorId in : prim.inputs) args.push_back(local.at(in).get());
      const TensorInfo& out = g_.tensor(prim.output);
      auto v = std::make_shared<const TensorData>(reference::evaluate(prim, args, out.dtype, out.shape));
      ++(evaluated_once_[p] ? stats_.reevaluated : stats_.evaluated);
      evaluated_once_[p] = true;
      keep(prim.output, v);
      if (prim.output == t) result = v;
      local[prim.output] = std::move(v);
      for (TensorId in : prim.inputs)
        if (last_use[in] == p && in != t) local.erase(in);
    }
  } catch (const std::exception&) {  // a primitive the reference does not evaluate
    result = nullptr;
    ++stats_.refused;
  }
  return result;
}

}  // namespace korch
