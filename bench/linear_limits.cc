// How close korch's linear kernels come to this CPU's fp32 FMA peak: the GEMMs of ViT-B/16 and
// BERT-base and a representative set of ResNet-50's convolutions, each a single kernel as korch's
// fission makes it from the ONNX operator (MatMul + bias Add with constant weights and bias, Conv +
// bias, the attention's batched MatMul of two activations) and the fused softmax attention of
// those models and of long-sequence encoders, run in every schedule variant the CPU backend
// offers (so implementations added to the backend appear here unchanged). Each variant is checked
// against the reference executor once, then timed in interleaved rounds with warm caches (the
// kernel over and over, as a GEMM benchmark and ONNX Runtime's single-operator run see it);
// reported: median ms, GFLOP/s (2 x multiply-adds, of both GEMMs for the attention; the bias, the
// softmax's exp and divisions not counted) and % of the FMA peak.
// Usage: korch_linear_limits [--threads 2] [--rounds 31] [--only TEXT] [--json FILE]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/calibrate.h"
#include "backend/timing.h"
#include "bench_kernels.h"
#include "util/error.h"

namespace korch {
namespace {

// One linear operator. MatMul+Add: input [1, M, K] times weight [K, N] plus bias [N] (ONNX MatMul +
// Add, or Gemm, of a Linear layer); MatMul: input [B, M, K] times a second activation `weight`
// [B, K, N] (attention); Conv: input [1, C, H, W], weight [O, C, KH, KW], bias [O], square stride and
// padding (ONNX Conv with bias); Attention: Q `input` [H, M, D], K and V `weight` [H, N, D], softmax(Q Kt
// / sqrt(D)) V as fission makes it (one fused kernel: two MatMuls, ReduceMax, Exp, ReduceSum, Div).
struct LinearShape {
  std::string model, layer, op;
  Shape input, weight;
  int64_t stride = 1, pad = 0;

