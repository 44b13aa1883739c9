// Fission rules for DFT and STFT as MatMuls with constant cosine/sine matrices: the signal's
// real and imaginary parts (last axis of size 1 or 2) with the transformed axis moved last,
// Yr = Xr C - Xi S and Yi = Xr S + Xi C (S with the sign of the direction; inverse divides by
// n), one-sided output keeping n/2 + 1 bins; dft_length pads or truncates. The inverse
// one-sided form (irfft) reads n/2 + 1 bins of a Hermitian spectrum and gives a real signal,
// with the middle bins counted twice. STFT frames the signal (Slices + Concat), applies the
// window and transforms each frame.
#include <cmath>

#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

namespace {

TensorId move_axis_last(FissionContext& c, TensorId x, int64_t axis, bool back) {
  int64_t r = c.rank(x);
  if (axis == r - 1) return x;
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r; ++i)
    if (i != axis) perm.push_back(i);
  perm.push_back(axis);
  if (back) {  // the inverse permutation
    std::vector<int64_t> inv(r);
    for (int64_t i = 0; i < r; ++i) inv[perm[i]] = i;
    perm = inv;
  }
  return c.emit(PrimOp::Transpose, {x}, Attrs().set("perm", perm));
}

// x: [..., N, C] (C = 1 real, 2 complex), transformed along `axis` (< rank - 1); returns
// [..., K, 2].
TensorId dft(FissionContext& c, TensorId x, int64_t axis, int64_t length, bool inverse, bool onesided) {
  DType t = c.dtype(x);
  int64_t r = c.rank(x), comps = c.shape(x).back();
  if (comps != 1 && comps != 2) c.error("the last axis must have size 1 (real) or 2 (complex)");
  if (axis < 0 || axis >= r - 1) c.error("axis must not be the last (complex) axis");
  int64_t n = c.shape(x)[axis];
  if (length <= 0) c.error("dft_length must be positive");
  if (length < n) x = slice_axis(c, x, axis, 0, length);
  if (length > n) x = pad_axis(c, x, axis, 0, length - n);
  n = length;
  int64_t bins = onesided ? n / 2 + 1 : n;
  Shape part = c.shape(x);
  part.pop_back();
  auto component = [&](int64_t k) { return c.reshape(slice_axis(c, x, r - 1, k, 1), part); };
  TensorId xr = move_axis_last(c, component(0), axis, false);
  TensorId xi = comps == 2 ? move_axis_last(c, component(1), axis, false) : kNone;
  Shape moved = c.shape(xr);
  if (moved.size() == 1) {  // MatMul wants rank >= 2
    xr = c.reshape(xr, {1, n});
    if (xi != kNone) xi = c.reshape(xi, {1, n});
  }
  TensorData cosm(t, {n, bins}), sinm(t, {n, bins});
  double sign = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / static_cast<double>(n) : 1.0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < bins; ++k) {
      double theta = sign * 2.0 * M_PI * static_cast<double>((i * k) % n) / static_cast<double>(n);
      cosm.set_f64(i * bins + k, std::cos(theta) * scale);
      sinm.set_f64(i * bins + k, std::sin(theta) * scale);
    }
  TensorId cm = c.constant(std::move(cosm)), sm = c.constant(std::move(sinm));
  TensorId yr = c.binary(PrimOp::MatMul, xr, cm), yi = c.binary(PrimOp::MatMul, xr, sm);
  if (xi != kNone) {
    yr = c.binary(PrimOp::Sub, yr, c.binary(PrimOp::MatMul, xi, sm));
    yi = c.binary(PrimOp::Add, yi, c.binary(PrimOp::MatMul, xi, cm));
  }
  moved.back() = bins;
  yr = move_axis_last(c, c.reshape(yr, moved), axis, true);
  yi = move_axis_last(c, c.reshape(yi, moved), axis, true);
  Shape one = c.shape(yr);
  one.push_back(1);
  return c.emit(PrimOp::Concat, {c.reshape(yr, one), c.reshape(yi, one)}, Attrs().set("axis", r - 1));
}

