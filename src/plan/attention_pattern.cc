// match_attention / find_attention / attention_of_kernel: the softmax-attention pattern of
// attention_pattern.h, walked backwards from its final Div.
#include "plan/attention_pattern.h"

#include <algorithm>

namespace korch {
namespace {

bool is_graph_output(const PrimGraph& g, TensorId t) {
  return std::find(g.outputs().begin(), g.outputs().end(), t) != g.outputs().end();
}

// Whether tensor t is read exactly by the primitives `readers` (in any order) and is no graph output.
bool read_only_by(const PrimGraph& g, TensorId t, std::vector<PrimId> readers,
                  const std::vector<std::vector<PrimId>>& consumers) {
  std::vector<PrimId> actual = consumers[t];
  std::sort(actual.begin(), actual.end());
  std::sort(readers.begin(), readers.end());
  return actual == readers && !is_graph_output(g, t);
}

const Primitive* producer(const PrimGraph& g, TensorId t, PrimOp op) {
  PrimId p = g.tensor(t).producer;
  return p != kNone && g.prim(p).op == op ? &g.prim(p) : nullptr;
}

// A reduction over exactly the last axis of its input, keeping it.
bool reduces_last_axis(const PrimGraph& g, const Primitive& r) {
  const int64_t last = static_cast<int64_t>(g.tensor(r.inputs[0]).shape.size()) - 1;
  return r.attrs.ints("axes") == std::vector<int64_t>{last} && r.attrs.i("keepdims") == 1;
}

// A step of the score chain: elementwise, two operands, the other one broadcast to the scores'
// shape (so the step keeps that shape).
bool is_score_step(const PrimGraph& g, const Primitive& p, TensorId chain) {
  if (p.op != PrimOp::Add && p.op != PrimOp::Sub && p.op != PrimOp::Mul && p.op != PrimOp::Div) return false;
  if (p.inputs.size() != 2 || (p.inputs[0] == chain) == (p.inputs[1] == chain)) return false;
  const TensorInfo& other = g.tensor(p.inputs[0] == chain ? p.inputs[1] : p.inputs[0]);
  const Shape& shape = g.tensor(chain).shape;
  if (other.dtype != DType::F32 || other.shape.size() > shape.size()) return false;
  return g.tensor(p.output).shape == shape;
}

Shape batch_dims(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

constexpr int kMaxScoreSteps = 4;

// From the scores S' back to the MatMul that makes S: *steps gets the elementwise steps in
// order, *operands which input of each is the other operand, *matmul_out S. Each step's chain operand has the scores'
// shape and is read only by the step; where both operands could be, the first that leads to a MatMul is taken.
bool walk_score_steps(const PrimGraph& g, TensorId t, const std::vector<std::vector<PrimId>>& consumers,
                      std::vector<PrimId>* steps, std::vector<int>* operands, TensorId* matmul_out, int depth = 0) {
  PrimId p = g.tensor(t).producer;
  if (p == kNone) return false;
  const Primitive& step = g.prim(p);
  if (step.op == PrimOp::MatMul) {
    *matmul_out = t;
    return true;
  }
  if (depth >= kMaxScoreSteps || step.inputs.size() != 2) return false;
  for (TensorId chain : step.inputs) {
    if (g.tensor(chain).producer == kNone || !is_score_step(g, step, chain) || !read_only_by(g, chain, {p}, consumers))
      continue;
    std::vector<PrimId> inner_steps = *steps;
    std::vector<int> inner_operands = *operands;
    if (walk_score_steps(g, chain, consumers, &inner_steps, &inner_operands, matmul_out, depth + 1)) {
      inner_steps.push_back(p);
      inner_operands.push_back(chain == step.inputs[0] ? 1 : 0);
      *steps = std::move(inner_steps);
      *operands = std::move(inner_operands);
      return true;
    }
  }
  return false;
}

}  // namespace

std::optional<AttentionPattern> match_attention(const PrimGraph& g, PrimId div,
                                                const std::vector<std::vector<PrimId>>& consumers) {
  AttentionPattern a;
  const Primitive& normalize = g.prim(div);
  if (normalize.op != PrimOp::Div || normalize.inputs.size() != 2) return std::nullopt;
  a.normalize = div;
  a.output = normalize.output;
  const Primitive* values = producer(g, normalize.inputs[0], PrimOp::MatMul);
  const Primitive* row_sum = producer(g, normalize.inputs[1], PrimOp::ReduceSum);
  if (!values || !row_sum || !reduces_last_axis(g, *row_sum) || values->inputs[0] != row_sum->inputs[0])
    return std::nullopt;
  a.values = g.tensor(normalize.inputs[0]).producer;
  a.row_sum = g.tensor(normalize.inputs[1]).producer;
  const TensorId e = values->inputs[0];
  a.v = values->inputs[1];
  const Primitive* exp = producer(g, e, PrimOp::Exp);
  const Primitive* shift = exp ? producer(g, exp->inputs[0], PrimOp::Sub) : nullptr;
  if (!shift) return std::nullopt;
  a.exp = g.tensor(e).producer;
  a.shift = g.tensor(exp->inputs[0]).producer;
  const TensorId scores = shift->inputs[0];
  const Primitive* row_max = producer(g, shift->inputs[1], PrimOp::ReduceMax);
  if (!row_max || row_max->inputs[0] != scores || !reduces_last_axis(g, *row_max)) return std::nullopt;
  a.row_max = g.tensor(shift->inputs[1]).producer;

  // Every intermediate is read only inside the pattern.
  if (!read_only_by(g, normalize.inputs[0], {div}, consumers) ||
      !read_only_by(g, normalize.inputs[1], {div}, consumers) ||
      !read_only_by(g, e, {a.values, a.row_sum}, consumers) || !read_only_by(g, exp->inputs[0], {a.exp}, consumers) ||
      !read_only_by(g, shift->inputs[1], {a.shift}, consumers) ||
      !read_only_by(g, scores, {a.row_max, a.shift}, consumers))
    return std::nullopt;

  // Back through the score steps to the first MatMul.
  TensorId t = scores;
  if (!walk_score_steps(g, t, consumers, &a.score_steps, &a.score_operand, &t)) return std::nullopt;
  const Primitive* first = producer(g, t, PrimOp::MatMul);
  if (!first) return std::nullopt;
  a.scores = g.tensor(t).producer;
  a.q = first->inputs[0];
  a.kt = first->inputs[1];

  const Shape& q = g.tensor(a.q).shape;
  const Shape& kt = g.tensor(a.kt).shape;
  const Shape& v = g.tensor(a.v).shape;
  const Shape& y = g.tensor(a.output).shape;
  if (q.size() < 2 || kt.size() != q.size() || v.size() != q.size() || y.size() != q.size()) return std::nullopt;
  if (batch_dims(q) != batch_dims(y) || batch_dims(kt) != batch_dims(y) || batch_dims(v) != batch_dims(y))
    return std::nullopt;
  for (TensorId x : {a.q, a.kt, a.v, a.output})
    if (g.tensor(x).dtype != DType::F32) return std::nullopt;

  for (auto [view, t] : {std::pair{&a.q_view, a.q}, {&a.kt_view, a.kt}, {&a.v_view, a.v}, {&a.y_view, a.output}}) {
    view->tensor = view->base = t;
    view->view = dense_view(g.tensor(t).shape);
  }
  a.prims = a.score_steps;
  for (PrimId p : {a.scores, a.row_max, a.shift, a.exp, a.row_sum, a.values, a.normalize}) a.prims.push_back(p);
  std::sort(a.prims.begin(), a.prims.end());
  return a;
}

bool AttentionPattern::has_views() const {
  return !q_view.chain.empty() || !kt_view.chain.empty() || !v_view.chain.empty() || !y_view.chain.empty() ||
         !q_scale_prims.empty();
}

namespace {

// The scalar value of a one-element f32 constant.
std::optional<float> scalar_constant(const PrimGraph& g, TensorId t) {
  const TensorInfo& info = g.tensor(t);
  if (!info.is_constant() || info.dtype != DType::F32 || num_elements(info.shape) != 1) return std::nullopt;
  return info.constant->data<float>()[0];
}

// The operand `t` of the core read through the layout chain above it (and, with `scale`, scalar
// Mul/Div steps, whose product goes to *scale): steps are taken from t upwards while each one's
// output is read only by the step below, as many as compose into one view.
AttentionView operand_view(const PrimGraph& g, TensorId t, const std::vector<std::vector<PrimId>>& consumers,
                           float* scale, std::vector<PrimId>* scale_prims) {
  struct Step {
    PrimId prim;
    TensorId input;  // the operand the chain continues from
    float factor;    // a scale's factor (0 for a layout link)
  };
  std::vector<Step> steps;  // from t upwards
  TensorId top = t;
  for (;;) {
    PrimId p = g.tensor(top).producer;
    if (p == kNone || consumers[top].size() != 1 || is_graph_output(g, top)) break;
    const Primitive& prim = g.prim(p);
    if (prim.op == PrimOp::Transpose || prim.op == PrimOp::Slice || prim.op == PrimOp::Reshape) {
      steps.push_back({p, prim.inputs[0], 0});
    } else if (scale && (prim.op == PrimOp::Mul || prim.op == PrimOp::Div) && prim.inputs.size() == 2) {
      int chain = 0;
      std::optional<float> c = scalar_constant(g, prim.inputs[1]);
      if (!c && prim.op == PrimOp::Mul) {
        c = scalar_constant(g, prim.inputs[0]);
        chain = 1;
      }
      if (!c || *c == 0 || g.tensor(prim.inputs[chain]).shape != g.tensor(prim.output).shape) break;
      steps.push_back({p, prim.inputs[chain], prim.op == PrimOp::Mul ? *c : 1 / *c});
    } else {
      break;
    }
    top = steps.back().input;
  }
  for (size_t count = steps.size(); count > 0; --count) {
    const TensorId base = steps[count - 1].input;
    StridedView view = dense_view(g.tensor(base).shape);
    bool ok = true;
    for (size_t i = count; i-- > 0 && ok;) {
      if (steps[i].factor != 0) continue;
      std::optional<StridedView> next = view_through(view, g.prim(steps[i].prim));
      if (next) view = *next;
      ok = next.has_value();
    }
    if (!ok) continue;
    AttentionView v{t, base, {}, view};
    for (size_t i = 0; i < count; ++i) {
      if (steps[i].factor == 0) {
        v.chain.push_back(steps[i].prim);
      } else {
        *scale *= steps[i].factor;
        scale_prims->push_back(steps[i].prim);
      }
    }
    return v;
  }
  return AttentionView{t, t, {}, dense_view(g.tensor(t).shape)};
}

// Y written through the Transpose/Reshape chain below it into the chain's last output.
AttentionView output_view(const PrimGraph& g, TensorId y, const std::vector<std::vector<PrimId>>& consumers) {
  std::vector<PrimId> links;
  TensorId bottom = y;
  while (consumers[bottom].size() == 1 && !is_graph_output(g, bottom)) {
    const Primitive& prim = g.prim(consumers[bottom][0]);
    if (prim.op != PrimOp::Transpose && prim.op != PrimOp::Reshape) break;
    links.push_back(consumers[bottom][0]);
    bottom = prim.output;
  }
  AttentionView v{y, y, {}, dense_view(g.tensor(y).shape)};
  // Back from the chain's output: each link's input viewed inside its output.
  for (size_t end = links.size(); end > 0; --end) {
    StridedView view = dense_view(g.tensor(g.prim(links[end - 1]).output).shape);
    bool ok = true;
    for (size_t i = end; i-- > 0 && ok;) {
      const Primitive& prim = g.prim(links[i]);
      const Shape& in_shape = g.tensor(prim.inputs[0]).shape;
      if (prim.op == PrimOp::Reshape) {
        std::optional<StridedView> next = reshape_view(view, in_shape);
        if (next) view = *next;
        ok = next.has_value();
      } else {
        const std::vector<int64_t>& perm = prim.attrs.ints("perm");
        StridedView back{view.offset, in_shape, std::vector<int64_t>(in_shape.size())};
        for (size_t d = 0; d < perm.size(); ++d) back.strides[perm[d]] = view.strides[d];
        view = back;
      }
    }
    if (!ok) continue;
    v.base = g.prim(links[end - 1]).output;
    v.chain.assign(links.begin(), links.begin() + static_cast<std::ptrdiff_t>(end));
    v.view = view;
    break;
  }
  return v;
}

}  // namespace

std::optional<AttentionPattern> with_views(const PrimGraph& g, const AttentionPattern& core,
                                           const std::vector<std::vector<PrimId>>& consumers) {
  AttentionPattern a = core;
  a.q_view = operand_view(g, core.q, consumers, &a.q_scale, &a.q_scale_prims);
  a.kt_view = operand_view(g, core.kt, consumers, nullptr, nullptr);
  a.v_view = operand_view(g, core.v, consumers, nullptr, nullptr);
  a.y_view = output_view(g, core.output, consumers);
  if (!a.has_views()) return std::nullopt;
  for (const AttentionView* v : {&a.q_view, &a.kt_view, &a.v_view, &a.y_view})
    a.prims.insert(a.prims.end(), v->chain.begin(), v->chain.end());
  a.prims.insert(a.prims.end(), a.q_scale_prims.begin(), a.q_scale_prims.end());
  std::sort(a.prims.begin(), a.prims.end());
  a.prims.erase(std::unique(a.prims.begin(), a.prims.end()), a.prims.end());
  return a;
}

std::vector<AttentionPattern> find_attention(const PrimGraph& g) {
  std::vector<AttentionPattern> found;
  const std::vector<std::vector<PrimId>> consumers = g.consumers();
  for (PrimId p = 0; p < g.num_prims(); ++p)
    if (g.prim(p).op == PrimOp::Div)
      if (auto a = match_attention(g, p, consumers)) found.push_back(std::move(*a));
  return found;
}

std::optional<AttentionPattern> attention_of_kernel(const PrimGraph& g, const Kernel& k) {
  if (k.num_linear != 2 || k.output == kNone) return std::nullopt;
  PrimId div = g.tensor(k.output).producer;
  if (div == kNone) return std::nullopt;
  const std::vector<std::vector<PrimId>> consumers = g.consumers();
  // The kernel's sink is Y, or the last link of the chain after it: find the Div above.
  std::optional<AttentionPattern> a = match_attention(g, div, consumers);
  if (a && a->prims == k.prims) return a;
  for (PrimId p : k.prims)
    if (g.prim(p).op == PrimOp::Div)
      if (std::optional<AttentionPattern> core = match_attention(g, p, consumers)) {
        std::optional<AttentionPattern> extended = with_views(g, *core, consumers);
        if (extended && extended->prims == k.prims) return extended;
      }
  return std::nullopt;
}

}  // namespace korch
