// Fission rule for RoiAlign with a fixed sampling_ratio (> 0), as ONNX's reference computes it:
// each output bin of a region averages (mode avg) or takes the largest of (mode max, over the
// four weighted corner values) sampling_ratio x sampling_ratio bilinear samples. Per region the
// sample rows and columns are computed separably (float32 coordinates; a sample outside
// [-1, size] gets zero weights at pixel 0, a coordinate at or beyond the last pixel clamps to
// it); each of the four corners is one Gather of the input's pixels (channels last, flattened
// over batch and space) at the region's batch index (out of range: a run-time error).
// Adaptive sampling (sampling_ratio 0: the sample count depends on the region sizes) is refused.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

namespace {

TensorId f32(FissionContext& c, double v) { return c.scalar(v, DType::F32); }

// One axis of the samples: the low and high pixel (int64), the high corner's weight l and the
// low one's h = 1 - l, and whether the sample lies inside [-1, size].
struct SampleAxis {
  TensorId low, high, l, h, inside;
};

// Sample coordinates start + bin * (p + (i + 0.5) / grid) for p < pooled, i < grid, as
// [regions, pooled, grid] (start and bin are [regions, 1, 1]).
SampleAxis sample_axis(FissionContext& c, TensorId start, TensorId bin, int64_t pooled, int64_t grid, int64_t size) {
  TensorId p = c.cast(iota_along(c, pooled, 3, 1), DType::F32);
  TensorId i = c.cast(iota_along(c, grid, 3, 2), DType::F32);
  TensorId within = c.binary(PrimOp::Div, c.binary(PrimOp::Mul, c.binary(PrimOp::Add, i, f32(c, 0.5)), bin),
                             f32(c, static_cast<double>(grid)));
  TensorId v = c.binary(PrimOp::Add, c.binary(PrimOp::Add, start, c.binary(PrimOp::Mul, p, bin)), within);
  SampleAxis a;
  a.inside = c.binary(PrimOp::And, c.binary(PrimOp::GreaterEqual, v, f32(c, -1)),
                      c.binary(PrimOp::LessEqual, v, f32(c, static_cast<double>(size))));
  v = c.binary(PrimOp::Max, v, f32(c, 0));
  TensorId low = c.unary(PrimOp::Floor, v);
  TensorId at_end = c.binary(PrimOp::GreaterEqual, low, f32(c, static_cast<double>(size - 1)));
  TensorId last = f32(c, static_cast<double>(size - 1));
  low = c.emit(PrimOp::Where, {at_end, last, low});
  v = c.emit(PrimOp::Where, {at_end, last, v});
  TensorId high = c.emit(PrimOp::Where, {at_end, last, c.binary(PrimOp::Add, low, f32(c, 1))});
  a.l = c.binary(PrimOp::Sub, v, low);
  a.h = c.binary(PrimOp::Sub, f32(c, 1), a.l);
  a.low = c.cast(low, DType::I64);
  a.high = c.cast(high, DType::I64);
  return a;
}

}  // namespace

