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
  Kernel k = whole_graph_kernel(g);
  std::vector<const void*> inputs;
  for (TensorId t : k.inputs) {  // graph inputs and the scale constant
    const auto at = std::find(g.inputs().begin(), g.inputs().end(), t);
    inputs.push_back(at != g.inputs().end() ? graph_inputs[static_cast<size_t>(at - g.inputs().begin())].raw()
                                            : g.tensor(t).constant->raw());
  }
  std::vector<TensorData> outputs;
  for (int v : {0, 2}) {
    k.schedule = v;
    std::string why;
    auto kernel = cpu::compile_attention_kernel(g, k, &why);
    ASSERT_TRUE(kernel) << why;
    TensorData got(DType::F32, expect.shape());
    kernel->run(inputs, got.raw());
    for (int64_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got.data<float>()[i], expect.data<float>()[i], 1e-5 + 1e-4 * std::abs(expect.data<float>()[i]))
          << kernel->describe() << ", element " << i;
    outputs.push_back(std::move(got));
  }
  double worst = 0;
  for (int64_t i = 0; i < outputs[0].size(); ++i)
    worst = std::max(worst, std::abs(double(outputs[0].data<float>()[i]) - outputs[1].data<float>()[i]));
  EXPECT_LT(worst, 1e-5) << "tiles vs dnnl_sgemm";
}

}  // namespace
}  // namespace korch
