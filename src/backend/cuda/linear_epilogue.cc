// The epilogue of a linear kernel on the GPU: the chain hanging off the Linear primitive, matched
// against what cuBLASLt's epilogues and cuDNN's fused bias-activation call compute,
//   out = act(alpha * linear + residual + bias),   act in {none, ReLU, tanh-GELU},
// in that order (scalar Mul/Div first, the adds, the activation last). Anything else is refused
// with a one-line reason. GELU is matched by evaluating the activation's elementwise sub-graph
// with the reference executor on sample points (a small duplicate of the CPU oneDNN analysis'
// fitting, which lives in backend/cpu and is out of this layer's reach): cuBLASLt's GELU is the
// tanh approximation, so the erf GELU (up to ~4.7e-4 away) is refused.
#include <algorithm>
#include <cmath>
#include <map>

#include "backend/cuda/linear_internal.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch::cuda::linear_detail {

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::None: return "none";
    case Activation::Relu: return "relu";
    case Activation::GeluTanh: return "gelu_tanh";
  }
  return "?";
}

namespace {

double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x * M_SQRT1_2)); }

class EpilogueFinder {
 public:
  EpilogueFinder(const PrimGraph& g, const Kernel& k, size_t channel_axis) : g_(g), k_(k), channel_axis_(channel_axis) {
    for (PrimId p : k.prims) inside_[p] = 1;
    for (PrimId p : k.prims)
      for (TensorId t : g.prim(p).inputs)
        if (produced_inside(t) && (consumers_[t].empty() || consumers_[t].back() != p)) consumers_[t].push_back(p);
  }

  bool run(PrimId linear, Epilogue* ep, std::string* why) {
    TensorId cur = g_.prim(linear).output;
    const Shape shape = g_.tensor(cur).shape;
    while (cur != k_.output) {
      const std::vector<PrimId>& cons = consumers_[cur];
      if (cons.empty()) return refuse(why, "the linear result does not reach the kernel's output");
      TensorId next = kNone;
      if (cons.size() == 1) {
        next = step(cons[0], cur, ep, why);
        if (next == kNone && !why->empty()) return false;
      }
      if (next == kNone) {
        if (!fit_activation(cur, ep, &next, why)) return false;
      }
      cur = next;
      if (g_.tensor(cur).shape != shape)
        return refuse(why, "epilogue changes the shape to ", shape_str(g_.tensor(cur).shape));
      if (g_.tensor(cur).dtype != DType::F32) return refuse(why, "epilogue value is not f32");
    }
    return true;
  }

 private:
  const PrimGraph& g_;
  const Kernel& k_;
  size_t channel_axis_;
  std::map<PrimId, char> inside_;
  std::map<TensorId, std::vector<PrimId>> consumers_;

  template <typename... Args>
  static bool refuse(std::string* why, const Args&... args) {
    *why = str_cat(args...);
    return false;
  }
  bool produced_inside(TensorId t) const {
    PrimId p = g_.tensor(t).producer;
    return p != kNone && inside_.count(p);
  }
  bool scalar_constant(TensorId t, double* v) const {
    const TensorInfo& i = g_.tensor(t);
    if (produced_inside(t) || !i.is_constant() || num_elements(i.shape) != 1 || i.dtype != DType::F32) return false;
    *v = i.constant->get_f64(0);
    return true;
  }

  // One primitive consuming the running value `cur`: its output, or kNone (with *why set when
  // the op is certainly not an epilogue; empty when an activation sub-graph may still match).
  TensorId step(PrimId pid, TensorId cur, Epilogue* ep, std::string* why) {
    const Primitive& p = g_.prim(pid);
    const char* name = prim_op_name(p.op);
    auto take = [&] {
      ep->prims.push_back(pid);
      return p.output;
    };
    auto no = [&](const auto&... args) {
      *why = str_cat(args...);
      return kNone;
    };
    bool after_act = ep->act != Activation::None;
    switch (p.op) {
      case PrimOp::Copy: return take();
      case PrimOp::Cast:
        if (g_.tensor(p.output).dtype == DType::F32) return take();
        return no("epilogue Cast to ", dtype_name(g_.tensor(p.output).dtype));
      case PrimOp::Relu:
        if (after_act) return no("a second activation (Relu after ", activation_name(ep->act), ")");
        ep->act = Activation::Relu;
        return take();
      default: break;
    }
    if (prim_arity(p.op) != 2) return kNone;  // maybe an activation sub-graph
    bool left = p.inputs[0] == cur;
    TensorId other = left ? p.inputs[1] : p.inputs[0];
    if (other == cur || produced_inside(other)) return kNone;
    double c = 0;
    bool one_channel = g_.tensor(cur).shape[channel_axis_] == 1;  // a scalar Add is its bias
    if (scalar_constant(other, &c) && !(p.op == PrimOp::Add && one_channel)) {
      if (p.op == PrimOp::Max && c == 0) {
        if (after_act) return no("a second activation (Max(x, 0) after ", activation_name(ep->act), ")");
        ep->act = Activation::Relu;
        return take();
      }
      if (p.op == PrimOp::Mul || (p.op == PrimOp::Div && left)) {
        if (after_act || ep->bias != kNone || ep->residual != kNone)
          return no("scaling by a constant after the bias/residual add or activation (only alpha * linear is fused)");
        ep->alpha *= static_cast<float>(p.op == PrimOp::Mul ? c : 1 / c);
        return take();
      }
      if (p.op == PrimOp::Mul || p.op == PrimOp::Add || p.op == PrimOp::Sub || p.op == PrimOp::Div)
        return no("epilogue op ", name, " with a scalar constant is not a cuBLASLt/cuDNN epilogue");
      return kNone;
    }
    if (p.op != PrimOp::Add) return kNone;
    if (after_act) return no("Add after the activation (the libraries add bias and residual before it)");
    const TensorInfo& o = g_.tensor(other);
    if (o.dtype != DType::F32) return no("Add operand '", o.name, "' is ", dtype_name(o.dtype));
    const Shape& out = g_.tensor(cur).shape;
    if (o.shape.size() > out.size()) return no("Add operand of rank ", o.shape.size(), " broadcasts the result");
    Shape od(out.size() - o.shape.size(), 1);
    od.insert(od.end(), o.shape.begin(), o.shape.end());
    bool per_channel = true, full = true, batch_broadcast = true;
    for (size_t i = 0; i < od.size(); ++i) {
      per_channel &= i == channel_axis_ ? od[i] == out[i] : od[i] == 1;
      full &= od[i] == out[i];
      batch_broadcast &= i + 2 < od.size() ? od[i] == 1 : od[i] == out[i];
    }
    if (per_channel && ep->bias == kNone) {  // (a per-channel add on a 1x1 output is full too)
      ep->bias = other;
      return take();
    }
    if ((full || (batch_broadcast && channel_axis_ + 1 == out.size())) && ep->residual == kNone) {
      ep->residual = other;
      return take();
    }
    if (per_channel || full) return no("a second ", per_channel ? "bias" : "residual", " Add in the epilogue");
    return no("Add operand of shape ", shape_str(o.shape), " is neither a per-channel bias nor a residual of shape ",
              shape_str(out));
  }

