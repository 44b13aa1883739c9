// Tests of the bit-operator rules (src/fission/rule_bitwise.cc), the inverse trigonometric rules
// (rule_inverse_trig.cc) and Mod-28's float fmod=0: the primitives they emit and what they compute.
#include <gtest/gtest.h>

#include <cmath>

#include "fission/fission.h"
#include "frontend/onnx_import.h"
#include "onnx_builder.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch {
namespace {

using testing::OnnxBuilder;

TensorData run_binary(const std::string& op, int opset, DType t, int onnx_type, const std::vector<int64_t>& a,
                      const std::vector<int64_t>& b, const std::string& direction = "") {
  OnnxBuilder m(opset);
  int64_t n = static_cast<int64_t>(a.size());
  m.input("a", {n}, onnx_type).input("b", {n}, onnx_type).output("y", onnx_type);
  onnx::NodeProto& node = m.node(op, {"a", "b"}, {"y"});
  if (!direction.empty()) OnnxBuilder::attr_s(node, "direction", direction);
  ImportedModel model = import_onnx_model(m.model(), ".");
  return reference::run_graph(model.graph, {TensorData::from_i64(t, {n}, a), TensorData::from_i64(t, {n}, b)})[0];
}

TEST(BitwiseRules, ShiftsAndLogicOnUnsignedAndSignedTypes) {
  TensorData left =
      run_binary("BitShift", 11, DType::U16, onnx::TensorProto::UINT16, {1, 3, 65535}, {15, 1, 16}, "LEFT");
  EXPECT_EQ(left.to_i64(), (std::vector<int64_t>{32768, 6, 0}));
  TensorData right = run_binary("BitShift", 28, DType::I32, onnx::TensorProto::INT32, {-8, 8, -1}, {1, 2, 40}, "RIGHT");
  EXPECT_EQ(right.to_i64(), (std::vector<int64_t>{-4, 2, -1}));
  TensorData x = run_binary("BitwiseXor", 18, DType::U32, onnx::TensorProto::UINT32, {0xFFFFFFFF, 5}, {1, 3});
  EXPECT_EQ(x.to_i64(), (std::vector<int64_t>{0xFFFFFFFE, 6}));
  TensorData a = run_binary("BitwiseAnd", 18, DType::I64, onnx::TensorProto::INT64, {-1, 12}, {-4, 10});
  EXPECT_EQ(a.to_i64(), (std::vector<int64_t>{-4, 8}));
}

TEST(BitwiseRules, RefusesWhatTheOperatorDoesNotDefine) {
  // Signed BitShift needs opset 28; a float operand and an unknown direction are errors.
  EXPECT_THROW(run_binary("BitShift", 18, DType::I32, onnx::TensorProto::INT32, {1}, {1}, "LEFT"), Error);
  EXPECT_THROW(run_binary("BitShift", 28, DType::U8, onnx::TensorProto::UINT8, {1}, {1}, "UP"), Error);
  OnnxBuilder m(18);
  m.input("a", {2}).output("y");
  m.node("BitwiseNot", {"a"}, {"y"});
  EXPECT_THROW(import_onnx_model(m.model(), "."), Error);
}

TEST(InverseTrigRules, EachIsOnePrimitive) {
  for (const char* op : {"Asin", "Acos", "Atan"}) {
    OnnxBuilder m(22);
    m.input("x", {3}).output("y");
    m.node(op, {"x"}, {"y"});
    ImportedModel model = import_onnx_model(m.model(), ".");
    ASSERT_EQ(model.graph.num_prims(), 1) << op;
    TensorData y = reference::run_graph(model.graph, {TensorData::from_f64(DType::F32, {3}, {-0.5, 0, 0.5})})[0];
    double (*f)(double) = std::string(op) == "Asin"   ? static_cast<double (*)(double)>(std::asin)
                          : std::string(op) == "Acos" ? static_cast<double (*)(double)>(std::acos)
                                                      : static_cast<double (*)(double)>(std::atan);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(y.get_f64(i), f(-0.5 + 0.5 * i), 1e-6) << op;
  }
}

TEST(ModRule, FloatFmodZeroTakesTheDivisorsSignFromOpset28) {
  auto build = [](int opset) {
    OnnxBuilder m(opset);
    m.input("a", {4}).input("b", {4}).output("y");
    m.node("Mod", {"a", "b"}, {"y"});
    return m;
  };
  OnnxBuilder m28 = build(28);
  ImportedModel model = import_onnx_model(m28.model(), ".");
  TensorData a = TensorData::from_f64(DType::F32, {4}, {-4.5, 4.5, 7, -7});
  TensorData b = TensorData::from_f64(DType::F32, {4}, {2, -2, 3, -3});
  TensorData y = reference::run_graph(model.graph, {a, b})[0];
  EXPECT_EQ(y.to_f64(), (std::vector<double>{1.5, -1.5, 1, -1}));
  OnnxBuilder m13 = build(13);
  EXPECT_THROW(import_onnx_model(m13.model(), "."), Error);
}

}  // namespace
}  // namespace korch
