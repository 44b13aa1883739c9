// Fission rule for GridSample (2-D and 3-D spatial inputs; modes linear/bilinear, nearest,
// cubic/bicubic; padding zeros, border, reflection; align_corners), as ONNX's reference computes
// it. Per spatial axis the grid coordinate is denormalised (in float32), rounded half to even
// for nearest, and brought back into range by the padding mode; the interpolation taps (1 for
// nearest, 2 linear, 4 cubic with Keys' a = -0.75) get their weights and in-range indices. Each
// combination of taps over the axes is one Gather of the input's pixels (channels last,
// flattened over batch and space) weighted by the product of the axes' weights; with zeros
// padding, a tap outside the input reads 0. Floating inputs only. The sampling (sample_grid) also
// serves DeformConv.
#include <cmath>

#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

namespace {

struct AxisTaps {
  std::vector<TensorId> index;   // int64, in [0, size)
  std::vector<TensorId> weight;  // float32; none for nearest
  std::vector<TensorId> inside;  // bool, zeros padding only: the tap lies inside the input
};

TensorId f32(FissionContext& c, double v) { return c.scalar(v, DType::F32); }

TensorId clamp(FissionContext& c, TensorId x, double lo, double hi) {
  return c.binary(PrimOp::Min, c.binary(PrimOp::Max, x, f32(c, lo)), f32(c, hi));
}

// v reflected by the near border until it lies within [lo, hi] (ONNX's _gs_reflect; hi > lo).
TensorId reflect(FissionContext& c, TensorId v, double lo, double hi) {
  TensorId below = c.binary(PrimOp::Less, v, f32(c, lo));
  TensorId above = c.binary(PrimOp::Greater, v, f32(c, hi));
  TensorId dx =
      c.emit(PrimOp::Where, {below, c.binary(PrimOp::Sub, f32(c, lo), v), c.binary(PrimOp::Sub, v, f32(c, hi))});
  TensorId flips = c.unary(PrimOp::Floor, c.binary(PrimOp::Div, dx, f32(c, hi - lo)));
  TensorId r = c.binary(PrimOp::Sub, dx, c.binary(PrimOp::Mul, flips, f32(c, hi - lo)));
  TensorId even =
      c.binary(PrimOp::Equal, c.emit(PrimOp::Mod, {flips, f32(c, 2)}, Attrs().set("fmod", int64_t{1})), f32(c, 0));
  TensorId from_lo = c.binary(PrimOp::Add, f32(c, lo), r);
  TensorId from_hi = c.binary(PrimOp::Sub, f32(c, hi), r);
  TensorId reflected_below = c.emit(PrimOp::Where, {even, from_lo, from_hi});
  TensorId reflected_above = c.emit(PrimOp::Where, {even, from_hi, from_lo});
  return c.emit(PrimOp::Where, {below, reflected_below, c.emit(PrimOp::Where, {above, reflected_above, v})});
}

// Keys' cubic convolution weights (a = -0.75) of the taps at -1, 0, 1, 2 for a fraction t in [0, 1).
std::vector<TensorId> cubic_weights(FissionContext& c, TensorId t) {
  const double a = -0.75;
  auto far = [&](TensorId x) {  // ((a x - 5a) x + 8a) x - 4a, for 1 <= x <= 2
    TensorId y = c.binary(PrimOp::Sub, c.binary(PrimOp::Mul, x, f32(c, a)), f32(c, 5 * a));
    y = c.binary(PrimOp::Add, c.binary(PrimOp::Mul, y, x), f32(c, 8 * a));
    return c.binary(PrimOp::Sub, c.binary(PrimOp::Mul, y, x), f32(c, 4 * a));
  };
  auto near = [&](TensorId x) {  // ((a + 2) x - (a + 3)) x x + 1, for 0 <= x <= 1
    TensorId y = c.binary(PrimOp::Sub, c.binary(PrimOp::Mul, x, f32(c, a + 2)), f32(c, a + 3));
    return c.binary(PrimOp::Add, c.binary(PrimOp::Mul, c.binary(PrimOp::Mul, y, x), x), f32(c, 1));
  };
  TensorId one_minus_t = c.binary(PrimOp::Sub, f32(c, 1), t);
  return {far(c.binary(PrimOp::Add, t, f32(c, 1))), near(t), near(one_minus_t),
          far(c.binary(PrimOp::Sub, f32(c, 2), t))};
}

// The taps of one spatial axis of `size` pixels at normalised coordinates g (float32).
AxisTaps axis_taps(FissionContext& c, const GridSampleSpec& spec, TensorId g, int64_t size) {
  double n = static_cast<double>(size);
  double lo = spec.align_corners ? 0.0 : -0.5, hi = spec.align_corners ? n - 1 : n - 0.5;
  TensorId plus_one = c.binary(PrimOp::Add, g, f32(c, 1));
  TensorId v = spec.align_corners  // (g + 1) / 2 (n - 1), or ((g + 1) n - 1) / 2
                   ? c.binary(PrimOp::Mul, c.binary(PrimOp::Div, plus_one, f32(c, 2)), f32(c, n - 1))
                   : c.binary(PrimOp::Div, c.binary(PrimOp::Sub, c.binary(PrimOp::Mul, plus_one, f32(c, n)), f32(c, 1)),
                              f32(c, 2));
  if (spec.mode == "nearest") v = c.unary(PrimOp::Round, v);
  if (spec.padding == "border") {
    TensorId outside =
        c.binary(PrimOp::Or, c.binary(PrimOp::Less, v, f32(c, lo)), c.binary(PrimOp::Greater, v, f32(c, hi)));
    v = c.emit(PrimOp::Where, {outside, clamp(c, v, 0, n - 1), v});
  } else if (spec.padding == "reflection") {
    v = reflect(c, v, lo, hi);
  }
  std::vector<TensorId> positions;
  AxisTaps taps;
  if (spec.mode == "nearest") {
    positions.push_back(c.cast(c.cast(v, DType::I64), DType::F32));  // truncated toward zero
  } else {
    TensorId first = c.unary(PrimOp::Floor, v);
    TensorId t = c.binary(PrimOp::Sub, v, first);
    if (spec.mode == "linear") {
      positions = {first, c.binary(PrimOp::Add, first, f32(c, 1))};
      taps.weight = {c.binary(PrimOp::Sub, f32(c, 1), t), t};
    } else {
      for (int k = -1; k <= 2; ++k) positions.push_back(c.binary(PrimOp::Add, first, f32(c, k)));
      taps.weight = cubic_weights(c, t);
    }
  }
  for (TensorId p : positions) {
    if (spec.padding == "zeros")
      taps.inside.push_back(c.binary(PrimOp::And, c.binary(PrimOp::GreaterEqual, p, f32(c, 0)),
                                     c.binary(PrimOp::LessEqual, p, f32(c, n - 1))));
    else if (spec.padding == "reflection")
      p = c.cast(c.cast(reflect(c, p, lo, hi), DType::I64), DType::F32);
    taps.index.push_back(c.cast(clamp(c, p, 0, n - 1), DType::I64));
  }
  return taps;
}

}  // namespace