void register_roi_align_rule() {
  register_fission_rule("RoiAlign", [](FissionContext& c) {
    TensorId x = c.input(0), rois = c.input(1), batch_indices = c.input(2);
    const Shape xs = c.shape(x);
    DType t = c.dtype(x);
    require_floating(c, x);
    if (c.rank(x) != 4) c.error("the input must have rank 4, got ", c.rank(x));
    int64_t regions = c.shape(rois).size() == 2 ? c.shape(rois)[0] : -1;
    if (regions < 0 || c.shape(rois)[1] != 4) c.error("rois must have shape [regions, 4]");
    if (c.shape(batch_indices) != Shape{regions}) c.error("batch_indices must have shape [", regions, "]");
    std::string mode = c.attr_s("mode", "avg");
    if (mode != "avg" && mode != "max") c.error("unknown mode '", mode, "'");
    std::string transform =
        c.attr_s("coordinate_transformation_mode", c.opset() < 16 ? "output_half_pixel" : "half_pixel");
    if (transform != "half_pixel" && transform != "output_half_pixel")
      c.error("unknown coordinate_transformation_mode '", transform, "'");
    bool half_pixel = transform == "half_pixel";
    int64_t out_h = c.attr_i("output_height", 1), out_w = c.attr_i("output_width", 1);
    int64_t grid = c.attr_i("sampling_ratio", 0);
    if (out_h <= 0 || out_w <= 0) c.error("output_height and output_width must be positive");
    if (grid <= 0) c.error("adaptive sampling (sampling_ratio=", grid, ") is not supported");
    double scale = c.attr_f("spatial_scale", 1.0);
    int64_t batch = xs[0], channels = xs[1], height = xs[2], width = xs[3];
    if (height <= 0 || width <= 0) c.error("the input has an empty spatial axis");

    // Region corners (x1, y1, x2, y2) scaled, as [regions, 1, 1].
    TensorId r32 = c.cast(rois, DType::F32);
    auto corner = [&](int64_t k) {
      TensorId v = c.binary(PrimOp::Mul, c.reshape(slice_axis(c, r32, 1, k, 1), {regions, 1, 1}), f32(c, scale));
      return half_pixel ? c.binary(PrimOp::Sub, v, f32(c, 0.5)) : v;
    };
    TensorId start_w = corner(0), start_h = corner(1);
    TensorId size_w = c.binary(PrimOp::Sub, corner(2), start_w), size_h = c.binary(PrimOp::Sub, corner(3), start_h);
    if (!half_pixel) {
      size_w = c.binary(PrimOp::Max, size_w, f32(c, 1));
      size_h = c.binary(PrimOp::Max, size_h, f32(c, 1));
    }
    TensorId bin_h = c.binary(PrimOp::Div, size_h, f32(c, static_cast<double>(out_h)));
    TensorId bin_w = c.binary(PrimOp::Div, size_w, f32(c, static_cast<double>(out_w)));
    SampleAxis ys = sample_axis(c, start_h, bin_h, out_h, grid, height);  // [regions, out_h, grid]
    SampleAxis xs_ = sample_axis(c, start_w, bin_w, out_w, grid, width);  // [regions, out_w, grid]
    // Broadcast to [regions, out_h, out_w, grid_y, grid_x].
    auto as_rows = [&](TensorId v) { return c.reshape(v, {regions, out_h, 1, grid, 1}); };
    auto as_cols = [&](TensorId v) { return c.reshape(v, {regions, 1, out_w, 1, grid}); };
    TensorId inside = c.binary(PrimOp::And, as_rows(ys.inside), as_cols(xs_.inside));

    Shape region_shape = {regions, 1, 1, 1, 1};
    // A batch index outside [0, batch) points past the pixel table, which Gather reports.
    TensorId b = c.reshape(c.cast(batch_indices, DType::I64), region_shape);
    TensorId valid = c.binary(PrimOp::And, c.binary(PrimOp::GreaterEqual, b, c.scalar(0, DType::I64)),
                              c.binary(PrimOp::Less, b, c.scalar(static_cast<double>(batch), DType::I64)));
    TensorId base =
        c.binary(PrimOp::Mul, c.emit(PrimOp::Where, {valid, b, c.scalar(static_cast<double>(batch), DType::I64)}),
                 c.scalar(static_cast<double>(height * width), DType::I64));
    TensorId table = c.reshape(c.emit(PrimOp::Transpose, {x}, Attrs().set("perm", std::vector<int64_t>{0, 2, 3, 1})),
                               {batch * height * width, channels});
    Shape samples = {regions, out_h, out_w, grid, grid, 1};
    TensorId zero_weight = f32(c, 0);
    TensorId combined = kNone;
    for (int corner_y = 0; corner_y < 2; ++corner_y) {
      for (int corner_x = 0; corner_x < 2; ++corner_x) {
        TensorId row = as_rows(corner_y ? ys.high : ys.low), col = as_cols(corner_x ? xs_.high : xs_.low);
        TensorId weight = c.binary(PrimOp::Mul, as_rows(corner_y ? ys.l : ys.h), as_cols(corner_x ? xs_.l : xs_.h));
        weight = c.emit(PrimOp::Where, {inside, weight, zero_weight});
        TensorId pixel =
            c.binary(PrimOp::Add, c.binary(PrimOp::Mul, row, c.scalar(static_cast<double>(width), DType::I64)), col);
        pixel = c.emit(PrimOp::Where, {inside, pixel, c.scalar(0, DType::I64)});
        TensorId value =
            c.emit(PrimOp::Gather, {table, c.binary(PrimOp::Add, base, pixel)}, Attrs().set("axis", int64_t{0}));
        TensorId term = c.binary(PrimOp::Mul, value, c.reshape(c.cast(weight, t), samples));
        if (combined == kNone)
          combined = term;
        else
          combined = c.binary(mode == "avg" ? PrimOp::Add : PrimOp::Max, combined, term);
      }
    }
    // [regions, out_h, out_w, grid, grid, channels] -> [regions, out_h, out_w, channels]
    TensorId pooled = mode == "avg" ? c.binary(PrimOp::Div, c.reduce(PrimOp::ReduceSum, combined, {3, 4}, false),
                                               c.scalar(static_cast<double>(grid * grid), t))
                                    : c.reduce(PrimOp::ReduceMax, combined, {3, 4}, false);
    c.set_output(0, c.emit(PrimOp::Transpose, {pooled}, Attrs().set("perm", std::vector<int64_t>{0, 3, 1, 2})));
  });
}

}  // namespace korch
