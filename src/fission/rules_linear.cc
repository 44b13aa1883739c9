// Fission rules for compute-intensive and window ONNX operators: MatMul (1-D operands
// become rank-2 by Reshape), Gemm (transposes, alpha, beta*C as elementwise epilogue),
// Conv / ConvTranspose (auto_pad resolved to explicit pads, bias as a broadcast Add), ConvInteger
// (Conv of the zero-point-shifted operands in int32), and
// MaxPool (with its Indices output) / AveragePool, and LpPool as a depthwise all-ones Conv of |x|^p (zero pads add
// nothing; ceil_mode pads the end further) raised to 1/p.
#include <algorithm>

#include "fission/fission.h"

namespace korch {

namespace {

struct SpatialAttrs {
  std::vector<int64_t> kernel, strides, pads, dilations;
};

// Kernel, strides, dilations and explicit pads of a conv/pool node (auto_pad resolved).
SpatialAttrs spatial_attrs(FissionContext& c, const Shape& x, const std::vector<int64_t>& kernel) {
  size_t nsp = x.size() - 2;
  SpatialAttrs a;
  a.kernel = kernel;
  if (a.kernel.size() != nsp)
    c.error("kernel_shape has ", a.kernel.size(), " entries, input has ", nsp, " spatial dims");
  a.strides = c.attr_ints("strides", std::vector<int64_t>(nsp, 1));
  a.dilations = c.attr_ints("dilations", std::vector<int64_t>(nsp, 1));
  a.pads = c.attr_ints("pads", std::vector<int64_t>(2 * nsp, 0));
  if (a.strides.size() != nsp || a.dilations.size() != nsp || a.pads.size() != 2 * nsp)
    c.error("strides/dilations/pads do not match ", nsp, " spatial dims");
  for (size_t i = 0; i < nsp; ++i)
    if (a.strides[i] <= 0 || a.dilations[i] <= 0 || a.kernel[i] <= 0)
      c.error("non-positive stride, dilation or kernel");
  std::string auto_pad = c.attr_s("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < nsp; ++i) {
      int64_t in = x[2 + i];
      int64_t out = (in + a.strides[i] - 1) / a.strides[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * a.strides[i] + (a.kernel[i] - 1) * a.dilations[i] + 1 - in);
      int64_t small = total / 2, large = total - small;
      a.pads[i] = auto_pad == "SAME_UPPER" ? small : large;
      a.pads[nsp + i] = auto_pad == "SAME_UPPER" ? large : small;
    }
  } else if (auto_pad == "VALID") {
    std::fill(a.pads.begin(), a.pads.end(), 0);
  } else if (auto_pad != "NOTSET") {
    c.error("unknown auto_pad '", auto_pad, "'");
  }
  return a;
}

TensorId add_channel_bias(FissionContext& c, TensorId y, TensorId bias) {
  Shape bshape(c.rank(y) - 1, 1);
  bshape[0] = c.shape(y)[1];
  if (num_elements(c.shape(bias)) != bshape[0])
    c.error("bias has ", num_elements(c.shape(bias)), " values for ", bshape[0], " channels");
  return c.binary(PrimOp::Add, y, c.reshape(bias, bshape));
}

// MaxPool's Indices output for the pooled shape `out`: each window's first largest element inside
// the input (window taps in row-major order, a strict > replacing the best so far), as its index
// into the flattened input (spatial axes row-major, or column-major with storage_order=1). The
// taps are strided Slices of the input; their positions and flat indices are constants.
TensorId max_pool_indices(FissionContext& c, TensorId x, const SpatialAttrs& a, Shape out) {
  const Shape xs = c.shape(x);
  int64_t rank = c.rank(x), nsp = rank - 2;
  bool column_major = c.attr_i("storage_order", 0) != 0;
  std::vector<int64_t> spatial_stride(nsp, 1);  // of each spatial axis in the flat index
  for (int64_t i = 0; i < nsp; ++i)
    for (int64_t j = 0; j < nsp; ++j)
      if (column_major ? j < i : j > i) spatial_stride[i] *= xs[2 + j];
  int64_t plane = num_elements(Shape(xs.begin() + 2, xs.end()));
  // The input padded so that every tap's strided slice fits (pad values are never taken).
  std::vector<int64_t> pads(2 * rank, 0);
  for (int64_t i = 0; i < nsp; ++i) {
    pads[2 + i] = a.pads[i];
    int64_t reach = (out[2 + i] - 1) * a.strides[i] + (a.kernel[i] - 1) * a.dilations[i] + 1;
    pads[rank + 2 + i] = std::max<int64_t>(reach - a.pads[i] - xs[2 + i], 0);
  }
  TensorId padded =
      c.emit(PrimOp::Pad, {x}, Attrs().set("pads", pads).set("mode", std::string("constant")).set("value", 0.0));
  Shape out_spatial(out.begin() + 2, out.end()), position_shape = {1, 1};
  position_shape.insert(position_shape.end(), out_spatial.begin(), out_spatial.end());
  int64_t positions = num_elements(out_spatial);
  std::vector<int64_t> base(xs[0] * xs[1]);  // where each (batch, channel) plane starts
  for (int64_t i = 0; i < xs[0] * xs[1]; ++i) base[i] = i * plane;
  Shape base_shape(rank, 1);
  base_shape[0] = xs[0];
  base_shape[1] = xs[1];
  TensorId channel_base = c.constant(TensorData::from_i64(DType::I64, base_shape, base));
  TensorId best = kNone, best_index = kNone, best_valid = kNone;
  std::vector<int64_t> tap(nsp, 0);
  while (true) {
    std::vector<int64_t> starts(rank, 0), steps(rank, 1), sizes = out;
    for (int64_t i = 0; i < nsp; ++i) {
      starts[2 + i] = tap[i] * a.dilations[i];
      steps[2 + i] = a.strides[i];
    }
    TensorId value =
        c.emit(PrimOp::Slice, {padded}, Attrs().set("starts", starts).set("steps", steps).set("sizes", sizes));
    TensorData inside(DType::Bool, position_shape), index(DType::I64, position_shape);
    for (int64_t p = 0; p < positions; ++p) {
      int64_t rest = p, flat = 0;
      bool in = true;
      for (int64_t i = nsp - 1; i >= 0; --i) {
        int64_t o = rest % out_spatial[i];
        rest /= out_spatial[i];
        int64_t coordinate = o * a.strides[i] + tap[i] * a.dilations[i] - a.pads[i];
        in = in && coordinate >= 0 && coordinate < xs[2 + i];
        flat += coordinate * spatial_stride[i];
      }
      inside.set_i64(p, in);
      index.set_i64(p, in ? flat : 0);
    }
    TensorId valid = c.constant(std::move(inside));
    TensorId flat_index = c.binary(PrimOp::Add, channel_base, c.constant(std::move(index)));
    if (best == kNone) {
      best = value;
      best_index = flat_index;
      best_valid = valid;
    } else {
      TensorId take =
          c.binary(PrimOp::And, valid,
                   c.binary(PrimOp::Or, c.unary(PrimOp::Not, best_valid), c.binary(PrimOp::Greater, value, best)));
      best = c.emit(PrimOp::Where, {take, value, best});
      best_index = c.emit(PrimOp::Where, {take, flat_index, best_index});
      best_valid = c.binary(PrimOp::Or, best_valid, valid);
    }
    int64_t i = nsp - 1;
    while (i >= 0 && ++tap[i] == a.kernel[i]) tap[i--] = 0;
    if (i < 0) break;
  }
  return best_index;
}

void pool_rule(const std::string& op_type, PrimOp op) {
  register_fission_rule(op_type, [op](FissionContext& c) {
    TensorId x = c.input(0);
    if (c.rank(x) < 3) c.error("expects a tensor of rank >= 3");
    bool indices = op == PrimOp::MaxPool && c.wants_output(1);
    if (op == PrimOp::MaxPool && !indices && c.attr_i("storage_order", 0) != 0)
      c.error("storage_order=1 is not supported");
    SpatialAttrs a = spatial_attrs(c, c.shape(x), c.attr_ints("kernel_shape"));
    Attrs attrs;
    attrs.set("kernel", a.kernel)
        .set("strides", a.strides)
        .set("pads", a.pads)
        .set("dilations", a.dilations)
        .set("ceil_mode", c.attr_i("ceil_mode", 0))
        .set("count_include_pad", c.attr_i("count_include_pad", 0));
    TensorId y = c.emit(op, {x}, attrs);
    c.set_output(0, y);
    if (indices) c.set_output(1, max_pool_indices(c, x, a, c.shape(y)));
  });
}

// The Conv primitive of a Conv-like node (kernel_shape, strides, pads / auto_pad, dilations, group).
TensorId conv(FissionContext& c, TensorId x, TensorId w) {
  if (c.rank(x) < 3 || c.rank(w) != c.rank(x)) c.error("input and weight must have the same rank >= 3");
  Shape ws = c.shape(w);
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape", Shape(ws.begin() + 2, ws.end()));
  SpatialAttrs a = spatial_attrs(c, c.shape(x), kernel);
  int64_t group = c.attr_i("group", 1);
  if (group <= 0) c.error("group must be positive");
  Attrs attrs;
  attrs.set("strides", a.strides).set("pads", a.pads).set("dilations", a.dilations).set("group", group);
  return c.emit(PrimOp::Conv, {x, w}, attrs);
}

}  // namespace

