// Tests of the MaxUnpool rule (src/fission/rule_max_unpool.cc): values land at their indices, the
// last of repeated indices wins, output_shape pads with zeros at the end.
#include <gtest/gtest.h>

#include "fission/fission.h"
#include "frontend/onnx_import.h"
#include "onnx_builder.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch {
namespace {

using testing::OnnxBuilder;

TEST(MaxUnpoolRule, ScattersToIndicesAndPadsToOutputShape) {
  OnnxBuilder m(22);
  m.input("x", {1, 1, 2, 2}).input("i", {1, 1, 2, 2}, onnx::TensorProto::INT64).output("y");
  m.initializer("shape", TensorData::from_i64(DType::I64, {4}, {1, 1, 4, 5}));
  onnx::NodeProto& node = m.node("MaxUnpool", {"x", "i", "shape"}, {"y"});
  OnnxBuilder::attr_ints(node, "kernel_shape", {2, 2});
  OnnxBuilder::attr_ints(node, "strides", {2, 2});
  ImportedModel model = import_onnx_model(m.model(), ".");
  TensorData x = TensorData::from_f64(DType::F32, {1, 1, 2, 2}, {1, 2, 3, 4});
  TensorData i = TensorData::from_i64(DType::I64, {1, 1, 2, 2}, {5, 7, 13, 13});  // 13 twice: 4 wins
  TensorData y = reference::run_graph(model.graph, {x, i})[0];
  ASSERT_EQ(y.shape(), (Shape{1, 1, 4, 5}));
  // The unpooled 4x4 image, row by row, sits in the top-left corner of the 4x5 output.
  std::vector<double> want(20, 0.0);
  want[1 * 5 + 1] = 1;  // index 5 = (1, 1)
  want[1 * 5 + 3] = 2;  // index 7 = (1, 3)
  want[3 * 5 + 1] = 4;  // index 13 = (3, 1)
  EXPECT_EQ(y.to_f64(), want);
}

}  // namespace
}  // namespace korch
