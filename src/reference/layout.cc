// Reference layout primitives (pure data movement, any dtype) and Resize
// (separable 1-D interpolation per axis, following the ONNX Resize
// specification).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "reference/reference.h"
#include "util/error.h"

namespace korch::reference {

namespace {

// Calls f(out_linear_index, multi_index) for every element of `shape` in
// row-major order.
template <typename F>
void for_each_index(const Shape& shape, F&& f) {
  int64_t n = num_elements(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    f(i, idx);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

template <typename T>
void copy_row(unsigned char* out, const unsigned char* in, int64_t len, int64_t stride) {
  T* o = reinterpret_cast<T*>(out);
  const T* i = reinterpret_cast<const T*>(in);
  for (int64_t k = 0; k < len; ++k) o[k] = i[k * stride];
}

// out (row-major over its shape) = x's element at base + sum over d of index[d] * strides[d]:
// transposes, slices and broadcasts, a row at a time.
void copy_strided(const TensorData& x, int64_t base, const std::vector<int64_t>& strides, TensorData& out) {
  const Shape& shape = out.shape();
  int64_t n = out.size();
  if (n == 0) return;
  size_t rank = shape.size();
  size_t es = dtype_size(x.dtype());
  int64_t len = rank ? shape.back() : 1, stride = rank ? strides.back() : 0;
  std::vector<int64_t> idx(rank ? rank - 1 : 0, 0);
  const unsigned char* in = static_cast<const unsigned char*>(x.raw());
  unsigned char* o = static_cast<unsigned char*>(out.raw());
  int64_t off = base;
  for (int64_t row = 0; row < n / len; ++row) {
    unsigned char* dst = o + row * len * static_cast<int64_t>(es);
    const unsigned char* src = in + off * static_cast<int64_t>(es);
    switch (es) {
      case 1: copy_row<uint8_t>(dst, src, len, stride); break;
      case 2: copy_row<uint16_t>(dst, src, len, stride); break;
      case 4: copy_row<uint32_t>(dst, src, len, stride); break;
      case 8: copy_row<uint64_t>(dst, src, len, stride); break;
      default:
        for (int64_t k = 0; k < len; ++k) std::memcpy(dst + k * es, src + k * stride * es, es);
    }
    for (int64_t d = static_cast<int64_t>(idx.size()) - 1; d >= 0; --d) {
      off += strides[d];
      if (++idx[d] < shape[d]) break;
      off -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

void copy_elem(TensorData& out, int64_t o, const TensorData& in, int64_t i) {
  size_t es = dtype_size(in.dtype());
  std::memcpy(static_cast<unsigned char*>(out.raw()) + o * es, static_cast<const unsigned char*>(in.raw()) + i * es,
              es);
}

TensorData pad(const Primitive& prim, const TensorData& x, const Shape& out_shape) {
  const auto& pads = prim.attrs.ints("pads");
  const std::string& mode = prim.attrs.s("mode");
  double value = prim.attrs.f("value");
  const Shape& s = x.shape();
  int64_t rank = static_cast<int64_t>(s.size());
  std::vector<int64_t> st = strides_of(s);
  TensorData out(x.dtype(), out_shape);
  for_each_index(out_shape, [&](int64_t o, const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t c = idx[d] - pads[d];
      if (c < 0 || c >= s[d]) {
        if (mode == "constant" || s[d] == 0) {
          off = -1;
          break;
        }
        if (mode == "edge") {
          c = c < 0 ? 0 : s[d] - 1;
        } else {  // reflect (period 2*(n-1))
          if (s[d] == 1) {
            c = 0;
          } else {
            int64_t period = 2 * (s[d] - 1);
            c = ((c % period) + period) % period;
            if (c >= s[d]) c = period - c;
          }
        }
      }
      off += c * st[d];
    }
    if (off < 0)
      out.set_f64(o, value);
    else
      copy_elem(out, o, x, off);
  });
  return out;
}

double cubic_weight(double t, double a) {
  t = std::fabs(t);
  if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
  return 0;
}

}  // namespace

bool resize_taps(const Attrs& a, int64_t axis, int64_t rank, int64_t x, int64_t in_len, int64_t out_len,
                 std::vector<ResizeTap>* taps) {
  double scale = a.floats("scales")[axis];
  const std::string& mode = a.s("mode");
  const std::string& cmode = a.s("coord_mode");
  double out_width = scale * static_cast<double>(in_len);
  double xo;
  if (cmode == "align_corners") {
    // ONNX uses the fractional output width scale * in_len here, not the
    // rounded size.
    xo = out_width == 1 ? 0.0 : x * static_cast<double>(in_len - 1) / (out_width - 1);
  } else if (cmode == "asymmetric") {
    xo = x / scale;
  } else if (cmode == "pytorch_half_pixel") {
    xo = out_len == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  } else if (cmode == "half_pixel") {
    xo = (x + 0.5) / scale - 0.5;
  } else if (cmode == "half_pixel_symmetric") {
    // half_pixel with the input's centre mapped onto the centre of the integer-sized output.
    double adjustment = static_cast<double>(out_len) / out_width;
    xo = static_cast<double>(in_len) / 2 * (1 - adjustment) + (x + 0.5) / scale - 0.5;
  } else if (cmode == "tf_half_pixel_for_nn") {
    xo = (x + 0.5) / scale;
  } else if (cmode == "tf_crop_and_resize") {
    const auto& roi = a.floats("roi");
    double start = roi[axis], end = roi[rank + axis];
    xo = out_len > 1 ? start * (in_len - 1) + x * (end - start) * (in_len - 1) / (out_width - 1)
                     : 0.5 * (start + end) * (in_len - 1);
    if (xo < 0 || xo > in_len - 1) return false;
  } else {
    fail("unsupported Resize coordinate_transformation_mode '", cmode, "'");
  }
  taps->clear();
  auto clamp = [&](int64_t i) { return i < 0 ? 0 : (i >= in_len ? in_len - 1 : i); };
  // ONNX picks neighbours around i0 with ratio in (0, 1] (an integer coordinate
  // counts as ratio 1).
  int64_t i0 = static_cast<int64_t>(std::ceil(xo)) - 1;
  double ratio = xo - static_cast<double>(i0);
  if (mode == "nearest") {
    const std::string& nm = a.s("nearest_mode");
    bool upper;
    if (ratio == 1.0)
      upper = true;
    else if (nm == "round_prefer_floor")
      upper = ratio > 0.5;
    else if (nm == "round_prefer_ceil")
      upper = ratio >= 0.5;
    else if (nm == "floor")
      upper = false;
    else if (nm == "ceil")
      upper = true;
    else
      fail("unsupported Resize nearest_mode '", nm, "'");
    taps->push_back({clamp(upper ? i0 + 1 : i0), 1.0});
  } else if (mode == "linear") {
    taps->push_back({i0, 1.0 - ratio});
    taps->push_back({i0 + 1, ratio});
  } else if (mode == "cubic") {
    double ca = a.f("cubic_coeff_a");
    for (int k = -1; k <= 2; ++k) taps->push_back({i0 + k, cubic_weight(ratio - k, ca)});
  } else {
    fail("unsupported Resize mode '", mode, "'");
  }
  if (mode != "nearest") {
    if (a.i("exclude_outside")) {
      double total = 0;
      for (ResizeTap& t : *taps) {
        if (t.index < 0 || t.index >= in_len) t.weight = 0;
        total += t.weight;
      }
      if (total != 0)
        for (ResizeTap& t : *taps) t.weight /= total;
    }
    for (ResizeTap& t : *taps) t.index = clamp(t.index);
  }
  return true;
}

bool resize_axis_is_identity(const Attrs& a, int64_t axis, int64_t in_len, int64_t out_len) {
  if (in_len != out_len || a.floats("scales")[axis] != 1.0) return false;
  const std::string& cmode = a.s("coord_mode");
  // At scale 1 these map output coordinate x onto input coordinate x exactly.
  if (cmode == "half_pixel" || cmode == "half_pixel_symmetric" || cmode == "pytorch_half_pixel" ||
      cmode == "asymmetric" || cmode == "align_corners")
    return true;
  // tf_half_pixel_for_nn maps x onto x + 0.5: only nearest rounding down returns x.
  if (cmode == "tf_half_pixel_for_nn")
    return a.s("mode") == "nearest" && (a.s("nearest_mode") == "floor" || a.s("nearest_mode") == "round_prefer_floor");
  return false;
}

namespace {

TensorData resize(const Primitive& prim, const TensorData& x, DType out_dtype, const Shape& out_shape) {
  Shape cur_shape = x.shape();
  std::vector<double> cur = x.to_f64();
  int64_t rank = static_cast<int64_t>(cur_shape.size());
  double extrapolation = prim.attrs.f("extrapolation_value");
  if (num_elements(out_shape) == 0) return TensorData(out_dtype, out_shape);
  for (int64_t d : cur_shape) KORCH_CHECK(d > 0, "Resize of an empty tensor to a non-empty one");
  // Axes are independent: shrink before growing, so no intermediate exceeds
  // max(in, out).
  std::vector<int64_t> order(rank);
  for (int64_t i = 0; i < rank; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return static_cast<double>(out_shape[a]) * static_cast<double>(cur_shape[b]) <
           static_cast<double>(out_shape[b]) * static_cast<double>(cur_shape[a]);
  });
  std::vector<ResizeTap> taps;
  for (int64_t axis : order) {
    int64_t in_len = cur_shape[axis], out_len = out_shape[axis];
    if (resize_axis_is_identity(prim.attrs, axis, in_len, out_len)) continue;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= cur_shape[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= cur_shape[d];
    std::vector<double> next(outer * out_len * inner);
    for (int64_t j = 0; j < out_len; ++j) {
      bool inside = resize_taps(prim.attrs, axis, rank, j, in_len, out_len, &taps);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          double v = 0;
          if (!inside) {
            v = extrapolation;
          } else {
            for (const ResizeTap& t : taps) v += t.weight * cur[(o * in_len + t.index) * inner + i];
          }
          next[(o * out_len + j) * inner + i] = v;
        }
    }
    cur.swap(next);
    cur_shape[axis] = out_len;
  }
  return TensorData::from_f64(out_dtype, out_shape, cur);
}

}  // namespace

TensorData eval_layout(const Primitive& prim, const std::vector<const TensorData*>& in, DType out_dtype,
                       const Shape& out_shape) {
  const TensorData& x = *in[0];
  const Shape& s = x.shape();
  int64_t rank = static_cast<int64_t>(s.size());
  switch (prim.op) {
    case PrimOp::Broadcast: {
      TensorData out(out_dtype, out_shape);
      std::vector<int64_t> st = strides_of(s), strides(out_shape.size(), 0);
      size_t shift = out_shape.size() - s.size();
      for (size_t d = 0; d < s.size(); ++d) strides[shift + d] = s[d] == 1 ? 0 : st[d];
      copy_strided(x, 0, strides, out);
      return out;
    }
    case PrimOp::Reshape: return x.reshaped(out_shape);
    case PrimOp::Transpose: {
      const auto& perm = prim.attrs.ints("perm");
      std::vector<int64_t> st = strides_of(s), strides(rank);
      for (int64_t d = 0; d < rank; ++d) strides[d] = st[perm[d]];
      TensorData out(out_dtype, out_shape);
      copy_strided(x, 0, strides, out);
      return out;
    }
    case PrimOp::Slice: {
      const auto& starts = prim.attrs.ints("starts");
      const auto& steps = prim.attrs.ints("steps");
      std::vector<int64_t> st = strides_of(s), strides(rank);
      int64_t base = 0;
      for (int64_t d = 0; d < rank; ++d) {
        base += starts[d] * st[d];
        strides[d] = steps[d] * st[d];
      }
      TensorData out(out_dtype, out_shape);
      copy_strided(x, base, strides, out);
      return out;
    }
    case PrimOp::Concat: {
      int64_t axis = prim.attrs.i("axis");
      TensorData out(out_dtype, out_shape);
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < axis; ++d) outer *= out_shape[d];
      for (int64_t d = axis + 1; d < rank; ++d) inner *= out_shape[d];
      size_t es = dtype_size(out_dtype);
      int64_t out_row = out_shape[axis] * inner;
      int64_t pos = 0;
      for (const TensorData* t : in) {
        int64_t row = t->shape()[axis] * inner;
        for (int64_t o = 0; o < outer; ++o)
          std::memcpy(static_cast<unsigned char*>(out.raw()) + (o * out_row + pos) * es,
                      static_cast<const unsigned char*>(t->raw()) + o * row * es, row * es);
        pos += row;
      }
      return out;
    }
    case PrimOp::Pad: return pad(prim, x, out_shape);
    case PrimOp::Gather: {
      int64_t axis = prim.attrs.i("axis");
      const TensorData& indices = *in[1];
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < axis; ++d) outer *= s[d];
      for (int64_t d = axis + 1; d < rank; ++d) inner *= s[d];
      int64_t len = s[axis];
      int64_t n_idx = indices.size();
      TensorData out(out_dtype, out_shape);
      size_t es = dtype_size(out_dtype);
      for (int64_t k = 0; k < n_idx; ++k) {
        int64_t j = indices.get_i64(k);
        if (j < 0) j += len;
        if (j < 0 || j >= len) fail("Gather index ", indices.get_i64(k), " out of range for axis of length ", len);
      }
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t k = 0; k < n_idx; ++k) {
          int64_t j = indices.get_i64(k);
          if (j < 0) j += len;
          std::memcpy(static_cast<unsigned char*>(out.raw()) + ((o * n_idx + k) * inner) * es,
                      static_cast<const unsigned char*>(x.raw()) + ((o * len + j) * inner) * es, inner * es);
        }
      return out;
    }
    case PrimOp::Resize: return resize(prim, x, out_dtype, out_shape);
    default: break;
  }
  fail("reference: ", prim_op_name(prim.op), " is not a layout op");
}

}  // namespace korch::reference
