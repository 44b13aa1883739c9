// Loads ONNX test-case data sets and checks a model's outputs against them.
#include "check/test_case.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <set>

#include "fission/onnx_tensor.h"
#include "onnx/onnx_pb.h"
#include "util/error.h"

namespace korch {

namespace fs = std::filesystem;

std::vector<DataSet> load_data_sets(const std::string& case_dir) {
  if (!fs::is_directory(case_dir)) fail("'", case_dir, "' is not a directory");
  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(case_dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      dirs.push_back(e.path().string());
  std::sort(dirs.begin(), dirs.end());
  if (dirs.empty()) fail("'", case_dir, "' has no test_data_set_* folder");
  std::vector<DataSet> sets;
  for (const std::string& d : dirs) {
    DataSet ds;
    ds.dir = d;
    for (int i = 0; fs::exists(d + "/input_" + std::to_string(i) + ".pb"); ++i) {
      std::string name;
      ds.inputs.push_back(read_tensor_file(d + "/input_" + std::to_string(i) + ".pb", &name));
      ds.input_names.push_back(name);
    }
    for (int i = 0; fs::exists(d + "/output_" + std::to_string(i) + ".pb"); ++i) {
      std::string name;
      ds.outputs.push_back(read_tensor_file(d + "/output_" + std::to_string(i) + ".pb", &name));
      ds.output_names.push_back(name);
    }
    sets.push_back(std::move(ds));
  }
  return sets;
}

std::vector<std::string> declared_input_names(const std::string& model_path) {
  std::ifstream f(model_path, std::ios::binary);
  onnx::ModelProto model;
  if (!f || !model.ParseFromIstream(&f)) return {};
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  std::vector<std::string> names;
  for (const auto& vi : model.graph().input())
    if (!initializers.count(vi.name())) names.push_back(vi.name());
  return names;
}

ImportedModel import_binding_inputs(const std::string& model_path, ImportOptions options, const DataSet& ds,
                                    std::ostream& os) {
  // Inputs of a test case that feed static parameters (shapes, axes, pads, scales) are bound
  // to the data set's values and the model is imported again; each input at most once.
  for (size_t attempt = 0; attempt <= ds.inputs.size(); ++attempt) {
    try {
      return import_onnx_file(model_path, options);
    } catch (const ConstantInputRequired& e) {
      auto it = std::find(ds.input_names.begin(), ds.input_names.end(), e.input_name());
      if (it == ds.input_names.end() || options.bound_inputs.count(e.input_name())) throw;
      os << "  binding input '" << e.input_name() << "' to its data-set value (it sets a static parameter)\n";
      options.bound_inputs[e.input_name()] = ds.inputs[it - ds.input_names.begin()];
    }
  }
  fail("could not bind the inputs of '", model_path, "'");
}

bool check_case(const std::string& case_dir, const ImportOptions& options, const ModelRunner& run, const Tolerance& tol,
                std::ostream& os) {
  bool all_pass = true;
  std::vector<std::string> declared = declared_input_names(case_dir + "/model.onnx");
  for (DataSet& ds : load_data_sets(case_dir)) {
    // Tensor files without names bind to the model's inputs by position.
    for (size_t i = 0; i < ds.input_names.size(); ++i)
      if (ds.input_names[i].empty() && i < declared.size()) ds.input_names[i] = declared[i];
    ImportedModel model = import_binding_inputs(case_dir + "/model.onnx", options, ds, os);
    std::vector<TensorData> inputs;
    for (const std::string& name : model.input_names) {
      auto it = std::find(ds.input_names.begin(), ds.input_names.end(), name);
      if (it == ds.input_names.end()) fail(ds.dir, " has no value for input '", name, "'");
      inputs.push_back(ds.inputs[it - ds.input_names.begin()]);
    }
    if (ds.outputs.size() != model.output_names.size())
      fail(ds.dir, " has ", ds.outputs.size(), " expected outputs; the model produces ", model.output_names.size());
    std::vector<TensorData> actual = run(model, inputs);
    bool pass = true;
    for (size_t i = 0; i < actual.size(); ++i) {
      Comparison c = compare_tensors(actual[i], ds.outputs[i], tol);
      os << "  " << fs::path(ds.dir).filename().string() << " output '" << model.output_names[i] << "': ";
      if (!c.problem.empty())
        os << c.problem;
      else
        os << std::scientific << std::setprecision(3) << "max abs " << c.max_abs_error << ", max rel "
           << c.max_rel_error << std::defaultfloat << ", " << c.mismatches << " mismatches";
      os << (c.pass ? "  PASS" : "  FAIL") << "\n";
      pass = pass && c.pass;
    }
    os << fs::path(ds.dir).filename().string() << ": " << (pass ? "PASS" : "FAIL") << "\n";
    all_pass = all_pass && pass;
  }
  return all_pass;
}

}  // namespace korch
