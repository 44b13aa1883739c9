// Reference executor tests on hand-computed examples for every primitive kind.
#include "reference/reference.h"

#include <gtest/gtest.h>

#include <cmath>

#include "util/error.h"

namespace korch {
namespace {

TensorData f32(const Shape& shape, const std::vector<double>& v) { return TensorData::from_f64(DType::F32, shape, v); }
TensorData i64(const Shape& shape, const std::vector<int64_t>& v) { return TensorData::from_i64(DType::I64, shape, v); }

// Builds a one-primitive graph over the given inputs and runs it.
TensorData run1(PrimOp op, const std::vector<TensorData>& inputs, Attrs attrs = {}) {
  PrimGraph g;
  std::vector<TensorId> ids;
  for (size_t i = 0; i < inputs.size(); ++i)
    ids.push_back(g.add_input("x" + std::to_string(i), inputs[i].dtype(), inputs[i].shape()));
  g.mark_output(g.add_primitive(op, ids, std::move(attrs)));
  return reference::run_graph(g, inputs)[0];
}

void expect_values(const TensorData& t, const Shape& shape, const std::vector<double>& v, double tol = 1e-6) {
  ASSERT_EQ(t.shape(), shape);
  ASSERT_EQ(t.size(), static_cast<int64_t>(v.size()));
  for (int64_t i = 0; i < t.size(); ++i) EXPECT_NEAR(t.get_f64(i), v[i], tol) << "at " << i;
}

TEST(Reference, ElementwiseBroadcast) {
  expect_values(run1(PrimOp::Add, {f32({2, 1}, {1, 2}), f32({3}, {10, 20, 30})}), {2, 3}, {11, 21, 31, 12, 22, 32});
  expect_values(run1(PrimOp::Mod, {i64({3}, {-7, 7, 5}), i64({1}, {3})}, Attrs().set("fmod", int64_t{0})), {3},
                {2, 1, 2});
  expect_values(run1(PrimOp::Mod, {i64({2}, {-7, 7}), i64({1}, {3})}, Attrs().set("fmod", int64_t{1})), {2}, {-1, 1});
  expect_values(run1(PrimOp::Sigmoid, {f32({1}, {0})}), {1}, {0.5});
  TensorData cond(DType::Bool, {2});
  cond.set_i64(0, 1);
  expect_values(run1(PrimOp::Where, {cond, f32({2}, {1, 2}), f32({1}, {9})}), {2}, {1, 9});
  expect_values(run1(PrimOp::Cast, {f32({3}, {-1.7, 2.5, 0})}, Attrs().set("to", int64_t(DType::I64))), {3},
                {-1, 2, 0});
}

TEST(Reference, BitwiseAndShiftsOnTwosComplementBits) {
  auto typed = [](DType t, const std::vector<int64_t>& v) {
    return TensorData::from_i64(t, {static_cast<int64_t>(v.size())}, v);
  };
  expect_values(run1(PrimOp::BitAnd, {typed(DType::U8, {0xF0, 0x3C}), typed(DType::U8, {0x3C, 0xFF})}), {2},
                {0x30, 0x3C});
  expect_values(run1(PrimOp::BitOr, {typed(DType::I8, {-128, 5}), typed(DType::I8, {1, 2})}), {2}, {-127, 7});
  expect_values(run1(PrimOp::BitXor, {typed(DType::I32, {-1, 6}), typed(DType::I32, {5, 3})}), {2}, {-6, 5});
  expect_values(run1(PrimOp::BitNot, {typed(DType::U8, {0, 200})}), {2}, {255, 55});
  expect_values(run1(PrimOp::BitNot, {typed(DType::I16, {0, -7})}), {2}, {-1, 6});
  // Amounts outside [0, width) give 0, or -1 for a negative signed value shifted right.
  expect_values(run1(PrimOp::ShiftLeft, {typed(DType::U8, {1, 3, 1, 1}), typed(DType::U8, {7, 7, 8, 200})}), {4},
                {128, 128, 0, 0});
  expect_values(run1(PrimOp::ShiftRight, {typed(DType::I8, {-128, -128, 64, -3}), typed(DType::I8, {7, 8, 9, -1})}),
                {4}, {-1, -1, 0, -1});
  expect_values(run1(PrimOp::ShiftLeft, {typed(DType::I32, {-1, 1}), typed(DType::I32, {31, 32})}), {2},
                {-2147483648.0, 0});
  TensorData big = run1(PrimOp::ShiftRight, {typed(DType::U64, {-1}), typed(DType::U64, {60})});
  EXPECT_EQ(big.data<uint64_t>()[0], 15u);
  EXPECT_THROW(run1(PrimOp::BitAnd, {f32({1}, {1}), f32({1}, {1})}), Error);
}

TEST(Reference, InverseTrigonometricFunctions) {
  expect_values(run1(PrimOp::Asin, {f32({3}, {-1, 0, 0.5})}), {3}, {-M_PI / 2, 0, M_PI / 6});
  expect_values(run1(PrimOp::Acos, {f32({2}, {1, 0.5})}), {2}, {0, M_PI / 3});
  expect_values(run1(PrimOp::Atan, {f32({2}, {1, -1e30})}), {2}, {M_PI / 4, -M_PI / 2});
  EXPECT_TRUE(std::isnan(run1(PrimOp::Asin, {f32({1}, {2})}).get_f64(0)));
  EXPECT_THROW(run1(PrimOp::Atan, {i64({1}, {1})}), Error);
}

TEST(Reference, Reductions) {
  TensorData x = f32({2, 3}, {1, 5, 3, 4, 2, 6});
  auto axes = [](std::vector<int64_t> a, int64_t keep) { return Attrs().set("axes", a).set("keepdims", keep); };
  expect_values(run1(PrimOp::ReduceSum, {x}, axes({1}, 1)), {2, 1}, {9, 12});
  expect_values(run1(PrimOp::ReduceMean, {x}, axes({0}, 0)), {3}, {2.5, 3.5, 4.5});
  expect_values(run1(PrimOp::ReduceMax, {x}, axes({0, 1}, 0)), {}, {6});
  expect_values(run1(PrimOp::ReduceProd, {x}, axes({1}, 0)), {2}, {15, 48});
  TensorData ties = f32({4}, {3, 1, 3, 0});
  Attrs am = Attrs().set("axis", int64_t{0}).set("keepdims", int64_t{0}).set("select_last_index", int64_t{0});
  expect_values(run1(PrimOp::ArgMax, {ties}, am), {}, {0});
  am.set("select_last_index", int64_t{1});
  expect_values(run1(PrimOp::ArgMax, {ties}, am), {}, {2});
}

TEST(Reference, Layout) {
  TensorData x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_values(run1(PrimOp::Transpose, {x}, Attrs().set("perm", std::vector<int64_t>{1, 0})), {3, 2},
                {1, 4, 2, 5, 3, 6});
  Attrs sl;
  sl.set("starts", std::vector<int64_t>{1, 2})
      .set("steps", std::vector<int64_t>{1, -2})
      .set("sizes", std::vector<int64_t>{1, 2});
  expect_values(run1(PrimOp::Slice, {x}, sl), {1, 2}, {6, 4});
  expect_values(run1(PrimOp::Concat, {x, f32({2, 1}, {7, 8})}, Attrs().set("axis", int64_t{1})), {2, 4},
                {1, 2, 3, 7, 4, 5, 6, 8});
  auto pad = [&](const char* mode) {
    return run1(PrimOp::Pad, {f32({3}, {1, 2, 3})},
                Attrs().set("pads", std::vector<int64_t>{2, 1}).set("mode", std::string(mode)).set("value", 9.0));
  };
  expect_values(pad("constant"), {6}, {9, 9, 1, 2, 3, 9});
  expect_values(pad("reflect"), {6}, {3, 2, 1, 2, 3, 2});
  expect_values(pad("edge"), {6}, {1, 1, 1, 2, 3, 3});
  expect_values(run1(PrimOp::Pad, {x},
                     Attrs()
                         .set("pads", std::vector<int64_t>{0, -1, 0, 0})
                         .set("mode", std::string("constant"))
                         .set("value", 0.0)),
                {2, 2}, {2, 3, 5, 6});
  expect_values(run1(PrimOp::Gather, {x, i64({2}, {-1, 0})}, Attrs().set("axis", int64_t{1})), {2, 2}, {3, 1, 6, 4});
  expect_values(run1(PrimOp::Broadcast, {f32({2, 1}, {1, 2})}, Attrs().set("shape", std::vector<int64_t>{2, 2})),
                {2, 2}, {1, 1, 2, 2});
  EXPECT_THROW(run1(PrimOp::Gather, {x, i64({1}, {3})}, Attrs().set("axis", int64_t{1})), Error);
}

Attrs resize_attrs(const std::string& mode, const std::string& coord, std::vector<int64_t> sizes,
                   std::vector<double> scales) {
  Attrs a;
  a.set("sizes", sizes).set("scales", scales).set("roi", std::vector<double>(2 * sizes.size(), 0.0));
  a.set("mode", mode).set("coord_mode", coord).set("nearest_mode", std::string("round_prefer_floor"));
  a.set("cubic_coeff_a", -0.75).set("exclude_outside", int64_t{0}).set("extrapolation_value", 0.0);
  return a;
}

TEST(Reference, Resize) {
  TensorData x = f32({1, 2}, {1, 3});
  expect_values(run1(PrimOp::Resize, {x}, resize_attrs("nearest", "asymmetric", {1, 4}, {1, 2})), {1, 4}, {1, 1, 3, 3});
  // half_pixel linear upsample by 2 of [1, 3]: coordinates -0.25, 0.25, 0.75, 1.25 (clamped).
  expect_values(run1(PrimOp::Resize, {x}, resize_attrs("linear", "half_pixel", {1, 4}, {1, 2})), {1, 4},
                {1, 1.5, 2.5, 3});
  expect_values(run1(PrimOp::Resize, {x}, resize_attrs("linear", "align_corners", {1, 3}, {1, 1.5})), {1, 3},
                {1, 2, 3});
}

TEST(Reference, Pooling) {
  TensorData x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Attrs a;
  a.set("kernel", std::vector<int64_t>{2, 2}).set("strides", std::vector<int64_t>{1, 1});
  a.set("pads", std::vector<int64_t>{0, 0, 1, 1}).set("dilations", std::vector<int64_t>{1, 1});
  a.set("ceil_mode", int64_t{0}).set("count_include_pad", int64_t{0});
  expect_values(run1(PrimOp::MaxPool, {x}, a), {1, 1, 3, 3}, {5, 6, 6, 8, 9, 9, 8, 9, 9});
  expect_values(run1(PrimOp::AvgPool, {x}, a), {1, 1, 3, 3}, {3, 4, 4.5, 6, 7, 7.5, 7.5, 8.5, 9});
  a.set("count_include_pad", int64_t{1});
  expect_values(run1(PrimOp::AvgPool, {x}, a), {1, 1, 3, 3}, {3, 4, 2.25, 6, 7, 3.75, 3.75, 4.25, 2.25});
}

TEST(Reference, MatMulBatchBroadcast) {
  TensorData a = f32({2, 1, 2}, {1, 2, 3, 4});
  TensorData b = f32({2, 1}, {10, 1});
  expect_values(run1(PrimOp::MatMul, {a, b}), {2, 1, 1}, {12, 34});
}

TEST(Reference, GroupedConvMatchesDirectSum) {
  // 1x4x5x5 input, 2 groups, 3x3 kernel, stride 2, pad 1, dilation 1 against a direct formula.
  TensorData x(DType::F32, {1, 4, 5, 5}), w(DType::F32, {6, 2, 3, 3});
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = static_cast<float>((i * 7) % 11) - 5.0f;
  for (int64_t i = 0; i < w.size(); ++i) w.data<float>()[i] = static_cast<float>((i * 5) % 7) - 3.0f;
  Attrs a;
  a.set("strides", std::vector<int64_t>{2, 2}).set("pads", std::vector<int64_t>{1, 1, 1, 1});
  a.set("dilations", std::vector<int64_t>{1, 1}).set("group", int64_t{2});
  TensorData y = run1(PrimOp::Conv, {x, w}, a);
  ASSERT_EQ(y.shape(), (Shape{1, 6, 3, 3}));
  for (int oc = 0; oc < 6; ++oc)
    for (int oh = 0; oh < 3; ++oh)
      for (int ow = 0; ow < 3; ++ow) {
        double acc = 0;
        int g = oc / 3;
        for (int ic = 0; ic < 2; ++ic)
          for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw) {
              int ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
              if (ih < 0 || ih >= 5 || iw < 0 || iw >= 5) continue;
              acc += x.data<float>()[((g * 2 + ic) * 5 + ih) * 5 + iw] *
                     w.data<float>()[((oc * 2 + ic) * 3 + kh) * 3 + kw];
            }
        EXPECT_NEAR(y.data<float>()[(oc * 3 + oh) * 3 + ow], acc, 1e-4);
      }
}

TEST(Reference, ConvTransposeIsAdjointOfConv) {
  // <conv(x, w), y> == <x, conv_transpose(y, w)> for matching geometry.
  TensorData x(DType::F32, {1, 2, 5, 5}), w(DType::F32, {3, 2, 3, 3}), y(DType::F32, {1, 3, 3, 3});
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = static_cast<float>((i * 3) % 5) - 2.0f;
  for (int64_t i = 0; i < w.size(); ++i) w.data<float>()[i] = static_cast<float>((i * 5) % 7) - 3.0f;
  for (int64_t i = 0; i < y.size(); ++i) y.data<float>()[i] = static_cast<float>((i * 2) % 3) - 1.0f;
  Attrs a;
  a.set("strides", std::vector<int64_t>{2, 2}).set("pads", std::vector<int64_t>{1, 1, 1, 1});
  a.set("dilations", std::vector<int64_t>{1, 1}).set("group", int64_t{1});
  TensorData cx = run1(PrimOp::Conv, {x, w}, a);
  a.set("out_spatial", std::vector<int64_t>{5, 5});
  TensorData ty = run1(PrimOp::ConvTranspose, {y, w}, a);
  double lhs = 0, rhs = 0;
  for (int64_t i = 0; i < cx.size(); ++i) lhs += cx.get_f64(i) * y.get_f64(i);
  for (int64_t i = 0; i < x.size(); ++i) rhs += x.get_f64(i) * ty.get_f64(i);
  EXPECT_NEAR(lhs, rhs, 1e-6);
}

TEST(Reference, RejectsWrongInputs) {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {2});
  g.mark_output(g.add_primitive(PrimOp::Exp, {x}, {}));
  EXPECT_THROW(reference::run_graph(g, {f32({3}, {1, 2, 3})}), Error);
  EXPECT_THROW(reference::run_graph(g, {}), Error);
}

}  // namespace
}  // namespace korch
