// Optimises (or loads a plan for) an ONNX model through korch's installed C++
// API, runs it, and prints the top outputs.
//
//   korch_cpp_consumer MODEL.onnx [--threads N] [--plan PLAN.json] [--save-plan
//   PLAN.json]
//
// Inputs come from test_data_set_0/input_K.pb beside the model when present (an
// ONNX test case), zeros otherwise; with test_data_set_0/output_0.pb it also
// prints the largest difference from it.
#include <korch/korch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace ka = korch::api;

static void print_spec(const ka::TensorSpec& s) {
  std::printf("  %s: %s[", s.name.c_str(), ka::dtype_name(s.dtype));
  for (size_t d = 0; d < s.shape.size(); ++d) std::printf("%s%lld", d ? "," : "", static_cast<long long>(s.shape[d]));
  std::printf("]\n");
}

int main(int argc, char** argv) {
  std::string model_path, plan_path, save_plan;
  int threads = 2;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--plan" && i + 1 < argc)
      plan_path = argv[++i];
    else if (a == "--save-plan" && i + 1 < argc)
      save_plan = argv[++i];
    else if (model_path.empty() && a[0] != '-')
      model_path = a;
    else {
      std::fprintf(stderr,
                   "usage: %s MODEL.onnx [--threads N] [--plan PLAN.json] "
                   "[--save-plan PLAN.json]\n",
                   argv[0]);
      return 2;
    }
  }
  if (model_path.empty()) {
    std::fprintf(stderr,
                 "usage: %s MODEL.onnx [--threads N] [--plan PLAN.json] "
                 "[--save-plan PLAN.json]\n",
                 argv[0]);
    return 2;
  }
  try {
    ka::Model model = ka::Model::load(model_path);
    std::printf("%s: %s, %d primitives\ninputs:\n", ka::version(), model_path.c_str(), model.num_primitives());
    for (const ka::TensorSpec& s : model.inputs()) print_spec(s);
    std::printf("outputs:\n");
    for (const ka::TensorSpec& s : model.outputs()) print_spec(s);

    ka::OptimizeOptions options;
    options.threads = threads;
    ka::Plan plan = plan_path.empty() ? ka::optimize(model, options) : ka::Plan::load(model, plan_path);
    std::printf("plan '%s': %d kernels, predicted %.3f ms\n", plan.strategy().c_str(), plan.num_kernels(),
                plan.predicted_ms());
    if (!save_plan.empty()) {
      plan.save(save_plan);
      plan = ka::Plan::load(model, save_plan);  // round trip through the file
      std::printf("saved and reloaded %s\n", save_plan.c_str());
    }

    fs::path data = fs::path(model_path).parent_path() / "test_data_set_0";
    std::map<std::string, ka::Tensor> inputs;
    for (size_t i = 0; i < model.inputs().size(); ++i) {
      const ka::TensorSpec& s = model.inputs()[i];
      fs::path pb = data / ("input_" + std::to_string(i) + ".pb");
      inputs[s.name] = fs::exists(pb) ? ka::Tensor::read_onnx(pb.string()) : ka::Tensor::zeros(s.dtype, s.shape);
    }
    ka::Session session(model, plan, threads);
    std::map<std::string, ka::Tensor> outputs = session.run(inputs);

    const ka::TensorSpec& first = model.outputs().at(0);
    const ka::Tensor& y = outputs.at(first.name);
    if (y.dtype == ka::DType::F32) {
      const float* v = y.data<float>();
      std::vector<int64_t> order(static_cast<size_t>(y.num_elements()));
      for (size_t j = 0; j < order.size(); ++j) order[j] = static_cast<int64_t>(j);
      size_t k = std::min<size_t>(5, order.size());
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                        [&](int64_t a, int64_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
      std::printf("top-%zu of %s:\n", k, first.name.c_str());
      for (size_t t = 0; t < k; ++t) std::printf("  %lld  %.6f\n", static_cast<long long>(order[t]), v[order[t]]);
      fs::path expected = data / "output_0.pb";
      if (fs::exists(expected)) {
        ka::Tensor e = ka::Tensor::read_onnx(expected.string());
        if (e.dtype != y.dtype || e.shape != y.shape) throw ka::Error("output_0.pb has another dtype or shape");
        double diff = 0;
        for (int64_t j = 0; j < y.num_elements(); ++j)
          diff = std::max(diff, std::fabs(static_cast<double>(v[j]) - e.data<float>()[j]));
        std::printf("max |diff| vs %s: %.3g\n", expected.string().c_str(), diff);
      }
    }
  } catch (const ka::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
