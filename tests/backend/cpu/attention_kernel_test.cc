// The fused attention kernel's implementations: every schedule variant names the GEMMs it runs
// (dnnl_sgemm, or korch's AVX-512 tiles where the CPU has them), and the tiles agree with the
// sgemm variant and the reference at a realistic head shape (64-wide heads over 1000 keys:
// panels and value blocks with remainders, sums over 1000 products).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "backend/cpu/compiled_kernel.h"
#include "backend/kernel_cases.h"
#include "reference/reference.h"

namespace korch {
namespace {

bool cpu_has_avx512() { return __builtin_cpu_supports("avx512f"); }

// The whole-graph attention kernel run in schedule variant 0 (dnnl_sgemm) and 2 (the tiles) on
// the graph's input values (`graph_inputs` in g.inputs() order; constants from the graph).
std::vector<TensorData> run_sgemm_and_tiles(const PrimGraph& g, const std::vector<TensorData>& graph_inputs) {
  Kernel k = whole_graph_kernel(g);
  std::vector<const void*> inputs;
  for (TensorId t : k.inputs) {
    const auto at = std::find(g.inputs().begin(), g.inputs().end(), t);
    inputs.push_back(at != g.inputs().end() ? graph_inputs[static_cast<size_t>(at - g.inputs().begin())].raw()
                                            : g.tensor(t).constant->raw());
  }
  std::vector<TensorData> outputs;
  for (int v : {0, 2}) {
    k.schedule = v;
    std::string why;
    auto kernel = cpu::compile_attention_kernel(g, k, &why);
    if (!kernel) {
      ADD_FAILURE() << "variant " << v << ": " << why;
      return {};
    }
    outputs.emplace_back(DType::F32, g.tensor(k.output).shape);
    kernel->run(inputs, outputs.back().raw());
  }
  return outputs;
}

TEST(AttentionKernel, VariantsNameTheirGemms) {
  for (const KernelCase& c : attention_kernel_cases()) {
    SCOPED_TRACE(c.name);
    const PrimGraph g = c.build();
    Kernel k = whole_graph_kernel(g);
    const int variants = cpu::attention_schedule_variants(g, k);
    EXPECT_EQ(variants, cpu_has_avx512() ? 4 : 2);
    for (int v = 0; v < variants; ++v) {
      k.schedule = v;
      std::string why;
      auto kernel = cpu::compile_attention_kernel(g, k, &why);
      ASSERT_TRUE(kernel) << why;
      const std::string d = kernel->describe();
      EXPECT_EQ(d.find("korch AVX-512") != std::string::npos, v >= 2) << d;
      EXPECT_EQ(d.find("dnnl_sgemm") != std::string::npos, v < 2 || c.name.find("transposes") != std::string::npos)
          << d;
    }
  }
}

TEST(AttentionKernel, TilesMatchSgemmAndReferenceOnAHeadSizedCase) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "no AVX-512: the kernel offers only the dnnl_sgemm variants";
  const PrimGraph g = attention_graph({2}, 75, 1000, 64, 64, true, true);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<TensorData> graph_inputs;
  for (TensorId t : g.inputs()) {
    TensorData d(DType::F32, g.tensor(t).shape);
    for (int64_t i = 0; i < d.size(); ++i) d.data<float>()[i] = dist(rng);
    graph_inputs.push_back(std::move(d));
  }
  const TensorData expect = reference::run_graph(g, graph_inputs).at(0);
  const std::vector<TensorData> outputs = run_sgemm_and_tiles(g, graph_inputs);
  ASSERT_EQ(outputs.size(), 2u);
  for (const TensorData& got : outputs)
    for (int64_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got.data<float>()[i], expect.data<float>()[i], 1e-5 + 1e-4 * std::abs(expect.data<float>()[i]))
          << (&got == &outputs[0] ? "dnnl_sgemm" : "tiles") << ", element " << i;
  double worst = 0;
  for (int64_t i = 0; i < outputs[0].size(); ++i)
    worst = std::max(worst, std::abs(double(outputs[0].data<float>()[i]) - outputs[1].data<float>()[i]));
  EXPECT_LT(worst, 1e-5) << "tiles vs dnnl_sgemm";
}

// Non-finite inputs through the tiles' row maxima (no score steps, so the maxima come from the
// tiles, not a pass of their own): a NaN in one query row makes that row NaN; +inf scores in
// another row make it NaN (inf - inf, inf * 0); the other rows stay finite. The same as the sgemm variant.
TEST(AttentionKernel, TilesTreatNaNAndInfinityAsSgemmDoes) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "no AVX-512: the kernel offers only the dnnl_sgemm variants";
  const PrimGraph g = attention_graph({1}, 20, 50, 8, 8, false, false);
  std::vector<TensorData> values;  // Q [1, 20, 8], Kt [1, 8, 50], V [1, 50, 8]
  for (TensorId t : g.inputs()) {
    TensorData d(DType::F32, g.tensor(t).shape);
    for (int64_t i = 0; i < d.size(); ++i) d.data<float>()[i] = 0.01f * static_cast<float>(i % 97) - 0.4f;
    values.push_back(std::move(d));
  }
  values[0].data<float>()[3 * 8 + 2] = std::nanf("");  // Q row 3
  values[0].data<float>()[7 * 8 + 1] = INFINITY;       // Q row 7: +-inf scores
  const std::vector<TensorData> outputs = run_sgemm_and_tiles(g, values);
  ASSERT_EQ(outputs.size(), 2u);
  for (int64_t i = 0; i < outputs[0].size(); ++i) {
    const float a = outputs[0].data<float>()[i], b = outputs[1].data<float>()[i];
    const int64_t row = i / 8;
    EXPECT_EQ(std::isnan(a), std::isnan(b)) << "element " << i;
    EXPECT_EQ(std::isnan(b), row == 3 || row == 7) << "element " << i;
    if (!std::isnan(a)) {
      EXPECT_NEAR(a, b, 1e-5) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace korch
