// split_pointwise_conv_over_concat: a pointwise Conv of a channel Concat is the sum of
// pointwise Convs of the Concat's inputs, each with its slice of the weights:
//   Conv(Concat(a_1..a_k), W) = sum_i Conv(a_i, W[:, channels of a_i]).
// Applied only when an input is an upsampling Resize used by nothing else, because then
// its part of the Conv can move below the Resize (commute_conv_resize.cc) and run at the
// lower resolution; the Concat's copy disappears too.
#include <string>

#include "rewrite/rewrite.h"
#include "rewrite/rewriter.h"

namespace korch {

std::optional<TensorId> split_pointwise_conv_over_concat(Rewriter& r, PrimId p) {
  const Primitive& conv = r.prim(p);
  if (!is_pointwise_conv(r.source(), conv)) return std::nullopt;
  const Primitive* concat = r.producer(conv.inputs[0], PrimOp::Concat);
  if (!concat || concat->attrs.i("axis") != 1 || !r.single_use(conv.inputs[0])) return std::nullopt;
  bool some_part_commutes = false;
  for (TensorId a : concat->inputs) {
    const Primitive* resize = r.producer(a, PrimOp::Resize);
    if (resize && r.single_use(a) && is_spatial_upsample(r.source(), *resize)) some_part_commutes = true;
  }
  if (!some_part_commutes) return std::nullopt;

  const TensorInfo& weight_info = r.tensor(conv.inputs[1]);
  const float* w = weight_info.constant->data<float>();
  const int64_t out_channels = weight_info.shape[0], in_channels = weight_info.shape[1];
  TensorId sum = kNone;
  int64_t offset = 0;
  int part = 0;
  for (TensorId a : concat->inputs) {
    const int64_t channels = r.tensor(a).shape[1];
    if (channels == 0) continue;
    Shape slice_shape = weight_info.shape;
    slice_shape[1] = channels;
    TensorData slice(DType::F32, slice_shape);
    float* s = slice.data<float>();
    for (int64_t o = 0; o < out_channels; ++o)
      for (int64_t c = 0; c < channels; ++c) s[o * channels + c] = w[o * in_channels + offset + c];
    const std::string suffix = "split" + std::to_string(part);
    TensorId weights = r.constant(weight_info.name + "#" + suffix, std::move(slice));
    TensorId y = r.emit(PrimOp::Conv, {r.mapped(a), weights}, conv.attrs, r.derived_origin(conv.origin, suffix));
    sum = sum == kNone ? y : r.emit(PrimOp::Add, {sum, y}, {}, r.derived_origin(conv.origin, "sum"));
    offset += channels;
    ++part;
  }
  return sum;
}

}  // namespace korch