TensorId sample_grid(FissionContext& c, TensorId x, const std::vector<TensorId>& normalized,
                     const GridSampleSpec& spec) {
  const Shape xs = c.shape(x);
  int64_t rank = c.rank(x), spatial = rank - 2;
  DType t = c.dtype(x);
  const Shape coords = c.shape(normalized.at(0));
  int64_t n = xs[0], channels = xs[1], pixels = 1;
  for (int64_t i = 2; i < rank; ++i) pixels *= xs[i];
  std::vector<AxisTaps> axes;
  std::vector<int64_t> strides(spatial, 1);
  for (int64_t i = spatial - 2; i >= 0; --i) strides[i] = strides[i + 1] * xs[i + 3];
  for (int64_t i = 0; i < spatial; ++i)
    axes.push_back(axis_taps(c, spec, c.cast(normalized[i], DType::F32), xs[i + 2]));

  // Pixels channels last: [n * pixels, channels]; batch b's pixels start at b * pixels.
  std::vector<int64_t> perm = {0};
  for (int64_t i = 2; i < rank; ++i) perm.push_back(i);
  perm.push_back(1);
  TensorId table = c.reshape(c.emit(PrimOp::Transpose, {x}, Attrs().set("perm", perm)), {n * pixels, channels});
  Shape base_shape(coords.size(), 1);
  base_shape[0] = n;
  std::vector<int64_t> base(n);
  for (int64_t b = 0; b < n; ++b) base[b] = b * pixels;
  TensorId batch_base = c.constant(TensorData::from_i64(DType::I64, base_shape, base));

  Shape weight_shape = coords;
  weight_shape.push_back(1);
  TensorId sum = kNone;
  std::vector<size_t> tap(spatial, 0);
  while (true) {
    TensorId offset = batch_base, weight = kNone, inside = kNone;
    for (int64_t i = 0; i < spatial; ++i) {
      const AxisTaps& a = axes[i];
      offset = c.binary(PrimOp::Add, offset,
                        c.binary(PrimOp::Mul, a.index[tap[i]], c.scalar(static_cast<double>(strides[i]), DType::I64)));
      if (!a.weight.empty())
        weight = weight == kNone ? a.weight[tap[i]] : c.binary(PrimOp::Mul, weight, a.weight[tap[i]]);
      if (!a.inside.empty())
        inside = inside == kNone ? a.inside[tap[i]] : c.binary(PrimOp::And, inside, a.inside[tap[i]]);
    }
    TensorId value = c.emit(PrimOp::Gather, {table, offset}, Attrs().set("axis", int64_t{0}));
    if (inside != kNone) value = c.emit(PrimOp::Where, {c.reshape(inside, weight_shape), value, c.scalar(0, t)});
    TensorId term = weight == kNone ? value : c.binary(PrimOp::Mul, value, c.reshape(c.cast(weight, t), weight_shape));
    sum = sum == kNone ? term : c.binary(PrimOp::Add, sum, term);
    int64_t i = spatial - 1;
    while (i >= 0 && ++tap[i] == axes[i].index.size()) tap[i--] = 0;
    if (i < 0) break;
  }
  return sum;
}

