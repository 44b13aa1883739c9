// Random kernel and graph inputs (see random_inputs.h).
#include "plan/random_inputs.h"

#include <algorithm>
#include <cstdint>
#include <random>

namespace korch {

std::vector<TensorData> random_graph_inputs(const PrimGraph& g, uint32_t seed) {
  Kernel whole_graph;
  whole_graph.inputs = g.inputs();
  return random_kernel_inputs(g, whole_graph, seed);
}

std::vector<TensorData> random_kernel_inputs(const PrimGraph& g, const Kernel& k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::vector<TensorData> values;
  for (TensorId t : k.inputs) {
    const TensorInfo& info = g.tensor(t);
    if (info.is_constant()) {
      values.push_back(*info.constant);
      continue;
    }
    TensorData v(info.dtype, info.shape);
    // Integer tensors used as Gather indices stay within the gathered axis.
    int64_t limit = 3;
    for (PrimId p : k.prims) {
      const Primitive& prim = g.prim(p);
      if (prim.op == PrimOp::Gather && prim.inputs[1] == t)
        limit = std::min<int64_t>(limit == 3 ? INT64_MAX : limit, g.tensor(prim.inputs[0]).shape[prim.attrs.i("axis")]);
    }
    float* f32 = info.dtype == DType::F32 ? v.data<float>() : nullptr;
    for (int64_t i = 0; i < v.size(); ++i) {
      if (f32)
        f32[i] = real(rng);
      else if (is_floating(info.dtype))
        v.set_f64(i, real(rng));
      else if (info.dtype == DType::Bool)
        v.set_i64(i, rng() & 1);
      else
        v.set_i64(i, static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(limit, 1))));
    }
    values.push_back(std::move(v));
  }
  return values;
}

}  // namespace korch
