// Fission rules for RNN, GRU and LSTM, unrolled over the (static) sequence: the input
// projection of all steps is one MatMul; each step is a MatMul with the recurrence weights,
// gate Slices, the gate activations (Sigmoid, Tanh, Relu, ... as `activations` names them, with
// `clip`) and elementwise updates; the outputs are Concats of the steps. Directions forward,
// reverse and bidirectional; layout 0 and 1; LSTM peepholes and input_forget; GRU
// linear_before_reset. sequence_lens must be absent or all equal to the sequence length.
#include <cmath>

#include "fission/fission.h"
#include "fission/fission_helpers.h"
#include "onnx/onnx_pb.h"

namespace korch {

namespace {

enum class Cell { Rnn, Gru, Lstm };

struct Activation {
  std::string name;
  double alpha, beta;
};

TensorId activate(FissionContext& c, const Activation& a, TensorId x) {
  DType t = c.dtype(x);
  auto s = [&](double v) { return c.scalar(v, t); };
  const std::string& n = a.name;
  if (n == "Sigmoid") return c.unary(PrimOp::Sigmoid, x);
  if (n == "Tanh") return c.unary(PrimOp::Tanh, x);
  if (n == "Relu") return c.unary(PrimOp::Relu, x);
  if (n == "Affine") return c.binary(PrimOp::Add, c.binary(PrimOp::Mul, x, s(a.alpha)), s(a.beta));
  if (n == "LeakyRelu")
    return c.emit(PrimOp::Where, {c.binary(PrimOp::Less, x, s(0)), c.binary(PrimOp::Mul, x, s(a.alpha)), x});
  if (n == "ThresholdedRelu") return c.emit(PrimOp::Where, {c.binary(PrimOp::Greater, x, s(a.alpha)), x, s(0)});
  if (n == "ScaledTanh")
    return c.binary(PrimOp::Mul, c.unary(PrimOp::Tanh, c.binary(PrimOp::Mul, x, s(a.beta))), s(a.alpha));
  if (n == "HardSigmoid") {
    TensorId y = c.binary(PrimOp::Add, c.binary(PrimOp::Mul, x, s(a.alpha)), s(a.beta));
    return c.binary(PrimOp::Max, c.binary(PrimOp::Min, y, s(1)), s(0));
  }
  if (n == "Elu") {
    TensorId em1 = c.binary(PrimOp::Mul, c.binary(PrimOp::Sub, c.unary(PrimOp::Exp, x), s(1)), s(a.alpha));
    return c.emit(PrimOp::Where, {c.binary(PrimOp::Less, x, s(0)), em1, x});
  }
  if (n == "Softsign") return c.binary(PrimOp::Div, x, c.binary(PrimOp::Add, c.unary(PrimOp::Abs, x), s(1)));
  if (n == "Softplus") return c.unary(PrimOp::Log, c.binary(PrimOp::Add, c.unary(PrimOp::Exp, x), s(1)));
  c.error("activation '", n, "' is not supported");
}

double default_alpha(const std::string& n) {
  if (n == "LeakyRelu") return 0.01;
  if (n == "HardSigmoid") return 0.2;
  return 1.0;
}
double default_beta(const std::string& n) { return n == "HardSigmoid" ? 0.5 : n == "Affine" ? 0.0 : 1.0; }

// Slice `d` of a [dirs, ...] tensor, without the leading axis.
TensorId direction(FissionContext& c, TensorId x, int64_t d) {
  Shape s = c.shape(x);
  TensorId y = slice_axis(c, x, 0, d, 1);
  s.erase(s.begin());
  return c.reshape(y, s);
}

TensorId transpose2(FissionContext& c, TensorId x) {
  return c.emit(PrimOp::Transpose, {x}, Attrs().set("perm", std::vector<int64_t>{1, 0}));
}

void rnn_rule(const std::string& op_type, Cell cell) {
  register_fission_rule(op_type, [cell](FissionContext& c) {
    const int gates = cell == Cell::Lstm ? 4 : cell == Cell::Gru ? 3 : 1;
    const int nact = cell == Cell::Lstm ? 3 : cell == Cell::Gru ? 2 : 1;
    TensorId x = c.input(0);
    if (c.rank(x) != 3) c.error("X must be 3-D");
    DType t = c.dtype(x);
    int64_t layout = c.attr_i("layout", 0);
    if (layout) x = c.emit(PrimOp::Transpose, {x}, Attrs().set("perm", std::vector<int64_t>{1, 0, 2}));
    const int64_t seq = c.shape(x)[0], batch = c.shape(x)[1], in = c.shape(x)[2];
    const int64_t hidden = c.attr_i("hidden_size", c.shape(c.input(2))[2]);
    std::string dir = c.attr_s("direction", "forward");
    if (dir != "forward" && dir != "reverse" && dir != "bidirectional") c.error("unknown direction '", dir, "'");
    const int64_t dirs = dir == "bidirectional" ? 2 : 1;
    if (c.has_input(4)) {
      for (int64_t len : c.constant_ints(4))
        if (len != seq) c.error("sequence_lens other than the full sequence length are not supported");
    }
    std::vector<std::string> names;
    if (const auto* a = c.attr("activations"))
      for (const auto& n : a->strings()) names.push_back(n);
    if (names.empty()) {
      std::vector<std::string> def = cell == Cell::Lstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                     : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                         : std::vector<std::string>{"Tanh"};
      for (int64_t d = 0; d < dirs; ++d) names.insert(names.end(), def.begin(), def.end());
    }
    if (static_cast<int64_t>(names.size()) != nact * dirs) c.error("activations must name ", nact * dirs, " functions");
    std::vector<double> alphas = c.attr_floats("activation_alpha"), betas = c.attr_floats("activation_beta");
    std::vector<Activation> acts;
    for (size_t i = 0; i < names.size(); ++i)
      acts.push_back({names[i], i < alphas.size() ? alphas[i] : default_alpha(names[i]),
                      i < betas.size() ? betas[i] : default_beta(names[i])});
    bool has_clip = c.has_attr("clip");
    double clip = c.attr_f("clip", 0.0);
    auto pre = [&](TensorId v) {
      if (!has_clip) return v;
      return c.binary(PrimOp::Max, c.binary(PrimOp::Min, v, c.scalar(clip, t)), c.scalar(-clip, t));
    };
    bool input_forget = c.attr_i("input_forget", 0) != 0;
    bool linear_before_reset = c.attr_i("linear_before_reset", 0) != 0;
    const int64_t gh = gates * hidden;

    std::vector<TensorId> ys(dirs), last_h(dirs), last_c(dirs);
    for (int64_t d = 0; d < dirs; ++d) {
      TensorId w = direction(c, c.input(1), d), r = direction(c, c.input(2), d);  // [G*H, I], [G*H, H]
      TensorId wb = kNone, rb = kNone;
      if (c.has_input(3)) {
        TensorId b = direction(c, c.input(3), d);  // [2*G*H]
        wb = slice_axis(c, b, 0, 0, gh);
        rb = slice_axis(c, b, 0, gh, gh);
      }
      TensorId h = c.has_input(5) ? direction(c, c.input(5), d) : c.constant(TensorData(t, {batch, hidden}));
      TensorId cs = kNone;
      if (cell == Cell::Lstm)
        cs = c.has_input(6) ? direction(c, c.input(6), d) : c.constant(TensorData(t, {batch, hidden}));
      TensorId peep = cell == Cell::Lstm && c.has_input(7) ? direction(c, c.input(7), d) : kNone;  // [3H]: i, o, f
      const Activation* act = &acts[d * nact];
      // All steps' input projections (plus the biases that are not reset-gated) at once.
      TensorId xw = c.binary(PrimOp::MatMul, c.reshape(x, {seq * batch, in}), transpose2(c, w));
      if (wb != kNone) {
        TensorId bias = c.binary(PrimOp::Add, wb, rb);
        if (cell == Cell::Gru && linear_before_reset) {
          // The hidden gate's recurrence bias Rbh is reset-gated with the recurrence below.
          bias =
              c.emit(PrimOp::Concat, {slice_axis(c, bias, 0, 0, 2 * hidden), slice_axis(c, wb, 0, 2 * hidden, hidden)},
                     Attrs().set("axis", int64_t{0}));
        }
        xw = c.binary(PrimOp::Add, xw, bias);
      }
      xw = c.reshape(xw, {seq, batch, gh});
      TensorId rt = transpose2(c, r);  // [H, G*H]
      std::vector<TensorId> steps(seq);
      for (int64_t k = 0; k < seq; ++k) {
        int64_t step = dir == "reverse" || d == 1 ? seq - 1 - k : k;
        TensorId xt = c.reshape(slice_axis(c, xw, 0, step, 1), {batch, gh});
        auto gate = [&](TensorId v, int64_t g) { return slice_axis(c, v, 1, g * hidden, hidden); };
        if (cell == Cell::Rnn) {
          TensorId v = c.binary(PrimOp::Add, xt, c.binary(PrimOp::MatMul, h, rt));
          h = activate(c, act[0], pre(v));
        } else if (cell == Cell::Gru) {
          // r, z from x and h; the hidden gate from x and the reset-gated recurrence.
          TensorId rz_h = c.binary(PrimOp::MatMul, h, slice_axis(c, rt, 1, 0, 2 * hidden));
          TensorId z = activate(c, act[0], pre(c.binary(PrimOp::Add, gate(xt, 0), slice_axis(c, rz_h, 1, 0, hidden))));
          TensorId rg =
              activate(c, act[0], pre(c.binary(PrimOp::Add, gate(xt, 1), slice_axis(c, rz_h, 1, hidden, hidden))));
          TensorId rh = slice_axis(c, rt, 1, 2 * hidden, hidden);
          TensorId rbh = rb == kNone || !linear_before_reset ? kNone : slice_axis(c, rb, 0, 2 * hidden, hidden);
          TensorId hh;
          if (linear_before_reset) {
            TensorId lin = c.binary(PrimOp::MatMul, h, rh);
            if (rbh != kNone) lin = c.binary(PrimOp::Add, lin, rbh);
            hh = c.binary(PrimOp::Add, gate(xt, 2), c.binary(PrimOp::Mul, rg, lin));
          } else {
            hh = c.binary(PrimOp::Add, gate(xt, 2), c.binary(PrimOp::MatMul, c.binary(PrimOp::Mul, rg, h), rh));
          }
          hh = activate(c, act[1], pre(hh));
          TensorId one_minus_z = c.binary(PrimOp::Sub, c.scalar(1, t), z);
          h = c.binary(PrimOp::Add, c.binary(PrimOp::Mul, one_minus_z, hh), c.binary(PrimOp::Mul, z, h));
        } else {
          TensorId v = c.binary(PrimOp::Add, xt, c.binary(PrimOp::MatMul, h, rt));
          TensorId vi = gate(v, 0), vo = gate(v, 1), vf = gate(v, 2), vc = gate(v, 3);
          if (peep != kNone) {
            vi = c.binary(PrimOp::Add, vi, c.binary(PrimOp::Mul, slice_axis(c, peep, 0, 0, hidden), cs));
            vf = c.binary(PrimOp::Add, vf, c.binary(PrimOp::Mul, slice_axis(c, peep, 0, 2 * hidden, hidden), cs));
          }
          TensorId ig = activate(c, act[0], pre(vi));
          TensorId fg = input_forget ? c.binary(PrimOp::Sub, c.scalar(1, t), ig) : activate(c, act[0], pre(vf));
          TensorId cg = activate(c, act[1], pre(vc));
          cs = c.binary(PrimOp::Add, c.binary(PrimOp::Mul, fg, cs), c.binary(PrimOp::Mul, ig, cg));
          if (peep != kNone)
            vo = c.binary(PrimOp::Add, vo, c.binary(PrimOp::Mul, slice_axis(c, peep, 0, hidden, hidden), cs));
          TensorId og = activate(c, act[0], pre(vo));
          h = c.binary(PrimOp::Mul, og, activate(c, act[2], cs));
        }
        steps[step] = c.reshape(h, {1, 1, batch, hidden});
      }
      ys[d] = seq == 1 ? steps[0] : c.emit(PrimOp::Concat, steps, Attrs().set("axis", int64_t{0}));
      last_h[d] = c.reshape(h, {1, batch, hidden});
      if (cell == Cell::Lstm) last_c[d] = c.reshape(cs, {1, batch, hidden});
    }
    auto cat = [&](const std::vector<TensorId>& v, int64_t axis) {
      return v.size() == 1 ? v[0] : c.emit(PrimOp::Concat, v, Attrs().set("axis", axis));
    };
    TensorId y = cat(ys, 1), yh = cat(last_h, 0);  // [seq, dirs, batch, H], [dirs, batch, H]
    TensorId yc = cell == Cell::Lstm ? cat(last_c, 0) : kNone;
    if (layout) {
      y = c.emit(PrimOp::Transpose, {y}, Attrs().set("perm", std::vector<int64_t>{2, 0, 1, 3}));
      yh = c.emit(PrimOp::Transpose, {yh}, Attrs().set("perm", std::vector<int64_t>{1, 0, 2}));
      if (yc != kNone) yc = c.emit(PrimOp::Transpose, {yc}, Attrs().set("perm", std::vector<int64_t>{1, 0, 2}));
    }
    c.set_output(0, y);
    if (c.wants_output(1)) c.set_output(1, yh);
    if (c.wants_output(2) && yc != kNone) c.set_output(2, yc);
  });
}

}  // namespace

void register_rnn_rules() {
  rnn_rule("RNN", Cell::Rnn);
  rnn_rule("GRU", Cell::Gru);
  rnn_rule("LSTM", Cell::Lstm);
}

}  // namespace korch
