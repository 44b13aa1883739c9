// Dispatch of primitives to the per-kind reference implementations, and a whole-graph
// interpreter that frees each intermediate after its last use.
#include "reference/reference.h"

#include "util/error.h"

namespace korch::reference {

std::vector<int64_t> broadcast_offsets(const Shape& in_shape, const Shape& out_shape) {
  size_t rank = out_shape.size();
  KORCH_CHECK(in_shape.size() <= rank);
  std::vector<int64_t> in_strides(rank, 0);
  std::vector<int64_t> s = strides_of(in_shape);
  size_t shift = rank - in_shape.size();
  for (size_t i = 0; i < in_shape.size(); ++i) in_strides[shift + i] = in_shape[i] == 1 ? 0 : s[i];
  int64_t n = num_elements(out_shape);
  std::vector<int64_t> offsets(n);
  std::vector<int64_t> idx(rank, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    offsets[i] = off;
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      if (++idx[d] < out_shape[d]) {
        off += in_strides[d];
        break;
      }
      off -= in_strides[d] * (out_shape[d] - 1);
      idx[d] = 0;
    }
  }
  return offsets;
}

TensorData evaluate(const Primitive& prim, const std::vector<const TensorData*>& inputs, DType out_dtype,
                    const Shape& out_shape) {
  switch (prim_kind(prim.op)) {
    case PrimKind::Elementwise: return eval_elementwise(prim, inputs, out_dtype, out_shape);
    case PrimKind::Reduce: return eval_reduce(prim, *inputs[0], out_dtype, out_shape);
    case PrimKind::Broadcast:
    case PrimKind::Layout: return eval_layout(prim, inputs, out_dtype, out_shape);
    case PrimKind::Window: return eval_window(prim, *inputs[0], out_shape);
    case PrimKind::Linear: return eval_linear(prim, *inputs[0], *inputs[1], out_shape);
  }
  fail("reference: unknown primitive kind");
}

TensorData evaluate_chain(const PrimGraph& g, const std::vector<PrimId>& prims, std::map<TensorId, TensorData> values,
                          TensorId result) {
  for (PrimId p : prims) {
    const Primitive& prim = g.prim(p);
    std::vector<const TensorData*> args;
    Shape out;
    for (TensorId t : prim.inputs) {
      auto it = values.find(t);
      const TensorData* v = it != values.end() ? &it->second : g.tensor(t).constant.get();
      KORCH_CHECK(v, "reference: tensor ", g.tensor(t).name, " has no value");
      args.push_back(v);
      out = broadcast_shapes(out, v->shape());
    }
    values[prim.output] = evaluate(prim, args, g.tensor(prim.output).dtype, out);
  }
  return std::move(values.at(result));
}

std::vector<TensorData> run_graph(const PrimGraph& g, const std::vector<TensorData>& inputs) {
  if (inputs.size() != g.inputs().size())
    fail("the model has ", g.inputs().size(), " inputs but ", inputs.size(), " were given");
  std::vector<const TensorData*> value(g.num_tensors(), nullptr);
  std::vector<std::unique_ptr<TensorData>> owned(g.num_tensors());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo& info = g.tensor(g.inputs()[i]);
    if (inputs[i].dtype() != info.dtype || inputs[i].shape() != info.shape)
      fail("input '", info.name, "' must be ", dtype_name(info.dtype), shape_str(info.shape), ", got ",
           dtype_name(inputs[i].dtype()), shape_str(inputs[i].shape()));
    value[g.inputs()[i]] = &inputs[i];
  }
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).is_constant()) value[t] = g.tensor(t).constant.get();
  // Last use of every intermediate, so memory stays bounded on big models.
  std::vector<PrimId> last_use(g.num_tensors(), kNone);
  for (PrimId p = 0; p < g.num_prims(); ++p)
    for (TensorId t : g.prim(p).inputs) last_use[t] = p;
  for (TensorId t : g.outputs()) last_use[t] = g.num_prims();
  for (PrimId p = 0; p < g.num_prims(); ++p) {
    const Primitive& prim = g.prim(p);
    std::vector<const TensorData*> args;
    for (TensorId t : prim.inputs) {
      KORCH_CHECK(value[t] != nullptr, "tensor %", t, " has no value");
      args.push_back(value[t]);
    }
    const TensorInfo& out = g.tensor(prim.output);
    owned[prim.output] = std::make_unique<TensorData>(evaluate(prim, args, out.dtype, out.shape));
    value[prim.output] = owned[prim.output].get();
    for (TensorId t : prim.inputs)
      if (last_use[t] == p && owned[t]) {
        owned[t].reset();
        value[t] = nullptr;
      }
  }
  std::vector<TensorData> results;
  for (TensorId t : g.outputs()) {
    KORCH_CHECK(value[t] != nullptr, "output %", t, " has no value");
    results.push_back(*value[t]);
  }
  return results;
}

}  // namespace korch::reference
