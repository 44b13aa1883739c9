// Fission rules for normalisation layers. Statistics become ReduceMean primitives over the
// normalised axes; per-channel parameters are reshaped to broadcast. BatchNormalization in
// inference folds to y = x*s + (B - mean*s) with s = scale/sqrt(var+eps) computed at import; in
// training mode (opset 14+) it normalises by the batch's statistics and also updates the running ones.
#include <cmath>

#include "fission/fission.h"

namespace korch {

namespace {

// Shape [C, 1, ..., 1] that broadcasts a per-channel vector against an NC... tensor.
Shape channel_shape(int64_t rank, int64_t channels) {
  Shape s(rank - 1, 1);
  s[0] = channels;
  return s;
}

struct Normalized {
  TensorId centered, var, mean;
};

// mean and variance over `axes` (keepdims), and x - mean.
Normalized moments(FissionContext& c, TensorId x, const std::vector<int64_t>& axes) {
  TensorId mean = c.reduce(PrimOp::ReduceMean, x, axes, true);
  TensorId d = c.binary(PrimOp::Sub, x, mean);
  TensorId var = c.reduce(PrimOp::ReduceMean, c.binary(PrimOp::Mul, d, d), axes, true);
  return {d, var, mean};
}

TensorId std_dev(FissionContext& c, TensorId var, double eps) {
  return c.unary(PrimOp::Sqrt, c.binary(PrimOp::Add, var, c.scalar(eps, c.dtype(var))));
}

}  // namespace

void register_normalization_rules() {
  register_fission_rule("BatchNormalization", [](FissionContext& c) {
    bool training = c.attr_i("training_mode", 0) != 0;
    if ((training && c.opset() < 14) || (!training && c.wants_output(1)))
      c.error("training mode is not supported before BatchNormalization-14 (inference only)");
    TensorId x = c.input(0);
    if (c.rank(x) < 2) c.error("input must have rank >= 2");
    int64_t ch = c.shape(x)[1];
    double eps = c.attr_f("epsilon", 1e-5);
    Shape cs = channel_shape(c.rank(x), ch);
    TensorId scale = c.reshape(c.input(1), cs), bias = c.reshape(c.input(2), cs);
    TensorId mean = c.reshape(c.input(3), cs), var = c.reshape(c.input(4), cs);
    if (training) {
      // Normalised by the batch's statistics (over every axis but the channels); the running
      // statistics become momentum * running + (1 - momentum) * batch.
      std::vector<int64_t> axes = {0};
      for (int64_t i = 2; i < c.rank(x); ++i) axes.push_back(i);
      Normalized batch = moments(c, x, axes);
      TensorId batch_mean = c.reshape(batch.mean, cs), batch_var = c.reshape(batch.var, cs);
      TensorId y = c.binary(PrimOp::Mul, c.binary(PrimOp::Div, batch.centered, std_dev(c, batch.var, eps)), scale);
      c.set_output(0, c.binary(PrimOp::Add, y, bias));
      DType t = c.dtype(x);
      double momentum = c.attr_f("momentum", 0.9);
      auto running = [&](TensorId old, TensorId now) {
        return c.reshape(c.binary(PrimOp::Add, c.binary(PrimOp::Mul, old, c.scalar(momentum, t)),
                                  c.binary(PrimOp::Mul, now, c.scalar(1 - momentum, t))),
                         {ch});
      };
      if (c.wants_output(1)) c.set_output(1, running(mean, batch_mean));
      if (c.wants_output(2)) c.set_output(2, running(var, batch_var));
      return;
    }
    TensorId s = c.binary(PrimOp::Div, scale, std_dev(c, var, eps));
    TensorId shift = c.binary(PrimOp::Sub, bias, c.binary(PrimOp::Mul, mean, s));
    c.set_output(0, c.binary(PrimOp::Add, c.binary(PrimOp::Mul, x, s), shift));
  });
  register_fission_rule("InstanceNormalization", [](FissionContext& c) {
    TensorId x = c.input(0);
    if (c.rank(x) < 3) c.error("input must have rank >= 3");
    std::vector<int64_t> axes;
    for (int64_t i = 2; i < c.rank(x); ++i) axes.push_back(i);
    Normalized m = moments(c, x, axes);
    TensorId y = c.binary(PrimOp::Div, m.centered, std_dev(c, m.var, c.attr_f("epsilon", 1e-5)));
    Shape cs = channel_shape(c.rank(x), c.shape(x)[1]);
    y = c.binary(PrimOp::Mul, y, c.reshape(c.input(1), cs));
    c.set_output(0, c.binary(PrimOp::Add, y, c.reshape(c.input(2), cs)));
  });
  register_fission_rule("LayerNormalization", [](FissionContext& c) {
    TensorId x = c.input(0);
    int64_t rank = c.rank(x);
    int64_t axis = normalize_axis(c.attr_i("axis", -1), rank);
    std::vector<int64_t> axes;
    for (int64_t i = axis; i < rank; ++i) axes.push_back(i);
    Normalized m = moments(c, x, axes);
    TensorId sd = std_dev(c, m.var, c.attr_f("epsilon", 1e-5));
    TensorId y = c.binary(PrimOp::Div, m.centered, sd);
    y = c.binary(PrimOp::Mul, y, c.input(1));
    if (c.has_input(2)) y = c.binary(PrimOp::Add, y, c.input(2));
    c.set_output(0, y);
    if (c.wants_output(1)) c.set_output(1, m.mean);
    if (c.wants_output(2)) c.set_output(2, c.unary(PrimOp::Reciprocal, sd));
  });
  register_fission_rule("GroupNormalization", [](FissionContext& c) {
    TensorId x = c.input(0);
    Shape s = c.shape(x);
    if (s.size() < 3) c.error("input must have rank >= 3");
    int64_t groups = c.attr_i("num_groups", 0);
    int64_t ch = s[1];
    if (groups <= 0 || ch % groups) c.error("num_groups ", groups, " must divide the ", ch, " channels");
    TensorId grouped = c.reshape(x, {s[0], groups, num_elements(s) / (s[0] * groups)});
    Normalized m = moments(c, grouped, {2});
    TensorId y = c.reshape(c.binary(PrimOp::Div, m.centered, std_dev(c, m.var, c.attr_f("epsilon", 1e-5))), s);
    // Opset 18 has one scale/bias per group, opset 21 one per channel.
    auto per_channel = [&](TensorId p) {
      int64_t n = num_elements(c.shape(p));
      if (n == ch) return c.reshape(p, channel_shape(static_cast<int64_t>(s.size()), ch));
      if (n != groups) c.error("scale/bias must have num_groups or C entries");
      TensorId spread =
          c.emit(PrimOp::Broadcast, {c.reshape(p, {groups, 1})}, Attrs().set("shape", Shape{groups, ch / groups}));
      return c.reshape(spread, channel_shape(static_cast<int64_t>(s.size()), ch));
    };
    y = c.binary(PrimOp::Mul, y, per_channel(c.input(1)));
    c.set_output(0, c.binary(PrimOp::Add, y, per_channel(c.input(2))));
  });
}

}  // namespace korch
