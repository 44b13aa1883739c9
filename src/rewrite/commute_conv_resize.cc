// commute_pointwise_conv_with_resize: a pointwise Conv (no bias: fission emits the bias as
// a separate Add) mixes channels pixel by pixel and a Resize mixes pixels channel by
// channel, both linearly, so Conv(Resize(x), W) = Resize(Conv(x, W)). After an upsampling
// Resize the Conv then runs on the smaller image. Applied when the Conv's saving exceeds
// what resizing more channels costs (4 taps per output element as the estimate).
#include "rewrite/rewrite.h"
#include "rewrite/rewriter.h"

namespace korch {

std::optional<TensorId> commute_pointwise_conv_with_resize(Rewriter& r, PrimId p) {
  const Primitive& conv = r.prim(p);
  if (!is_pointwise_conv(r.source(), conv)) return std::nullopt;
  const Primitive* resize = r.producer(conv.inputs[0], PrimOp::Resize);
  if (!resize || !r.single_use(conv.inputs[0]) || !is_spatial_upsample(r.source(), *resize)) return std::nullopt;

  const Shape& small = r.tensor(resize->inputs[0]).shape;
  const Shape& large = r.tensor(resize->output).shape;
  const double small_pixels = static_cast<double>(num_elements(small)) / (small[0] * small[1]);
  const double large_pixels = static_cast<double>(num_elements(large)) / (large[0] * large[1]);
  const double in_channels = static_cast<double>(small[1]);
  const double out_channels = static_cast<double>(r.tensor(conv.inputs[1]).shape[0]);
  const double conv_saving = in_channels * out_channels * (large_pixels - small_pixels);
  const double resize_extra = 4.0 * (out_channels - in_channels) * large_pixels;
  if (conv_saving <= resize_extra) return std::nullopt;

  TensorId y = r.emit(PrimOp::Conv, {r.mapped(resize->inputs[0]), r.mapped(conv.inputs[1])}, conv.attrs, conv.origin);
  Attrs attrs = resize->attrs;
  std::vector<int64_t> sizes = attrs.ints("sizes");
  sizes[1] = static_cast<int64_t>(out_channels);
  attrs.set("sizes", sizes);
  return r.emit(PrimOp::Resize, {y}, attrs, resize->origin);
}

}  // namespace korch
