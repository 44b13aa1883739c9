// Fission rules for the quantisation operators in float arithmetic with exact integer rounding
// (Round is round-half-to-even, as ONNX's rint): QuantizeLinear (saturate(rint(x / scale) +
// zero_point) to 2- to 16-bit integers and int32; to float8 / float4 x / scale + zero_point
// cast with saturation), DequantizeLinear ((x - zero_point) * scale), per tensor, per axis or
// blocked; DynamicQuantizeLinear; QLinearMatMul and MatMulInteger (integer products summed
// exactly in the float/int32 MatMul, then rescaled).
#include <algorithm>

#include "fission/fission.h"
#include "fission/fission_helpers.h"
#include "fission/onnx_tensor.h"

namespace korch {

namespace {

// A scale / zero point made broadcastable against x: scalar, per axis (1-D), or blocked (same
// rank as x, `block` elements of x's axis per entry).
TensorId spread(FissionContext& c, TensorId p, const Shape& xs, int64_t axis, int64_t block) {
  int64_t r = static_cast<int64_t>(xs.size());
  if (num_elements(c.shape(p)) == 1 && block == 0) return c.reshape(p, {});
  axis = normalize_axis(axis, r);  // only per-axis and blocked parameters need the axis
  if (block > 0) {
    if (c.rank(p) != r) c.error("a blocked scale must have the input's rank");
    Shape s = c.shape(p), with = s;
    with.insert(with.begin() + axis + 1, 1);
    Shape wide = with;
    wide[axis + 1] = block;
    TensorId b = c.emit(PrimOp::Broadcast, {c.reshape(p, with)}, Attrs().set("shape", wide));
    s[axis] *= block;
    b = c.reshape(b, s);
    return s[axis] == xs[axis] ? b : slice_axis(c, b, axis, 0, xs[axis]);
  }
  if (c.rank(p) != 1 || c.shape(p)[0] != xs[axis]) c.error("a per-axis scale must be 1-D with one entry per index");
  Shape s(r, 1);
  s[axis] = xs[axis];
  return c.reshape(p, s);
}

// The integer types QuantizeLinear produces by rounding and saturating.
bool is_quantized_integer(DType t) {
  switch (t) {
    case DType::U8:
    case DType::I8:
    case DType::U16:
    case DType::I16:
    case DType::I32:
    case DType::U4:
    case DType::I4:
    case DType::U2:
    case DType::I2: return true;
    default: return false;
  }
}

// saturate(rint(v) + zp) in type `to` (v float).
TensorId requantize(FissionContext& c, TensorId v, TensorId zp, DType to) {
  DType f = c.dtype(v);
  TensorId q = c.unary(PrimOp::Round, v);
  if (zp != kNone) q = c.binary(PrimOp::Add, q, c.cast(zp, f));
  q = c.binary(PrimOp::Max, c.binary(PrimOp::Min, q, c.scalar(highest_of(to), f)), c.scalar(lowest_of(to), f));
  return c.cast(q, to);
}

TensorId minus_zero_point(FissionContext& c, TensorId x, TensorId zp, DType f) {
  TensorId v = c.cast(x, f);
  return zp == kNone ? v : c.binary(PrimOp::Sub, v, c.cast(zp, f));
}

}  // namespace

void register_quantize_rules() {
  register_fission_rule("QuantizeLinear", [](FissionContext& c) {
    TensorId x = c.input(0);
    const Shape xs = c.shape(x);
    int64_t axis = c.attr_i("axis", 1);
    int64_t block = c.attr_i("block_size", 0);
    if (c.has_attr("precision") && c.attr_i("precision", 0) != 0) c.error("the precision attribute is not supported");
    TensorId zp = c.has_input(2) ? c.input(2) : kNone;
    if (zp != kNone && c.attr_i("output_dtype", 0) &&
        dtype_from_onnx(static_cast<int>(c.attr_i("output_dtype", 0)), "output_dtype") != c.dtype(zp))
      c.error("output_dtype differs from the zero point's type ", dtype_name(c.dtype(zp)));
    DType to = zp != kNone ? c.dtype(zp)
               : c.attr_i("output_dtype", 0)
                   ? dtype_from_onnx(static_cast<int>(c.attr_i("output_dtype", 0)), "output_dtype")
                   : DType::U8;
    if (!is_quantized_integer(to) && !is_float8(to) && to != DType::F4E2M1)
      c.error("output type ", dtype_name(to), " is not supported");
    TensorId scale = spread(c, c.input(1), xs, axis, block);
    DType f = c.dtype(scale);
    TensorId v = c.binary(PrimOp::Div, c.cast(x, f), scale);
    if (is_quantized_integer(to)) {
      c.set_output(0, requantize(c, v, zp == kNone ? kNone : spread(c, zp, xs, axis, block), to));
      return;
    }
    // Float outputs: x / scale + zero_point cast (round to nearest even; float8 saturates
    // unless saturate=0, float4 always does).
    if (zp != kNone) v = c.binary(PrimOp::Add, v, c.cast(spread(c, zp, xs, axis, block), f));
    c.set_output(0, onnx_cast(c, v, to));
  });
  register_fission_rule("DequantizeLinear", [](FissionContext& c) {
    TensorId x = c.input(0);
    const Shape xs = c.shape(x);
    int64_t axis = c.attr_i("axis", 1);
    int64_t block = c.attr_i("block_size", 0);
    TensorId scale = spread(c, c.input(1), xs, axis, block);
    DType f = c.dtype(scale);
    TensorId zp = c.has_input(2) ? spread(c, c.input(2), xs, axis, block) : kNone;
    TensorId y = c.binary(PrimOp::Mul, minus_zero_point(c, x, zp, f), scale);
    if (c.attr_i("output_dtype", 0))
      y = c.cast(y, dtype_from_onnx(static_cast<int>(c.attr_i("output_dtype", 0)), "output_dtype"));
    c.set_output(0, y);
  });
  register_fission_rule("DynamicQuantizeLinear", [](FissionContext& c) {
    TensorId x = c.input(0);
    DType f = c.dtype(x);
    std::vector<int64_t> all;
    for (int64_t i = 0; i < c.rank(x); ++i) all.push_back(i);
    TensorId mx = c.binary(PrimOp::Max, c.reduce(PrimOp::ReduceMax, x, all, false), c.scalar(0, f));
    TensorId mn = c.binary(PrimOp::Min, c.reduce(PrimOp::ReduceMin, x, all, false), c.scalar(0, f));
    TensorId range = c.binary(PrimOp::Sub, mx, mn);
    range = c.emit(PrimOp::Where, {c.binary(PrimOp::Equal, mx, mn), c.scalar(1, f), range});
    TensorId scale = c.binary(PrimOp::Div, range, c.scalar(255, f));
    TensorId zp0 = c.binary(PrimOp::Sub, c.scalar(0, f), c.binary(PrimOp::Div, mn, scale));
    zp0 = c.binary(PrimOp::Max, c.binary(PrimOp::Min, zp0, c.scalar(255, f)), c.scalar(0, f));
    TensorId zp = c.unary(PrimOp::Round, zp0);
    c.set_output(0, requantize(c, c.binary(PrimOp::Div, x, scale), zp, DType::U8));
    if (c.wants_output(1)) c.set_output(1, scale);
    if (c.wants_output(2)) c.set_output(2, c.cast(zp, DType::U8));
  });
  // (a - a_zp) @ (b - b_zp) summed exactly (integers below 2^24 in float32), then rescaled.
  register_fission_rule("QLinearMatMul", [](FissionContext& c) {
    TensorId a = c.input(0), b = c.input(3);
    if (c.rank(a) < 2 || c.rank(b) < 2) c.error("a and b must have rank >= 2");
    DType f = c.dtype(c.input(1));
    TensorId acc = c.binary(PrimOp::MatMul, minus_zero_point(c, a, c.has_input(2) ? c.input(2) : kNone, f),
                            minus_zero_point(c, b, c.has_input(5) ? c.input(5) : kNone, f));
    auto scalar_of = [&](int i) {
      if (num_elements(c.shape(c.input(i))) != 1) c.error("only per-tensor scales are supported");
      return c.reshape(c.input(i), {});
    };
    TensorId factor = c.binary(PrimOp::Div, c.binary(PrimOp::Mul, scalar_of(1), scalar_of(4)), scalar_of(6));
    TensorId zp = c.has_input(7) ? c.reshape(c.input(7), {}) : kNone;
    DType to = zp != kNone ? c.dtype(zp) : c.dtype(a);
    c.set_output(0, requantize(c, c.binary(PrimOp::Mul, acc, factor), zp, to));
  });
  register_fission_rule("MatMulInteger", [](FissionContext& c) {
    TensorId a = c.input(0), b = c.input(1);
    if (c.rank(a) < 2 || c.rank(b) < 2) c.error("a and b must have rank >= 2");
    TensorId za = c.has_input(2) ? c.input(2) : kNone, zb = c.has_input(3) ? c.input(3) : kNone;
    // A per-row a_zero_point [M] / per-column b_zero_point [N] broadcast as [M, 1] / [1, N].
    if (za != kNone && c.rank(za) == 1 && c.shape(za)[0] > 1) za = c.reshape(za, {c.shape(za)[0], 1});
    TensorId y =
        c.binary(PrimOp::MatMul, minus_zero_point(c, a, za, DType::I32), minus_zero_point(c, b, zb, DType::I32));
    c.set_output(0, y);
  });
}

}  // namespace korch
