// The CPU profiler on a Halide kernel with channels-last candidates: it verifies the kernel in
// both layouts and prices the layout links (what the BLP subtracts next to nhwc convolutions).
#include "cost/profiler.h"

#include <gtest/gtest.h>

#include <memory>

#include "backend/cpu/compiled_kernel.h"
#include "orchestrate/kernel.h"

namespace korch {
namespace {

TEST(CpuProfiler, VerifiesAndPricesChannelsLastHalideKernels) {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {1, 24, 10, 12});
  auto bias = std::make_shared<TensorData>(DType::F32, Shape{1, 24, 1, 1});
  for (int64_t i = 0; i < bias->size(); ++i) bias->data<float>()[i] = 0.01f * static_cast<float>(i);
  TensorId y = g.add_primitive(PrimOp::Add, {x, g.add_constant("bias", bias)}, {});
  g.mark_output(g.add_primitive(PrimOp::Mul, {y, g.add_primitive(PrimOp::Sigmoid, {y}, {})}, {}));
  Kernel k = make_kernel(g, {0, 1, 2});
  cpu::HalideLayouts candidates = cpu::channels_last_candidates(g, k);
  ASSERT_TRUE(candidates.any());
  EXPECT_TRUE(candidates.output_nhwc);

  CpuProfiler profiler(2, nullptr);
  std::optional<double> seconds = profiler.measure(g, k);
  ASSERT_TRUE(seconds.has_value());
  EXPECT_GT(*seconds, 0.0);
  EXPECT_EQ(profiler.stats().mismatches, 0);
  std::vector<double> savings = profiler.link_savings(k);
  ASSERT_EQ(savings.size(), 1 + k.inputs.size());
  EXPECT_GE(savings[0], 0.0) << "the output can stay nhwc";
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    if (k.inputs[i] == x) {
      EXPECT_GE(savings[1 + i], 0.0) << "x can arrive nhwc";
    }
  }
}

}  // namespace
}  // namespace korch
