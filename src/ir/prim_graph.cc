#include "ir/prim_graph.h"

#include "util/error.h"

namespace korch {

TensorId PrimGraph::add_input(const std::string& name, DType dtype, Shape shape) {
  TensorInfo info;
  info.name = name;
  info.dtype = dtype;
  info.shape = std::move(shape);
  tensors_.push_back(std::move(info));
  inputs_.push_back(static_cast<TensorId>(tensors_.size() - 1));
  return inputs_.back();
}

TensorId PrimGraph::add_constant(const std::string& name, ConstTensorPtr value) {
  TensorInfo info;
  info.name = name;
  info.dtype = value->dtype();
  info.shape = value->shape();
  info.constant = std::move(value);
  tensors_.push_back(std::move(info));
  return static_cast<TensorId>(tensors_.size() - 1);
}

TensorId PrimGraph::add_primitive(PrimOp op, std::vector<TensorId> inputs, Attrs attrs, int32_t origin,
                                  const std::string& output_name) {
  int arity = prim_arity(op);
  KORCH_CHECK(arity < 0 || static_cast<int>(inputs.size()) == arity, prim_op_name(op), " takes ", arity, " inputs");
  std::vector<const TensorInfo*> infos;
  for (TensorId t : inputs) {
    KORCH_CHECK(t >= 0 && t < num_tensors(), "input tensor id ", t);
    infos.push_back(&tensors_[t]);
  }
  TensorInfo out;
  infer_primitive(op, infos, attrs, &out.dtype, &out.shape);
  checked_num_elements(out.shape, dtype_size(out.dtype), str_cat(prim_op_name(op), " output"));
  out.name = output_name.empty() ? "t" + std::to_string(tensors_.size()) : output_name;
  out.producer = static_cast<PrimId>(prims_.size());
  tensors_.push_back(std::move(out));
  TensorId id = static_cast<TensorId>(tensors_.size() - 1);
  prims_.push_back(Primitive{op, std::move(inputs), id, std::move(attrs), origin});
  return id;
}

int32_t PrimGraph::add_origin(OpOrigin origin) {
  origins_.push_back(std::move(origin));
  return static_cast<int32_t>(origins_.size() - 1);
}

void PrimGraph::mark_output(TensorId t) { outputs_.push_back(t); }

std::vector<std::vector<PrimId>> PrimGraph::consumers() const {
  std::vector<std::vector<PrimId>> result(tensors_.size());
  for (PrimId p = 0; p < num_prims(); ++p)
    for (TensorId t : prims_[p].inputs)
      if (result[t].empty() || result[t].back() != p) result[t].push_back(p);
  return result;
}

PrimGraph PrimGraph::without_dead_code() const {
  std::vector<char> live_tensor(tensors_.size(), 0);
  std::vector<char> live_prim(prims_.size(), 0);
  for (TensorId t : outputs_) live_tensor[t] = 1;
  for (TensorId t : inputs_) live_tensor[t] = 1;  // graph inputs stay, used or not
  for (PrimId p = num_prims() - 1; p >= 0; --p) {
    if (!live_tensor[prims_[p].output]) continue;
    live_prim[p] = 1;
    for (TensorId t : prims_[p].inputs) live_tensor[t] = 1;
  }
  PrimGraph g;
  g.origins_ = origins_;
  std::vector<TensorId> remap(tensors_.size(), kNone);
  // Keep tensors in their original relative order: inputs and constants first as they appear.
  for (TensorId t = 0; t < num_tensors(); ++t) {
    if (!live_tensor[t] || tensors_[t].producer != kNone) continue;
    remap[t] = static_cast<TensorId>(g.tensors_.size());
    g.tensors_.push_back(tensors_[t]);
  }
  for (TensorId t : inputs_) g.inputs_.push_back(remap[t]);
  for (PrimId p = 0; p < num_prims(); ++p) {
    if (!live_prim[p]) continue;
    Primitive prim = prims_[p];
    for (TensorId& t : prim.inputs) t = remap[t];
    TensorInfo out = tensors_[prim.output];
    out.producer = static_cast<PrimId>(g.prims_.size());
    g.tensors_.push_back(std::move(out));
    remap[prim.output] = static_cast<TensorId>(g.tensors_.size() - 1);
    prim.output = remap[prim.output];
    g.prims_.push_back(std::move(prim));
  }
  for (TensorId t : outputs_) g.outputs_.push_back(remap[t]);
  return g;
}

bool is_unit_stride_1x1_conv(const PrimGraph& g, const Primitive& conv) {
  if (conv.op != PrimOp::Conv || conv.attrs.i("group") != 1) return false;
  const Shape& w = g.tensor(conv.inputs[1]).shape;
  for (size_t i = 2; i < w.size(); ++i)
    if (w[i] != 1) return false;
  for (int64_t s : conv.attrs.ints("strides"))
    if (s != 1) return false;
  return true;
}

}  // namespace korch
