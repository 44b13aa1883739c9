// Fission rules for NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (= NLL of
// LogSoftmax over the class axis 1). The target picks its class through a one-hot mask
// (target == iota(C)) summed over the class axis; weights are picked the same way, ignore_index
// zeroes an element's weight, and 'mean' divides the summed loss by the summed weights.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

namespace {

TensorId sum_all(FissionContext& c, TensorId x) {
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < c.rank(x); ++i) axes.push_back(i);
  return c.reduce(PrimOp::ReduceSum, x, axes, false);
}

// NLL of log-probabilities x [N, C, d1, ...] at targets [N, d1, ...].
TensorId nll(FissionContext& c, TensorId x, TensorId target, TensorId weight) {
  int64_t r = c.rank(x);
  if (r < 2) c.error("input must have rank >= 2 (N, C, ...)");
  if (c.rank(target) != r - 1) c.error("target must have rank ", r - 1);
  DType t = c.dtype(x);
  int64_t classes = c.shape(x)[1];
  TensorId tgt = c.cast(target, DType::I64);
  TensorId hot = c.binary(PrimOp::Equal, insert_axis(c, tgt, 1), iota_along(c, classes, r, 1));
  TensorId zero = c.scalar(0, t);
  TensorId picked = c.reduce(PrimOp::ReduceSum, c.emit(PrimOp::Where, {hot, x, zero}), {1}, false);
  TensorId w = kNone;
  if (weight != kNone) {
    Shape ws(r, 1);
    ws[1] = classes;
    w = c.reduce(PrimOp::ReduceSum, c.emit(PrimOp::Where, {hot, c.reshape(weight, ws), zero}), {1}, false);
  }
  if (c.has_attr("ignore_index")) {
    TensorId valid =
        c.unary(PrimOp::Not, c.binary(PrimOp::Equal, tgt, c.scalar(c.attr_i("ignore_index", 0), DType::I64)));
    w = w == kNone ? c.cast(valid, t) : c.emit(PrimOp::Where, {valid, w, zero});
  }
  TensorId loss = c.unary(PrimOp::Neg, w == kNone ? picked : c.binary(PrimOp::Mul, picked, w));
  std::string reduction = c.attr_s("reduction", "mean");
  if (reduction == "none") return loss;
  if (reduction == "sum") return sum_all(c, loss);
  if (reduction != "mean") c.error("unknown reduction '", reduction, "'");
  if (w == kNone) {
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < c.rank(loss); ++i) axes.push_back(i);
    return c.reduce(PrimOp::ReduceMean, loss, axes, false);
  }
  return c.binary(PrimOp::Div, sum_all(c, loss), sum_all(c, w));
}

}  // namespace

void register_loss_rules() {
  register_fission_rule("NegativeLogLikelihoodLoss", [](FissionContext& c) {
    c.set_output(0, nll(c, c.input(0), c.input(1), c.has_input(2) ? c.input(2) : kNone));
  });
  register_fission_rule("SoftmaxCrossEntropyLoss", [](FissionContext& c) {
    TensorId x = c.input(0);
    if (c.rank(x) < 2) c.error("scores must have rank >= 2 (N, C, ...)");
    TensorId m = c.reduce(PrimOp::ReduceMax, x, {1}, true);
    TensorId shifted = c.binary(PrimOp::Sub, x, m);
    TensorId s = c.reduce(PrimOp::ReduceSum, c.unary(PrimOp::Exp, shifted), {1}, true);
    TensorId log_prob = c.binary(PrimOp::Sub, shifted, c.unary(PrimOp::Log, s));
    c.set_output(0, nll(c, log_prob, c.input(1), c.has_input(2) ? c.input(2) : kNone));
    if (c.wants_output(1)) c.set_output(1, log_prob);
  });
}

}  // namespace korch
