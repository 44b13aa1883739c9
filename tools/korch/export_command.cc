// korch export: import, load the plan (it must have been made for this graph), write the package.
#include "export_command.h"

#include <iostream>

#include "backend/cpu/cpu_backend.h"
#include "export/export.h"
#include "frontend/onnx_import.h"
#include "util/error.h"

namespace korch {

int run_export(const std::string& model, const std::vector<std::string>& input_shapes, const std::string& plan_path,
               const std::string& out_dir, int threads) {
  if (plan_path.empty()) fail("export needs --plan FILE (make one with `korch optimize MODEL -o plan.json`)");
  if (out_dir.empty()) fail("export needs -o OUTDIR");
  ImportOptions options;
  for (const std::string& s : input_shapes) options.input_shapes.insert(parse_input_shape(s));
  ImportedModel m = import_onnx_file(model, options);
  Plan plan = load_plan(m.graph, plan_path);
  if (std::string w = codegen_mismatch(plan, cpu::kCodegenVersion); !w.empty()) std::cerr << "warning: " << w << "\n";
  ExportOptions eo;
  eo.out_dir = out_dir;
  eo.threads = threads;
  ExportSummary s = export_package(m.graph, m.output_names, plan, eo, std::cout);
  std::cout << "exported " << model << " -> " << out_dir << "\n  kernels: " << plan.kernels.size() << " ("
            << s.halide_kernels << " halide aot, " << s.onednn_kernels << " onednn, " << s.reference_kernels
            << " reference)\n  target: " << s.target << "\n  cpu features: ";
  for (const std::string& f : s.cpu_features) std::cout << f << " ";
  std::cout << "\n  weights: " << s.weight_bytes << " bytes\n  build: cmake -S " << out_dir << " -B " << out_dir
            << "/build && cmake --build " << out_dir << "/build\n";
  return 0;
}

}  // namespace korch
