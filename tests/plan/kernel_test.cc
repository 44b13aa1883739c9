// make_kernel's hash: the structure of the primitive set plus the constants code generation
// specialises on (small_integer_exponent), so that kernels compiled differently never share a
// profile or a precompiled kernel.
#include "plan/kernel.h"

#include <gtest/gtest.h>

#include <memory>

namespace korch {
namespace {

struct PowGraph {
  PrimGraph g;
  PrimId pow = kNone;
  explicit PowGraph(float exponent) {
    TensorId x = g.add_input("x", DType::F32, {4, 8});
    TensorId e = g.add_constant("e", std::make_shared<TensorData>(TensorData::scalar_f32(exponent)));
    TensorId y = g.add_primitive(PrimOp::Pow, {x, e}, {});
    pow = g.tensor(y).producer;
    g.mark_output(g.add_primitive(PrimOp::Relu, {y}, {}));
  }
  uint64_t hash() const { return make_kernel(g, {0, 1}).hash; }
};

TEST(Kernel, SmallIntegerExponentsAreOnlyIntegersFromOneToFour) {
  for (float e : {1.0f, 2.0f, 3.0f, 4.0f}) {
    PowGraph p(e);
    EXPECT_EQ(small_integer_exponent(p.g, p.g.prim(p.pow)), static_cast<int>(e));
  }
  for (float e : {0.0f, 0.5f, 2.5f, 5.0f, -2.0f}) {
    PowGraph p(e);
    EXPECT_FALSE(small_integer_exponent(p.g, p.g.prim(p.pow))) << e;
  }
  PowGraph p(2.0f);  // a Relu is no Pow
  EXPECT_FALSE(small_integer_exponent(p.g, p.g.prim(1)));
}

TEST(Kernel, HashTellsApartKernelsCompiledForDifferentExponents) {
  EXPECT_NE(PowGraph(2.0f).hash(), PowGraph(3.0f).hash());
  EXPECT_NE(PowGraph(2.0f).hash(), PowGraph(0.5f).hash());
  // The general pow is one program whatever the exponent: those kernels share their hash.
  EXPECT_EQ(PowGraph(0.5f).hash(), PowGraph(2.5f).hash());
  EXPECT_EQ(PowGraph(2.0f).hash(), PowGraph(2.0f).hash());
}

}  // namespace
}  // namespace korch
