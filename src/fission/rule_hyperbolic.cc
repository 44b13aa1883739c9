// Fission rules for the trigonometric and hyperbolic functions korch has no primitive for, in
// exp/log/sqrt/sin/cos: Tan, Sinh, Cosh, Asinh, Acosh, Atanh.
#include "fission/fission.h"

namespace korch {

namespace {

void rule(const std::string& op_type, TensorId (*body)(FissionContext&, TensorId)) {
  register_fission_rule(op_type, [body](FissionContext& c) { c.set_output(0, body(c, c.input(0))); });
}

TensorId s(FissionContext& c, TensorId like, double v) { return c.scalar(v, c.dtype(like)); }

}  // namespace

void register_hyperbolic_rules() {
  rule("Tan", [](FissionContext& c, TensorId x) {
    return c.binary(PrimOp::Div, c.unary(PrimOp::Sin, x), c.unary(PrimOp::Cos, x));
  });
  rule("Sinh", [](FissionContext& c, TensorId x) {
    TensorId d = c.binary(PrimOp::Sub, c.unary(PrimOp::Exp, x), c.unary(PrimOp::Exp, c.unary(PrimOp::Neg, x)));
    return c.binary(PrimOp::Mul, d, s(c, x, 0.5));
  });
  rule("Cosh", [](FissionContext& c, TensorId x) {
    TensorId d = c.binary(PrimOp::Add, c.unary(PrimOp::Exp, x), c.unary(PrimOp::Exp, c.unary(PrimOp::Neg, x)));
    return c.binary(PrimOp::Mul, d, s(c, x, 0.5));
  });
  rule("Asinh", [](FissionContext& c, TensorId x) {  // sign(x) log(|x| + sqrt(x^2 + 1))
    TensorId a = c.unary(PrimOp::Abs, x);
    TensorId r = c.unary(PrimOp::Sqrt, c.binary(PrimOp::Add, c.binary(PrimOp::Mul, x, x), s(c, x, 1)));
    return c.binary(PrimOp::Mul, c.unary(PrimOp::Sign, x), c.unary(PrimOp::Log, c.binary(PrimOp::Add, a, r)));
  });
  rule("Acosh", [](FissionContext& c, TensorId x) {  // log(x + sqrt(x^2 - 1))
    TensorId r = c.unary(PrimOp::Sqrt, c.binary(PrimOp::Sub, c.binary(PrimOp::Mul, x, x), s(c, x, 1)));
    return c.unary(PrimOp::Log, c.binary(PrimOp::Add, x, r));
  });
  rule("Atanh", [](FissionContext& c, TensorId x) {  // 0.5 log((1 + x) / (1 - x))
    TensorId q = c.binary(PrimOp::Div, c.binary(PrimOp::Add, s(c, x, 1), x), c.binary(PrimOp::Sub, s(c, x, 1), x));
    return c.binary(PrimOp::Mul, c.unary(PrimOp::Log, q), s(c, x, 0.5));
  });
}

}  // namespace korch
