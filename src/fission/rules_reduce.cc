// Fission rules for reductions and reduction-based ops: Reduce*, ArgMax/ArgMin, global
// pooling, and the numerically stable Softmax / LogSoftmax (max is subtracted first).
#include <numeric>

#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

namespace {

// Axes of a Reduce* node (attribute before opset 13/18, optional input after); empty means
// all axes unless noop_with_empty_axes is set (then *noop is set).
std::vector<int64_t> reduce_axes(FissionContext& c, TensorId x, bool* noop) {
  std::vector<int64_t> axes;
  if (c.has_input(1))
    axes = c.constant_ints(1);
  else
    axes = c.attr_ints("axes");
  *noop = false;
  if (axes.empty()) {
    if (c.attr_i("noop_with_empty_axes", 0)) *noop = true;
    axes.resize(c.rank(x));
    std::iota(axes.begin(), axes.end(), 0);
  }
  return axes;
}

// A max (or, `minimum`, a min) over `axes` of which one is empty: the constant the reduction
// starts from (-inf / +inf for floats, the type's extremes for integers, false / true for bool),
// as ONNX's reference defines it; kNone when no reduced axis is empty.
TensorId empty_extremum(FissionContext& c, TensorId x, const std::vector<int64_t>& axes, bool keep, bool minimum) {
  const Shape& xs = c.shape(x);
  std::vector<bool> reduced(xs.size(), false);
  bool empty = false;
  for (int64_t a : axes) {
    int64_t axis = normalize_axis(a, c.rank(x));
    reduced[axis] = true;
    empty = empty || xs[axis] == 0;
  }
  if (!empty) return kNone;
  Shape out;
  for (size_t i = 0; i < xs.size(); ++i)
    if (!reduced[i] || keep) out.push_back(reduced[i] ? 1 : xs[i]);
  DType t = c.dtype(x);
  TensorData value(t, out);
  for (int64_t i = 0; i < value.size(); ++i) {
    if (is_floating(t))
      value.set_f64(i, minimum ? highest_of(t) : lowest_of(t));
    else if (minimum)
      value.set_i64(i, static_cast<int64_t>(integer_max(t)));  // uint64's maximum wraps to its bits
    else
      value.set_i64(i, integer_min(t));
  }
  return c.constant(std::move(value));
}

// kind: 0 plain, 1 L1, 2 L2, 3 sum of squares, 4 log-sum, 5 log-sum-exp
void reduce_rule(const std::string& op_type, PrimOp op, int kind) {
  register_fission_rule(op_type, [op, kind](FissionContext& c) {
    TensorId x = c.input(0);
    bool noop;
    std::vector<int64_t> axes = reduce_axes(c, x, &noop);
    bool keep = c.attr_i("keepdims", 1) != 0;
    TensorId v = x;
    if (kind == 1) v = c.unary(PrimOp::Abs, x);
    if (kind == 2 || kind == 3) v = c.binary(PrimOp::Mul, x, x);
    if (noop) {
      // Only the reduction is skipped; the elementwise parts (|x|, x^2, sqrt, log) still apply.
      TensorId r = v == x ? c.unary(PrimOp::Copy, x) : v;
      if (kind == 2) r = c.unary(PrimOp::Sqrt, r);
      if (kind == 4) r = c.unary(PrimOp::Log, r);
      if (kind == 5) r = c.unary(PrimOp::Copy, x);  // log(exp(x)) == x
      c.set_output(0, r);
      return;
    }
    if (op == PrimOp::ReduceMax || op == PrimOp::ReduceMin || kind == 5)
      if (TensorId empty = empty_extremum(c, x, axes, keep, op == PrimOp::ReduceMin); empty != kNone) {
        c.set_output(0, empty);
        return;
      }
    if (kind == 5) {
      TensorId m = c.reduce(PrimOp::ReduceMax, x, axes, true);
      TensorId e = c.unary(PrimOp::Exp, c.binary(PrimOp::Sub, x, m));
      TensorId s = c.unary(PrimOp::Log, c.reduce(PrimOp::ReduceSum, e, axes, true));
      TensorId r = c.binary(PrimOp::Add, s, m);
      if (!keep) {
        Shape out;
        std::vector<int64_t> norm;
        for (int64_t a : axes) norm.push_back(normalize_axis(a, c.rank(x)));
        for (int64_t i = 0; i < c.rank(x); ++i)
          if (std::find(norm.begin(), norm.end(), i) == norm.end()) out.push_back(c.shape(x)[i]);
        r = c.reshape(r, out);
      }
      c.set_output(0, r);
      return;
    }
    TensorId r = c.reduce(op, v, axes, keep);
    if (kind == 2) r = c.unary(PrimOp::Sqrt, r);
    if (kind == 4) r = c.unary(PrimOp::Log, r);
    c.set_output(0, r);
  });
}

void arg_rule(const std::string& op_type, PrimOp op) {
  register_fission_rule(op_type, [op](FissionContext& c) {
    TensorId x = c.input(0);
    int64_t axis = normalize_axis(c.attr_i("axis", 0), c.rank(x));
    c.set_output(0, c.emit(op, {x},
                           Attrs()
                               .set("axis", axis)
                               .set("keepdims", c.attr_i("keepdims", 1))
                               .set("select_last_index", c.attr_i("select_last_index", 0))));
  });
}

void global_pool_rule(const std::string& op_type, PrimOp op) {
  register_fission_rule(op_type, [op](FissionContext& c) {
    TensorId x = c.input(0);
    if (c.rank(x) < 3) c.error("expects a tensor of rank >= 3, got ", shape_str(c.shape(x)));
    std::vector<int64_t> axes;
    for (int64_t i = 2; i < c.rank(x); ++i) axes.push_back(i);
    c.set_output(0, c.reduce(op, x, axes, true));
  });
}

// Softmax / LogSoftmax over `axis` (opset >= 13), or over the flattened trailing block
// [axis, rank) (opset < 13 semantics).
void softmax_rule(const std::string& op_type, bool log) {
  register_fission_rule(op_type, [log](FissionContext& c) {
    TensorId x = c.input(0);
    refuse_bfloat16(c, x);
    int64_t rank = c.rank(x);
    bool legacy = c.opset() < 13;
    int64_t axis = normalize_axis(c.attr_i("axis", legacy ? 1 : -1), rank);
    Shape original = c.shape(x);
    std::vector<int64_t> axes;
    if (legacy) {
      for (int64_t i = axis; i < rank; ++i) axes.push_back(i);
    } else {
      axes = {axis};
    }
    TensorId m = c.reduce(PrimOp::ReduceMax, x, axes, true);
    TensorId shifted = c.binary(PrimOp::Sub, x, m);
    TensorId e = c.unary(PrimOp::Exp, shifted);
    TensorId s = c.reduce(PrimOp::ReduceSum, e, axes, true);
    TensorId y = log ? c.binary(PrimOp::Sub, shifted, c.unary(PrimOp::Log, s)) : c.binary(PrimOp::Div, e, s);
    c.set_output(0, y);
  });
}

}  // namespace

void register_reduce_rules() {
  reduce_rule("ReduceSum", PrimOp::ReduceSum, 0);
  reduce_rule("ReduceMean", PrimOp::ReduceMean, 0);
  reduce_rule("ReduceMax", PrimOp::ReduceMax, 0);
  reduce_rule("ReduceMin", PrimOp::ReduceMin, 0);
  reduce_rule("ReduceProd", PrimOp::ReduceProd, 0);
  reduce_rule("ReduceL1", PrimOp::ReduceSum, 1);
  reduce_rule("ReduceL2", PrimOp::ReduceSum, 2);
  reduce_rule("ReduceSumSquare", PrimOp::ReduceSum, 3);
  reduce_rule("ReduceLogSum", PrimOp::ReduceSum, 4);
  reduce_rule("ReduceLogSumExp", PrimOp::ReduceSum, 5);
  arg_rule("ArgMax", PrimOp::ArgMax);
  arg_rule("ArgMin", PrimOp::ArgMin);
  global_pool_rule("GlobalAveragePool", PrimOp::ReduceMean);
  global_pool_rule("GlobalMaxPool", PrimOp::ReduceMax);
  softmax_rule("Softmax", false);
  softmax_rule("LogSoftmax", true);
}

}  // namespace korch
