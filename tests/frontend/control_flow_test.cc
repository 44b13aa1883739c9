// Control flow unrolled at import (src/frontend/control_flow.cc): If on a constant condition
// takes its branch, Scan and Loop bodies are copied per iteration with the state threaded through
// and the scan outputs stacked; data-dependent conditions and trip counts are one-line errors.
#include <gtest/gtest.h>

#include "fission/onnx_tensor.h"
#include "frontend/onnx_import.h"
#include "onnx/onnx_pb.h"
#include "onnx_builder.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch {
namespace {

using testing::OnnxBuilder;

TensorData values(const Shape& shape, std::vector<float> v) {
  TensorData t(DType::F32, shape);
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
  return t;
}

TensorData scalar_tensor(DType dtype, double v) {
  TensorData t(dtype, {});
  t.set_f64(0, v);
  return t;
}

// A subgraph attribute: nodes added through the returned graph.
onnx::GraphProto& graph_attr(onnx::NodeProto& n, const std::string& name) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  return *a->mutable_g();
}

onnx::NodeProto& add_node(onnx::GraphProto& g, const std::string& op, const std::vector<std::string>& in,
                          const std::vector<std::string>& out) {
  auto* n = g.add_node();
  n->set_op_type(op);
  for (const auto& i : in) n->add_input(i);
  for (const auto& o : out) n->add_output(o);
  return *n;
}

void add_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name) {
  auto* vi = list->Add();
  vi->set_name(name);
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
}

std::vector<float> floats(const TensorData& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.size(); ++i) v.push_back(static_cast<float>(t.get_f64(i)));
  return v;
}

OnnxBuilder if_model(TensorData cond) {
  OnnxBuilder b(13);
  b.input("x", {4}).output("y");
  b.initializer("cond", cond);
  auto& n = b.node("If", {"cond"}, {"y"}, "choice");
  onnx::GraphProto& then_branch = graph_attr(n, "then_branch");
  add_value(then_branch.mutable_output(), "t");
  add_node(then_branch, "Relu", {"x"}, {"t"});  // reads the outer x
  onnx::GraphProto& else_branch = graph_attr(n, "else_branch");
  add_value(else_branch.mutable_output(), "e");
  add_node(else_branch, "Neg", {"x"}, {"e"});
  return b;
}

TEST(ControlFlow, IfOnAConstantConditionTakesItsBranch) {
  TensorData x = values({4}, {-1, 2, -3, 4});
  ImportedModel then_model = import_onnx_model(if_model(scalar_tensor(DType::Bool, 1)).model(), ".");
  EXPECT_EQ(floats(reference::run_graph(then_model.graph, {x})[0]), (std::vector<float>{0, 2, 0, 4}));
  ImportedModel else_model = import_onnx_model(if_model(scalar_tensor(DType::Bool, 0)).model(), ".");
  EXPECT_EQ(floats(reference::run_graph(else_model.graph, {x})[0]), (std::vector<float>{1, -2, 3, -4}));
}

TEST(ControlFlow, IfOnAModelInputIsRefused) {
  OnnxBuilder b(13);
  b.input("x", {4}).input("c", {}, onnx::TensorProto::BOOL).output("y");
  auto& n = b.node("If", {"c"}, {"y"}, "data_if");
  add_value(graph_attr(n, "then_branch").mutable_output(), "x");
  add_value(graph_attr(n, "else_branch").mutable_output(), "x");
  try {
    import_onnx_model(b.model(), ".");
    FAIL() << "a data-dependent If imported";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("data_if"), std::string::npos) << msg;
    EXPECT_NE(msg.find("data-dependent"), std::string::npos) << msg;
  }
}

// Running sum over the rows of x [3, 2]: final state and every partial sum, scanned in
// `direction`, stacked on `out_axis`.
OnnxBuilder running_sum(int64_t direction, int64_t out_axis) {
  OnnxBuilder b(16);
  b.input("s0", {2}).input("x", {3, 2}).output("s").output("partial");
  auto& n = b.node("Scan", {"s0", "x"}, {"s", "partial"}, "running_sum");
  OnnxBuilder::attr_i(n, "num_scan_inputs", 1);
  OnnxBuilder::attr_ints(n, "scan_input_directions", {direction});
  OnnxBuilder::attr_ints(n, "scan_output_axes", {out_axis});
  onnx::GraphProto& body = graph_attr(n, "body");
  add_value(body.mutable_input(), "s_in");
  add_value(body.mutable_input(), "row");
  add_value(body.mutable_output(), "s_out");
  add_value(body.mutable_output(), "p");
  add_node(body, "Add", {"s_in", "row"}, {"s_out"});
  add_node(body, "Identity", {"s_out"}, {"p"});
  return b;
}

