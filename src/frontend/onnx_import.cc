// Import pipeline: parse -> opset check -> initializers -> graph inputs (static shapes) ->
// fission of each node in order (node_import.cc: its operator version at the opset must be one the
// rule implements; with folding; control flow unrolled, control_flow.cc) -> outputs -> dead-code
// removal -> verify.
#include "frontend/onnx_import.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_map>

#include "fission/fission.h"
#include "fission/onnx_tensor.h"
#include "fission/onnx_versions.h"
#include "frontend/node_import.h"
#include "ir/printer.h"
#include "onnx/onnx_pb.h"
#include "util/error.h"

namespace korch {

namespace {

constexpr int kMinOpset = 1;

int default_domain_opset(const onnx::ModelProto& model) {
  int opset = -1;
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = static_cast<int>(o.version());
  if (opset < 0) {
    if (model.opset_import_size() == 0)
      opset = 1;
    else
      fail("the model imports no opset of the default ONNX domain");
  }
  if (opset < kMinOpset || opset > onnx_newest_opset())
    fail("the model uses opset ", opset, "; korch knows opsets ", kMinOpset, " to ", onnx_newest_opset(),
         " (re-export with e.g. torch.onnx.export(..., opset_version=17))");
  return opset;
}

Shape input_shape(const onnx::ValueInfoProto& vi, const ImportOptions& options) {
  auto it = options.input_shapes.find(vi.name());
  const auto& tt = vi.type().tensor_type();
  if (it != options.input_shapes.end()) {
    if (tt.has_shape() && tt.shape().dim_size() != static_cast<int>(it->second.size()))
      fail("--input-shape for '", vi.name(), "' has rank ", it->second.size(), " but the model declares rank ",
           tt.shape().dim_size());
    for (int i = 0; tt.has_shape() && i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      if (d.has_dim_value() && d.dim_value() > 0 && d.dim_value() != it->second[i])
        fail("--input-shape for '", vi.name(), "' sets dimension ", i, " to ", it->second[i],
             " but the model fixes it to ", d.dim_value());
    }
    return it->second;
  }
  if (!tt.has_shape())
    fail("input '", vi.name(), "' has no shape; fix it with --input-shape ", vi.name(), "=D0,D1,...");
  Shape s;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& d = tt.shape().dim(i);
    if (!d.has_dim_value() || d.dim_value() < 0)
      fail("input '", vi.name(), "' has a dynamic dimension ", i,
           d.has_dim_param() ? " ('" + d.dim_param() + "')" : std::string(),
           "; korch needs static shapes: pass --input-shape ", vi.name(), "=D0,D1,...");
    s.push_back(d.dim_value());
  }
  return s;
}

}  // namespace

std::pair<std::string, Shape> parse_input_shape(const std::string& spec) {
  auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) fail("--input-shape expects NAME=D0,D1,... (got '", spec, "')");
  std::string name = spec.substr(0, eq);
  Shape shape;
  std::stringstream ss(spec.substr(eq + 1));
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      int64_t v = std::stoll(item, &used);
      if (used != item.size() || v <= 0) throw std::invalid_argument(item);
      shape.push_back(v);
    } catch (const std::exception&) {
      fail("--input-shape '", spec, "': '", item, "' is not a positive integer");
    }
  }
  return {name, shape};
}

std::vector<std::string> importable_onnx_ops() {
  std::vector<std::string> ops = supported_onnx_ops();
  ops.insert(ops.end(), control_flow_ops().begin(), control_flow_ops().end());
  std::sort(ops.begin(), ops.end());
  return ops;
}

