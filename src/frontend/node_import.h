// NodeImporter: fission of ONNX nodes into a PrimGraph, one node at a time, with names resolved
// through nested scopes (a subgraph sees the values of the graphs around it). The import pipeline
// (onnx_import.cc) runs it over the model's graph; control flow (control_flow.cc) runs it again
// over an If branch or each unrolled iteration of a Loop/Scan body, in a scope of its own.
#pragma once
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/prim_graph.h"

namespace onnx {
class GraphProto;
class NodeProto;
class AttributeProto;
class TensorProto;
}  // namespace onnx

namespace korch {

// ONNX value names visible at a point of the import: a graph's own, then its enclosing graphs'.
class Scope {
 public:
  explicit Scope(const Scope* parent = nullptr) : parent_(parent) {}
  TensorId find(const std::string& name) const;  // kNone where no enclosing scope has it
  void bind(const std::string& name, TensorId t) { names_[name] = t; }

 private:
  const Scope* parent_;
  std::unordered_map<std::string, TensorId> names_;
};

class NodeImporter {
 public:
  NodeImporter(PrimGraph& g, int opset, const std::string& base_dir, std::map<std::string, int>& op_histogram)
      : g_(g), opset_(opset), base_dir_(base_dir), op_histogram_(op_histogram) {}

  PrimGraph& graph() { return g_; }
  int opset() const { return opset_; }

  // Imports one node: its outputs are bound in `scope`. `label` names it in errors and origins.
  void import_node(const onnx::NodeProto& node, const std::string& label, Scope& scope);
  // A subgraph's initializers and nodes, bound in `scope` (whose parent holds the outer values);
  // node labels start with `prefix`.
  void import_subgraph(const onnx::GraphProto& body, const std::string& prefix, Scope& scope);
  // The value a subgraph output names in `scope` (an error naming `what` if it is never produced).
  TensorId subgraph_output(const onnx::GraphProto& body, int i, const Scope& scope, const std::string& what) const;

  // One standard ONNX node over already imported tensors (for the nodes control flow adds:
  // Gather, Reshape, Concat), through the same fission rules. Returns its single output.
  TensorId emit_node(const std::string& op_type, const std::vector<TensorId>& inputs,
                     const std::vector<onnx::AttributeProto>& attributes, const std::string& label);
  TensorId scalar_constant(int64_t value);

 private:
  void import_fission_node(const onnx::NodeProto& node, const std::string& label, Scope& scope);

  PrimGraph& g_;
  int opset_;
  std::string base_dir_;
  std::map<std::string, int>& op_histogram_;
  std::unordered_map<const onnx::TensorProto*, TensorId> subgraph_constants_;
  int synthetic_names_ = 0;
  int64_t subgraph_nodes_ = 0;  // nodes imported from subgraphs so far (every unrolled copy)
};

// Control flow unrolled at import (control_flow.cc): If with a constant condition, Scan over its
// static sequence, Loop with a constant trip count or a condition that folds to a constant.
bool is_control_flow(const std::string& op_type);
void import_control_flow(NodeImporter& importer, const onnx::NodeProto& node, const std::string& label, Scope& scope);

}  // namespace korch
