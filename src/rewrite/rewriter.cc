#include "rewrite/rewriter.h"

#include "util/error.h"

namespace korch {

Rewriter::Rewriter(const PrimGraph& source)
    : source_(source),
      map_(source.num_tensors(), kNone),
      uses_(source.num_tensors(), 0),
      is_output_(source.num_tensors(), 0) {
  for (const OpOrigin& o : source.origins()) target_.add_origin(o);
  for (const Primitive& p : source.prims())
    for (TensorId t : p.inputs) ++uses_[t];
  for (TensorId t : source.outputs()) is_output_[t] = 1;
}

const Primitive* Rewriter::producer(TensorId t, PrimOp op) const {
  PrimId p = source_.tensor(t).producer;
  if (p == kNone || source_.prim(p).op != op) return nullptr;
  return &source_.prim(p);
}

bool Rewriter::single_use(TensorId t) const { return uses_[t] == 1 && !is_output_[t]; }

TensorId Rewriter::mapped(TensorId t) const {
  KORCH_CHECK(map_.at(t) != kNone, "rewrite: tensor ", t, " read before it was mapped");
  return map_[t];
}

TensorId Rewriter::emit(PrimOp op, std::vector<TensorId> new_inputs, Attrs attrs, int32_t origin) {
  return target_.add_primitive(op, std::move(new_inputs), std::move(attrs), origin);
}

TensorId Rewriter::constant(const std::string& name, TensorData value) {
  return target_.add_constant(name, std::make_shared<const TensorData>(std::move(value)));
}

int32_t Rewriter::derived_origin(int32_t origin, const std::string& suffix) {
  if (origin == kNone) return kNone;
  OpOrigin o = target_.origins().at(origin);
  o.name += "#" + suffix;
  return target_.add_origin(std::move(o));
}

PrimGraph Rewriter::apply(const PrimGraph& source, const Rule& rule, int* fired) {
  Rewriter r(source);
  *fired = 0;
  // Inputs and constants first, in their original order.
  for (TensorId t = 0; t < source.num_tensors(); ++t) {
    const TensorInfo& info = source.tensor(t);
    if (info.producer != kNone) continue;
    if (info.is_constant()) r.map_[t] = r.target_.add_constant(info.name, info.constant);
  }
  for (TensorId t : source.inputs()) {
    const TensorInfo& info = source.tensor(t);
    r.map_[t] = r.target_.add_input(info.name, info.dtype, info.shape);
  }
  for (PrimId p = 0; p < source.num_prims(); ++p) {
    const Primitive& prim = source.prim(p);
    std::optional<TensorId> replacement = rule(r, p);
    if (replacement) {
      const TensorInfo& before = source.tensor(prim.output);
      const TensorInfo& after = r.target_.tensor(*replacement);
      KORCH_CHECK(after.shape == before.shape && after.dtype == before.dtype, "rewrite of ", prim_op_name(prim.op),
                  " changed ", shape_str(before.shape), " into ", shape_str(after.shape));
      r.map_[prim.output] = *replacement;
      ++*fired;
      continue;
    }
    std::vector<TensorId> inputs;
    for (TensorId t : prim.inputs) inputs.push_back(r.mapped(t));
    r.map_[prim.output] =
        r.target_.add_primitive(prim.op, std::move(inputs), prim.attrs, prim.origin, source.tensor(prim.output).name);
  }
  for (TensorId t : source.outputs()) {
    TensorId m = r.mapped(t);
    const TensorInfo& info = r.target_.tensor(m);
    // A graph output keeps its name; one that became a graph input or constant is copied
    // so that the output is still computed by a primitive.
    if (info.producer == kNone && source.tensor(t).producer != kNone)
      m = r.target_.add_primitive(PrimOp::Copy, {m}, {}, source.prim(source.tensor(t).producer).origin);
    if (r.target_.tensor(m).producer != kNone) r.target_.mutable_tensor(m).name = source.tensor(t).name;
    r.target_.mark_output(m);
  }
  return std::move(r.target_);
}

bool is_pointwise_conv(const PrimGraph& g, const Primitive& conv) {
  if (!is_unit_stride_1x1_conv(g, conv)) return false;
  const TensorInfo& w = g.tensor(conv.inputs[1]);
  if (!w.is_constant() || w.dtype != DType::F32) return false;
  for (int64_t p : conv.attrs.ints("pads"))
    if (p != 0) return false;
  return true;
}

bool is_spatial_upsample(const PrimGraph& g, const Primitive& resize) {
  if (resize.op != PrimOp::Resize || resize.attrs.s("coord_mode") == "tf_crop_and_resize") return false;
  const Shape& in = g.tensor(resize.inputs[0]).shape;
  const Shape& out = g.tensor(resize.output).shape;
  if (in.size() < 3 || in[0] != out[0] || in[1] != out[1]) return false;
  const auto& scales = resize.attrs.floats("scales");
  if (scales[0] != 1.0 || scales[1] != 1.0) return false;
  if (g.tensor(resize.inputs[0]).dtype != DType::F32) return false;
  return num_elements(out) > num_elements(in);
}

}  // namespace korch
