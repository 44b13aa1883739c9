// Activation layouts of Halide kernels: which of a kernel's 4-D activations can be stored in one
// of oneDNN's layouts (nhwc, or channel-blocked nChw8c / nChw16c as a 5-D view), and how such a
// tensor is addressed. Kernels of elementwise, broadcast, spatial reduction, pooling, pad and
// resize primitives read and write these layouts through strides, so that they can sit between
// convolutions without reorders; the values are those of the dense layout, never padded (a
// blocked format is taken only where its block divides the channel count).
#include <algorithm>
#include <cstring>
#include <optional>

#include "backend/cpu/halide_internal.h"
#include "util/error.h"

namespace korch::cpu {

namespace halide_detail {

// Halide's dimensions (innermost first) of a 4-D tensor [n, c, h, w] stored in `format`: nhwc
// keeps the 4 dimensions (w, h, c, n) with permuted strides; a channel-blocked format has 5
// (c % block, w, h, c / block, n).
std::vector<halide_dimension_t> layout_dimensions(const Shape& s, const std::string& format) {
  int n = static_cast<int>(s[0]), c = static_cast<int>(s[1]), h = static_cast<int>(s[2]), w = static_cast<int>(s[3]);
  int block = channel_block(format);
  KORCH_CHECK(takes_format(s, format), "no Halide layout ", format, " for ", shape_str(s));
  if (block == 0)
    return {halide_dimension_t(0, w, c), halide_dimension_t(0, h, w * c), halide_dimension_t(0, c, 1),
            halide_dimension_t(0, n, h * w * c)};
  return {halide_dimension_t(0, block, 1), halide_dimension_t(0, w, block), halide_dimension_t(0, h, w * block),
          halide_dimension_t(0, c / block, h * w * block), halide_dimension_t(0, n, c * h * w)};
}

void store_with_dimensions(Halide::OutputImageParam p, const std::vector<halide_dimension_t>& d) {
  for (size_t i = 0; i < d.size(); ++i) p.dim(static_cast<int>(i)).set_bounds(0, d[i].extent).set_stride(d[i].stride);
}

void store_in_layout(Halide::OutputImageParam p, const Shape& shape, const std::string& format) {
  store_with_dimensions(p, layout_dimensions(shape, format));
}

int concat_piece_block(const std::string& format) {
  if (format == "nhwc") return channel_block(native_blocked_format());
  return format == native_blocked_format() ? channel_block(format) : -1;
}

std::vector<halide_dimension_t> concat_output_dimensions(const Shape& s, const std::string& format) {
  if (channel_block(format) > 0) return layout_dimensions(s, format);
  int block = concat_piece_block(format);
  int n = static_cast<int>(s[0]), c = static_cast<int>(s[1]), h = static_cast<int>(s[2]), w = static_cast<int>(s[3]);
  KORCH_CHECK(format == "nhwc" && block > 0 && c % block == 0, "no concat output layout ", format, " for ",
              shape_str(s));
  return {halide_dimension_t(0, block, 1), halide_dimension_t(0, w, c), halide_dimension_t(0, h, w * c),
          halide_dimension_t(0, c / block, block), halide_dimension_t(0, n, h * w * c)};
}

std::optional<PrimId> output_channel_concat(const PrimGraph& g, const Kernel& k) {
  for (PrimId p : k.prims) {
    const Primitive& prim = g.prim(p);
    if (prim.output == k.output && prim.op == PrimOp::Concat && g.tensor(prim.output).shape.size() == 4 &&
        prim.attrs.i("axis") == 1)
      return p;
  }
  return std::nullopt;
}

}  // namespace halide_detail

int channel_block(const std::string& format) {
  if (format == "nhwc") return 0;
  if (format == "nChw8c") return 8;
  if (format == "nChw16c") return 16;
  return -1;
}

bool takes_format(const Shape& shape, const std::string& format) {
  int block = channel_block(format);
  return shape.size() == 4 && block >= 0 && (block == 0 || shape[1] % block == 0);
}

TensorData permute_activation(const TensorData& t, const std::string& format, bool to_layout) {
  const Shape& s = t.shape();
  KORCH_CHECK(takes_format(s, format), "permute_activation: no layout ", format, " for ", shape_str(s));
  int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  int64_t block = channel_block(format);
  // Element (in, ic, ih, iw)'s offset in the layout: its coordinates in layout_dimensions' view
  // times that view's strides, so each layout is defined in one place.
  std::vector<halide_dimension_t> d = halide_detail::layout_dimensions(s, format);
  auto stored = [&](int64_t in, int64_t ic, int64_t ih, int64_t iw) {
    std::vector<int64_t> at =
        block == 0 ? std::vector<int64_t>{iw, ih, ic, in} : std::vector<int64_t>{ic % block, iw, ih, ic / block, in};
    int64_t offset = 0;
    for (size_t i = 0; i < at.size(); ++i) offset += at[i] * d[i].stride;
    return offset;
  };
  TensorData r(t.dtype(), s);
  size_t bytes = dtype_size(t.dtype());
  const char* src = static_cast<const char*>(t.raw());
  char* dst = static_cast<char*>(r.raw());
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t ih = 0; ih < h; ++ih)
        for (int64_t iw = 0; iw < w; ++iw) {
          int64_t nchw = ((in * c + ic) * h + ih) * w + iw, at = stored(in, ic, ih, iw);
          std::memcpy(dst + (to_layout ? at : nchw) * bytes, src + (to_layout ? nchw : at) * bytes, bytes);
        }
  return r;
}