TEST(ControlFlow, ScanThreadsTheStateAndStacksItsOutputs) {
  TensorData s0 = values({2}, {10, 20});
  TensorData x = values({3, 2}, {1, 2, 3, 4, 5, 6});
  auto forward = reference::run_graph(import_onnx_model(running_sum(0, 0).model(), ".").graph, {s0, x});
  EXPECT_EQ(floats(forward[0]), (std::vector<float>{19, 32}));
  EXPECT_EQ(forward[1].shape(), (Shape{3, 2}));
  EXPECT_EQ(floats(forward[1]), (std::vector<float>{11, 22, 14, 26, 19, 32}));
  auto reverse = reference::run_graph(import_onnx_model(running_sum(1, 1).model(), ".").graph, {s0, x});
  EXPECT_EQ(floats(reverse[0]), (std::vector<float>{19, 32}));
  EXPECT_EQ(reverse[1].shape(), (Shape{2, 3}));  // partial sums from the last row, on axis 1
  EXPECT_EQ(floats(reverse[1]), (std::vector<float>{15, 18, 19, 26, 30, 32}));
}

// A Loop body reading (i, cond_in, v_in) and writing `outputs`.
onnx::GraphProto& loop_body(onnx::NodeProto& n, const std::vector<std::string>& outputs) {
  onnx::GraphProto& body = graph_attr(n, "body");
  for (const char* in : {"i", "cond_in", "v_in"}) add_value(body.mutable_input(), in);
  for (const auto& out : outputs) add_value(body.mutable_output(), out);
  return body;
}

// v <- v + step, `trips` times (a constant trip count), or while iter < 4 (a condition the body
// computes from the iteration number, which folds).
OnnxBuilder accumulate(bool trip_count_input, bool condition_from_iteration) {
  OnnxBuilder b(16);
  b.input("v0", {2}).output("v").output("history");
  b.initializer("step", values({2}, {1, 2}));
  b.initializer("trips", scalar_tensor(DType::I64, 3));
  b.initializer("go", scalar_tensor(DType::Bool, 1));
  b.initializer("four", scalar_tensor(DType::I64, 4));
  if (trip_count_input) b.input("m", {}, onnx::TensorProto::INT64);
  std::string m = trip_count_input ? "m" : (condition_from_iteration ? "" : "trips");
  auto& n = b.node("Loop", {m, "go", "v0"}, {"v", "history"}, "accumulate");
  onnx::GraphProto& body = loop_body(n, {"cond_out", "v_out", "h"});
  add_node(body, "Add", {"v_in", "step"}, {"v_out"});
  add_node(body, "Identity", {"v_out"}, {"h"});
  if (condition_from_iteration)
    add_node(body, "Less", {"i", "four"}, {"cond_out"});
  else
    add_node(body, "Identity", {"cond_in"}, {"cond_out"});
  return b;
}

TEST(ControlFlow, LoopUnrollsAConstantTripCount) {
  TensorData v0 = values({2}, {0, 0});
  auto out = reference::run_graph(import_onnx_model(accumulate(false, false).model(), ".").graph, {v0});
  EXPECT_EQ(floats(out[0]), (std::vector<float>{3, 6}));
  EXPECT_EQ(out[1].shape(), (Shape{3, 2}));
  EXPECT_EQ(floats(out[1]), (std::vector<float>{1, 2, 2, 4, 3, 6}));
}

TEST(ControlFlow, LoopRunsWhileAFoldedConditionHolds) {
  TensorData v0 = values({2}, {0, 0});
  auto out = reference::run_graph(import_onnx_model(accumulate(false, true).model(), ".").graph, {v0});
  EXPECT_EQ(floats(out[0]), (std::vector<float>{5, 10}));  // iterations 0..4
  EXPECT_EQ(out[1].shape(), (Shape{5, 2}));
}

TEST(ControlFlow, LoopTripCountFromAModelInputIsRefused) {
  try {
    import_onnx_model(accumulate(true, false).model(), ".");
    FAIL() << "a data-dependent Loop imported";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("accumulate"), std::string::npos) << msg;
    EXPECT_NE(msg.find("trip count"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(ControlFlow, UnrollingIsBounded) {
  // 4000 iterations of a 60-node body: more subgraph nodes than the importer unrolls.
  OnnxBuilder b(16);
  b.input("v0", {2}).output("v");
  b.initializer("trips", scalar_tensor(DType::I64, 4000));
  auto& n = b.node("Loop", {"trips", "", "v0"}, {"v"}, "long_loop");
  onnx::GraphProto& body = loop_body(n, {"cond_in", "v59"});
  add_node(body, "Neg", {"v_in"}, {"v0"});
  for (int i = 1; i < 60; ++i) add_node(body, "Neg", {"v" + std::to_string(i - 1)}, {"v" + std::to_string(i)});
  try {
    import_onnx_model(b.model(), ".");
    FAIL() << "an unbounded unrolling imported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("long_loop"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("more than"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace korch
