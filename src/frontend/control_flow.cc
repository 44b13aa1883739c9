// Control flow unrolled at import, so that the graph stays static:
//  - If: the condition must be a constant once folded; the branch it picks is imported in place.
//  - Scan: one copy of the body per element of the static scan axis, the state threaded from copy
//    to copy, scan inputs sliced with Gather (in the direction asked), scan outputs stacked with
//    Reshape + Concat on their axis (reversed where asked); Scan-8 once per batch element, without
//    sequence_lens.
//  - Loop: one copy of the body per iteration while the trip count allows and the condition, which
//    must fold to a constant in every copy, holds; at most kMaxIterations copies.
// A condition or trip count computed from the model's inputs is data-dependent control flow: it
// is refused with an error naming the node, as are sequence-typed values.
#include <algorithm>

#include "frontend/node_import.h"
#include "frontend/onnx_import.h"
#include "onnx/onnx_pb.h"
#include "util/error.h"

namespace korch {

namespace {

constexpr int64_t kMaxIterations = 4096;  // copies of a Loop body (the unrolled graph grows with each)

const onnx::AttributeProto* find_attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

const onnx::GraphProto& graph_attribute(const onnx::NodeProto& node, const std::string& name,
                                        const std::string& label) {
  const onnx::AttributeProto* a = find_attribute(node, name);
  if (!a || !a->has_g()) fail("node '", label, "' (", node.op_type(), ") has no '", name, "' graph");
  return a->g();
}

std::vector<int64_t> ints_attribute(const onnx::NodeProto& node, const std::string& name, size_t count,
                                    int64_t fallback) {
  const onnx::AttributeProto* a = find_attribute(node, name);
  if (!a) return std::vector<int64_t>(count, fallback);
  return {a->ints().begin(), a->ints().end()};
}

onnx::AttributeProto int_attribute(const std::string& name, int64_t value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
  return a;
}

// The value of a scalar (or one-element) constant input; an error where it is computed from the
// model's inputs.
double constant_scalar(const PrimGraph& g, TensorId t, const std::string& label, const std::string& what) {
  const TensorInfo& info = g.tensor(t);
  if (!info.is_constant())
    fail("node '", label, "': ", what,
         " is computed from the model's inputs; korch unrolls control flow at import and needs it to be a constant "
         "(data-dependent control flow is not supported)");
  if (info.constant->size() != 1) fail("node '", label, "': ", what, " must hold one element");
  return info.constant->get_f64(0);
}

TensorId input_value(const onnx::NodeProto& node, int i, const Scope& scope, const std::string& label) {
  if (i >= node.input_size() || node.input(i).empty()) return kNone;
  TensorId t = scope.find(node.input(i));
  if (t == kNone)
    fail("node '", label, "' (", node.op_type(), ") reads tensor '", node.input(i),
         "', which is neither a graph input, an initializer nor an earlier node's output");
  return t;
}

// The subgraph's value types must be tensors (sequence- and optional-typed values are refused).
void check_tensor_values(const onnx::GraphProto& body, const std::string& label) {
  for (const auto* list : {&body.input(), &body.output()})
    for (const auto& vi : *list)
      if (vi.has_type() && !vi.type().has_tensor_type())
        fail("node '", label, "': subgraph value '", vi.name(),
             "' is sequence- or optional-typed; korch handles tensors only");
}

// Per-iteration pieces stacked along a new axis: each reshaped to have extent 1 there, then one
// Concat.
TensorId stack(NodeImporter& importer, std::vector<TensorId> pieces, int64_t axis, bool reverse,
               const std::string& label) {
  if (reverse) std::reverse(pieces.begin(), pieces.end());
  const PrimGraph& g = importer.graph();
  Shape shape = g.tensor(pieces.front()).shape;
  int64_t rank = static_cast<int64_t>(shape.size()) + 1;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) fail("node '", label, "': scan output axis out of range");
  shape.insert(shape.begin() + axis, 1);
  TensorData target(DType::I64, {rank});
  for (int64_t i = 0; i < rank; ++i) target.data<int64_t>()[i] = shape[i];
  TensorId target_shape =
      importer.graph().add_constant(label + "/stacked_shape", std::make_shared<const TensorData>(std::move(target)));
  std::vector<TensorId> expanded;
  for (TensorId p : pieces) {
    if (g.tensor(p).shape != g.tensor(pieces.front()).shape)
      fail("node '", label, "': a scan output changes shape between iterations");
    expanded.push_back(importer.emit_node("Reshape", {p, target_shape}, {}, label + "/stack"));
  }
  if (expanded.size() == 1) return expanded.front();
  return importer.emit_node("Concat", expanded, {int_attribute("axis", axis)}, label + "/stack");
}

void import_if(NodeImporter& importer, const onnx::NodeProto& node, const std::string& label, Scope& scope) {
  TensorId cond = input_value(node, 0, scope, label);
  if (cond == kNone) fail("node '", label, "' (If) has no condition");
  bool taken = constant_scalar(importer.graph(), cond, label, "the If condition") != 0;
  const onnx::GraphProto& branch = graph_attribute(node, taken ? "then_branch" : "else_branch", label);
  check_tensor_values(branch, label);
  if (branch.output_size() != node.output_size())
    fail("node '", label, "' (If): the branch has ", branch.output_size(), " outputs, the node ", node.output_size());
  Scope inner(&scope);
  importer.import_subgraph(branch, label + (taken ? "/then" : "/else"), inner);
  for (int i = 0; i < node.output_size(); ++i)
    if (!node.output(i).empty()) scope.bind(node.output(i), importer.subgraph_output(branch, i, inner, label));
}

// The scan attributes of a Scan node, each of its length (an error otherwise).
struct ScanAxes {
  std::vector<int64_t> in_axes, in_dirs, out_axes, out_dirs;
};

// One Scan over `scanned` (already without a batch axis): the body unrolled over the sequence.
// Returns the final states, then the stacked scan outputs.
std::vector<TensorId> unroll_scan(NodeImporter& importer, const onnx::GraphProto& body, const Scope& outer,
                                  std::vector<TensorId> state, const std::vector<TensorId>& scanned, ScanAxes axes,
                                  int k, const std::string& label) {
  const PrimGraph& g = importer.graph();
  const int n = static_cast<int>(state.size());
  const int m = static_cast<int>(scanned.size());
  int64_t length = -1;
  for (int j = 0; j < m; ++j) {
    const Shape& shape = g.tensor(scanned[j]).shape;
    int64_t rank = static_cast<int64_t>(shape.size());
    int64_t& axis = axes.in_axes[j];
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) fail("node '", label, "' (Scan): scan input axis out of range");
    if (length >= 0 && shape[axis] != length)
      fail("node '", label, "' (Scan): the scan inputs differ in sequence length");
    length = shape[axis];
  }
  if (length < 1) fail("node '", label, "' (Scan): an empty sequence leaves its scan outputs without a shape");
  std::vector<std::vector<TensorId>> pieces(k);
  for (int64_t t = 0; t < length; ++t) {
    std::string prefix = label + "/" + std::to_string(t);
    Scope inner(&outer);
    for (int i = 0; i < n; ++i) inner.bind(body.input(i).name(), state[i]);
    for (int j = 0; j < m; ++j) {
      TensorId index = importer.scalar_constant(axes.in_dirs[j] ? length - 1 - t : t);
      inner.bind(body.input(n + j).name(),
                 importer.emit_node("Gather", {scanned[j], index}, {int_attribute("axis", axes.in_axes[j])},
                                    prefix + "/slice"));
    }
    importer.import_subgraph(body, prefix, inner);
    for (int i = 0; i < n; ++i) state[i] = importer.subgraph_output(body, i, inner, label);
    for (int j = 0; j < k; ++j) pieces[j].push_back(importer.subgraph_output(body, n + j, inner, label));
  }
  std::vector<TensorId> results = state;
  for (int j = 0; j < k; ++j)
    results.push_back(stack(importer, pieces[j], axes.out_axes[j], axes.out_dirs[j] != 0, label));
  return results;
}

