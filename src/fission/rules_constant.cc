// Fission rules for operators that only ever produce constants in static-shape models
// (Constant, Shape, Size, ConstantOfShape, Range, and ScatterND on constant inputs). They
// compute their value at import; a non-constant input is a clear error, except ScatterND with constant indices on
// runtime data: when the indices enumerate a box of the data in row-major order (YOLOX's `x[..., :2] = y`), it becomes
// Slices of the data concatenated around the updates (layout primitives that fuse with their neighbours); any other
// index set becomes Gather + Where over static index maps.
#include <algorithm>
#include <cmath>
#include <optional>

#include "fission/fission.h"
#include "fission/fission_helpers.h"
#include "fission/onnx_tensor.h"
#include "onnx/onnx_pb.h"

namespace korch {

namespace {

TensorData ints_tensor(const std::vector<int64_t>& v) {
  return TensorData::from_i64(DType::I64, {static_cast<int64_t>(v.size())}, v);
}

// The box [lo, lo + len) over the first k data axes when the n index tuples (already checked in
// range, negatives normalised) enumerate it exactly, in row-major order; nullopt otherwise.
struct IndexBox {
  std::vector<int64_t> lo, len;
};
std::optional<IndexBox> indices_as_box(const std::vector<int64_t>& tuples, int64_t n, int64_t k) {
  if (n == 0 || k == 0) return std::nullopt;
  IndexBox box{std::vector<int64_t>(tuples.begin(), tuples.begin() + k), std::vector<int64_t>(k, 1)};
  for (int64_t j = 0; j < n; ++j)
    for (int64_t d = 0; d < k; ++d) {
      box.lo[d] = std::min(box.lo[d], tuples[j * k + d]);
      box.len[d] = std::max(box.len[d], tuples[j * k + d] + 1);
    }
  int64_t count = 1;
  for (int64_t d = 0; d < k; ++d) count *= (box.len[d] -= box.lo[d]);
  if (count != n) return std::nullopt;
  std::vector<int64_t> at(k, 0);  // row-major position of tuple j inside the box
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t d = 0; d < k; ++d)
      if (tuples[j * k + d] != box.lo[d] + at[d]) return std::nullopt;
    for (int64_t d = k - 1; d >= 0 && ++at[d] == box.len[d]; --d) at[d] = 0;
  }
  return box;
}

// out = data with the box overwritten by updates: one Concat per axis the box does not cover
// fully, innermost first; the data pieces around the box are Slices of it.
TensorId scatter_box(FissionContext& c, TensorId data, TensorId updates, const Shape& ds, const IndexBox& box) {
  int64_t k = static_cast<int64_t>(box.lo.size()), rank = static_cast<int64_t>(ds.size());
  Shape box_shape = ds;
  for (int64_t d = 0; d < k; ++d) box_shape[d] = box.len[d];
  TensorId piece = c.reshape(updates, box_shape);
  auto data_slice = [&](int64_t axis, int64_t start, int64_t size) {
    std::vector<int64_t> starts(rank, 0), sizes = ds, steps(rank, 1);
    for (int64_t d = 0; d < axis; ++d) {  // axes outside this one stay inside the box
      starts[d] = box.lo[d];
      sizes[d] = box.len[d];
    }
    starts[axis] = start;
    sizes[axis] = size;
    return c.emit(PrimOp::Slice, {data}, Attrs().set("starts", starts).set("steps", steps).set("sizes", sizes));
  };
  for (int64_t axis = k - 1; axis >= 0; --axis) {
    if (box.len[axis] == ds[axis]) continue;
    std::vector<TensorId> parts;
    if (box.lo[axis] > 0) parts.push_back(data_slice(axis, 0, box.lo[axis]));
    parts.push_back(piece);
    int64_t end = box.lo[axis] + box.len[axis];
    if (end < ds[axis]) parts.push_back(data_slice(axis, end, ds[axis] - end));
    piece = c.emit(PrimOp::Concat, parts, Attrs().set("axis", axis));
  }
  return piece;
}

}  // namespace