void register_grid_sample_rule() {
  register_fission_rule("GridSample", [](FissionContext& c) {
    TensorId x = c.input(0), grid = c.input(1);
    const Shape xs = c.shape(x), gs = c.shape(grid);
    int64_t rank = c.rank(x), spatial = rank - 2;
    require_floating(c, x);
    if (spatial != 2 && spatial != 3) c.error("only 2-D and 3-D spatial inputs are supported, got rank ", rank);
    if (c.rank(grid) != rank || gs[0] != xs[0] || gs.back() != spatial)
      c.error("grid shape ", shape_str(gs), " does not fit input shape ", shape_str(xs));
    GridSampleSpec spec{c.attr_s("mode", c.opset() < 20 ? "bilinear" : "linear"), c.attr_s("padding_mode", "zeros"),
                        c.attr_i("align_corners", 0) != 0};
    if (spec.mode == "bilinear") spec.mode = "linear";
    if (spec.mode == "bicubic") spec.mode = "cubic";
    if (spec.mode != "linear" && spec.mode != "nearest" && spec.mode != "cubic")
      c.error("unknown mode '", spec.mode, "'");
    if (spec.padding != "zeros" && spec.padding != "border" && spec.padding != "reflection")
      c.error("unknown padding_mode '", spec.padding, "'");
    if (spec.mode == "cubic" && spatial != 2) c.error("cubic mode needs a 2-D spatial input");
    for (int64_t i = 2; i < rank; ++i) {
      if (xs[i] < 1) c.error("the input has an empty spatial axis");
      if (spec.padding == "reflection" && spec.align_corners && xs[i] == 1)
        c.error("reflection padding with align_corners on a spatial axis of size 1 is not defined");
    }
    Shape out_spatial(gs.begin() + 1, gs.end() - 1);
    Shape coords = {xs[0]};
    coords.insert(coords.end(), out_spatial.begin(), out_spatial.end());
    if (num_elements(coords) == 0 || xs[1] == 0) c.error("the output is empty");

    // The grid's last axis holds (x, y[, z]): spatial axis i reads entry spatial - 1 - i.
    std::vector<TensorId> normalized;
    for (int64_t i = 0; i < spatial; ++i)
      normalized.push_back(c.reshape(slice_axis(c, grid, rank - 1, spatial - 1 - i, 1), coords));
    std::vector<int64_t> channels_first = {0, spatial + 1};
    for (int64_t i = 1; i <= spatial; ++i) channels_first.push_back(i);
    c.set_output(0,
                 c.emit(PrimOp::Transpose, {sample_grid(c, x, normalized, spec)}, Attrs().set("perm", channels_first)));
  });
}

}  // namespace korch
