// Running ONNX test cases (model.onnx beside test_data_set_N/{input,output}_K.pb) and
// comparing results with tolerances: |a - b| <= atol + rtol * |b| elementwise.
#pragma once
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "frontend/onnx_import.h"
#include "ir/tensor_data.h"
#include "reference/compare.h"

namespace korch {

struct DataSet {
  std::string dir;
  std::vector<TensorData> inputs, outputs;
  std::vector<std::string> input_names, output_names;
};

// Lists test_data_set_* folders (sorted) and loads them.
std::vector<DataSet> load_data_sets(const std::string& case_dir);

// Executes a model: inputs in graph-input order -> outputs in graph-output order.
using ModelRunner = std::function<std::vector<TensorData>(const ImportedModel&, const std::vector<TensorData>&)>;

// Imports a model, binding (as constants) the data-set inputs that must be static.
ImportedModel import_binding_inputs(const std::string& model_path, ImportOptions options, const DataSet& ds,
                                    std::ostream& os);

// Runs every data set, prints one line per output and a PASS/FAIL per data set.
// Returns true when all pass.
bool check_case(const std::string& case_dir, const ImportOptions& options, const ModelRunner& run, const Tolerance& tol,
                std::ostream& os);

}  // namespace korch
