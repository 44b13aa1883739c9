// NodeImporter (see node_import.h): each node's operator must be in the default domain, have a
// fission rule (or be control flow) and be at an operator version the rule implements; every
// input must name a value of an enclosing scope; every named output must be produced.
#include "frontend/node_import.h"

#include <memory>

#include "fission/fission.h"
#include "fission/onnx_tensor.h"
#include "fission/onnx_versions.h"
#include "frontend/onnx_import.h"
#include "onnx/onnx_pb.h"
#include "util/error.h"

namespace korch {

namespace {

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

}  // namespace

TensorId Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent_) {
    auto it = s->names_.find(name);
    if (it != s->names_.end()) return it->second;
  }
  return kNone;
}

void NodeImporter::import_node(const onnx::NodeProto& node, const std::string& label, Scope& scope) {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    fail("node '", label, "' (", node.op_type(), ") is in domain '", node.domain(),
         "', which korch does not support (only the default ONNX domain)");
  op_histogram_[node.op_type()]++;
  if (is_control_flow(node.op_type())) {
    import_control_flow(*this, node, label, scope);
    return;
  }
  import_fission_node(node, label, scope);
}

void NodeImporter::import_fission_node(const onnx::NodeProto& node, const std::string& label, Scope& scope) {
  const FissionRule* rule = find_fission_rule(node.op_type());
  if (!rule)
    fail("node '", label, "': operator ", node.op_type(),
         " is not supported; supported operators: ", join(importable_onnx_ops(), " "));
  // 0: an operator the opset does not define yet (lenient: the rule's semantics apply).
  int version = onnx_since_version(node.op_type(), opset_);
  if (version > 0 && !rule_handles_version(node.op_type(), version))
    fail("node '", label, "': ", node.op_type(), " version ", version, " (opset ", opset_, ") is not supported");
  std::vector<TensorId> inputs;
  for (const std::string& in : node.input()) {
    if (in.empty()) {
      inputs.push_back(kNone);
      continue;
    }
    TensorId t = scope.find(in);
    if (t == kNone)
      fail("node '", label, "' (", node.op_type(), ") reads tensor '", in,
           "', which is neither a graph input, an initializer nor an earlier node's output (missing initializer or "
           "nodes out of order)");
    inputs.push_back(t);
  }
  int32_t origin = g_.add_origin(OpOrigin{label, node.op_type()});
  onnx::NodeProto named = node;
  named.set_name(label);
  FissionContext ctx(g_, named, opset_, origin, std::move(inputs));
  (*rule)(ctx);
  std::vector<char> produced(node.output_size(), 0);
  for (const auto& [index, tensor] : ctx.outputs()) {
    produced[index] = 1;
    if (!node.output(index).empty()) scope.bind(node.output(index), tensor);
  }
  for (int i = 0; i < node.output_size(); ++i)
    if (!node.output(i).empty() && !produced[i])
      fail("node '", label, "' (", node.op_type(), "): output ", i, " ('", node.output(i), "') is not supported");
}

void NodeImporter::import_subgraph(const onnx::GraphProto& body, const std::string& prefix, Scope& scope) {
  // Unrolled control flow grows the graph by a body per iteration: nested loops could make it
  // explode, so the copies are bounded.
  constexpr int64_t kMaxSubgraphNodes = 200000;
  subgraph_nodes_ += body.node_size();
  if (subgraph_nodes_ > kMaxSubgraphNodes)
    fail(prefix, ": unrolling the model's control flow would import more than ", kMaxSubgraphNodes, " subgraph nodes");
  for (const auto& init : body.initializer()) {
    if (init.name().empty()) fail("an initializer of ", prefix, " has no name");
    auto loaded = subgraph_constants_.find(&init);  // an unrolled body loads its constants once
    if (loaded == subgraph_constants_.end()) {
      auto value = std::make_shared<const TensorData>(
          tensor_from_proto(init, base_dir_, "initializer '" + init.name() + "' of " + prefix));
      loaded = subgraph_constants_.emplace(&init, g_.add_constant(init.name(), std::move(value))).first;
    }
    scope.bind(init.name(), loaded->second);
  }
  for (int n = 0; n < body.node_size(); ++n) {
    const onnx::NodeProto& node = body.node(n);
    import_node(node, prefix + "/" + (node.name().empty() ? node.op_type() + "_" + std::to_string(n) : node.name()),
                scope);
  }
}

TensorId NodeImporter::subgraph_output(const onnx::GraphProto& body, int i, const Scope& scope,
                                       const std::string& what) const {
  TensorId t = scope.find(body.output(i).name());
  if (t == kNone) fail(what, ": its output '", body.output(i).name(), "' is never produced");
  return t;
}

TensorId NodeImporter::emit_node(const std::string& op_type, const std::vector<TensorId>& inputs,
                                 const std::vector<onnx::AttributeProto>& attributes, const std::string& label) {
  onnx::NodeProto node;
  node.set_op_type(op_type);
  node.set_name(label);
  for (size_t i = 0; i < inputs.size(); ++i) node.add_input("in" + std::to_string(i));
  node.add_output("out");
  for (const auto& a : attributes) *node.add_attribute() = a;
  Scope scope;
  for (size_t i = 0; i < inputs.size(); ++i) scope.bind(node.input(static_cast<int>(i)), inputs[i]);
  import_fission_node(node, label, scope);
  return scope.find("out");
}

TensorId NodeImporter::scalar_constant(int64_t value) {
  TensorData t(DType::I64, {});
  t.data<int64_t>()[0] = value;
  return g_.add_constant("control_flow_index_" + std::to_string(synthetic_names_++),
                         std::make_shared<const TensorData>(std::move(t)));
}

}  // namespace korch