namespace {

// import_onnx_model; with `release` (the same model, owned by the caller), each initializer's raw
// bytes are freed once they are a TensorData, so that the weights are held once, not twice.
ImportedModel import_model(const onnx::ModelProto& model, onnx::ModelProto* release, const std::string& base_dir,
                           const ImportOptions& options) {
  ImportedModel result;
  result.opset = default_domain_opset(model);
  result.producer = model.producer_name() + " " + model.producer_version();
  const onnx::GraphProto& graph = model.graph();
  PrimGraph& g = result.graph;
  Scope names;

  for (int i = 0; i < graph.initializer_size(); ++i) {
    const onnx::TensorProto& init = graph.initializer(i);
    if (init.name().empty()) fail("an initializer has no name");
    auto value =
        std::make_shared<const TensorData>(tensor_from_proto(init, base_dir, "initializer '" + init.name() + "'"));
    if (is_floating(value->dtype())) result.num_parameters += value->size();
    names.bind(init.name(), g.add_constant(init.name(), std::move(value)));
    // clear_raw_data() would keep the string's capacity: swap it out instead.
    if (release) std::string().swap(*release->mutable_graph()->mutable_initializer(i)->mutable_raw_data());
  }
  std::set<std::string> known_inputs;
  for (const auto& vi : graph.input()) {
    known_inputs.insert(vi.name());
    if (names.find(vi.name()) != kNone) continue;  // an initializer listed as an input (old exporters)
    auto bound = options.bound_inputs.find(vi.name());
    if (bound != options.bound_inputs.end()) {
      names.bind(vi.name(), g.add_constant(vi.name(), std::make_shared<const TensorData>(bound->second)));
      continue;
    }
    if (!vi.type().has_tensor_type()) fail("input '", vi.name(), "' is not a tensor");
    DType dtype = dtype_from_onnx(vi.type().tensor_type().elem_type(), "input '" + vi.name() + "'");
    Shape shape = input_shape(vi, options);
    checked_num_elements(shape, dtype_size(dtype), "input '" + vi.name() + "'");
    names.bind(vi.name(), g.add_input(vi.name(), dtype, std::move(shape)));
    result.input_names.push_back(vi.name());
  }
  for (const auto& [name, shape] : options.input_shapes)
    if (!known_inputs.count(name)) fail("--input-shape names '", name, "', which is not an input of the model");

  NodeImporter importer(g, result.opset, base_dir, result.op_histogram);
  for (int n = 0; n < graph.node_size(); ++n) {
    const onnx::NodeProto& node = graph.node(n);
    importer.import_node(node, node.name().empty() ? node.op_type() + "_" + std::to_string(n) : node.name(), names);
  }
  for (const auto& vi : graph.output()) {
    TensorId t = names.find(vi.name());
    if (t == kNone) fail("graph output '", vi.name(), "' is never produced");
    // Give the output tensor its ONNX name (unless it is a graph input or shared).
    TensorInfo& info = g.mutable_tensor(t);
    if (info.producer != kNone) info.name = vi.name();
    g.mark_output(t);
    result.output_names.push_back(vi.name());
    if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0) {
      DType declared = dtype_from_onnx(vi.type().tensor_type().elem_type(), "output '" + vi.name() + "'");
      if (declared != info.dtype)
        fail("output '", vi.name(), "' is declared ", dtype_name(declared), " but computes ", dtype_name(info.dtype));
    }
  }
  if (g.outputs().empty()) fail("the model has no outputs");
  result.graph = g.without_dead_code();
  if (options.rewrite) result.graph = rewrite_graph(result.graph, &result.rewrites);
  verify_graph_or_throw(result.graph);
  return result;
}

}  // namespace

ImportedModel import_onnx_file(const std::string& path, const ImportOptions& options) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open model file '", path, "'");
  if (f.peek() == std::ifstream::traits_type::eof()) fail("'", path, "' is empty, not an ONNX model");
  onnx::ModelProto model;  // parsed from the stream: the file's bytes are not held beside it
  if (!model.ParseFromIstream(&f))
    fail("'", path, "' is not a valid ONNX model (protobuf parse failed: truncated or corrupt file?)");
  if (!model.has_graph()) fail("'", path, "' has no graph: not an ONNX model");
  auto slash = path.find_last_of('/');
  return import_model(model, &model, slash == std::string::npos ? "." : path.substr(0, slash), options);
}

ImportedModel import_onnx_model(const onnx::ModelProto& model, const std::string& base_dir,
                                const ImportOptions& options) {
  return import_model(model, nullptr, base_dir, options);
}

}  // namespace korch
