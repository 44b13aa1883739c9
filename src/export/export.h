// korch export: writes a self-contained, deployable package of a model and its plan.
//
//   OUTDIR/model.kpkg           primitive graph + plan + target record (runtime/package_format.h)
//   OUTDIR/weights.bin          every constant, 64-byte aligned, in tensor-id order
//   OUTDIR/kernels/kN.{o,h}     each Halide kernel of the plan compiled ahead of time (no_runtime)
//   OUTDIR/kernels/halide_runtime.o, kernels.cc (the table of AOT functions)
//   OUTDIR/runtime/             the package runtime: korch_model.cc and the korch sources it needs
//                               (IR, reference interpreter, oneDNN backend), HalideRuntime.h
//   OUTDIR/include/korch_model.h  the C API
//   OUTDIR/CMakeLists.txt       builds korch_model (shared) and korch_model_static
//
// At run time the package needs oneDNN and OpenMP only.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "orchestrate/plan.h"

namespace korch {

struct ExportOptions {
  std::string out_dir;
  int threads = 2;         // the package's default thread count (korch_create(dir, 0, ...))
  std::string source_dir;  // korch's source tree (runtime sources are copied from it); empty: built-in default
};

struct ExportSummary {
  int halide_kernels = 0;
  int onednn_kernels = 0;
  int reference_kernels = 0;
  std::string target;
  std::vector<std::string> cpu_features;
  int64_t weight_bytes = 0;
};

// output_names: the model's output names (declaration order of g.outputs()). Throws
// korch::Error when the plan does not fit the graph or a file cannot be written.
ExportSummary export_package(const PrimGraph& g, const std::vector<std::string>& output_names, const Plan& plan,
                             const ExportOptions& options, std::ostream& log);

}  // namespace korch
