// The attention pattern (plan/attention_pattern.h): found with its score steps and operands,
// refused where one of its intermediates is read outside it, the reductions are not over the
// last axis, or the batch dims differ; and offered as a candidate kernel.
#include "plan/attention_pattern.h"

#include <gtest/gtest.h>

#include "backend/kernel_cases.h"
#include "orchestrate/candidates.h"

namespace korch {
namespace {

Attrs last_axis(int64_t axis) { return Attrs().set("axes", std::vector<int64_t>{axis}).set("keepdims", int64_t{1}); }

TEST(AttentionPattern, FoundWithScoreStepsAndOperands) {
  PrimGraph g = attention_graph({2, 3}, 5, 7, 4, 4, true, true);
  std::vector<AttentionPattern> found = find_attention(g);
  ASSERT_EQ(found.size(), 1u);
  const AttentionPattern& a = found[0];
  EXPECT_EQ(a.prims.size(), 9u);  // 2 MatMuls, 2 steps, max, sub, exp, sum, div
  ASSERT_EQ(a.score_steps.size(), 2u);
  EXPECT_EQ(g.prim(a.score_steps[0]).op, PrimOp::Div);
  EXPECT_EQ(a.score_operand[0], 1);  // S / 8
  EXPECT_EQ(g.prim(a.score_steps[1]).op, PrimOp::Add);
  EXPECT_EQ(a.score_operand[1], 1);  // S + mask
  EXPECT_EQ(a.q, g.inputs()[0]);
  EXPECT_EQ(a.kt, g.inputs()[1]);
  EXPECT_EQ(a.output, g.outputs()[0]);

  PrimGraph first = attention_graph({4}, 3, 6, 2, 2, true, false, true);
  found = find_attention(first);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].score_operand, std::vector<int>{0});  // 0.125 * S

  std::vector<Kernel> cands = attention_candidates(g);
  ASSERT_EQ(cands.size(), 1u);
  EXPECT_EQ(cands[0].num_linear, 2);
  EXPECT_EQ(cands[0].output, g.outputs()[0]);
  EXPECT_TRUE(attention_of_kernel(g, cands[0]).has_value());
}

// Q Kt -> softmax pieces -> E V / rowsum, with a hook to change one piece.
PrimGraph variant(bool scores_also_output, int64_t reduce_axis, bool other_batch) {
  PrimGraph g;
  TensorId q = g.add_input("q", DType::F32, {2, 5, 4});
  TensorId kt = g.add_input("kt", DType::F32, {2, 4, 6});
  TensorId v = g.add_input("v", DType::F32, {other_batch ? 1 : 2, 6, 3});
  TensorId s = g.add_primitive(PrimOp::MatMul, {q, kt}, {});
  TensorId m = g.add_primitive(PrimOp::ReduceMax, {s}, last_axis(reduce_axis));
  TensorId e = g.add_primitive(PrimOp::Exp, {g.add_primitive(PrimOp::Sub, {s, m}, {})}, {});
  TensorId sum = g.add_primitive(PrimOp::ReduceSum, {e}, last_axis(2));
  TensorId o = g.add_primitive(PrimOp::MatMul, {e, v}, {});
  g.mark_output(g.add_primitive(PrimOp::Div, {o, sum}, {}));
  if (scores_also_output) g.mark_output(s);
  return g;
}

TEST(AttentionPattern, ExtendedByTheLayoutChainsAroundIt) {
  // The conformance case whose whole graph is attention between Slice/Reshape/Transpose chains.
  for (const KernelCase& c : attention_kernel_cases()) {
    if (c.name.find("layout chains") == std::string::npos) continue;
    PrimGraph g = c.build();
    std::vector<AttentionPattern> found = find_attention(g);
    ASSERT_EQ(found.size(), 1u);
    std::optional<AttentionPattern> extended = with_views(g, found[0], g.consumers());
    ASSERT_TRUE(extended.has_value());
    EXPECT_EQ(extended->prims.size(), static_cast<size_t>(g.num_prims()));
    EXPECT_EQ(extended->q_view.chain.size(), 3u);
    EXPECT_EQ(extended->kt_view.chain.size(), 3u);
    EXPECT_EQ(extended->y_view.chain.size(), 2u);
    EXPECT_EQ(extended->q_view.base, g.inputs()[0]);
    EXPECT_EQ(extended->y_view.base, g.outputs()[0]);
    EXPECT_NEAR(extended->q_scale, 1 / 2.8284271, 1e-6);
    EXPECT_EQ(attention_candidates(g).size(), 2u);  // core and extended
    return;
  }
  FAIL() << "no layout-chain attention case";
}

TEST(AttentionPattern, RefusedWhereItWouldNotBeOneKernel) {
  EXPECT_EQ(find_attention(variant(false, 2, false)).size(), 1u);
  EXPECT_TRUE(find_attention(variant(true, 2, false)).empty()) << "scores read outside";
  EXPECT_TRUE(find_attention(variant(false, 1, false)).empty()) << "max over the wrong axis";
  EXPECT_TRUE(find_attention(variant(false, 2, true)).empty()) << "V broadcast over the batch";
}

}  // namespace
}  // namespace korch
