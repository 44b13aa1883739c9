// compose_channel_linear_maps: two channel-linear maps in a row are one. The pattern is a
// token-major MatMul (with optional bias) whose result is turned channel-major and fed to a
// pointwise Conv, as transformer heads export it:
//   Conv(Reshape(Transpose_021(MatMul(x, W) + b)), F)
//     = Reshape(Transpose_021(MatMul(x, W F^T) + F b))
// (W: [K, C], F: [Cout, C]). The layout ops keep each pixel's channel vector intact, so only
// the channel count in the Reshape changes. Applied when the merged map costs no more
// multiply-adds per pixel than the two (K Cout <= K C + C Cout); the products are formed in
// double precision and rounded once.
#include <vector>

#include "rewrite/rewrite.h"
#include "rewrite/rewriter.h"

namespace korch {
namespace {

// A constant F32 bias that broadcasts along the last axis of a rank-`rank` tensor only.
bool is_last_axis_bias(const TensorInfo& t, int64_t channels) {
  if (!t.is_constant() || t.dtype != DType::F32 || t.shape.empty() || t.shape.back() != channels) return false;
  for (size_t i = 0; i + 1 < t.shape.size(); ++i)
    if (t.shape[i] != 1) return false;
  return true;
}

}  // namespace

std::optional<TensorId> compose_channel_linear_maps(Rewriter& r, PrimId p) {
  const Primitive& conv = r.prim(p);
  if (!is_pointwise_conv(r.source(), conv)) return std::nullopt;
  const Primitive* reshape = r.producer(conv.inputs[0], PrimOp::Reshape);
  if (!reshape || !r.single_use(conv.inputs[0])) return std::nullopt;
  const Primitive* transpose = r.producer(reshape->inputs[0], PrimOp::Transpose);
  if (!transpose || !r.single_use(reshape->inputs[0]) || transpose->attrs.ints("perm") != std::vector<int64_t>{0, 2, 1})
    return std::nullopt;
  const TensorId y = transpose->inputs[0];
  const Shape& token_major = r.tensor(y).shape;           // [N, L, C]
  const Shape& conv_in = r.tensor(conv.inputs[0]).shape;  // [N, C, spatial...]
  if (token_major.size() != 3 || conv_in[0] != token_major[0] || conv_in[1] != token_major[2] || !r.single_use(y))
    return std::nullopt;
  const int64_t channels = token_major[2];

  const Primitive* add = r.producer(y, PrimOp::Add);
  TensorId product = y, bias = kNone;
  if (add) {
    for (int i = 0; i < 2; ++i)
      if (is_last_axis_bias(r.tensor(add->inputs[i]), channels)) {
        bias = add->inputs[i];
        product = add->inputs[1 - i];
      }
    if (bias == kNone || !r.single_use(product)) return std::nullopt;
  }
  const Primitive* matmul = r.producer(product, PrimOp::MatMul);
  if (!matmul) return std::nullopt;
  const TensorInfo& w_info = r.tensor(matmul->inputs[1]);
  if (!w_info.is_constant() || w_info.dtype != DType::F32 || w_info.shape.size() != 2) return std::nullopt;
  const int64_t k = w_info.shape[0];
  const TensorInfo& f_info = r.tensor(conv.inputs[1]);
  const int64_t out_channels = f_info.shape[0];
  if (k * out_channels > k * channels + channels * out_channels) return std::nullopt;

  const float* w = w_info.constant->data<float>();
  const float* f = f_info.constant->data<float>();
  TensorData merged(DType::F32, {k, out_channels});
  float* m = merged.data<float>();
  for (int64_t i = 0; i < k; ++i)
    for (int64_t o = 0; o < out_channels; ++o) {
      double acc = 0;
      for (int64_t c = 0; c < channels; ++c) acc += static_cast<double>(w[i * channels + c]) * f[o * channels + c];
      m[i * out_channels + o] = static_cast<float>(acc);
    }
  TensorId out = r.emit(PrimOp::MatMul, {r.mapped(matmul->inputs[0]), r.constant(w_info.name + "#composed", merged)},
                        matmul->attrs, matmul->origin);
  if (bias != kNone) {
    const float* b = r.tensor(bias).constant->data<float>();
    TensorData merged_bias(DType::F32, {out_channels});
    float* mb = merged_bias.data<float>();
    for (int64_t o = 0; o < out_channels; ++o) {
      double acc = 0;
      for (int64_t c = 0; c < channels; ++c) acc += static_cast<double>(f[o * channels + c]) * b[c];
      mb[o] = static_cast<float>(acc);
    }
    out = r.emit(PrimOp::Add, {out, r.constant(r.tensor(bias).name + "#composed", merged_bias)}, {}, add->origin);
  }
  out = r.emit(PrimOp::Transpose, {out}, transpose->attrs, transpose->origin);
  Attrs reshape_attrs = reshape->attrs;
  std::vector<int64_t> shape = reshape_attrs.ints("shape");
  shape[1] = out_channels;
  reshape_attrs.set("shape", shape);
  return r.emit(PrimOp::Reshape, {out}, reshape_attrs, reshape->origin);
}

}  // namespace korch
