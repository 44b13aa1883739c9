// Fission rule for LpNormalization: x / ||x||_p along the axis (p = 1: sum |x|; p = 2:
// sqrt(sum x^2)); a zero norm gives zeros, as ONNX's reference does.
#include "fission/fission.h"

namespace korch {

void register_lpnorm_rule() {
  register_fission_rule("LpNormalization", [](FissionContext& c) {
    TensorId x = c.input(0);
    int64_t axis = normalize_axis(c.attr_i("axis", -1), c.rank(x));
    int64_t p = c.attr_i("p", 2);
    TensorId norm;
    if (p == 1)
      norm = c.reduce(PrimOp::ReduceSum, c.unary(PrimOp::Abs, x), {axis}, true);
    else if (p == 2)
      norm = c.unary(PrimOp::Sqrt, c.reduce(PrimOp::ReduceSum, c.binary(PrimOp::Mul, x, x), {axis}, true));
    else
      c.error("p must be 1 or 2");
    DType t = c.dtype(x);
    TensorId zero = c.binary(PrimOp::Equal, norm, c.scalar(0, t));
    c.set_output(0, c.binary(PrimOp::Div, x, c.emit(PrimOp::Where, {zero, c.scalar(1, t), norm})));
  });
}

}  // namespace korch
