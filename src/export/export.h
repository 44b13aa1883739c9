// korch export: writes a self-contained, deployable package of a model and its plan.
//
//   OUTDIR/model.kpkg           primitive graph + plan + target record (runtime/package_format.h)
//   OUTDIR/weights.bin          every constant, 64-byte aligned, in tensor-id order
//   OUTDIR/kernels/             the plan's kernels as the backend compiled them ahead of time
//                               (Backend::ahead_of_time; on the CPU: kN.{o,h} per AOT kernel,
//                               halide_runtime.o, kernels.cc: the table of AOT functions)
//   OUTDIR/runtime/             the package runtime: korch_model.cc and the korch sources it needs
//                               (IR, reference interpreter, the backend's kernels), the backend's
//                               runtime headers
//   OUTDIR/include/korch_model.h  the C API
//   OUTDIR/CMakeLists.txt       builds korch_model (shared) and korch_model_static
//
// At run time the package needs the backend's libraries only (the CPU's: oneDNN and OpenMP).
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace korch {

struct ExportOptions {
  std::string out_dir;
  int threads = 2;              // the package's default thread count (korch_create(dir, 0, ...))
  std::string source_dir;       // korch's source tree (runtime sources are copied from it); empty: built-in default
  std::string backend = "cpu";  // the backend (registry name) whose ahead-of-time compiler builds the kernels
};

struct ExportSummary {
  int halide_kernels = 0;                 // kernels compiled ahead of time (PackagedKernels::aot_kernels)
  int onednn_kernels = 0;                 // kernels a library builds at load (PackagedKernels::library_kernels)
  int reference_kernels = 0;              // reference fallbacks (PackagedKernels::fallback_kernels)
  std::string target;                     // what the kernels were compiled for
  std::vector<std::string> cpu_features;  // CPU features the package checks at load
  int64_t weight_bytes = 0;
};

// output_names: the model's output names (declaration order of g.outputs()). Throws
// korch::Error when the plan does not fit the graph, the backend cannot export packages
// (no Backend::ahead_of_time) or a file cannot be written.
ExportSummary export_package(const PrimGraph& g, const std::vector<std::string>& output_names, const Plan& plan,
                             const ExportOptions& options, std::ostream& log);

}  // namespace korch