  // The elementwise sub-graph from `cur` (other operands: scalar constants) to the first value
  // every path from `cur` goes through, matched against tanh-GELU.
  bool fit_activation(TensorId cur, Epilogue* ep, TensorId* next, std::string* why) {
    std::vector<PrimId> region;
    std::vector<TensorId> live = {cur};
    std::map<TensorId, int> pending;
    pending[cur] = static_cast<int>(consumers_[cur].size());
    const char* first = prim_op_name(g_.prim(consumers_[cur][0]).op);
    for (PrimId p : k_.prims) {
      if (p <= g_.tensor(cur).producer) continue;
      const Primitive& prim = g_.prim(p);
      bool reads_live = false;
      for (TensorId t : prim.inputs) reads_live |= std::count(live.begin(), live.end(), t) > 0;
      if (!reads_live) continue;
      double c;
      bool ok = prim_kind(prim.op) == PrimKind::Elementwise && region.size() < 24;
      for (TensorId t : prim.inputs) ok &= std::count(live.begin(), live.end(), t) > 0 || scalar_constant(t, &c);
      if (!ok)
        return refuse(why, "epilogue op ", prim_op_name(prim.op), " (after ", first,
                      ") is not a cuBLASLt/cuDNN epilogue (bias, residual Add, ReLU, tanh-GELU)");
      region.push_back(p);
      std::vector<TensorId> seen;
      for (TensorId t : prim.inputs)
        if (std::count(live.begin(), live.end(), t) && !std::count(seen.begin(), seen.end(), t)) {
          seen.push_back(t);
          if (--pending[t] == 0) live.erase(std::find(live.begin(), live.end(), t));
        }
      live.push_back(prim.output);
      pending[prim.output] = static_cast<int>(consumers_[prim.output].size());
      if (live.size() == 1) break;
    }
    if (live.size() != 1 || live[0] == cur)
      return refuse(why, "epilogue ", first, " does not form an activation that collapses into one value");
    TensorId result = live[0];
    // Evaluate the region on sample points.
    std::vector<double> xs;
    for (int i = 0; i <= 800; ++i) xs.push_back(-8.0 + 16.0 * i / 800);
    for (double x : {10.0, 20.0, 50.0}) xs.insert(xs.end(), {x, -x});
    const auto n = static_cast<int64_t>(xs.size());
    std::vector<double> ys =
        reference::evaluate_chain(g_, region, {{cur, TensorData::from_f64(DType::F32, {n}, xs)}}, result).to_f64();
    auto matches = [&](double (*f)(double)) {
      if (static_cast<int64_t>(ys.size()) != n) return false;
      for (int64_t i = 0; i < n; ++i)
        if (!(std::abs(f(xs[i]) - ys[i]) <= 2e-5 * (1 + std::abs(ys[i])))) return false;
      return true;
    };
    if (matches(gelu_tanh)) {
      if (ep->act != Activation::None)
        return refuse(why, "a second activation (GELU after ", activation_name(ep->act), ")");
      ep->act = Activation::GeluTanh;
      ep->prims.insert(ep->prims.end(), region.begin(), region.end());
      *next = result;
      return true;
    }
    if (matches(gelu_erf))
      return refuse(why, "erf GELU epilogue: cuBLASLt's GELU is the tanh approximation (differs by up to ~4.7e-4)");
    return refuse(why, "the elementwise epilogue starting with ", first,
                  " is not a cuBLASLt/cuDNN epilogue (bias, residual Add, ReLU, tanh-GELU)");
  }
};

}  // namespace

bool analyse_epilogue(const PrimGraph& g, const Kernel& k, PrimId linear, size_t channel_axis, Epilogue* ep,
                      std::string* why_not) {
  *ep = Epilogue{};
  std::string why;
  EpilogueFinder finder(g, k, channel_axis);
  if (finder.run(linear, ep, &why)) return true;
  if (why_not) *why_not = why;
  return false;
}

}  // namespace korch::cuda::linear_detail