  std::string name() const { return str_cat(model, " ", layer); }
  Shape output() const {
    if (op == "Attention") return input;
    if (op != "Conv") return {input[0], input[1], weight.back()};
    int64_t h = (input[2] + 2 * pad - weight[2]) / stride + 1, w = (input[3] + 2 * pad - weight[3]) / stride + 1;
    return {input[0], weight[0], h, w};
  }
  double flops() const {  // 2 x multiply-adds
    Shape o = output();
    if (op == "Attention") return 4.0 * num_elements(input) * weight[1];
    if (op != "Conv") return 2.0 * num_elements(o) * input[2];
    return 2.0 * num_elements(o) * weight[1] * weight[2] * weight[3];
  }
  std::string dims() const {
    if (op == "Attention") return str_cat(input[0], " heads, M", input[1], " N", weight[1], " D", input[2]);
    if (op != "Conv")
      return str_cat(input[0] > 1 ? str_cat(input[0], "x") : "", "M", input[1], " K", input[2], " N", weight.back());
    return str_cat(weight[2], "x", weight[3], "/", stride, " ", input[1], "->", weight[0], " @", input[2], "x",
                   input[3]);
  }
};

std::vector<LinearShape> linear_shapes() {
  std::vector<LinearShape> s;
  auto transformer = [&](const std::string& model, int64_t tokens) {
    const int64_t d = 768, ff = 3072, heads = 12, head = 64;
    s.push_back({model, "qkv", "MatMul+Add", {1, tokens, d}, {d, 3 * d}});
    s.push_back({model, "proj", "MatMul+Add", {1, tokens, d}, {d, d}});
    s.push_back({model, "fc1", "MatMul+Add", {1, tokens, d}, {d, ff}});
    s.push_back({model, "fc2", "MatMul+Add", {1, tokens, ff}, {ff, d}});
    s.push_back({model, "attention q.k", "MatMul", {heads, tokens, head}, {heads, head, tokens}});
    s.push_back({model, "attention p.v", "MatMul", {heads, tokens, tokens}, {heads, tokens, head}});
    s.push_back({model, "attention fused", "Attention", {heads, tokens, head}, {heads, tokens, head}});
  };
  transformer("vit_b_16", 197);
  transformer("bert_base", 128);
  transformer("vit_b_16@384", 577);
  auto attention = [&](const std::string& model, int64_t heads, int64_t tokens) {
    s.push_back({model, "attention fused", "Attention", {heads, tokens, 64}, {heads, tokens, 64}});
  };
  attention("encoder_1024", 4, 1024);
  attention("encoder_4096", 4, 4096);
  auto conv = [&](const std::string& layer, int64_t in, int64_t out, int64_t hw, int64_t k, int64_t stride) {
    s.push_back({"resnet50", layer, "Conv", {1, in, hw, hw}, {out, in, k, k}, stride, k / 2});
  };
  conv("stem 7x7/2", 3, 64, 224, 7, 2);
  struct Stage {
    int64_t width, hw;
  };
  const Stage stages[] = {{64, 56}, {128, 28}, {256, 14}, {512, 7}};
  for (int i = 0; i < 4; ++i) {
    const Stage& st = stages[i];
    std::string prefix = str_cat("stage", i + 1, " ");
    conv(prefix + "1x1 reduce", 4 * st.width, st.width, st.hw, 1, 1);
    conv(prefix + "3x3", st.width, st.width, st.hw, 3, 1);
    conv(prefix + "1x1 expand", st.width, 4 * st.width, st.hw, 1, 1);
  }
  return s;
}

// The kernel korch's fission makes of the operator: weights and bias are constants (initializers).
PrimGraph linear_graph(const LinearShape& s) {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, s.input);
  if (s.op == "Attention") {
    const int64_t h = s.weight[0], n = s.weight[1], d = s.weight[2];
    auto last_axis = [] { return Attrs().set("axes", std::vector<int64_t>{2}).set("keepdims", int64_t{1}); };
    TensorId kt = g.add_input("kt", DType::F32, {h, d, n});
    TensorId v = g.add_input("v", DType::F32, {h, n, d});
    TensorId scale = g.add_constant(
        "scale", std::make_shared<const TensorData>(TensorData::scalar_f32(1.0f / std::sqrt(static_cast<float>(d)))));
    TensorId scores = g.add_primitive(PrimOp::Mul, {g.add_primitive(PrimOp::MatMul, {x, kt}, {}), scale}, {});
    TensorId max = g.add_primitive(PrimOp::ReduceMax, {scores}, last_axis());
    TensorId e = g.add_primitive(PrimOp::Exp, {g.add_primitive(PrimOp::Sub, {scores, max}, {})}, {});
    TensorId sum = g.add_primitive(PrimOp::ReduceSum, {e}, last_axis());
    g.mark_output(g.add_primitive(PrimOp::Div, {g.add_primitive(PrimOp::MatMul, {e, v}, {}), sum}, {}));
    return g;
  }
  if (s.op == "MatMul") {
    g.mark_output(g.add_primitive(PrimOp::MatMul, {x, g.add_input("y", DType::F32, s.weight)}, {}));
    return g;
  }
  TensorId w = g.add_constant("w", std::make_shared<const TensorData>(bench::random_tensor(s.weight, 2)));
  Shape bias_shape = s.op == "Conv" ? Shape{s.weight[0], 1, 1} : Shape{s.weight[1]};
  TensorId b = g.add_constant("b", std::make_shared<const TensorData>(bench::random_tensor(bias_shape, 3)));
  TensorId y;
  if (s.op == "Conv") {
    Attrs attrs;
    attrs.set("strides", std::vector<int64_t>{s.stride, s.stride})
        .set("pads", std::vector<int64_t>(4, s.pad))
        .set("dilations", std::vector<int64_t>{1, 1})
        .set("group", int64_t{1});
    y = g.add_primitive(PrimOp::Conv, {x, w}, attrs);
  } else {
    y = g.add_primitive(PrimOp::MatMul, {x, w}, {});
  }
  g.mark_output(g.add_primitive(PrimOp::Add, {y, b}, {}));
  return g;
}

nlohmann::json peak_json(const FmaPeak& p) {
  return {{"threads", p.threads},
          {"lanes", p.lanes},
          {"clock_ghz", p.clock_ghz},
          {"measured_fmas_per_cycle", p.measured_fmas_per_cycle},
          {"known_fma_units", p.known_fma_units},
          {"fma_units", p.fma_units},
          {"cpu", p.cpu},
          {"gflops", p.gflops()},
          {"formula", p.formula()}};
}

// Runs per timed block: enough for ~2 ms, so that sub-millisecond kernels are not timed one
// clock read at a time.
int block_runs(double seconds_per_run) { return std::clamp(static_cast<int>(2e-3 / seconds_per_run), 1, 1000); }

int main_impl(int threads, int rounds, const std::string& only, const std::string& json_path) {
  cpu::set_num_threads(threads);
  FmaPeak peak = measure_fma_peak(threads);
  std::cout << "FMA peak: " << peak.formula() << "\n"
            << "  clock: measured, a chain of dependent integer adds (1 cycle each) on every thread at once\n"
            << "  FMA units: "
            << (peak.known_fma_units > 0 ? str_cat(peak.known_fma_units, " from the CPU model (", peak.cpu, ")")
                                         : str_cat("not known for ", peak.cpu, ", the measured count rounded"))
            << "; measured " << std::fixed << std::setprecision(2) << peak.measured_fmas_per_cycle << " "
            << peak.lanes * 32 << "-bit FMAs per cycle per core (12 independent chains)\n\n"
            << "linear kernels, " << threads << " threads, " << rounds
            << " interleaved rounds (median ms per run; warm caches), verified against the reference executor\n";
  nlohmann::json results = nlohmann::json::array();
  for (const LinearShape& s : linear_shapes()) {
    if (s.name().find(only) == std::string::npos) continue;
    PrimGraph g = linear_graph(s);
    bench::KernelVariants kv = bench::compile_variants(g, /*verify=*/true);
    std::cout << "\n"
              << s.name() << " (" << s.op << ", " << s.dims() << ", " << std::setprecision(3) << s.flops() / 1e9
              << " GFLOP)\n";
    for (const std::string& why : kv.left_out) std::cout << "  left out: " << why << "\n";
    std::vector<int> runs;
    for (size_t v = 0; v < kv.compiled.size(); ++v) runs.push_back(block_runs(kv.run_seconds(v)));
    std::vector<std::vector<double>> seconds(kv.compiled.size());
    for (int r = 0; r < rounds; ++r)
      for (size_t v = 0; v < kv.compiled.size(); ++v) {
        double block = 0;
        for (int i = 0; i < runs[v]; ++i) block += kv.run_seconds(v);
        seconds[v].push_back(block / runs[v]);
      }
    nlohmann::json impls = nlohmann::json::array();
    size_t best = 0;
    for (size_t v = 0; v < kv.compiled.size(); ++v)
      if (median_of(seconds[v]) < median_of(seconds[best])) best = v;
    for (size_t v = 0; v < kv.compiled.size(); ++v) {
      double sec = median_of(seconds[v]), gflops = s.flops() / sec / 1e9, pct = 100.0 * gflops / peak.gflops();
      std::cout << (v == best ? "* " : "  ") << std::setw(9) << std::setprecision(3) << sec * 1e3 << " ms "
                << std::setw(7) << std::setprecision(1) << gflops << " GFLOP/s " << std::setw(4) << std::lround(pct)
                << "% of peak  " << kv.compiled[v]->describe() << "\n";
      impls.push_back({{"implementation", kv.compiled[v]->describe()},
                       {"median_ms", sec * 1e3},
                       {"gflops", gflops},
                       {"percent_of_peak", pct},
                       {"runs_per_block", runs[v]},
                       {"verified", true}});
    }
    results.push_back({{"name", s.name()},
                       {"model", s.model},
                       {"layer", s.layer},
                       {"op", s.op},
                       {"input", s.input},
                       {"weight", s.weight},
                       {"stride", s.stride},
                       {"pad", s.pad},
                       {"output", s.output()},
                       {"dims", s.dims()},
                       {"flops", s.flops()},
                       {"implementations", impls},
                       {"best", kv.compiled.empty() ? nlohmann::json(nullptr) : nlohmann::json(best)},
                       {"left_out", kv.left_out}});
  }
  if (results.empty()) fail("no shape's name contains '", only, "'");
  int without = 0;
  for (const nlohmann::json& r : results) without += r["implementations"].empty() ? 1 : 0;
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << nlohmann::json{{"threads", threads}, {"rounds", rounds}, {"peak", peak_json(peak)}, {"shapes", results}}.dump(
             2)
      << "\n";
    if (!f) fail("cannot write ", json_path);
  }
  if (without > 0) fail(without, " shape(s) without a verified implementation (see 'left out' above)");
  return 0;
}

}  // namespace
}  // namespace korch

int main(int argc, char** argv) {
  CLI::App app{"korch's linear kernels (every implementation) against this CPU's fp32 FMA peak"};
  int threads = 2, rounds = 31;
  std::string only, json_path;
  app.add_option("--threads", threads, "Threads of every kernel and of the peak")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "Interleaved timing rounds (each times every implementation once)")
      ->check(CLI::PositiveNumber);
  app.add_option("--only", only, "Only the shapes whose name (model and layer) contains TEXT");
  app.add_option("--json", json_path, "Also write every figure to FILE");
  CLI11_PARSE(app, argc, argv);
  try {
    return korch::main_impl(threads, rounds, only, json_path);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
