// Fission rule for Shrink: x < -lambd ? x + bias : (x > lambd ? x - bias : 0).
#include "fission/fission.h"

namespace korch {

void register_shrink_rule() {
  register_fission_rule("Shrink", [](FissionContext& c) {
    TensorId x = c.input(0);
    DType t = c.dtype(x);
    double lambd = c.attr_f("lambd", 0.5), bias = c.attr_f("bias", 0.0);
    TensorId below = c.binary(PrimOp::Less, x, c.scalar(-lambd, t));
    TensorId above = c.binary(PrimOp::Greater, x, c.scalar(lambd, t));
    TensorId hi = c.emit(PrimOp::Where, {above, c.binary(PrimOp::Sub, x, c.scalar(bias, t)), c.scalar(0, t)});
    c.set_output(0, c.emit(PrimOp::Where, {below, c.binary(PrimOp::Add, x, c.scalar(bias, t)), hi}));
  });
}

}  // namespace korch
