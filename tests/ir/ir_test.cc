// Tests of the primitive IR: shape inference, verifier, structural hash, printers, dead-code removal.
#include <gtest/gtest.h>

#include <sstream>

#include "ir/prim_graph.h"
#include "ir/printer.h"
#include "util/error.h"

namespace korch {
namespace {

PrimGraph small_graph(int64_t n = 4) {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {2, n});
  TensorId w = g.add_constant("w", std::make_shared<const TensorData>(TensorData(DType::F32, {n, 3})));
  TensorId y = g.add_primitive(PrimOp::MatMul, {x, w}, {});
  TensorId r = g.add_primitive(PrimOp::Relu, {y}, {});
  TensorId s =
      g.add_primitive(PrimOp::ReduceSum, {r}, Attrs().set("axes", std::vector<int64_t>{1}).set("keepdims", int64_t{1}));
  g.mark_output(g.add_primitive(PrimOp::Div, {r, s}, {}));
  return g;
}

TEST(DType, BroadcastShapes) {
  EXPECT_EQ(broadcast_shapes({2, 1, 4}, {3, 1}), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {5}), (Shape{5}));
  EXPECT_THROW(broadcast_shapes({2, 3}, {4, 3}), Error);
  EXPECT_EQ(normalize_axis(-1, 4), 3);
  EXPECT_THROW(normalize_axis(4, 4), Error);
}

TEST(Infer, ShapesOfEveryKind) {
  PrimGraph g = small_graph();
  EXPECT_EQ(g.tensor(g.prim(0).output).shape, (Shape{2, 3}));
  EXPECT_EQ(g.tensor(g.prim(2).output).shape, (Shape{2, 1}));
  PrimGraph h;
  TensorId x = h.add_input("x", DType::F32, {1, 8, 10, 10});
  TensorId w = h.add_input("w", DType::F32, {16, 4, 3, 3});
  Attrs conv;
  conv.set("strides", std::vector<int64_t>{2, 2})
      .set("pads", std::vector<int64_t>{1, 1, 1, 1})
      .set("dilations", std::vector<int64_t>{1, 1})
      .set("group", int64_t{2});
  EXPECT_EQ(h.tensor(h.add_primitive(PrimOp::Conv, {x, w}, conv)).shape, (Shape{1, 16, 5, 5}));
  Attrs pool;
  pool.set("kernel", std::vector<int64_t>{3, 3})
      .set("strides", std::vector<int64_t>{2, 2})
      .set("pads", std::vector<int64_t>{0, 0, 0, 0})
      .set("dilations", std::vector<int64_t>{1, 1})
      .set("ceil_mode", int64_t{1});
  EXPECT_EQ(h.tensor(h.add_primitive(PrimOp::MaxPool, {x}, pool)).shape, (Shape{1, 8, 5, 5}));
  EXPECT_EQ(
      h.tensor(h.add_primitive(PrimOp::Transpose, {x}, Attrs().set("perm", std::vector<int64_t>{0, 2, 3, 1}))).shape,
      (Shape{1, 10, 10, 8}));
  EXPECT_THROW(h.add_primitive(PrimOp::Reshape, {x}, Attrs().set("shape", std::vector<int64_t>{7})), Error);
  EXPECT_EQ(h.tensor(h.add_primitive(PrimOp::Less, {x, x}, {})).dtype, DType::Bool);
}

TEST(Verifier, AcceptsValidGraph) { EXPECT_TRUE(verify_graph(small_graph()).empty()); }

TEST(Verifier, RejectsCorruptedGraphs) {
  // A tampered output shape.
  PrimGraph g = small_graph();
  g.mutable_tensor(g.prim(1).output).shape = {9};
  auto problems = verify_graph(g);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find("inference gives"), std::string::npos);
  EXPECT_THROW(verify_graph_or_throw(g), Error);
  // A tensor recorded with the wrong producer.
  PrimGraph h = small_graph();
  h.mutable_tensor(h.prim(2).output).producer = 0;
  EXPECT_FALSE(verify_graph(h).empty());
  // No outputs.
  PrimGraph e;
  e.add_input("x", DType::F32, {1});
  EXPECT_FALSE(verify_graph(e).empty());
}

TEST(StructuralHash, SameStructureSameHash) {
  EXPECT_EQ(structural_hash(small_graph()), structural_hash(small_graph()));
  EXPECT_NE(structural_hash(small_graph(4)), structural_hash(small_graph(5)));  // shapes matter
  PrimGraph g = small_graph();
  // Subsets: {Relu} and {ReduceSum} differ; the same subset is stable.
  EXPECT_NE(structural_hash(g, {1}), structural_hash(g, {2}));
  EXPECT_EQ(structural_hash(g, {1, 2}), structural_hash(small_graph(), {1, 2}));
  // Attributes matter.
  PrimGraph a, b;
  TensorId xa = a.add_input("x", DType::F32, {2, 3});
  TensorId xb = b.add_input("renamed", DType::F32, {2, 3});
  a.mark_output(a.add_primitive(PrimOp::ReduceSum, {xa},
                                Attrs().set("axes", std::vector<int64_t>{0}).set("keepdims", int64_t{1})));
  b.mark_output(b.add_primitive(PrimOp::ReduceSum, {xb},
                                Attrs().set("axes", std::vector<int64_t>{1}).set("keepdims", int64_t{1})));
  EXPECT_NE(structural_hash(a), structural_hash(b));
}

TEST(StructuralHash, NamesAndIdsDoNotMatter) {
  PrimGraph a, b;
  TensorId xa = a.add_input("x", DType::F32, {4});
  b.add_constant("unrelated", std::make_shared<const TensorData>(TensorData(DType::F32, {1})));
  TensorId xb = b.add_input("y", DType::F32, {4});
  a.mark_output(a.add_primitive(PrimOp::Exp, {xa}, {}));
  b.mark_output(b.add_primitive(PrimOp::Exp, {xb}, {}));
  EXPECT_EQ(structural_hash(a), structural_hash(b));
}

TEST(Printer, TextAndDot) {
  PrimGraph g = small_graph();
  std::string text = graph_to_string(g);
  EXPECT_NE(text.find("MatMul(%0, %1)"), std::string::npos);
  EXPECT_NE(text.find("ReduceSum"), std::string::npos);
  std::ostringstream dot;
  print_dot(dot, g);
  EXPECT_EQ(dot.str().rfind("digraph korch", 0), 0u);
  EXPECT_NE(dot.str().find("p0 -> p1"), std::string::npos);
  std::ostringstream grouped;
  print_dot(grouped, g, {0, 0, 1, 1});
  EXPECT_NE(grouped.str().find("kernel 1"), std::string::npos);
}

TEST(DeadCode, RemovesUnusedPrimitives) {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {3});
  TensorId used = g.add_primitive(PrimOp::Exp, {x}, {});
  g.add_primitive(PrimOp::Log, {x}, {});  // dead
  g.mark_output(g.add_primitive(PrimOp::Neg, {used}, {}));
  PrimGraph live = g.without_dead_code();
  EXPECT_EQ(live.num_prims(), 2);
  EXPECT_TRUE(verify_graph(live).empty());
}

}  // namespace
}  // namespace korch
