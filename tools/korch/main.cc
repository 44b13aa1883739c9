// The korch command line: inspect | check. Every korch::Error becomes one "error: ..." line
// on stderr and exit status 1; usage errors exit with 2.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iomanip>
#include <iostream>

#include "check/test_case.h"
#include "frontend/onnx_import.h"
#include "ir/printer.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch {
namespace {

ImportOptions import_options(const std::vector<std::string>& shapes) {
  ImportOptions options;
  for (const std::string& s : shapes) options.input_shapes.insert(parse_input_shape(s));
  return options;
}

int run_inspect(const std::string& model_path, const std::vector<std::string>& shapes, const std::string& dot_path,
                bool print) {
  ImportedModel m = import_onnx_file(model_path, import_options(shapes));
  const PrimGraph& g = m.graph;
  std::cout << "model: " << model_path << "\nopset: " << m.opset << "   producer: " << m.producer
            << "\nparameters: " << m.num_parameters << "\n\ninputs:\n";
  for (TensorId t : g.inputs())
    std::cout << "  " << g.tensor(t).name << ": " << dtype_name(g.tensor(t).dtype) << shape_str(g.tensor(t).shape) << "\n";
  std::cout << "outputs:\n";
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const TensorInfo& info = g.tensor(g.outputs()[i]);
    std::cout << "  " << m.output_names[i] << ": " << dtype_name(info.dtype) << shape_str(info.shape) << "\n";
  }
  int total_ops = 0;
  for (const auto& [op, n] : m.op_histogram) total_ops += n;
  std::cout << "\nONNX operators (" << total_ops << "):\n";
  for (const auto& [op, n] : m.op_histogram) std::cout << "  " << std::left << std::setw(24) << op << n << "\n";
  int by_kind[kNumPrimKinds] = {};
  std::map<std::string, int> by_op;
  for (const Primitive& p : g.prims()) {
    by_kind[static_cast<int>(prim_kind(p.op))]++;
    by_op[prim_op_name(p.op)]++;
  }
  std::cout << "\nprimitives (" << g.num_prims() << ") by kind:\n";
  for (int k = 0; k < kNumPrimKinds; ++k)
    std::cout << "  " << std::left << std::setw(24) << prim_kind_name(static_cast<PrimKind>(k)) << by_kind[k] << "\n";
  std::cout << "primitives by op:\n";
  for (const auto& [op, n] : by_op) std::cout << "  " << std::left << std::setw(24) << op << n << "\n";
  std::cout << "structural hash: " << std::hex << structural_hash(g) << std::dec << "\n";
  if (print) {
    std::cout << "\n";
    print_graph(std::cout, g);
  }
  if (!dot_path.empty()) {
    std::ofstream f(dot_path);
    if (!f) fail("cannot write '", dot_path, "'");
    print_dot(f, g);
    std::cout << "wrote " << dot_path << "\n";
  }
  return 0;
}

int run_check(const std::string& case_dir, const std::string& backend, const std::vector<std::string>& shapes,
              const Tolerance& tol) {
  if (backend != "reference") fail("unknown backend '", backend, "' (available: reference)");
  Executor exec = [](const ImportedModel& m, const std::vector<TensorData>& inputs) {
    return reference::run_graph(m.graph, inputs);
  };
  std::cout << "case: " << case_dir << "  backend: " << backend << "  tolerance: |a-b| <= " << tol.atol << " + "
            << tol.rtol << "*|b|\n";
  bool ok = check_case(case_dir, import_options(shapes), exec, tol, std::cout);
  std::cout << (ok ? "PASS" : "FAIL") << "\n";
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace korch

int main(int argc, char** argv) {
  CLI::App app{"korch: optimal kernel orchestration for tensor programs"};
  app.require_subcommand(1);

  std::string model_path, dot_path, case_dir, backend = "reference";
  std::vector<std::string> shapes;
  bool print = false;
  korch::Tolerance tol;

  CLI::App* inspect = app.add_subcommand("inspect", "Import a model and summarise its operators and primitives");
  inspect->add_option("model", model_path, "ONNX model file")->required();
  inspect->add_option("--input-shape", shapes, "Fix an input shape: NAME=D0,D1,...");
  inspect->add_option("--dot", dot_path, "Write the primitive graph as Graphviz DOT");
  inspect->add_flag("--print", print, "Print the primitive graph");

  CLI::App* check = app.add_subcommand("check", "Run an ONNX test case and compare with its expected outputs");
  check->add_option("case_dir", case_dir, "Folder with model.onnx and test_data_set_N/")->required();
  check->add_option("--backend", backend, "reference");
  check->add_option("--input-shape", shapes, "Fix an input shape: NAME=D0,D1,...");
  check->add_option("--atol", tol.atol, "Absolute tolerance (default 1e-4)");
  check->add_option("--rtol", tol.rtol, "Relative tolerance (default 1e-3)");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*inspect) return korch::run_inspect(model_path, shapes, dot_path, print);
    if (*check) return korch::run_check(case_dir, backend, shapes, tol);
  } catch (const korch::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
