// Fission rule for GatherElements: out[i] = data[i with the axis coordinate replaced by
// indices[i]], as one Gather from the flattened data at offsets indices * stride(axis) + (the
// constant offset of i's other coordinates). Constant inputs fold at import.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

void register_gather_elements_rule() {
  register_fission_rule("GatherElements", [](FissionContext& c) {
    TensorId data = c.input(0), indices = c.input(1);
    const Shape ds = c.shape(data), is = c.shape(indices);
    int64_t r = c.rank(data);
    if (r == 0 || c.rank(indices) != r) c.error("data and indices must have the same rank >= 1");
    int64_t axis = normalize_axis(c.attr_i("axis", 0), r);
    for (int64_t d = 0; d < r; ++d)
      if (d != axis && is[d] > ds[d]) c.error("indices shape ", shape_str(is), " exceeds data shape ", shape_str(ds));
    std::vector<int64_t> dst = strides_of(ds), ist = strides_of(is);
    int64_t n = num_elements(is);
    std::vector<int64_t> offset(n, 0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t d = 0, rem = i; d < r; ++d) {
        int64_t coord = rem / ist[d];
        rem %= ist[d];
        if (d != axis) offset[i] += coord * dst[d];
      }
    TensorId idx = wrap_negative(c, indices, c.scalar(static_cast<double>(ds[axis]), DType::I64));
    TensorId linear =
        c.binary(PrimOp::Add, c.binary(PrimOp::Mul, idx, c.scalar(static_cast<double>(dst[axis]), DType::I64)),
                 c.constant(TensorData::from_i64(DType::I64, is, offset)));
    c.set_output(
        0, c.emit(PrimOp::Gather, {c.reshape(data, {num_elements(ds)}), linear}, Attrs().set("axis", int64_t{0})));
  });
}

}  // namespace korch
