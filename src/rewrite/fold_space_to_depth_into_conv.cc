// fold_space_to_depth_into_conv: a Conv (stride 1, no dilation, one group) of a channel
// Concat of the b*b phases of a space-to-depth (YOLOX's and YOLOv5's Focus stem:
// Concat(x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2])) is one
// Conv of x with a b-times larger kernel, stride b and b-times the padding:
//   Conv(Concat_i(x[:, :, di_i::b, dj_i::b]), W)[o, h, w] = Conv(x, W', stride b)[o, h, w]
//   with W'[o, c, b*kh + di_i, b*kw + dj_i] = W[o, i*C + c, kh, kw].
// Every output reads the same inputs with the same weights (only the summation order
// changes), zero padding included, when H and W are multiples of b. Each phase may be a chain
// of Slices of x; the rule needs every phase exactly once, each with all of x's batch and
// channels. The strided Slices and the Concat's copy disappear, and oneDNN runs the folded
// Conv straight from the dense input (x has few channels) instead of reordering the Concat's
// output to a blocked layout first.
#include <string>
#include <vector>

#include "rewrite/rewrite.h"
#include "rewrite/rewriter.h"

namespace korch {

namespace {

// x[.., start + step * i, ..] per axis: a chain of Slices back to its first non-Slice source.
struct StridedView {
  TensorId root = kNone;
  std::vector<int64_t> start, step, size;
};

StridedView strided_view(const Rewriter& r, TensorId t) {
  StridedView v;
  const Shape& shape = r.tensor(t).shape;
  v.start.assign(shape.size(), 0);
  v.step.assign(shape.size(), 1);
  v.size = shape;
  while (const Primitive* s = r.producer(t, PrimOp::Slice)) {
    const auto& starts = s->attrs.ints("starts");
    const auto& steps = s->attrs.ints("steps");
    for (size_t a = 0; a < shape.size(); ++a) {  // view(i) = s(start + step * i) = starts + steps * (...)
      v.start[a] = starts[a] + steps[a] * v.start[a];
      v.step[a] *= steps[a];
    }
    t = s->inputs[0];
  }
  v.root = t;
  return v;
}

}  // namespace

std::optional<TensorId> fold_space_to_depth_into_conv(Rewriter& r, PrimId p) {
  const Primitive& conv = r.prim(p);
  if (conv.op != PrimOp::Conv || conv.attrs.i("group") != 1) return std::nullopt;
  const TensorInfo& weight_info = r.tensor(conv.inputs[1]);
  if (!weight_info.is_constant() || weight_info.dtype != DType::F32 || weight_info.shape.size() != 4)
    return std::nullopt;
  for (int64_t s : conv.attrs.ints("strides"))
    if (s != 1) return std::nullopt;
  for (int64_t d : conv.attrs.ints("dilations"))
    if (d != 1) return std::nullopt;
  const Primitive* concat = r.producer(conv.inputs[0], PrimOp::Concat);
  if (!concat || concat->attrs.i("axis") != 1 || !r.single_use(conv.inputs[0])) return std::nullopt;

  // Every piece a phase (di, dj) of the same x with the same block b, all of x's channels.
  const size_t pieces = concat->inputs.size();
  int64_t b = 0;
  while (b * b < static_cast<int64_t>(pieces)) ++b;
  if (b < 2 || b * b != static_cast<int64_t>(pieces)) return std::nullopt;
  TensorId x = kNone;
  std::vector<int> phase_of_piece(pieces);
  std::vector<char> seen(pieces, 0);
  for (size_t i = 0; i < pieces; ++i) {
    StridedView v = strided_view(r, concat->inputs[i]);
    if (v.root == concat->inputs[i]) return std::nullopt;  // not a Slice at all
    if (x == kNone) x = v.root;
    const Shape& xs = r.tensor(x).shape;
    if (v.root != x || xs.size() != 4 || xs[2] % b || xs[3] % b) return std::nullopt;
    if (v.start[0] != 0 || v.step[0] != 1 || v.size[0] != xs[0]) return std::nullopt;
    if (v.start[1] != 0 || v.step[1] != 1 || v.size[1] != xs[1]) return std::nullopt;
    for (int a : {2, 3})
      if (v.step[a] != b || v.start[a] < 0 || v.start[a] >= b || v.size[a] != xs[a] / b) return std::nullopt;
    int phase = static_cast<int>(v.start[2] * b + v.start[3]);
    if (seen[phase]) return std::nullopt;
    seen[phase] = 1;
    phase_of_piece[i] = phase;
  }
  const Shape& xs = r.tensor(x).shape;
  if (r.tensor(x).dtype != DType::F32) return std::nullopt;

  const int64_t out_channels = weight_info.shape[0], channels = xs[1];
  const int64_t kh = weight_info.shape[2], kw = weight_info.shape[3];
  const float* w = weight_info.constant->data<float>();
  TensorData folded(DType::F32, {out_channels, channels, b * kh, b * kw});
  float* f = folded.data<float>();
  for (int64_t o = 0; o < out_channels; ++o)
    for (size_t i = 0; i < pieces; ++i) {
      int64_t di = phase_of_piece[i] / b, dj = phase_of_piece[i] % b;
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t y = 0; y < kh; ++y)
          for (int64_t z = 0; z < kw; ++z)
            f[((o * channels + c) * b * kh + b * y + di) * b * kw + b * z + dj] =
                w[((o * pieces * channels + i * channels + c) * kh + y) * kw + z];
    }
  std::vector<int64_t> pads = conv.attrs.ints("pads");
  for (int64_t& pad : pads) pad *= b;
  Attrs attrs = conv.attrs;
  attrs.set("strides", std::vector<int64_t>{b, b}).set("pads", pads);
  TensorId weights = r.constant(weight_info.name + "#space_to_depth", std::move(folded));
  return r.emit(PrimOp::Conv, {r.mapped(x), weights}, attrs, r.derived_origin(conv.origin, "space_to_depth"));
}

}  // namespace korch
