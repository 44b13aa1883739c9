// Fission rule for DeformConv (2-D), as ONNX's reference computes it: every kernel tap of every
// output position samples its offset group's input channels bilinearly (zeros outside) at the
// tap's position plus its offset, the way GridSample does with align_corners (sample_grid, on
// coordinates normalised by the input size - 1), times the mask where given; the sampled columns
// [n, positions, channels x taps] of each group then go through one MatMul with that group's
// weights, and the bias is added. Inputs of height or width 1 are refused (the normalisation
// divides by size - 1).
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

void register_deform_conv_rule() {
  register_fission_rule("DeformConv", [](FissionContext& c) {
    TensorId x = c.input(0), w = c.input(1), offset = c.input(2);
    require_floating(c, x);
    DType t = c.dtype(x);
    const Shape xs = c.shape(x), ws = c.shape(w), os = c.shape(offset);
    if (c.rank(x) != 4 || c.rank(w) != 4 || c.rank(offset) != 4)
      c.error("only 2-D inputs are supported (input, weights and offsets of rank 4)");
    int64_t n = xs[0], channels = xs[1], height = xs[2], width = xs[3], out_channels = ws[0];
    std::vector<int64_t> kernel = c.attr_ints("kernel_shape", {ws[2], ws[3]});
    std::vector<int64_t> strides = c.attr_ints("strides", {1, 1}), dilations = c.attr_ints("dilations", {1, 1});
    std::vector<int64_t> pads = c.attr_ints("pads", {0, 0, 0, 0});
    int64_t group = c.attr_i("group", 1), offset_group = c.attr_i("offset_group", 1);
    if (kernel.size() != 2 || strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
      c.error("kernel_shape/strides/dilations/pads do not match 2 spatial dims");
    if (kernel[0] != ws[2] || kernel[1] != ws[3]) c.error("kernel_shape differs from the weights' shape");
    if (group <= 0 || offset_group <= 0 || channels != ws[1] * group || out_channels % group != 0 ||
        channels % offset_group != 0)
      c.error("channels ", channels, ", weights ", shape_str(ws), ", group ", group, " and offset_group ", offset_group,
              " do not fit");
    if (height < 2 || width < 2) c.error("inputs of height or width 1 are not supported");
    int64_t taps = kernel[0] * kernel[1], out_h = os[2], out_w = os[3];
    if (os[0] != n || os[1] != offset_group * taps * 2) c.error("offset shape ", shape_str(os), " does not fit");
    for (int axis = 0; axis < 2; ++axis) {
      int64_t span = (kernel[axis] - 1) * dilations[axis] + 1;
      if (strides[axis] <= 0 || dilations[axis] <= 0 ||
          os[2 + axis] != (xs[2 + axis] - span + pads[axis] + pads[2 + axis]) / strides[axis] + 1)
        c.error("pads, strides, dilations and kernel do not give the offsets' output size");
    }
    TensorId mask = c.has_input(4) ? c.input(4) : kNone;
    if (mask != kNone && c.shape(mask) != Shape{n, offset_group * taps, out_h, out_w})
      c.error("mask shape ", shape_str(c.shape(mask)), " does not fit");

    // Sample positions in float64: rows -pad + stride * i + dilation * kh (+ offset).
    auto positions = [&](int axis, int64_t tap, int64_t count) {
      std::vector<double> v(count);
      for (int64_t i = 0; i < count; ++i)
        v[i] = static_cast<double>(-pads[axis] + strides[axis] * i + dilations[axis] * tap);
      Shape s = axis == 0 ? Shape{count, 1} : Shape{1, count};
      return c.constant(TensorData::from_f64(DType::F64, s, v));
    };
    TensorId offset64 = c.cast(offset, DType::F64);
    GridSampleSpec bilinear{"linear", "zeros", true};
    int64_t group_channels = channels / offset_group;
    std::vector<TensorId> sampled_groups;  // each [n, out_h, out_w, group_channels, taps]
    for (int64_t og = 0; og < offset_group; ++og) {
      TensorId xg = offset_group == 1 ? x : slice_axis(c, x, 1, og * group_channels, group_channels);
      std::vector<TensorId> sampled_taps;
      for (int64_t kh = 0; kh < kernel[0]; ++kh) {
        for (int64_t kw = 0; kw < kernel[1]; ++kw) {
          int64_t tap = og * taps + kh * kernel[1] + kw;
          std::vector<TensorId> normalized;
          for (int axis = 0; axis < 2; ++axis) {
            TensorId shift = c.reshape(slice_axis(c, offset64, 1, 2 * tap + axis, 1), {n, out_h, out_w});
            TensorId p = c.binary(PrimOp::Add, positions(axis, axis == 0 ? kh : kw, axis == 0 ? out_h : out_w), shift);
            double extent = static_cast<double>(xs[2 + axis] - 1);
            normalized.push_back(c.binary(
                PrimOp::Sub,
                c.binary(PrimOp::Mul, c.binary(PrimOp::Div, p, c.scalar(extent, DType::F64)), c.scalar(2, DType::F64)),
                c.scalar(1, DType::F64)));
          }
          TensorId s = sample_grid(c, xg, normalized, bilinear);  // [n, out_h, out_w, group_channels]
          if (mask != kNone)
            s = c.binary(PrimOp::Mul, s, c.reshape(c.cast(slice_axis(c, mask, 1, tap, 1), t), {n, out_h, out_w, 1}));
          sampled_taps.push_back(c.reshape(s, {n, out_h, out_w, group_channels, 1}));
        }
      }
      sampled_groups.push_back(taps == 1 ? sampled_taps[0]
                                         : c.emit(PrimOp::Concat, sampled_taps, Attrs().set("axis", int64_t{4})));
    }
    TensorId columns =
        offset_group == 1 ? sampled_groups[0] : c.emit(PrimOp::Concat, sampled_groups, Attrs().set("axis", int64_t{3}));
    int64_t in_per_group = channels / group, out_per_group = out_channels / group;
    std::vector<TensorId> outputs;
    for (int64_t g = 0; g < group; ++g) {
      TensorId cols = group == 1 ? columns : slice_axis(c, columns, 3, g * in_per_group, in_per_group);
      cols = c.reshape(cols, {n, out_h * out_w, in_per_group * taps});
      TensorId wg = group == 1 ? w : slice_axis(c, w, 0, g * out_per_group, out_per_group);
      wg = c.emit(PrimOp::Transpose, {c.reshape(wg, {out_per_group, in_per_group * taps})},
                  Attrs().set("perm", std::vector<int64_t>{1, 0}));
      outputs.push_back(c.binary(PrimOp::MatMul, cols, wg));  // [n, positions, out_per_group]
    }
    TensorId y = group == 1 ? outputs[0] : c.emit(PrimOp::Concat, outputs, Attrs().set("axis", int64_t{2}));
    y = c.reshape(c.emit(PrimOp::Transpose, {y}, Attrs().set("perm", std::vector<int64_t>{0, 2, 1})),
                  {n, out_channels, out_h, out_w});
    if (c.has_input(3)) y = c.binary(PrimOp::Add, y, c.reshape(c.input(3), {out_channels, 1, 1}));
    c.set_output(0, y);
  });
}

}  // namespace korch
