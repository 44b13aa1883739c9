// Reference reductions (sum/mean/max/min/prod over sorted axes, double accumulation) and
// arg-reductions (first or last extreme index along one axis).
#include <algorithm>
#include <cmath>
#include <limits>

#include "reference/reference.h"
#include "util/error.h"

namespace korch::reference {

namespace {

TensorData arg_reduce(const Primitive& prim, const TensorData& x, const Shape& out_shape) {
  int64_t axis = prim.attrs.i("axis");
  bool last = prim.attrs.i_or("select_last_index", 0) != 0;
  bool is_max = prim.op == PrimOp::ArgMax;
  const Shape& s = x.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= s[i];
  for (size_t i = axis + 1; i < s.size(); ++i) inner *= s[i];
  int64_t len = s[axis];
  if (len == 0) fail("ArgMax/ArgMin over an empty axis");
  TensorData out(DType::I64, out_shape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      int64_t best = 0;
      double best_v = x.get_f64(o * len * inner + in);
      for (int64_t k = 1; k < len; ++k) {
        double v = x.get_f64((o * len + k) * inner + in);
        bool better = is_max ? (last ? v >= best_v : v > best_v) : (last ? v <= best_v : v < best_v);
        if (better) {
          best = k;
          best_v = v;
        }
      }
      out.data<int64_t>()[o * inner + in] = best;
    }
  return out;
}

}  // namespace

TensorData eval_reduce(const Primitive& prim, const TensorData& x, DType out_dtype, const Shape& out_shape) {
  if (prim.op == PrimOp::ArgMax || prim.op == PrimOp::ArgMin) return arg_reduce(prim, x, out_shape);
  const auto& axes = prim.attrs.ints("axes");
  const Shape& s = x.shape();
  size_t rank = s.size();
  // Output strides indexed by input axis (0 for reduced axes).
  Shape kept(rank);
  for (size_t i = 0; i < rank; ++i) kept[i] = std::count(axes.begin(), axes.end(), i) ? 1 : s[i];
  std::vector<int64_t> kept_strides = strides_of(kept);
  for (size_t i = 0; i < rank; ++i)
    if (kept[i] == 1) kept_strides[i] = 0;
  int64_t n_out = num_elements(out_shape);
  double init = 0;
  switch (prim.op) {
    case PrimOp::ReduceMax: init = -std::numeric_limits<double>::infinity(); break;
    case PrimOp::ReduceMin: init = std::numeric_limits<double>::infinity(); break;
    case PrimOp::ReduceProd: init = 1; break;
    default: break;
  }
  std::vector<double> acc(n_out, init);
  std::vector<char> nan(n_out, 0);
  std::vector<int64_t> idx(rank, 0);
  int64_t off = 0;
  int64_t n = x.size();
  for (int64_t i = 0; i < n; ++i) {
    double v = x.get_f64(i);
    double& a = acc[off];
    switch (prim.op) {
      case PrimOp::ReduceSum:
      case PrimOp::ReduceMean: a += v; break;
      case PrimOp::ReduceMax:
        if (std::isnan(v)) nan[off] = 1;
        a = std::max(a, v);
        break;
      case PrimOp::ReduceMin:
        if (std::isnan(v)) nan[off] = 1;
        a = std::min(a, v);
        break;
      case PrimOp::ReduceProd: a *= v; break;
      default: fail("reference: bad reduce op");
    }
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      if (++idx[d] < s[d]) {
        off += kept_strides[d];
        break;
      }
      off -= kept_strides[d] * (s[d] - 1);
      idx[d] = 0;
    }
  }
  if (prim.op == PrimOp::ReduceMean) {
    double count = static_cast<double>(n) / static_cast<double>(std::max<int64_t>(n_out, 1));
    for (double& a : acc) a /= count;
  }
  for (int64_t i = 0; i < n_out; ++i)
    if (nan[i]) acc[i] = NAN;
  return TensorData::from_f64(out_dtype, out_shape, acc);
}

}  // namespace korch::reference
