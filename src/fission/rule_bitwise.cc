// Fission rules for the integer bit operators: BitwiseAnd / BitwiseOr / BitwiseXor / BitwiseNot
// and BitShift (direction LEFT or RIGHT) become one BitAnd / BitOr / BitXor / BitNot /
// ShiftLeft / ShiftRight primitive on the two's complement bits of any integer type; a shift
// by a negative amount or by at least the type's width gives 0 (-1 for a negative signed value
// shifted right), as ONNX's reference does. Floating and bool operands are refused.
#include "fission/fission.h"

namespace korch {

namespace {

void require_integer(FissionContext& c, TensorId x) {
  DType t = c.dtype(x);
  if (is_floating(t) || t == DType::Bool) c.error("element type ", dtype_name(t), " is not an integer type");
}

void bitwise_rule(const std::string& op_type, PrimOp op) {
  register_fission_rule(op_type, [op](FissionContext& c) {
    std::vector<TensorId> operands;
    for (int i = 0; i < prim_arity(op); ++i) {
      operands.push_back(c.input(i));
      require_integer(c, operands.back());
    }
    c.set_output(0, c.emit(op, operands));
  });
}

}  // namespace

void register_bitwise_rules() {
  bitwise_rule("BitwiseAnd", PrimOp::BitAnd);
  bitwise_rule("BitwiseOr", PrimOp::BitOr);
  bitwise_rule("BitwiseXor", PrimOp::BitXor);
  bitwise_rule("BitwiseNot", PrimOp::BitNot);
  register_fission_rule("BitShift", [](FissionContext& c) {
    TensorId x = c.input(0), amount = c.input(1);
    require_integer(c, x);
    if (c.opset() < 28 && !is_unsigned_integer(c.dtype(x)))
      c.error("element type ", dtype_name(c.dtype(x)), " needs BitShift-28 (opset 28)");
    std::string direction = c.attr_s("direction", "");
    PrimOp op;
    if (direction == "LEFT")
      op = PrimOp::ShiftLeft;
    else if (direction == "RIGHT")
      op = PrimOp::ShiftRight;
    else
      c.error("direction must be LEFT or RIGHT, got '", direction, "'");
    c.set_output(0, c.binary(op, x, amount));
  });
}

}  // namespace korch