static void register_lppool_rule() {
  register_fission_rule("LpPool", [](FissionContext& c) {
    TensorId x = c.input(0);
    if (c.rank(x) < 3) c.error("expects a tensor of rank >= 3");
    const Shape xs = c.shape(x);
    SpatialAttrs a = spatial_attrs(c, xs, c.attr_ints("kernel_shape"));
    size_t nsp = xs.size() - 2;
    if (c.attr_i("ceil_mode", 0)) {
      for (size_t i = 0; i < nsp; ++i) {
        int64_t span = (a.kernel[i] - 1) * a.dilations[i] + 1;
        int64_t padded = xs[2 + i] + a.pads[i] + a.pads[nsp + i];
        int64_t out = (padded - span + a.strides[i] - 1) / a.strides[i] + 1;
        if ((out - 1) * a.strides[i] >= xs[2 + i] + a.pads[i]) --out;
        a.pads[nsp + i] += std::max<int64_t>(0, (out - 1) * a.strides[i] + span - padded);
      }
    }
    DType t = c.dtype(x);
    double p = static_cast<double>(c.attr_i("p", 2));
    int64_t ch = xs[1];
    Shape ws = {ch, 1};
    ws.insert(ws.end(), a.kernel.begin(), a.kernel.end());
    TensorData ones(t, ws);
    for (int64_t i = 0; i < ones.size(); ++i) ones.set_f64(i, 1.0);
    TensorId xp = p == 1.0   ? c.unary(PrimOp::Abs, x)
                  : p == 2.0 ? c.binary(PrimOp::Mul, x, x)
                             : c.binary(PrimOp::Pow, c.unary(PrimOp::Abs, x), c.scalar(p, t));
    Attrs attrs;
    attrs.set("strides", a.strides).set("pads", a.pads).set("dilations", a.dilations).set("group", ch);
    TensorId sum = c.emit(PrimOp::Conv, {xp, c.constant(std::move(ones))}, attrs);
    TensorId y = p == 1.0   ? sum
                 : p == 2.0 ? c.unary(PrimOp::Sqrt, sum)
                            : c.binary(PrimOp::Pow, sum, c.scalar(1.0 / p, t));
    c.set_output(0, y);
  });
}

