// Fission rule for OneHot: Where(indices (negatives wrapped by depth from opset 11; an inserted
// axis) == iota(depth), on, off), with depth a constant and values [off, on].
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

void register_onehot_rule() {
  register_fission_rule("OneHot", [](FissionContext& c) {
    TensorId indices = c.input(0);
    std::vector<double> d = c.constant_floats(1);
    if (d.size() != 1) c.error("depth must hold one value");
    int64_t depth = static_cast<int64_t>(d[0]);
    if (depth <= 0) c.error("depth must be positive");
    TensorId values = c.input(2);
    if (num_elements(c.shape(values)) != 2) c.error("values must hold [off_value, on_value]");
    int64_t out_rank = c.rank(indices) + 1;
    int64_t axis = normalize_axis(c.attr_i("axis", -1), out_rank);
    TensorId idx = c.cast(indices, DType::I64);  // floating indices truncate, as the reference does
    if (c.opset() >= 11) idx = wrap_negative(c, idx, c.scalar(static_cast<double>(depth), DType::I64));
    TensorId hot = c.binary(PrimOp::Equal, insert_axis(c, idx, axis), iota_along(c, depth, out_rank, axis));
    TensorId flat = c.reshape(values, {2});
    TensorId off = c.reshape(slice_axis(c, flat, 0, 0, 1), {}), on = c.reshape(slice_axis(c, flat, 0, 1, 1), {});
    c.set_output(0, c.emit(PrimOp::Where, {hot, on, off}));
  });
}

}  // namespace korch
