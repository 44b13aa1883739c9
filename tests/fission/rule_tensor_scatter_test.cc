// Tests of the TensorScatter rule (src/fission/rule_tensor_scatter.cc): circular writes wrap
// around the cache; a linear write past the cache's end is a run-time error.
#include <gtest/gtest.h>

#include "fission/fission.h"
#include "frontend/onnx_import.h"
#include "onnx_builder.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch {
namespace {

using testing::OnnxBuilder;

std::vector<double> scatter(const std::string& mode, const std::vector<int64_t>& write_indices) {
  OnnxBuilder m(24);
  m.input("cache", {2, 4, 1}).input("update", {2, 2, 1}).input("w", {2}, onnx::TensorProto::INT64).output("y");
  OnnxBuilder::attr_s(m.node("TensorScatter", {"cache", "update", "w"}, {"y"}), "mode", mode);
  ImportedModel model = import_onnx_model(m.model(), ".");
  TensorData cache = TensorData::from_f64(DType::F32, {2, 4, 1}, {9, 9, 9, 9, 8, 8, 8, 8});
  TensorData update = TensorData::from_f64(DType::F32, {2, 2, 1}, {1, 2, 3, 4});
  return reference::run_graph(model.graph, {cache, update, TensorData::from_i64(DType::I64, {2}, write_indices)})[0]
      .to_f64();
}

TEST(TensorScatterRule, LinearAndCircularWrites) {
  EXPECT_EQ(scatter("linear", {1, 2}), (std::vector<double>{9, 1, 2, 9, 8, 8, 3, 4}));
  EXPECT_EQ(scatter("circular", {1, 3}), (std::vector<double>{9, 1, 2, 9, 4, 8, 8, 3}));
  EXPECT_THROW(scatter("linear", {1, 3}), Error);  // batch 1 would write position 4 of 4
}

}  // namespace
}  // namespace korch