void import_scan(NodeImporter& importer, const onnx::NodeProto& node, const std::string& label, Scope& scope) {
  const onnx::GraphProto& body = graph_attribute(node, "body", label);
  check_tensor_values(body, label);
  const onnx::AttributeProto* m_attr = find_attribute(node, "num_scan_inputs");
  if (!m_attr) fail("node '", label, "' (Scan) has no num_scan_inputs");
  // Scan-8 (opsets 8): a first input sequence_lens, and a batch axis 0 on every input and output.
  const bool batched = importer.opset() < 9;
  const int first = batched ? 1 : 0;
  const int m = static_cast<int>(m_attr->i());
  const int n = node.input_size() - first - m;
  const int k = node.output_size() - n;
  if (m < 1 || n < 0 || k < 0 || body.input_size() != n + m || body.output_size() != n + k)
    fail("node '", label, "' (Scan): inputs, outputs and num_scan_inputs do not match its body");
  ScanAxes axes{ints_attribute(node, "scan_input_axes", m, 0),
                ints_attribute(node, batched ? "directions" : "scan_input_directions", m, 0),
                ints_attribute(node, "scan_output_axes", k, 0), ints_attribute(node, "scan_output_directions", k, 0)};
  if (axes.in_axes.size() != static_cast<size_t>(m) || axes.in_dirs.size() != static_cast<size_t>(m) ||
      axes.out_axes.size() != static_cast<size_t>(k) || axes.out_dirs.size() != static_cast<size_t>(k))
    fail("node '", label, "' (Scan): an axes or directions attribute has the wrong length");
  std::vector<TensorId> state(n), scanned(m);
  for (int i = 0; i < n; ++i) {
    state[i] = input_value(node, first + i, scope, label);
    if (state[i] == kNone) fail("node '", label, "' (Scan): state input ", i, " is missing");
  }
  for (int j = 0; j < m; ++j) {
    scanned[j] = input_value(node, first + n + j, scope, label);
    if (scanned[j] == kNone) fail("node '", label, "' (Scan): scan input ", j, " is missing");
  }
  std::vector<TensorId> results;
  if (!batched) {
    results = unroll_scan(importer, body, scope, state, scanned, axes, k, label);
  } else {
    // Per batch element: its slice of every input (the sequence is then axis 0), one unrolled
    // scan, and the results stacked over the batch again.
    const PrimGraph& g = importer.graph();
    if (input_value(node, 0, scope, label) != kNone)
      fail("node '", label, "' (Scan): sequence_lens is not supported (every sequence has the full length)");
    const int64_t batch = g.tensor(scanned.front()).shape.empty() ? 0 : g.tensor(scanned.front()).shape[0];
    if (batch < 1) fail("node '", label, "' (Scan): the batch axis is empty");
    std::vector<std::vector<TensorId>> per_batch(n + k);
    for (int64_t b = 0; b < batch; ++b) {
      TensorId index = importer.scalar_constant(b);
      auto slice = [&](TensorId t) {
        return importer.emit_node("Gather", {t, index}, {int_attribute("axis", 0)}, label + "/batch");
      };
      std::vector<TensorId> s(n), x(m);
      for (int i = 0; i < n; ++i) s[i] = slice(state[i]);
      for (int j = 0; j < m; ++j) x[j] = slice(scanned[j]);
      std::vector<TensorId> r = unroll_scan(importer, body, scope, s, x, axes, k, label + "/" + std::to_string(b));
      for (int i = 0; i < n + k; ++i) per_batch[i].push_back(r[i]);
    }
    for (auto& pieces : per_batch) results.push_back(stack(importer, pieces, 0, false, label));
  }
  for (int i = 0; i < n + k; ++i)
    if (!node.output(i).empty()) scope.bind(node.output(i), results[i]);
}

