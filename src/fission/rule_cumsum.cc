// Fission rules for CumSum and CumProd: a log-step prefix scan (y = y op (y shifted by 1, 2, 4,
// ... along the axis), each shift a Pad with the identity + Slice), exact for integers;
// `exclusive` shifts by one first, `reverse` flips the axis before and after.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

namespace {

TensorId shift(FissionContext& c, TensorId y, int64_t axis, int64_t by, double identity) {
  int64_t n = c.shape(y)[axis];
  return slice_axis(c, pad_axis(c, y, axis, by, 0, identity), axis, 0, n);
}

void scan_rule(const std::string& op_type, PrimOp op, double identity) {
  register_fission_rule(op_type, [op, identity](FissionContext& c) {
    TensorId x = c.input(0);
    if (c.rank(x) == 0) c.error("input must have rank >= 1");
    std::vector<int64_t> a = c.constant_ints(1);
    if (a.size() != 1) c.error("axis must be a single value");
    int64_t axis = normalize_axis(a[0], c.rank(x));
    int64_t n = c.shape(x)[axis];
    bool reverse = c.attr_i("reverse", 0) != 0;
    TensorId y = reverse ? flip_axis(c, x, axis) : x;
    if (c.attr_i("exclusive", 0) && n > 0) y = shift(c, y, axis, 1, identity);
    for (int64_t s = 1; s < n; s *= 2) y = c.binary(op, y, shift(c, y, axis, s, identity));
    if (reverse) y = flip_axis(c, y, axis);
    c.set_output(0, y == x ? c.unary(PrimOp::Copy, x) : y);
  });
}

}  // namespace

void register_cumsum_rules() {
  scan_rule("CumSum", PrimOp::Add, 0.0);
  scan_rule("CumProd", PrimOp::Mul, 1.0);
}

}  // namespace korch
