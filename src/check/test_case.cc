// Loads ONNX test-case data sets and checks a model's outputs against them.
#include "check/test_case.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>

#include "frontend/onnx_tensor.h"
#include "util/error.h"

namespace korch {

namespace fs = std::filesystem;

Comparison compare_tensors(const TensorData& actual, const TensorData& expected, const Tolerance& tol) {
  Comparison c;
  if (actual.shape() != expected.shape()) {
    c.pass = false;
    c.problem = str_cat("shape ", shape_str(actual.shape()), " != expected ", shape_str(expected.shape()));
    return c;
  }
  if (actual.dtype() != expected.dtype()) {
    c.pass = false;
    c.problem = str_cat("dtype ", dtype_name(actual.dtype()), " != expected ", dtype_name(expected.dtype()));
    return c;
  }
  for (int64_t i = 0; i < actual.size(); ++i) {
    double a = actual.get_f64(i), b = expected.get_f64(i);
    if (!is_floating(actual.dtype())) {
      int64_t ai = actual.get_i64(i), bi = expected.get_i64(i);
      if (ai != bi) {
        ++c.mismatches;
        c.max_abs_error = std::max(c.max_abs_error, std::fabs(a - b));
      }
      continue;
    }
    if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) != std::isnan(b)) ++c.mismatches;
      continue;
    }
    if (std::isinf(a) || std::isinf(b)) {
      if (a != b) ++c.mismatches;
      continue;
    }
    double err = std::fabs(a - b);
    c.max_abs_error = std::max(c.max_abs_error, err);
    if (b != 0) c.max_rel_error = std::max(c.max_rel_error, err / std::fabs(b));
    if (err > tol.atol + tol.rtol * std::fabs(b)) ++c.mismatches;
  }
  c.pass = c.mismatches == 0;
  return c;
}

std::vector<DataSet> load_data_sets(const std::string& case_dir) {
  if (!fs::is_directory(case_dir)) fail("'", case_dir, "' is not a directory");
  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(case_dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) dirs.push_back(e.path().string());
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

bool check_case(const std::string& case_dir, const ImportOptions& options, const Executor& run, const Tolerance& tol,
                std::ostream& os) {
  ImportedModel model = import_onnx_file(case_dir + "/model.onnx", options);
  bool all_pass = true;
  for (const DataSet& ds : load_data_sets(case_dir)) {
    if (ds.inputs.size() != model.input_names.size())
      fail(ds.dir, " has ", ds.inputs.size(), " inputs; the model takes ", model.input_names.size());
    if (ds.outputs.size() != model.output_names.size())
      fail(ds.dir, " has ", ds.outputs.size(), " expected outputs; the model produces ", model.output_names.size());
    std::vector<TensorData> actual = run(model, ds.inputs);
    bool pass = true;
    for (size_t i = 0; i < actual.size(); ++i) {
      Comparison c = compare_tensors(actual[i], ds.outputs[i], tol);
      os << "  " << fs::path(ds.dir).filename().string() << " output '" << model.output_names[i] << "': ";
      if (!c.problem.empty()) os << c.problem;
      else
        os << std::scientific << std::setprecision(3) << "max abs " << c.max_abs_error << ", max rel " << c.max_rel_error
           << std::defaultfloat << ", " << c.mismatches << " mismatches";
      os << (c.pass ? "  PASS" : "  FAIL") << "\n";
      pass = pass && c.pass;
    }
    os << fs::path(ds.dir).filename().string() << ": " << (pass ? "PASS" : "FAIL") << "\n";
    all_pass = all_pass && pass;
  }
  return all_pass;
}

}  // namespace korch