void import_loop(NodeImporter& importer, const onnx::NodeProto& node, const std::string& label, Scope& scope) {
  const onnx::GraphProto& body = graph_attribute(node, "body", label);
  check_tensor_values(body, label);
  const int n = node.input_size() - 2;   // loop-carried values
  const int k = node.output_size() - n;  // scan outputs
  if (n < 0 || k < 0 || body.input_size() != n + 2 || body.output_size() != n + 1 + k)
    fail("node '", label, "' (Loop): inputs and outputs do not match its body");
  const PrimGraph& g = importer.graph();
  TensorId trip_count = input_value(node, 0, scope, label);
  TensorId initial_cond = input_value(node, 1, scope, label);
  int64_t trips = kMaxIterations;
  if (trip_count != kNone) trips = static_cast<int64_t>(constant_scalar(g, trip_count, label, "the Loop trip count M"));
  bool running = initial_cond == kNone || constant_scalar(g, initial_cond, label, "the Loop condition") != 0;
  if (trip_count == kNone && initial_cond == kNone)
    fail("node '", label, "' (Loop) has neither a trip count nor a condition: it never ends");
  if (trips > kMaxIterations)
    fail("node '", label, "' (Loop): ", trips, " iterations; korch unrolls at most ", kMaxIterations);

  std::vector<TensorId> state(n);
  for (int i = 0; i < n; ++i) {
    state[i] = input_value(node, 2 + i, scope, label);
    if (state[i] == kNone) fail("node '", label, "' (Loop): loop-carried input ", i, " is missing");
  }
  std::vector<std::vector<TensorId>> pieces(k);
  int64_t i = 0;
  for (; i < trips && running; ++i) {
    std::string prefix = label + "/" + std::to_string(i);
    Scope inner(&scope);
    inner.bind(body.input(0).name(), importer.scalar_constant(i));
    TensorData cond_value(DType::Bool, {});
    cond_value.data<uint8_t>()[0] = 1;
    inner.bind(body.input(1).name(), importer.graph().add_constant(
                                         prefix + "/cond", std::make_shared<const TensorData>(std::move(cond_value))));
    for (int c = 0; c < n; ++c) inner.bind(body.input(2 + c).name(), state[c]);
    importer.import_subgraph(body, prefix, inner);
    running = constant_scalar(g, importer.subgraph_output(body, 0, inner, label), label,
                              "the condition the Loop body computes") != 0;
    for (int c = 0; c < n; ++c) state[c] = importer.subgraph_output(body, 1 + c, inner, label);
    for (int j = 0; j < k; ++j) pieces[j].push_back(importer.subgraph_output(body, 1 + n + j, inner, label));
  }
  if (running && trip_count == kNone)
    fail("node '", label, "' (Loop): the condition still holds after ", kMaxIterations,
         " iterations; korch unrolls at most that many");
  for (int c = 0; c < n; ++c)
    if (!node.output(c).empty()) scope.bind(node.output(c), state[c]);
  for (int j = 0; j < k; ++j) {
    if (node.output(n + j).empty()) continue;
    if (pieces[j].empty()) fail("node '", label, "' (Loop) runs no iteration: its scan outputs have no shape");
    scope.bind(node.output(n + j), stack(importer, pieces[j], 0, false, label));
  }
}

}  // namespace

const std::vector<std::string>& control_flow_ops() {
  static const std::vector<std::string> ops = {"If", "Loop", "Scan"};
  return ops;
}

bool is_control_flow(const std::string& op_type) {
  const auto& ops = control_flow_ops();
  return std::find(ops.begin(), ops.end(), op_type) != ops.end();
}

void import_control_flow(NodeImporter& importer, const onnx::NodeProto& node, const std::string& label, Scope& scope) {
  if (node.op_type() == "If")
    import_if(importer, node, label, scope);
  else if (node.op_type() == "Scan")
    import_scan(importer, node, label, scope);
  else
    import_loop(importer, node, label, scope);
}

}  // namespace korch