void register_linear_rules() {
  register_lppool_rule();
  register_fission_rule("MatMul", [](FissionContext& c) {
    TensorId a = c.input(0), b = c.input(1);
    Shape sa = c.shape(a), sb = c.shape(b);
    bool a_vec = sa.size() == 1, b_vec = sb.size() == 1;
    if (a_vec) a = c.reshape(a, {1, sa[0]});
    if (b_vec) b = c.reshape(b, {sb[0], 1});
    TensorId y = c.binary(PrimOp::MatMul, a, b);
    if (a_vec || b_vec) {
      Shape out = c.shape(y);
      if (b_vec) out.pop_back();
      if (a_vec) out.erase(out.end() - (b_vec ? 1 : 2));
      y = c.reshape(y, out);
    }
    c.set_output(0, y);
  });
  register_fission_rule("Gemm", [](FissionContext& c) {
    TensorId a = c.input(0), b = c.input(1);
    if (c.rank(a) != 2 || c.rank(b) != 2) c.error("A and B must be 2-D");
    if (c.attr_i("transA", 0)) a = c.emit(PrimOp::Transpose, {a}, Attrs().set("perm", std::vector<int64_t>{1, 0}));
    if (c.attr_i("transB", 0)) b = c.emit(PrimOp::Transpose, {b}, Attrs().set("perm", std::vector<int64_t>{1, 0}));
    TensorId y = c.binary(PrimOp::MatMul, a, b);
    DType t = c.dtype(y);
    double alpha = c.attr_f("alpha", 1.0), beta = c.attr_f("beta", 1.0);
    if (alpha != 1.0) y = c.binary(PrimOp::Mul, y, c.scalar(alpha, t));
    if (c.has_input(2) && beta != 0.0) {
      TensorId cc = c.input(2);
      if (beta != 1.0) cc = c.binary(PrimOp::Mul, cc, c.scalar(beta, t));
      y = c.binary(PrimOp::Add, y, cc);
    }
    c.set_output(0, y);
  });
  register_fission_rule("Conv", [](FissionContext& c) {
    TensorId y = conv(c, c.input(0), c.input(1));
    if (c.has_input(2)) y = add_channel_bias(c, y, c.input(2));
    c.set_output(0, y);
  });
  // (x - x_zero_point) conv (w - w_zero_point) in int32, exact in the reference's double sums;
  // the padding is zero after the shift (the zero point before it).
  register_fission_rule("ConvInteger", [](FissionContext& c) {
    auto shifted = [&](int value, int zero_point) {
      TensorId v = c.cast(c.input(value), DType::I32);
      if (!c.has_input(zero_point)) return v;
      TensorId zp = c.input(zero_point);
      Shape zs = {};
      if (num_elements(c.shape(zp)) != 1) {  // w's zero point per output channel
        if (value != 1 || c.rank(zp) != 1 || c.shape(zp)[0] != c.shape(v)[0])
          c.error("a zero point must be a scalar (or, for w, one per output channel)");
        zs = Shape(c.rank(v), 1);
        zs[0] = c.shape(zp)[0];
      }
      return c.binary(PrimOp::Sub, v, c.cast(c.reshape(zp, zs), DType::I32));
    };
    c.set_output(0, conv(c, shifted(0, 2), shifted(1, 3)));
  });
  register_fission_rule("ConvTranspose", [](FissionContext& c) {
    TensorId x = c.input(0), w = c.input(1);
    if (c.rank(x) < 3 || c.rank(w) != c.rank(x)) c.error("input and weight must have the same rank >= 3");
    Shape xs = c.shape(x), ws = c.shape(w);
    size_t nsp = xs.size() - 2;
    std::vector<int64_t> kernel = c.attr_ints("kernel_shape", Shape(ws.begin() + 2, ws.end()));
    std::vector<int64_t> strides = c.attr_ints("strides", std::vector<int64_t>(nsp, 1));
    std::vector<int64_t> dil = c.attr_ints("dilations", std::vector<int64_t>(nsp, 1));
    std::vector<int64_t> out_pad = c.attr_ints("output_padding", std::vector<int64_t>(nsp, 0));
    std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * nsp, 0));
    std::vector<int64_t> out_shape = c.attr_ints("output_shape");
    std::string auto_pad = c.attr_s("auto_pad", "NOTSET");
    if (kernel.size() != nsp || strides.size() != nsp || dil.size() != nsp || out_pad.size() != nsp ||
        pads.size() != 2 * nsp)
      c.error("attribute lengths do not match ", nsp, " spatial dims");
    if (out_shape.size() == nsp + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
    if (out_shape.empty() && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER"))
      for (size_t i = 0; i < nsp; ++i) out_shape.push_back(xs[2 + i] * strides[i]);
    std::vector<int64_t> out_spatial(nsp);
    for (size_t i = 0; i < nsp; ++i) {
      int64_t full = strides[i] * (xs[2 + i] - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1;
      if (!out_shape.empty()) {
        if (out_shape.size() != nsp) c.error("output_shape has the wrong length");
        // A negative total (output_shape beyond the full result) extends the end with zeros,
        // as ONNX Runtime and PyTorch do (output_padding semantics).
        int64_t total = full - out_shape[i];
        int64_t half = total / 2;
        if (total < 0) {
          pads[i] = 0;
          pads[nsp + i] = total;
        } else if (auto_pad == "SAME_UPPER") {
          pads[i] = half;
          pads[nsp + i] = total - half;
        } else {
          pads[i] = total - half;
          pads[nsp + i] = half;
        }
        out_spatial[i] = out_shape[i];
      } else {
        if (auto_pad == "VALID") pads[i] = pads[nsp + i] = 0;
        out_spatial[i] = full - pads[i] - pads[nsp + i];
      }
      if (out_spatial[i] <= 0) c.error("output size is not positive");
    }
    int64_t group = c.attr_i("group", 1);
    if (group <= 0 || xs[1] % group) c.error("channels not divisible by group");
    TensorId y = c.emit(PrimOp::ConvTranspose, {x, w}, conv_transpose_attrs(strides, pads, dil, group, out_spatial));
    if (c.has_input(2)) y = add_channel_bias(c, y, c.input(2));
    c.set_output(0, y);
  });
  pool_rule("MaxPool", PrimOp::MaxPool);
  pool_rule("AveragePool", PrimOp::AvgPool);
}

}  // namespace korch