void register_constant_rules() {
  register_fission_rule("Constant", [](FissionContext& c) {
    if (const auto* a = c.attr("value")) {
      c.set_output(0, c.constant(tensor_from_proto(a->t(), "", "Constant value")));
    } else if (c.has_attr("value_float")) {
      c.set_output(0, c.scalar(c.attr_f("value_float", 0), DType::F32));
    } else if (c.has_attr("value_int")) {
      c.set_output(0, c.scalar(static_cast<double>(c.attr_i("value_int", 0)), DType::I64));
    } else if (c.has_attr("value_floats")) {
      auto v = c.attr_floats("value_floats");
      c.set_output(0, c.constant(TensorData::from_f64(DType::F32, {static_cast<int64_t>(v.size())}, v)));
    } else if (c.has_attr("value_ints")) {
      c.set_output(0, c.constant(ints_tensor(c.attr_ints("value_ints"))));
    } else {
      c.error("only value, value_float(s) and value_int(s) constants are supported");
    }
  });
  register_fission_rule("Shape", [](FissionContext& c) {
    const Shape& s = c.shape(c.input(0));
    int64_t rank = static_cast<int64_t>(s.size());
    int64_t start = c.attr_i("start", 0), end = c.attr_i("end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, start, rank);
    c.set_output(0, c.constant(ints_tensor(Shape(s.begin() + start, s.begin() + end))));
  });
  register_fission_rule("Size", [](FissionContext& c) {
    c.set_output(0, c.scalar(static_cast<double>(num_elements(c.shape(c.input(0)))), DType::I64));
  });
  register_fission_rule("ConstantOfShape", [](FissionContext& c) {
    Shape shape = c.constant_ints(0);
    for (int64_t d : shape)
      if (d < 0) c.error("negative dimension in shape");
    TensorData value = TensorData::scalar_f32(0.0f);
    if (const auto* a = c.attr("value")) value = tensor_from_proto(a->t(), "", "ConstantOfShape value");
    if (value.size() != 1) c.error("value must hold exactly one element");
    TensorData out(value.dtype(), shape);
    for (int64_t i = 0; i < out.size(); ++i) out.set_f64(i, value.get_f64(0));
    if (!is_floating(value.dtype()))
      for (int64_t i = 0; i < out.size(); ++i) out.set_i64(i, value.get_i64(0));
    c.set_output(0, c.constant(std::move(out)));
  });
  register_fission_rule("Range", [](FissionContext& c) {
    const TensorData& start = c.constant_input(0);
    DType t = start.dtype();
    double s = start.get_f64(0), limit = c.constant_input(1).get_f64(0), delta = c.constant_input(2).get_f64(0);
    if (delta == 0) c.error("delta cannot be 0");
    double count = std::ceil((limit - s) / delta);
    int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
    if (n > (int64_t{1} << 31)) c.error("range is too long");
    TensorData out(t, {n});
    for (int64_t i = 0; i < n; ++i) {
      if (is_floating(t))
        out.set_f64(i, s + static_cast<double>(i) * delta);
      else
        out.set_i64(i, start.get_i64(0) + i * c.constant_input(2).get_i64(0));
    }
    c.set_output(0, c.constant(std::move(out)));
  });
  register_fission_rule("ScatterND", [](FissionContext& c) {
    std::string reduction = c.attr_s("reduction", "none");
    if (reduction != "none" || !c.is_constant(c.input(1))) {
      scatter_nd_by_mask(c, reduction);
      return;
    }
    if (!c.is_constant(c.input(0)) || !c.is_constant(c.input(2))) {
      // Runtime data/updates with constant indices (YOLOX's box decode).
      const TensorData& indices = c.constant_input(1);
      TensorId data = c.input(0), updates = c.input(2);
      Shape ds = c.shape(data);
      const Shape& is = indices.shape();
      if (is.empty()) c.error("indices must have rank >= 1");
      int64_t k = is.back();
      if (k > static_cast<int64_t>(ds.size())) c.error("index depth exceeds data rank");
      int64_t slice = 1;
      for (size_t i = k; i < ds.size(); ++i) slice *= ds[i];
      int64_t n = num_elements(is) / std::max<int64_t>(k, 1);
      if (num_elements(c.shape(updates)) != n * slice) c.error("updates has the wrong number of elements");
      std::vector<int64_t> tuples(n * k);
      for (int64_t j = 0; j < n * k; ++j) {
        int64_t idx = indices.get_i64(j), dim = ds[j % k];
        if (idx < 0) idx += dim;
        if (idx < 0 || idx >= dim) c.error("index ", indices.get_i64(j), " out of range");
        tuples[j] = idx;
      }
      if (auto box = indices_as_box(tuples, n, k)) {
        c.set_output(0, scatter_box(c, data, updates, ds, *box));
        return;
      }
      // Otherwise out = Where(written, Gather(flat updates, source index of each element), data).
      std::vector<int64_t> st = strides_of(ds);
      int64_t total = num_elements(ds);
      TensorData source(DType::I64, {total}), written(DType::Bool, {total});
      for (int64_t j = 0; j < n; ++j) {
        int64_t off = 0;
        for (int64_t d = 0; d < k; ++d) off += tuples[j * k + d] * st[d];
        for (int64_t e = 0; e < slice; ++e) {
          source.set_i64(off + e, j * slice + e);
          written.set_i64(off + e, 1);
        }
      }
      TensorId flat = c.reshape(updates, {n * slice});
      TensorId gathered =
          c.emit(PrimOp::Gather, {flat, c.constant(std::move(source))}, Attrs().set("axis", int64_t{0}));
      TensorId mask = c.reshape(c.constant(std::move(written)), ds);
      c.set_output(0, c.emit(PrimOp::Where, {mask, c.reshape(gathered, ds), data}));
      return;
    }
    const TensorData& data = c.constant_input(0);
    const TensorData& indices = c.constant_input(1);
    const TensorData& updates = c.constant_input(2);
    const Shape& ds = data.shape();
    const Shape& is = indices.shape();
    if (is.empty()) c.error("indices must have rank >= 1");
    int64_t k = is.back();
    if (k > static_cast<int64_t>(ds.size())) c.error("index depth exceeds data rank");
    int64_t slice = 1;
    for (size_t i = k; i < ds.size(); ++i) slice *= ds[i];
    std::vector<int64_t> st = strides_of(ds);
    int64_t n = num_elements(is) / std::max<int64_t>(k, 1);
    if (updates.size() != n * slice) c.error("updates has the wrong number of elements");
    TensorData out = data;
    for (int64_t j = 0; j < n; ++j) {
      int64_t off = 0;
      for (int64_t d = 0; d < k; ++d) {
        int64_t idx = indices.get_i64(j * k + d);
        if (idx < 0) idx += ds[d];
        if (idx < 0 || idx >= ds[d]) c.error("index out of range");
        off += idx * st[d];
      }
      for (int64_t e = 0; e < slice; ++e) out.set_f64(off + e, updates.get_f64(j * slice + e));
      if (!is_floating(out.dtype()))
        for (int64_t e = 0; e < slice; ++e) out.set_i64(off + e, updates.get_i64(j * slice + e));
    }
    c.set_output(0, c.constant(std::move(out)));
  });
}

}  // namespace korch
