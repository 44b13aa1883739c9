// Tests of the GridSample rule (src/fission/rule_grid_sample.cc) on hand-computed samples of a
// 2 x 3 image (values 0..5, row-major): interpolation modes, padding modes, align_corners.
#include <gtest/gtest.h>

#include "fission/fission.h"
#include "frontend/onnx_import.h"
#include "onnx_builder.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch {
namespace {

using testing::OnnxBuilder;

// Samples the image at normalised points (x, y) with the given attributes.
std::vector<double> sample(const std::string& mode, const std::string& padding, int64_t align_corners,
                           const std::vector<double>& points) {
  int64_t k = static_cast<int64_t>(points.size()) / 2;
  OnnxBuilder m(22);
  m.input("x", {1, 1, 2, 3}).input("grid", {1, 1, k, 2}).output("y");
  onnx::NodeProto& node = m.node("GridSample", {"x", "grid"}, {"y"});
  OnnxBuilder::attr_s(node, "mode", mode);
  OnnxBuilder::attr_s(node, "padding_mode", padding);
  OnnxBuilder::attr_i(node, "align_corners", align_corners);
  ImportedModel model = import_onnx_model(m.model(), ".");
  TensorData image = TensorData::from_f64(DType::F32, {1, 1, 2, 3}, {0, 1, 2, 3, 4, 5});
  TensorData grid = TensorData::from_f64(DType::F32, {1, 1, k, 2}, points);
  TensorData y = reference::run_graph(model.graph, {image, grid})[0];
  EXPECT_EQ(y.shape(), (Shape{1, 1, 1, k}));
  return y.to_f64();
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "sample " << i;
}

TEST(GridSampleRule, LinearWithAlignedCornersHitsPixelsAndMidpoints) {
  // (-1, -1) is pixel (0, 0); (1, 1) pixel (1, 2); (0, 0) the middle of pixels 1 and 4.
  expect_near(sample("linear", "zeros", 1, {-1, -1, 1, 1, 0, 0}), {0, 5, 2.5});
}

TEST(GridSampleRule, PaddingModesOutsideTheImage) {
  // x = 3 lies far right of the image; y = 0 is between the rows.
  expect_near(sample("linear", "zeros", 1, {3, 0}), {0});
  expect_near(sample("linear", "border", 1, {3, 0}), {3.5});
  // x = 1.5 denormalises to 2.5, reflected about 2 to 1.5; y = -1 is row 0.
  expect_near(sample("linear", "reflection", 1, {1.5, -1}), {1.5});
  // Without align_corners, x = 1 is 2.5: half outside, zeros padding halves pixel 2 of row 0.
  expect_near(sample("linear", "zeros", 0, {1, -0.5}), {1});
}

TEST(GridSampleRule, NearestAndCubic) {
  // x = 0.1 -> 1.1 -> column 1; y = 0.6 -> 0.8 -> row 1.
  expect_near(sample("nearest", "zeros", 1, {0.1, 0.6}), {4});
  // On a pixel the cubic weights are (0, 1, 0, 0).
  expect_near(sample("cubic", "border", 1, {0, 1, -1, -1}), {4, 0});
}

TEST(GridSampleRule, RefusesWhatItDoesNotImplement) {
  EXPECT_THROW(sample("area", "zeros", 0, {0, 0}), Error);
  EXPECT_THROW(sample("linear", "wrap", 0, {0, 0}), Error);
}

}  // namespace
}  // namespace korch
