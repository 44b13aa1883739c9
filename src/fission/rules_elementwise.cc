// Fission rules for elementwise ONNX operators: each becomes one primitive or a short
// chain of elementwise primitives (activations are spelled out, e.g. HardSwish = x *
// max(0, min(1, x/6 + 1/2))). Identity and inference-mode Dropout alias their input.
#include <cmath>

#include "fission/fission.h"
#include "fission/fission_helpers.h"
#include "fission/onnx_tensor.h"

namespace korch {

namespace {

void unary_rule(const std::string& op_type, PrimOp op) {
  register_fission_rule(op_type, [op](FissionContext& c) { c.set_output(0, c.unary(op, c.input(0))); });
}

void binary_rule(const std::string& op_type, PrimOp op) {
  register_fission_rule(op_type, [op](FissionContext& c) {
    if (op == PrimOp::Mod) {
      int64_t fmod = c.attr_i("fmod", 0);
      // Mod-28 defines fmod=0 on floats as numpy's mod (a - b * floor(a / b), the divisor's sign);
      // the earlier versions require fmod=1 there.
      if (!fmod && is_floating(c.dtype(c.input(0))) && c.opset() < 28)
        c.error("fmod=0 on floating inputs needs Mod-28 (opset 28)");
      c.set_output(0, c.emit(op, {c.input(0), c.input(1)}, Attrs().set("fmod", fmod)));
      return;
    }
    c.set_output(0, c.binary(op, c.input(0), c.input(1)));
  });
}

// Sum / Mean / Max / Min over any number of inputs.
void variadic_rule(const std::string& op_type, PrimOp op, bool mean) {
  register_fission_rule(op_type, [op, mean](FissionContext& c) {
    TensorId acc = c.input(0);
    for (int i = 1; i < c.num_inputs(); ++i) acc = c.binary(op, acc, c.input(i));
    if (mean) acc = c.binary(PrimOp::Div, acc, c.scalar(c.num_inputs(), c.dtype(acc)));
    if (c.num_inputs() == 1) acc = c.unary(PrimOp::Copy, acc);
    c.set_output(0, acc);
  });
}

TensorId hard_sigmoid(FissionContext& c, TensorId x, double alpha, double beta) {
  DType t = c.dtype(x);
  TensorId y = c.binary(PrimOp::Add, c.binary(PrimOp::Mul, x, c.scalar(alpha, t)), c.scalar(beta, t));
  return c.binary(PrimOp::Max, c.binary(PrimOp::Min, y, c.scalar(1.0, t)), c.scalar(0.0, t));
}

TensorId softplus(FissionContext& c, TensorId x) {
  return c.unary(PrimOp::Log, c.binary(PrimOp::Add, c.unary(PrimOp::Exp, x), c.scalar(1.0, c.dtype(x))));
}

}  // namespace

void register_elementwise_rules() {
  unary_rule("Abs", PrimOp::Abs);
  unary_rule("Neg", PrimOp::Neg);
  unary_rule("Exp", PrimOp::Exp);
  unary_rule("Log", PrimOp::Log);
  unary_rule("Sqrt", PrimOp::Sqrt);
  unary_rule("Reciprocal", PrimOp::Reciprocal);
  unary_rule("Sin", PrimOp::Sin);
  unary_rule("Cos", PrimOp::Cos);
  unary_rule("Tanh", PrimOp::Tanh);
  unary_rule("Sigmoid", PrimOp::Sigmoid);
  unary_rule("Erf", PrimOp::Erf);
  unary_rule("Floor", PrimOp::Floor);
  unary_rule("Ceil", PrimOp::Ceil);
  unary_rule("Round", PrimOp::Round);
  unary_rule("Sign", PrimOp::Sign);
  unary_rule("Not", PrimOp::Not);
  unary_rule("Relu", PrimOp::Relu);
  binary_rule("Add", PrimOp::Add);
  binary_rule("Sub", PrimOp::Sub);
  binary_rule("Mul", PrimOp::Mul);
  binary_rule("Div", PrimOp::Div);
  binary_rule("Pow", PrimOp::Pow);
  binary_rule("Mod", PrimOp::Mod);
  binary_rule("Equal", PrimOp::Equal);
  binary_rule("Less", PrimOp::Less);
  binary_rule("Greater", PrimOp::Greater);
  binary_rule("LessOrEqual", PrimOp::LessEqual);
  binary_rule("GreaterOrEqual", PrimOp::GreaterEqual);
  binary_rule("And", PrimOp::And);
  binary_rule("Or", PrimOp::Or);
  binary_rule("Xor", PrimOp::Xor);
  variadic_rule("Sum", PrimOp::Add, false);
  variadic_rule("Mean", PrimOp::Add, true);
  variadic_rule("Max", PrimOp::Max, false);
  variadic_rule("Min", PrimOp::Min, false);

  register_fission_rule("Where", [](FissionContext& c) {
    c.set_output(0, c.emit(PrimOp::Where, {c.input(0), c.input(1), c.input(2)}));
  });
  register_fission_rule("Cast", [](FissionContext& c) {
    DType to = dtype_from_onnx(static_cast<int>(c.attr_i("to", 0)), "Cast target");
    c.set_output(0, onnx_cast(c, c.input(0), to));
  });
  register_fission_rule("Identity", [](FissionContext& c) { c.set_output(0, c.input(0)); });
  register_fission_rule("Dropout", [](FissionContext& c) {
    // training_mode with ratio 0 (what torch exports for p=0 Dropout) is still the identity.
    bool training = c.has_input(2) && c.constant_ints(2).at(0) != 0;
    double ratio = c.has_input(1) ? c.constant_floats(1).at(0) : c.attr_f("ratio", 0.5);
    if (training && ratio != 0.0)
      c.error("training_mode=true with ratio ", ratio, " is not supported (inference only)");
    if (c.attr_i("is_test", 1) == 0 && c.opset() < 7) c.error("training-mode Dropout is not supported");
    TensorId x = c.input(0);
    c.set_output(0, x);
    if (c.wants_output(1)) {
      TensorData mask(DType::Bool, c.shape(x));
      for (int64_t i = 0; i < mask.size(); ++i) mask.set_i64(i, 1);
      c.set_output(1, c.constant(std::move(mask)));
    }
  });
  register_fission_rule("Clip", [](FissionContext& c) {
    TensorId x = c.input(0);
    DType t = c.dtype(x);
    TensorId y = x;
    if (c.opset() < 11) {
      if (c.has_attr("min")) y = c.binary(PrimOp::Max, y, c.scalar(c.attr_f("min", 0), t));
      if (c.has_attr("max")) y = c.binary(PrimOp::Min, y, c.scalar(c.attr_f("max", 0), t));
    } else {
      if (c.has_input(1)) y = c.binary(PrimOp::Max, y, c.input(1));
      if (c.has_input(2)) y = c.binary(PrimOp::Min, y, c.input(2));
    }
    if (y == x) y = c.unary(PrimOp::Copy, x);
    c.set_output(0, y);
  });
  register_fission_rule("LeakyRelu", [](FissionContext& c) {
    TensorId x = c.input(0);
    DType t = c.dtype(x);
    TensorId neg = c.binary(PrimOp::Less, x, c.scalar(0, t));
    c.set_output(0, c.emit(PrimOp::Where, {neg, c.binary(PrimOp::Mul, x, c.scalar(c.attr_f("alpha", 0.01), t)), x}));
  });
  register_fission_rule("PRelu", [](FissionContext& c) {
    TensorId x = c.input(0);
    TensorId neg = c.binary(PrimOp::Less, x, c.scalar(0, c.dtype(x)));
    c.set_output(0, c.emit(PrimOp::Where, {neg, c.binary(PrimOp::Mul, x, c.input(1)), x}));
  });
  register_fission_rule("Elu", [](FissionContext& c) {
    TensorId x = c.input(0);
    refuse_bfloat16(c, x);
    DType t = c.dtype(x);
    TensorId neg = c.binary(PrimOp::Less, x, c.scalar(0, t));
    TensorId em1 = c.binary(PrimOp::Sub, c.unary(PrimOp::Exp, x), c.scalar(1, t));
    c.set_output(0, c.emit(PrimOp::Where, {neg, c.binary(PrimOp::Mul, em1, c.scalar(c.attr_f("alpha", 1.0), t)), x}));
  });
  register_fission_rule("Selu", [](FissionContext& c) {
    TensorId x = c.input(0);
    DType t = c.dtype(x);
    double alpha = c.attr_f("alpha", 1.67326319217681884765625);
    double gamma = c.attr_f("gamma", 1.05070102214813232421875);
    TensorId pos = c.binary(PrimOp::Greater, x, c.scalar(0, t));
    TensorId neg_branch =
        c.binary(PrimOp::Sub, c.binary(PrimOp::Mul, c.unary(PrimOp::Exp, x), c.scalar(alpha, t)), c.scalar(alpha, t));
    c.set_output(0, c.binary(PrimOp::Mul, c.emit(PrimOp::Where, {pos, x, neg_branch}), c.scalar(gamma, t)));
  });
  register_fission_rule("HardSigmoid", [](FissionContext& c) {
    c.set_output(0, hard_sigmoid(c, c.input(0), c.attr_f("alpha", 0.2), c.attr_f("beta", 0.5)));
  });
  register_fission_rule("HardSwish", [](FissionContext& c) {
    TensorId x = c.input(0);
    c.set_output(0, c.binary(PrimOp::Mul, x, hard_sigmoid(c, x, 1.0 / 6.0, 0.5)));
  });
  register_fission_rule("Softplus", [](FissionContext& c) { c.set_output(0, softplus(c, c.input(0))); });
  register_fission_rule("Softsign", [](FissionContext& c) {
    TensorId x = c.input(0);
    TensorId denom = c.binary(PrimOp::Add, c.unary(PrimOp::Abs, x), c.scalar(1, c.dtype(x)));
    c.set_output(0, c.binary(PrimOp::Div, x, denom));
  });
  register_fission_rule("Mish", [](FissionContext& c) {
    TensorId x = c.input(0);
    c.set_output(0, c.binary(PrimOp::Mul, x, c.unary(PrimOp::Tanh, softplus(c, x))));
  });
  register_fission_rule("Swish", [](FissionContext& c) {  // x * sigmoid(alpha x)
    TensorId x = c.input(0);
    TensorId ax = c.binary(PrimOp::Mul, x, c.scalar(c.attr_f("alpha", 1.0), c.dtype(x)));
    c.set_output(0, c.binary(PrimOp::Mul, x, c.unary(PrimOp::Sigmoid, ax)));
  });
  register_fission_rule("ThresholdedRelu", [](FissionContext& c) {  // x > alpha ? x : 0
    TensorId x = c.input(0);
    DType t = c.dtype(x);
    TensorId above = c.binary(PrimOp::Greater, x, c.scalar(c.attr_f("alpha", 1.0), t));
    c.set_output(0, c.emit(PrimOp::Where, {above, x, c.scalar(0, t)}));
  });
  register_fission_rule("Celu", [](FissionContext& c) {  // max(0, x) + min(0, alpha (exp(x / alpha) - 1))
    TensorId x = c.input(0);
    refuse_bfloat16(c, x);
    DType t = c.dtype(x);
    double alpha = c.attr_f("alpha", 1.0);
    TensorId e =
        c.binary(PrimOp::Sub, c.unary(PrimOp::Exp, c.binary(PrimOp::Div, x, c.scalar(alpha, t))), c.scalar(1, t));
    TensorId neg = c.binary(PrimOp::Min, c.binary(PrimOp::Mul, e, c.scalar(alpha, t)), c.scalar(0, t));
    c.set_output(0, c.binary(PrimOp::Add, c.unary(PrimOp::Relu, x), neg));
  });
  register_fission_rule("Gelu", [](FissionContext& c) {
    TensorId x = c.input(0);
    DType t = c.dtype(x);
    std::string approx = c.attr_s("approximate", "none");
    TensorId inner;
    if (approx == "tanh") {
      // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      TensorId x3 = c.binary(PrimOp::Mul, c.binary(PrimOp::Mul, x, x), x);
      TensorId arg = c.binary(PrimOp::Add, x, c.binary(PrimOp::Mul, x3, c.scalar(0.044715, t)));
      inner = c.unary(PrimOp::Tanh, c.binary(PrimOp::Mul, arg, c.scalar(std::sqrt(2.0 / M_PI), t)));
    } else if (approx == "none") {
      inner = c.unary(PrimOp::Erf, c.binary(PrimOp::Mul, x, c.scalar(M_SQRT1_2, t)));
    } else {
      c.error("unknown approximate='", approx, "'");
    }
    TensorId half_x = c.binary(PrimOp::Mul, x, c.scalar(0.5, t));
    c.set_output(0, c.binary(PrimOp::Mul, half_x, c.binary(PrimOp::Add, inner, c.scalar(1, t))));
  });
}

}  // namespace korch