// irfft: x [..., K, 2] along `axis` -> [..., n, 1], from the first n/2 + 1 bins.
TensorId inverse_onesided(FissionContext& c, TensorId x, int64_t axis, int64_t n) {
  DType t = c.dtype(x);
  int64_t r = c.rank(x);
  if (c.shape(x).back() != 2) c.error("the inverse one-sided DFT needs a complex input");
  if (axis < 0 || axis >= r - 1) c.error("axis must not be the last (complex) axis");
  int64_t bins = n / 2 + 1, have = c.shape(x)[axis];
  if (have > bins) x = slice_axis(c, x, axis, 0, bins);
  if (have < bins) x = pad_axis(c, x, axis, 0, bins - have);
  Shape part = c.shape(x);
  part.pop_back();
  TensorId xr = move_axis_last(c, c.reshape(slice_axis(c, x, r - 1, 0, 1), part), axis, false);
  TensorId xi = move_axis_last(c, c.reshape(slice_axis(c, x, r - 1, 1, 1), part), axis, false);
  Shape moved = c.shape(xr);
  if (moved.size() == 1) {
    xr = c.reshape(xr, {1, bins});
    xi = c.reshape(xi, {1, bins});
  }
  TensorData cosm(t, {bins, n}), sinm(t, {bins, n});
  for (int64_t k = 0; k < bins; ++k) {
    double w = (k == 0 || 2 * k == n) ? 1.0 : 2.0;
    for (int64_t m = 0; m < n; ++m) {
      double theta = 2.0 * M_PI * static_cast<double>((k * m) % n) / static_cast<double>(n);
      cosm.set_f64(k * n + m, w * std::cos(theta) / static_cast<double>(n));
      sinm.set_f64(k * n + m, -w * std::sin(theta) / static_cast<double>(n));
    }
  }
  TensorId y = c.binary(PrimOp::Add, c.binary(PrimOp::MatMul, xr, c.constant(std::move(cosm))),
                        c.binary(PrimOp::MatMul, xi, c.constant(std::move(sinm))));
  moved.back() = n;
  y = move_axis_last(c, c.reshape(y, moved), axis, true);
  Shape one = c.shape(y);
  one.push_back(1);
  return c.reshape(y, one);
}

}  // namespace

void register_dft_rules() {
  register_fission_rule("DFT", [](FissionContext& c) {
    TensorId x = c.input(0);
    int64_t r = c.rank(x);
    int64_t axis = c.opset() < 20 ? c.attr_i("axis", 1) : (c.has_input(2) ? c.constant_ints(2).at(0) : -2);
    axis = normalize_axis(axis, r);
    bool inverse = c.attr_i("inverse", 0) != 0, onesided = c.attr_i("onesided", 0) != 0;
    bool given = c.has_input(1) && num_elements(c.shape(c.input(1))) > 0;
    if (inverse && onesided) {
      int64_t n = given ? c.constant_ints(1).at(0) : 2 * (c.shape(x)[axis] - 1);
      if (n <= 0) c.error("dft_length must be positive");
      c.set_output(0, inverse_onesided(c, x, axis, n));
      return;
    }
    int64_t length = given ? c.constant_ints(1).at(0) : c.shape(x)[axis];
    c.set_output(0, dft(c, x, axis, length, inverse, onesided));
  });
  register_fission_rule("STFT", [](FissionContext& c) {
    TensorId x = c.input(0);
    if (c.rank(x) != 3) c.error("signal must be [batch, length, 1 or 2]");
    int64_t step = c.constant_ints(1).at(0);
    TensorId window = c.has_input(2) ? c.input(2) : kNone;
    int64_t frame = c.has_input(3) ? c.constant_ints(3).at(0) : window != kNone ? c.shape(window)[0] : c.shape(x)[1];
    if (step <= 0 || frame <= 0 || frame > c.shape(x)[1]) c.error("invalid frame_step or frame_length");
    int64_t frames = 1 + (c.shape(x)[1] - frame) / step, batch = c.shape(x)[0], comps = c.shape(x)[2];
    std::vector<TensorId> parts;
    for (int64_t f = 0; f < frames; ++f)
      parts.push_back(c.reshape(slice_axis(c, x, 1, f * step, frame), {batch, 1, frame, comps}));
    TensorId framed = parts.size() == 1 ? parts[0] : c.emit(PrimOp::Concat, parts, Attrs().set("axis", int64_t{1}));
    if (window != kNone) framed = c.binary(PrimOp::Mul, framed, c.reshape(window, {1, 1, frame, 1}));
    c.set_output(0, dft(c, framed, 2, frame, false, c.attr_i("onesided", 1) != 0));
  });
}

}  // namespace korch
