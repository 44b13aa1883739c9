// Fission rule for SwiGLU (opset 28): Y = A * sigmoid(alpha * A) * B, with A and B of one shape
// and type (no broadcasting); the sigmoid rounds to the inputs' type before the products, as
// ONNX's reference does.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

void register_swiglu_rule() {
  register_fission_rule("SwiGLU", [](FissionContext& c) {
    TensorId a = c.input(0), b = c.input(1);
    DType t = c.dtype(a);
    require_floating(c, a);
    if (c.shape(a) != c.shape(b) || c.dtype(b) != t)
      c.error("A and B must have one shape and type, got ", shape_str(c.shape(a)), " and ", shape_str(c.shape(b)));
    TensorId gate = c.unary(PrimOp::Sigmoid, c.binary(PrimOp::Mul, a, c.scalar(c.attr_f("alpha", 1.0), t)));
    c.set_output(0, c.binary(PrimOp::Mul, c.binary(PrimOp::Mul, a, gate), b));
  });
}

}  // namespace korch
