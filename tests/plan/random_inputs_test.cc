// Random kernel inputs (plan/random_inputs.h): a tensor the graph computes as never negative (a
// LayerNorm's mean of squares, a softmax's sum of exps, a ReLU) gets values in [0, 1), every other
// float tensor values in [-1, 1) with both signs; the same seed gives the same values.
#include "plan/random_inputs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

namespace korch {
namespace {

ConstTensorPtr make_scalar(float v) { return std::make_shared<const TensorData>(TensorData::scalar_f32(v)); }

Attrs mean_over(int64_t axis) { return Attrs().set("axes", std::vector<int64_t>{axis}).set("keepdims", int64_t{1}); }

// A LayerNorm as fission writes it: mean, d = x - mean, var = mean(d * d) (or d^2), then
// d / sqrt(var + eps).
struct LayerNorm {
  PrimGraph g;
  TensorId x, d, square, power, variance, sum_of_exps, relu;
  LayerNorm() {
    x = g.add_input("x", DType::F32, {64, 96});
    TensorId mean = g.add_primitive(PrimOp::ReduceMean, {x}, mean_over(1));
    d = g.add_primitive(PrimOp::Sub, {x, mean}, {});
    square = g.add_primitive(PrimOp::Mul, {d, d}, {});
    power = g.add_primitive(PrimOp::Pow, {d, g.add_constant("two", make_scalar(2.0f))}, {});
    variance = g.add_primitive(PrimOp::ReduceMean, {square}, mean_over(1));
    TensorId eps = g.add_constant("eps", make_scalar(1e-6f));
    TensorId std_dev = g.add_primitive(PrimOp::Sqrt, {g.add_primitive(PrimOp::Add, {variance, eps}, {})}, {});
    TensorId y = g.add_primitive(PrimOp::Div, {d, std_dev}, {});
    sum_of_exps = g.add_primitive(PrimOp::ReduceSum, {g.add_primitive(PrimOp::Exp, {y}, {})}, mean_over(1));
    relu = g.add_primitive(PrimOp::Relu, {y}, {});
    g.mark_output(sum_of_exps);
    g.mark_output(relu);
  }
};

TEST(RandomInputs, NeverNegativeFollowsWhatTheGraphComputes) {
  LayerNorm n;
  EXPECT_FALSE(never_negative(n.g, n.x));  // a model input: any sign
  EXPECT_FALSE(never_negative(n.g, n.d));
  EXPECT_TRUE(never_negative(n.g, n.square));
  EXPECT_TRUE(never_negative(n.g, n.power));
  EXPECT_TRUE(never_negative(n.g, n.variance));
  EXPECT_TRUE(never_negative(n.g, n.sum_of_exps));
  EXPECT_TRUE(never_negative(n.g, n.relu));
  // x * y of two signed tensors, and x^3, can be negative.
  TensorId cube = n.g.add_primitive(PrimOp::Pow, {n.d, n.g.add_constant("three", make_scalar(3.0f))}, {});
  TensorId product = n.g.add_primitive(PrimOp::Mul, {n.d, n.x}, {});
  EXPECT_FALSE(never_negative(n.g, cube));
  EXPECT_FALSE(never_negative(n.g, product));
}

// A tensor read along many paths (here 2^30 through 30 blocks y = y + max(y, 0)) is examined once
// per depth, not once per path.
TEST(RandomInputs, NeverNegativeExaminesEachTensorOncePerDepth) {
  PrimGraph g;
  TensorId y = g.add_primitive(PrimOp::Relu, {g.add_input("x", DType::F32, {4})}, {});
  TensorId zero = g.add_constant("zero", make_scalar(0.0f));
  for (int i = 0; i < 30; ++i) y = g.add_primitive(PrimOp::Add, {y, g.add_primitive(PrimOp::Max, {y, zero}, {})}, {});
  g.mark_output(y);
  EXPECT_TRUE(never_negative(g, y));
}

TEST(RandomInputs, NeverNegativeTensorsGetValuesInTheUnitInterval) {
  LayerNorm n;
  Kernel k;
  k.inputs = {n.variance, n.d};
  std::vector<TensorData> values = random_kernel_inputs(n.g, k, 11);
  ASSERT_EQ(values.size(), 2u);
  float variance_min = 1, variance_max = 0, d_min = 1, d_max = -1;
  for (int64_t i = 0; i < values[0].size(); ++i) {
    variance_min = std::min(variance_min, values[0].data<float>()[i]);
    variance_max = std::max(variance_max, values[0].data<float>()[i]);
  }
  for (int64_t i = 0; i < values[1].size(); ++i) {
    d_min = std::min(d_min, values[1].data<float>()[i]);
    d_max = std::max(d_max, values[1].data<float>()[i]);
  }
  EXPECT_GE(variance_min, 0.0f);
  EXPECT_LT(variance_max, 1.0f);
  EXPECT_LT(d_min, -0.5f);  // both signs, over [-1, 1)
  EXPECT_GT(d_max, 0.5f);
  std::vector<TensorData> again = random_kernel_inputs(n.g, k, 11);
  EXPECT_EQ(std::memcmp(again[0].raw(), values[0].raw(), values[0].byte_size()), 0);
}

}  // namespace
}  // namespace korch
