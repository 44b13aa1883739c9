// Tests of the Det rule (src/fission/rule_det.cc): Laplace expansion against known determinants,
// batch axes, and the refusal of larger matrices.
#include <gtest/gtest.h>

#include "fission/fission.h"
#include "frontend/onnx_import.h"
#include "onnx_builder.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch {
namespace {

using testing::OnnxBuilder;

TensorData det(const Shape& shape, const std::vector<double>& values) {
  OnnxBuilder m(22);
  m.input("x", shape).output("y");
  m.node("Det", {"x"}, {"y"});
  ImportedModel model = import_onnx_model(m.model(), ".");
  return reference::run_graph(model.graph, {TensorData::from_f64(DType::F32, shape, values)})[0];
}

TEST(DetRule, KnownDeterminantsOfOrdersOneToFour) {
  EXPECT_NEAR(det({1, 1}, {-2.5}).get_f64(0), -2.5, 1e-6);
  EXPECT_NEAR(det({3, 3}, {2, -3, 1, 2, 0, -1, 1, 4, 5}).get_f64(0), 49, 1e-4);
  // An upper-triangular 4x4 with its first two rows swapped: -(1 * 2 * 3 * 4).
  EXPECT_NEAR(det({4, 4}, {0, 2, 5, 6, 1, 7, 8, 9, 0, 0, 3, 1, 0, 0, 0, 4}).get_f64(0), -24, 1e-4);
}

TEST(DetRule, BatchAxesAndRefusals) {
  TensorData y = det({2, 2, 2}, {1, 2, 3, 4, 2, 0, 0, 3});
  EXPECT_EQ(y.shape(), (Shape{2}));
  EXPECT_NEAR(y.get_f64(0), -2, 1e-6);
  EXPECT_NEAR(y.get_f64(1), 6, 1e-6);
  EXPECT_THROW(det({5, 5}, std::vector<double>(25, 1.0)), Error);
  EXPECT_THROW(det({2, 3}, std::vector<double>(6, 1.0)), Error);
}

}  // namespace
}  // namespace korch
