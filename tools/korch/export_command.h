// `korch export MODEL.onnx --plan plan.json -o OUTDIR`: writes a deployable package (see
// src/export/export.h). Returns the process exit status; throws korch::Error on bad input.
#pragma once
#include <string>
#include <vector>

namespace korch {

int run_export(const std::string& model, const std::vector<std::string>& input_shapes, const std::string& plan_path,
               const std::string& out_dir, int threads);

}  // namespace korch
