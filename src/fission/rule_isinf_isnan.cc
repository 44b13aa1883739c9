// Fission rules for IsNaN (x != x) and IsInf (x == +inf and/or x == -inf, as detect_positive /
// detect_negative ask).
#include <limits>

#include "fission/fission.h"

namespace korch {

void register_isinf_isnan_rules() {
  register_fission_rule("IsNaN", [](FissionContext& c) {
    TensorId x = c.input(0);
    c.set_output(0, c.unary(PrimOp::Not, c.binary(PrimOp::Equal, x, x)));
  });
  register_fission_rule("IsInf", [](FissionContext& c) {
    TensorId x = c.input(0);
    DType t = c.dtype(x);
    double inf = std::numeric_limits<double>::infinity();
    bool pos = c.attr_i("detect_positive", 1) != 0, neg = c.attr_i("detect_negative", 1) != 0;
    TensorId p = c.binary(PrimOp::Equal, x, c.scalar(inf, t));
    TensorId n = c.binary(PrimOp::Equal, x, c.scalar(-inf, t));
    if (pos && neg)
      c.set_output(0, c.binary(PrimOp::Or, p, n));
    else if (pos)
      c.set_output(0, p);
    else if (neg)
      c.set_output(0, n);
    else
      c.set_output(0, c.binary(PrimOp::Less, x, x));  // all false
  });
}

}  // namespace korch
