// ONNX import: parse a model file, bind static input shapes, load weights (including
// external data), and run fission node by node into a PrimGraph. Constant subgraphs are
// folded during fission; dead primitives are removed; algebraic rewrites run (src/rewrite);
// the result is verified.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/prim_graph.h"
#include "rewrite/rewrite.h"

namespace onnx {
class ModelProto;
}

namespace korch {

struct ImportOptions {
  // Fixes dynamic (or overrides) input dimensions: name -> full shape.
  std::map<std::string, Shape> input_shapes;
  // Graph inputs whose values are fixed at import: they become constants (and stop being
  // inputs), so operators that need static parameters (shapes, axes, pads) can use them.
  std::map<std::string, TensorData> bound_inputs;
  // Algebraic rewrites (src/rewrite) after fission; KORCH_REWRITE=off turns the default off.
  bool rewrite = rewrites_enabled_by_default();
};

struct ImportedModel {
  PrimGraph graph;
  int opset = 0;
  std::string producer;
  std::map<std::string, int> op_histogram;             // ONNX op_type -> count
  int64_t num_parameters = 0;                          // elements in floating-point initializers
  std::vector<std::string> input_names, output_names;  // graph inputs left unbound; outputs
  RewriteStats rewrites;                               // what the algebraic rewrites changed
};

ImportedModel import_onnx_file(const std::string& path, const ImportOptions& options = {});
// `base_dir` resolves external-data locations.
ImportedModel import_onnx_model(const onnx::ModelProto& model, const std::string& base_dir,
                                const ImportOptions& options = {});
// The ONNX operators the importer handles itself rather than through a fission rule: control flow,
// unrolled at import (If on a constant condition, Loop with a constant trip count or a condition
// that folds, Scan over its static axis).
const std::vector<std::string>& control_flow_ops();
// Every operator korch imports: the fission rules' and control_flow_ops(), sorted.
std::vector<std::string> importable_onnx_ops();
// Parses --input-shape values like "input=1,3,224,224".
std::pair<std::string, Shape> parse_input_shape(const std::string& spec);

}  // namespace korch
