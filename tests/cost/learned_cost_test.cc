// The learned cost model: nearest measured neighbours of the same class predict the smallest of
// their ratios; the features say what a kernel holds.
#include "cost/learned_cost.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "cost/kernel_features.h"

namespace korch {
namespace {

TEST(NeighbourRatioModel, PredictsTheSmallestRatioOfTheNearestKernelsOfItsClass) {
  NeighbourRatioModel model(3);
  // Two clusters of memory-bound kernels: small ones run 4-8x their estimate, large ones 1-1.5x.
  for (double size : {1.0, 1.1, 1.2, 0.9}) model.add({size, 2.0}, std::log2(4.0 + size), false);
  EXPECT_FALSE(model.predict({1.0, 2.0}, true).has_value());  // no linear kernel measured
  for (double size : {20.0, 21.0, 22.0}) model.add({size, 2.0}, std::log2(1.0 + (size - 20.0) / 4), false);
  std::optional<double> small = model.predict({0.98, 2.0}, false);
  std::optional<double> large = model.predict({20.5, 2.0}, false);
  ASSERT_TRUE(small && large);
  EXPECT_NEAR(*small, std::log2(4.9), 1e-12);  // sizes 1.0, 0.9, 1.1: the smallest of 5.0, 4.9, 5.1
  EXPECT_NEAR(*large, 0.0, 1e-12);             // the smallest of 1, 1.25, 1.5
  // The other class learns separately.
  model.add({1.0, 2.0}, 3.0, true);
  EXPECT_FALSE(model.predict({1.0, 2.0}, true).has_value());  // fewer examples than neighbours
  model.add({1.0, 2.0}, 3.0, true);
  model.add({1.0, 2.0}, 2.5, true);
  ASSERT_TRUE(model.predict({1.0, 2.0}, true).has_value());
  EXPECT_NEAR(*model.predict({1.0, 2.0}, true), 2.5, 1e-12);
  EXPECT_EQ(model.size(), 10);
}

TEST(NeighbourRatioModel, IgnoresConstantFeaturesAndNonFiniteRatios) {
  NeighbourRatioModel model(2);
  model.add({5.0, 1.0}, 1.0, false);
  model.add({5.0, 2.0}, 2.0, false);
  model.add({5.0, 9.0}, std::nan(""), false);  // not an example
  EXPECT_EQ(model.size(), 2);
  std::optional<double> p = model.predict({5.0, 1.5}, false);
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(std::isfinite(*p));
  EXPECT_EQ(*p, 1.0);
}

TEST(NeighbourRatioModel, OffWithNoNeighbours) {
  NeighbourRatioModel model(0);
  model.add({1.0}, 1.0, false);
  EXPECT_FALSE(model.predict({1.0}, false).has_value());
}

TEST(KernelFeatures, CountWhatTheKernelHolds) {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {1, 8, 6, 4});
  TensorId t = g.add_primitive(PrimOp::Transpose, {x}, Attrs().set("perm", std::vector<int64_t>{0, 1, 3, 2}));
  TensorId s = g.add_primitive(PrimOp::Sigmoid, {t}, {});
  TensorId m = g.add_primitive(PrimOp::Mul, {t, s}, {});
  TensorId r =
      g.add_primitive(PrimOp::ReduceSum, {m}, Attrs().set("axes", std::vector<int64_t>{3}).set("keepdims", int64_t{1}));
  g.mark_output(r);
  Kernel k = make_kernel(g, {0, 1, 2, 3});
  std::vector<double> f = kernel_features(g, k, 1e-6);
  ASSERT_EQ(static_cast<int>(f.size()), kNumKernelFeatures);
  EXPECT_NEAR(f[0], std::log2(1e-6), 1e-9);   // the estimate
  EXPECT_EQ(f[2], 0.0);                       // no linear flops
  EXPECT_EQ(f[4], 4.0);                       // primitives
  EXPECT_EQ(f[5], 1.0);                       // inputs
  EXPECT_EQ(f[6], 2.0);                       // elementwise
  EXPECT_EQ(f[7], 1.0);                       // reductions
  EXPECT_EQ(f[9], 1.0);                       // layout
  EXPECT_EQ(f[10], 1.0);                      // transcendental (Sigmoid)
  EXPECT_EQ(f[12], 1.0);                      // transposes of the innermost axis
  EXPECT_EQ(f[14], 4.0);                      // output rank
  EXPECT_NEAR(f[15], std::log2(2.0), 1e-12);  // innermost extent 1, as log2(1 + 1)
}

}  // namespace
}  // namespace korch