bool HalideLayouts::any() const {
  return output || std::any_of(inputs.begin(), inputs.end(), [](char c) { return c != 0; });
}

const std::string& HalideLayouts::input_format(size_t i) const {
  return i < input_formats.size() && !input_formats[i].empty() ? input_formats[i] : format;
}

bool HalideLayouts::mixes_formats() const {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i] && input_format(i) != format) return true;
  return false;
}

std::string HalideLayouts::summary() const {
  std::string s = format + (output ? " out" : "") + " in";
  for (size_t i = 0; i < inputs.size(); ++i) {
    s += inputs[i] ? '1' : '0';
    if (inputs[i] && input_format(i) != format) s += ":" + input_format(i);
  }
  return s;
}

bool formats_mix(const std::string& a, const std::string& b) {
  if (a == b) return true;
  const std::string blocked = native_blocked_format();
  return (a == "nhwc" && b == blocked) || (a == blocked && b == "nhwc");
}

bool output_concat_takes_format(const PrimGraph& g, const Kernel& k, const std::string& format) {
  std::optional<PrimId> concat = halide_detail::output_channel_concat(g, k);
  if (!concat) return true;
  int block = halide_detail::concat_piece_block(format);
  if (block <= 0) return false;
  return std::all_of(g.prim(*concat).inputs.begin(), g.prim(*concat).inputs.end(),
                     [&](TensorId t) { return g.tensor(t).shape[1] % block == 0; });
}

HalideLayouts channels_last_candidates(const PrimGraph& g, const Kernel& k) {
  HalideLayouts none;
  if (k.num_linear > 0) return none;
  auto spatial_4d = [&](TensorId t) { return g.tensor(t).shape.size() == 4; };
  std::optional<PrimId> concat = halide_detail::output_channel_concat(g, k);
  for (PrimId p : k.prims) {
    const Primitive& prim = g.prim(p);
    PrimKind kind = prim_kind(prim.op);
    bool ok = kind == PrimKind::Elementwise || kind == PrimKind::Broadcast || p == concat;
    if (prim.op == PrimOp::ReduceSum || prim.op == PrimOp::ReduceMean || prim.op == PrimOp::ReduceMax ||
        prim.op == PrimOp::ReduceMin) {
      const auto& axes = prim.attrs.ints("axes");
      ok = spatial_4d(prim.inputs[0]) && !axes.empty() &&
           std::all_of(axes.begin(), axes.end(), [](int64_t a) { return a == 2 || a == 3; });
    } else if (prim.op == PrimOp::Pad) {
      const auto& pads = prim.attrs.ints("pads");
      ok = spatial_4d(prim.inputs[0]) && pads.size() == 8 && pads[0] == 0 && pads[1] == 0 && pads[4] == 0 &&
           pads[5] == 0;
    } else if (prim.op == PrimOp::Resize) {
      const Shape& in = g.tensor(prim.inputs[0]).shape;
      const Shape& out = g.tensor(prim.output).shape;
      ok = in.size() == 4 && out.size() == 4 && in[0] == out[0] && in[1] == out[1];
    } else if (kind == PrimKind::Window) {  // 2-D pooling windows: per channel, over pixels
      ok = spatial_4d(prim.inputs[0]) && prim.attrs.ints("kernel").size() == 2;
    }
    if (!ok) return none;
  }
  auto linkable = [&](TensorId t) {
    const TensorInfo& info = g.tensor(t);
    return !info.is_constant() && info.dtype == DType::F32 && info.shape.size() == 4 && info.shape[1] > 1 &&
           info.shape[2] * info.shape[3] > 1;
  };
  HalideLayouts l;
  for (TensorId t : k.inputs) l.inputs.push_back(linkable(t) ? 1 : 0);
  l.output = linkable(k.output);
  if (concat) {
    l.concat_output = true;
    l.format = native_blocked_format();
    if (!output_concat_takes_format(g, k, l.format)) return none;
    for (size_t i = 0; i < k.inputs.size(); ++i)
      if (l.inputs[i] && !takes_format(g.tensor(k.inputs[i]).shape, l.format)) return none;
  }
  return l.any() ? l : none;
}

}  // namespace korch::cpu
