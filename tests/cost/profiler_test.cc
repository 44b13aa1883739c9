// The CPU profiler on a Halide kernel with channels-last candidates: it verifies the kernel in
// every layout the runtime may link it in (dense, nhwc, this CPU's blocked one) and offers the BLP no
// link savings for it.
#include "cost/profiler.h"

#include <gtest/gtest.h>

#include <memory>

#include "backend/cpu/compiled_kernel.h"
#include "orchestrate/kernel.h"

namespace korch {
namespace {

TEST(CpuProfiler, VerifiesChannelsLastHalideKernelsInEveryLinkedLayout) {
  PrimGraph g;  // 48 channels: both blocked formats apply (nChw8c on AVX2, nChw16c on AVX-512)
  TensorId x = g.add_input("x", DType::F32, {1, 48, 10, 12});
  auto bias = std::make_shared<TensorData>(DType::F32, Shape{1, 48, 1, 1});
  for (int64_t i = 0; i < bias->size(); ++i) bias->data<float>()[i] = 0.01f * static_cast<float>(i);
  TensorId y = g.add_primitive(PrimOp::Add, {x, g.add_constant("bias", bias)}, {});
  g.mark_output(g.add_primitive(PrimOp::Mul, {y, g.add_primitive(PrimOp::Sigmoid, {y}, {})}, {}));
  Kernel k = make_kernel(g, {0, 1, 2});
  cpu::HalideLayouts candidates = cpu::channels_last_candidates(g, k);
  ASSERT_TRUE(candidates.any());
  EXPECT_TRUE(candidates.output);

  CpuProfiler profiler(2, nullptr);
  std::optional<double> seconds = profiler.measure(g, k);
  ASSERT_TRUE(seconds.has_value());
  EXPECT_GT(*seconds, 0.0);
  EXPECT_EQ(profiler.stats().mismatches, 0);
  // Its layout links are decided per kernel at run time; the BLP is offered none.
  EXPECT_TRUE(profiler.link_savings(k).empty());
}

}  // namespace
}  // namespace korch
