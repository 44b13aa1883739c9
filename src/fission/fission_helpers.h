// Small emission helpers shared by the single-operator rules (rule_*.cc): index constants,
// one-axis Slice/Pad/flip, and one-hot masks, all as existing primitives.
#pragma once
#include <limits>
#include <string>
#include <vector>

#include "fission/fission.h"

namespace korch {

// The constant 0, 1, ..., n-1 (int64) shaped [1, ..., n, ..., 1] with n at `axis` of `rank`.
inline TensorId iota_along(FissionContext& c, int64_t n, int64_t rank, int64_t axis) {
  Shape s(rank, 1);
  s[axis] = n;
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return c.constant(TensorData::from_i64(DType::I64, s, v));
}

// x[start : start + size : step] along `axis` (start is the first element taken).
inline TensorId slice_axis(FissionContext& c, TensorId x, int64_t axis, int64_t start, int64_t size, int64_t step = 1) {
  int64_t rank = c.rank(x);
  std::vector<int64_t> starts(rank, 0), steps(rank, 1), sizes = c.shape(x);
  starts[axis] = start;
  steps[axis] = step;
  sizes[axis] = size;
  return c.emit(PrimOp::Slice, {x}, Attrs().set("starts", starts).set("steps", steps).set("sizes", sizes));
}

// x with `before` / `after` constant `value` elements added along `axis`.
inline TensorId pad_axis(FissionContext& c, TensorId x, int64_t axis, int64_t before, int64_t after,
                         double value = 0.0) {
  int64_t rank = c.rank(x);
  std::vector<int64_t> pads(2 * rank, 0);
  pads[axis] = before;
  pads[rank + axis] = after;
  return c.emit(PrimOp::Pad, {x}, Attrs().set("pads", pads).set("mode", std::string("constant")).set("value", value));
}

// x reversed along `axis`.
inline TensorId flip_axis(FissionContext& c, TensorId x, int64_t axis) {
  int64_t n = c.shape(x)[axis];
  if (n <= 1) return x;
  return slice_axis(c, x, axis, n - 1, n, -1);
}

// x with a new axis of size 1 inserted at `axis` (0 <= axis <= rank).
inline TensorId insert_axis(FissionContext& c, TensorId x, int64_t axis) {
  Shape s = c.shape(x);
  s.insert(s.begin() + axis, 1);
  return c.reshape(x, s);
}

// int64 indices with negatives wrapped by `dim` (x < 0 ? x + dim : x).
inline TensorId wrap_negative(FissionContext& c, TensorId idx, TensorId dim) {
  idx = c.cast(idx, DType::I64);
  TensorId neg = c.binary(PrimOp::Less, idx, c.scalar(0, DType::I64));
  return c.emit(PrimOp::Where, {neg, c.binary(PrimOp::Add, idx, dim), idx});
}

inline bool is_float8(DType t) {
  return t == DType::F8E4M3FN || t == DType::F8E4M3FNUZ || t == DType::F8E5M2 || t == DType::F8E5M2FNUZ;
}

// ONNX Cast / CastLike of x to `to`: a Copy when the types agree; float8 targets carry the node's
// saturate attribute (default 1: out-of-range values clamp to the largest finite value).
inline TensorId onnx_cast(FissionContext& c, TensorId x, DType to) {
  if (c.dtype(x) == to) return c.unary(PrimOp::Copy, x);
  Attrs attrs = Attrs().set("to", static_cast<int64_t>(to));
  if (is_float8(to)) attrs.set("saturate", c.attr_i("saturate", 1) != 0 ? int64_t{1} : int64_t{0});
  return c.emit(PrimOp::Cast, {x}, attrs);
}

// bfloat16 keeps 8 significant bits. Where ONNX's reference rounds intermediate results in an
// order korch's primitives do not reproduce (exp-based activations, softmax, attention), outputs
// differ by a unit in the last place, beyond the node suite's tolerance: these rules refuse it.
inline void refuse_bfloat16(FissionContext& c, TensorId x) {
  if (c.dtype(x) == DType::BF16)
    c.error("bfloat16 is not supported (the reference's intermediate roundings are not reproduced)");
}

// Refuses an operand whose element type is not floating (rules computing in float only).
inline void require_floating(FissionContext& c, TensorId x) {
  if (!is_floating(c.dtype(x))) c.error("element type ", dtype_name(c.dtype(x)), " is not supported (floating only)");
}

// The most negative / positive value of a dtype, as a double (infinities for floats).
inline double lowest_of(DType t) {
  return is_floating(t) ? -std::numeric_limits<double>::infinity() : static_cast<double>(integer_min(t));
}
inline double highest_of(DType t) {
  if (is_floating(t)) return std::numeric_limits<double>::infinity();
  if (t == DType::I64) return 9.2233720368547748e18;  // the largest double below 2^63
  if (t == DType::U64) return 1.8446744073709550e19;  // the largest double below 2^64
  return static_cast<double>(integer_max(t));
}

// How sample_grid interpolates and pads (GridSample's attributes).
struct GridSampleSpec {
  std::string mode;     // "linear", "nearest" or "cubic"
  std::string padding;  // "zeros", "border" or "reflection"
  bool align_corners;
};

// x [n, channels, spatial...] sampled as GridSample does at normalised coordinates in [-1, 1]
// (one tensor per spatial axis, outermost first, each [n, points...]): [n, points..., channels]
// (rule_grid_sample.cc).
TensorId sample_grid(FissionContext& c, TensorId x, const std::vector<TensorId>& normalized,
                     const GridSampleSpec& spec);

// ScatterND (input 0 data, 1 indices, 2 updates) with any reduction and run-time indices, by
// one-hot masks over the flattened indexed axes (rule_scatter_elements.cc).
void scatter_nd_by_mask(FissionContext& c, const std::string& reduction);

}  // namespace korch
