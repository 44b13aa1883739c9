// Fission rules for Asin, Acos and Atan: one Asin / Acos / Atan primitive each (floating types;
// narrow floats compute in float32 and round once, as ONNX's reference does).
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

namespace {

void inverse_trig_rule(const std::string& op_type, PrimOp op) {
  register_fission_rule(op_type, [op](FissionContext& c) {
    TensorId x = c.input(0);
    require_floating(c, x);
    c.set_output(0, c.unary(op, x));
  });
}

}  // namespace

void register_inverse_trig_rules() {
  inverse_trig_rule("Asin", PrimOp::Asin);
  inverse_trig_rule("Acos", PrimOp::Acos);
  inverse_trig_rule("Atan", PrimOp::Atan);
}

}  // namespace korch
