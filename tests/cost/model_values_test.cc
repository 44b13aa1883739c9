// The model's tensor values (cost/model_values.h): every tensor's value is the reference run's,
// bit for bit; the budget keeps the most recently used values and a dropped value is evaluated
// again only when that takes a few primitives; the profiler verifies the kernels of the graph it
// was given on these values, and the kernels of any other graph on random inputs.
#include "cost/model_values.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>

#include "cost/profiler.h"
#include "plan/random_inputs.h"
#include "reference/reference.h"

namespace korch {
namespace {

ConstTensorPtr random_constant(const Shape& shape, uint32_t seed) {
  PrimGraph holder;
  Kernel k;
  k.inputs = {holder.add_input("w", DType::F32, shape)};
  return std::make_shared<const TensorData>(std::move(random_kernel_inputs(holder, k, seed)[0]));
}

// x [8, 16] -> MatMul(w [16, 12]) -> + b -> LayerNorm over the rows -> ReLU.
PrimGraph small_model() {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {8, 16});
  TensorId h = g.add_primitive(PrimOp::MatMul, {x, g.add_constant("w", random_constant({16, 12}, 1))}, {});
  h = g.add_primitive(PrimOp::Add, {h, g.add_constant("b", random_constant({12}, 2))}, {});
  Attrs rows = Attrs().set("axes", std::vector<int64_t>{1}).set("keepdims", int64_t{1});
  TensorId d = g.add_primitive(PrimOp::Sub, {h, g.add_primitive(PrimOp::ReduceMean, {h}, rows)}, {});
  TensorId var = g.add_primitive(PrimOp::ReduceMean, {g.add_primitive(PrimOp::Mul, {d, d}, {})}, rows);
  auto eps = std::make_shared<const TensorData>(TensorData::scalar_f32(1e-5f));
  TensorId sd =
      g.add_primitive(PrimOp::Sqrt, {g.add_primitive(PrimOp::Add, {var, g.add_constant("eps", eps)}, {})}, {});
  g.mark_output(g.add_primitive(PrimOp::Relu, {g.add_primitive(PrimOp::Div, {d, sd}, {})}, {}));
  return g;
}

TEST(ModelValues, EveryTensorIsTheReferenceRunsValue) {
  PrimGraph g = small_model();
  ModelValues values(g, 5, int64_t{1} << 20);
  std::vector<TensorData> inputs = random_graph_inputs(g, 5);
  // The reference run of the same graph with every computed tensor as an output.
  PrimGraph every = g;
  for (PrimId p = 0; p < g.num_prims(); ++p) every.mark_output(g.prim(p).output);
  std::vector<TensorData> run = reference::run_graph(every, inputs);
  std::map<TensorId, const TensorData*> want;
  for (size_t i = 0; i < every.outputs().size(); ++i) want[every.outputs()[i]] = &run[i];
  // Asked last tensor first, so that the first call evaluates the whole graph.
  for (TensorId t = g.num_tensors() - 1; t >= 0; --t) {
    std::shared_ptr<const TensorData> got = values.value(t);
    ASSERT_TRUE(got) << "tensor " << t;
    const TensorData* expected = g.tensor(t).is_constant()       ? g.tensor(t).constant.get()
                                 : g.tensor(t).producer == kNone ? &inputs[0]
                                                                 : want.at(t);
    ASSERT_EQ(got->byte_size(), expected->byte_size());
    EXPECT_EQ(std::memcmp(got->raw(), expected->raw(), expected->byte_size()), 0) << "tensor " << t;
  }
  EXPECT_EQ(values.stats().evaluated, g.num_prims());  // each primitive once
  EXPECT_EQ(values.stats().reevaluated, 0);
}

TEST(ModelValues, BudgetKeepsTheRecentValuesAndRefusesLongReevaluations) {
  PrimGraph g;
  std::vector<TensorId> chain = {g.add_input("x", DType::F32, {256})};  // 1 KiB per value
  for (int i = 0; i < 40; ++i) chain.push_back(g.add_primitive(PrimOp::Sigmoid, {chain.back()}, {}));
  g.mark_output(chain.back());
  ModelValues values(g, 1, 4 * 1024);  // four values
  ASSERT_TRUE(values.value(chain[40]));
  EXPECT_EQ(values.stats().evaluated, 40);
  EXPECT_LE(values.kept_bytes(), 4 * 1024);
  ASSERT_TRUE(values.value(chain[38]));  // still kept
  EXPECT_EQ(values.stats().evaluated + values.stats().reevaluated, 40);
  ASSERT_TRUE(values.value(chain[3]));  // dropped: three primitives again
  EXPECT_EQ(values.stats().reevaluated, 3);
  EXPECT_FALSE(values.value(chain[30]));  // 27 more than kMaxReevaluated primitives again
  EXPECT_EQ(values.stats().refused, 1);
}

TEST(ModelValues, TheProfilerVerifiesTheModelGraphsKernelsOnThem) {
  PrimGraph g = small_model();
  PrimGraph other = small_model();
  auto backend = make_backend("cpu", BackendOptions{1});
  Profiler profiler(*backend, nullptr);
  profiler.set_variants_from_seconds(std::numeric_limits<double>::infinity());
  profiler.set_model_graph(&g);
  // The LayerNorm tail with ReLU: inputs d and the variance, as the model computes them.
  std::vector<PrimId> tail;
  for (PrimId p = 0; p < g.num_prims(); ++p)
    if (g.prim(p).op == PrimOp::Add || g.prim(p).op == PrimOp::Sqrt || g.prim(p).op == PrimOp::Div ||
        g.prim(p).op == PrimOp::Relu)
      if (p > 1) tail.push_back(p);
  Kernel k = make_kernel(g, tail);
  ASSERT_TRUE(profiler.measure(g, k).has_value());
  EXPECT_EQ(profiler.stats().model_value_kernels, 1);
  EXPECT_GT(profiler.stats().model_values_evaluated, 0);
  ASSERT_TRUE(profiler.measure(other, make_kernel(other, tail)).has_value());
  EXPECT_EQ(profiler.stats().model_value_kernels, 1);  // another graph: random inputs
  EXPECT_EQ(profiler.stats().mismatches, 0);
}

}  // namespace
}  // namespace korch
