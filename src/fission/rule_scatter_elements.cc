// Fission rule for ScatterElements (and the older Scatter) with indices known only at run time:
// a one-hot mask M[..., k, p, ...] = (indices[..., k, ...] == p) along the axis picks, for each
// output position p, the updates written there (summed, multiplied, or maxed/minned as the
// reduction says; 'none' assumes no duplicate indices, as ONNX leaves those undefined); the
// written positions, padded to the data's shape, select between that and the data. ScatterND
// with a reduction or run-time indices works the same way over the flattened indexed axes.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

namespace {

// The updates' combination per written position, and the data where nothing is written.
TensorId combine(FissionContext& c, const std::string& reduction, TensorId data, TensorId mask, TensorId u,
                 int64_t axis, TensorId* written) {
  DType t = c.dtype(data);
  TensorId picked;
  if (reduction == "none" || reduction == "add")
    picked = c.reduce(PrimOp::ReduceSum, c.emit(PrimOp::Where, {mask, u, c.scalar(0, t)}), {axis}, false);
  else if (reduction == "mul")
    picked = c.reduce(PrimOp::ReduceProd, c.emit(PrimOp::Where, {mask, u, c.scalar(1, t)}), {axis}, false);
  else if (reduction == "max")
    picked = c.reduce(PrimOp::ReduceMax, c.emit(PrimOp::Where, {mask, u, c.scalar(lowest_of(t), t)}), {axis}, false);
  else if (reduction == "min")
    picked = c.reduce(PrimOp::ReduceMin, c.emit(PrimOp::Where, {mask, u, c.scalar(highest_of(t), t)}), {axis}, false);
  else
    c.error("unknown reduction '", reduction, "'");
  *written = c.reduce(PrimOp::ReduceMax, c.cast(mask, DType::I32), {axis}, false);
  return picked;
}

TensorId apply(FissionContext& c, const std::string& reduction, TensorId data, TensorId picked, TensorId written) {
  TensorId value = picked;
  if (reduction == "add") value = c.binary(PrimOp::Add, data, picked);
  if (reduction == "mul") value = c.binary(PrimOp::Mul, data, picked);
  if (reduction == "max") value = c.binary(PrimOp::Max, data, picked);
  if (reduction == "min") value = c.binary(PrimOp::Min, data, picked);
  TensorId is_written = c.binary(PrimOp::Greater, written, c.scalar(0, DType::I32));
  return c.emit(PrimOp::Where, {is_written, value, data});
}

void scatter_elements(FissionContext& c, const std::string& reduction) {
  TensorId data = c.input(0), indices = c.input(1), updates = c.input(2);
  const Shape ds = c.shape(data), is = c.shape(indices);
  int64_t r = c.rank(data);
  if (r == 0 || c.rank(indices) != r || c.shape(updates) != is)
    c.error("data, indices and updates must have the same rank >= 1, indices and updates the same shape");
  int64_t axis = normalize_axis(c.attr_i("axis", 0), r);
  for (int64_t d = 0; d < r; ++d)
    if (is[d] > ds[d]) c.error("indices shape ", shape_str(is), " exceeds data shape ", shape_str(ds));
  DType t = c.dtype(data);
  if (t == DType::Bool) c.error("bool data is not supported");
  int64_t m = ds[axis];
  TensorId idx = wrap_negative(c, indices, c.scalar(static_cast<double>(m), DType::I64));
  TensorId mask = c.binary(PrimOp::Equal, insert_axis(c, idx, axis + 1), iota_along(c, m, r + 1, axis + 1));
  TensorId u = insert_axis(c, updates, axis + 1);
  TensorId written;
  TensorId picked = combine(c, reduction, data, mask, u, axis, &written);
  // Indices may cover less than the data on the other axes: pad to the data's shape.
  int64_t padded_any = 0;
  std::vector<int64_t> pads(2 * r, 0);
  for (int64_t d = 0; d < r; ++d)
    if (d != axis) padded_any += pads[r + d] = ds[d] - is[d];
  if (padded_any) {
    Attrs a = Attrs().set("pads", pads).set("mode", std::string("constant")).set("value", 0.0);
    picked = c.emit(PrimOp::Pad, {picked}, a);
    written = c.emit(PrimOp::Pad, {written}, a);
  }
  c.set_output(0, apply(c, reduction, data, picked, written));
}

}  // namespace

void scatter_nd_by_mask(FissionContext& c, const std::string& reduction) {
  TensorId data = c.input(0), indices = c.input(1), updates = c.input(2);
  const Shape ds = c.shape(data), is = c.shape(indices);
  if (is.empty()) c.error("indices must have rank >= 1");
  int64_t r = c.rank(data), q = static_cast<int64_t>(is.size()), k = is.back();
  if (k < 1 || k > r) c.error("index depth ", k, " does not fit data rank ", r);
  if (c.dtype(data) == DType::Bool) c.error("bool data is not supported");
  std::vector<int64_t> dims(ds.begin(), ds.begin() + k), strides(k, 1);
  for (int64_t d = k - 2; d >= 0; --d) strides[d] = strides[d + 1] * dims[d + 1];
  int64_t positions = 1, slice = 1, n = 1;
  for (int64_t d : dims) positions *= d;
  for (int64_t d = k; d < r; ++d) slice *= ds[d];
  for (int64_t d = 0; d + 1 < q; ++d) n *= is[d];
  if (num_elements(c.shape(updates)) != n * slice) c.error("updates has the wrong number of elements");
  Shape tail(q, 1);
  tail[q - 1] = k;
  TensorId idx = wrap_negative(c, indices, c.constant(TensorData::from_i64(DType::I64, tail, dims)));
  TensorId linear =
      c.reduce(PrimOp::ReduceSum,
               c.binary(PrimOp::Mul, idx, c.constant(TensorData::from_i64(DType::I64, tail, strides))), {q - 1}, false);
  TensorId mask = c.binary(PrimOp::Equal, c.reshape(linear, {n, 1, 1}), iota_along(c, positions, 3, 1));
  TensorId written;
  TensorId picked = combine(c, reduction, data, mask, c.reshape(updates, {n, 1, slice}), 0, &written);
  Shape wshape(ds.begin(), ds.begin() + k);
  wshape.resize(r, 1);
  c.set_output(0, apply(c, reduction, data, c.reshape(picked, ds), c.reshape(written, wshape)));
}

void register_scatter_elements_rules() {
  register_fission_rule("ScatterElements",
                        [](FissionContext& c) { scatter_elements(c, c.attr_s("reduction", "none")); });
  register_fission_rule("Scatter", [](FissionContext& c) { scatter_elements(c, "none"); });
}

}  // namespace korch
