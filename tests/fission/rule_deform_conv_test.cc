// Tests of the DeformConv rule (src/fission/rule_deform_conv.cc): with zero offsets it is the
// ordinary grouped convolution (times the mask), and an offset of one whole row samples the next
// row.
#include <gtest/gtest.h>

#include "fission/fission.h"
#include "frontend/onnx_import.h"
#include "onnx_builder.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch {
namespace {

using testing::OnnxBuilder;
using testing::random_tensor;

const Shape kInput = {1, 4, 5, 5}, kWeights = {6, 2, 3, 3}, kOffsets = {1, 2 * 9 * 2, 5, 5}, kMask = {1, 2 * 9, 5, 5};

void conv_attrs(onnx::NodeProto& node) {
  OnnxBuilder::attr_ints(node, "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_i(node, "group", 2);
}

TensorData deform_conv(const TensorData& x, const TensorData& w, const TensorData& offsets, const TensorData& mask) {
  OnnxBuilder m(22);
  m.input("x", kInput).input("w", kWeights).input("offset", kOffsets).input("mask", kMask).output("y");
  onnx::NodeProto& node = m.node("DeformConv", {"x", "w", "offset", "", "mask"}, {"y"});
  conv_attrs(node);
  OnnxBuilder::attr_i(node, "offset_group", 2);
  ImportedModel model = import_onnx_model(m.model(), ".");
  return reference::run_graph(model.graph, {x, w, offsets, mask})[0];
}

TEST(DeformConvRule, ZeroOffsetsGiveTheGroupedConvolutionTimesTheMask) {
  TensorData x = random_tensor(kInput, 1), w = random_tensor(kWeights, 2);
  OnnxBuilder m(22);
  m.input("x", kInput).input("w", kWeights).output("y");
  conv_attrs(m.node("Conv", {"x", "w"}, {"y"}));
  TensorData want = reference::run_graph(import_onnx_model(m.model(), ".").graph, {x, w})[0];
  TensorData mask(DType::F32, kMask);
  for (int64_t i = 0; i < mask.size(); ++i) mask.set_f64(i, 0.5);
  TensorData got = deform_conv(x, w, TensorData(DType::F32, kOffsets), mask);
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got.get_f64(i), 0.5 * want.get_f64(i), 1e-5) << i;
}

TEST(DeformConvRule, AnOffsetOfOneRowSamplesTheNextRow) {
  // Every tap one row down: the convolution of x with pads (top 0, bottom 2) instead of (1, 1).
  TensorData x = random_tensor(kInput, 3), w = random_tensor(kWeights, 4);
  OnnxBuilder m(22);
  m.input("x", kInput).input("w", kWeights).output("y");
  onnx::NodeProto& conv = m.node("Conv", {"x", "w"}, {"y"});
  OnnxBuilder::attr_ints(conv, "pads", {0, 1, 2, 1});
  OnnxBuilder::attr_i(conv, "group", 2);
  TensorData want = reference::run_graph(import_onnx_model(m.model(), ".").graph, {x, w})[0];
  TensorData offsets(DType::F32, kOffsets), mask(DType::F32, kMask);
  for (int64_t i = 0; i < mask.size(); ++i) mask.set_f64(i, 1.0);
  const int64_t plane = 5 * 5;
  for (int64_t channel = 0; channel < kOffsets[1]; channel += 2)  // (dy, dx) pairs: dy = 1
    for (int64_t i = 0; i < plane; ++i) offsets.set_f64(channel * plane + i, 1.0);
  TensorData got = deform_conv(x, w, offsets, mask);
  for (int64_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got.get_f64(i), want.get_f64(i), 1e-5) << i;
}

TEST(DeformConvRule, RejectsOffsetsOfTheWrongShape) {
  OnnxBuilder m(22);
  m.input("x", kInput).input("w", kWeights).input("offset", {1, 16, 5, 5}).output("y");
  conv_attrs(m.node("DeformConv", {"x", "w", "offset"}, {"y"}));
  EXPECT_THROW(import_onnx_model(m.model(), "."), Error);  // one offset group needs 9 x 2 channels
}

}  // namespace
}  // namespace korch
