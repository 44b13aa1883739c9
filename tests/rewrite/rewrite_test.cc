// Tests of the algebraic rewrites: each rule fires on its pattern, leaves look-alikes that it
// must not touch alone, and the rewritten graph computes what the original did (reference
// executor, random inputs and weights).
#include "rewrite/rewrite.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "frontend/onnx_import.h"
#include "onnx_builder.h"
#include "reference/reference.h"

namespace korch {
namespace {

using testing::OnnxBuilder;
using testing::random_tensor;

TensorId weights(PrimGraph& g, const std::string& name, const Shape& shape, uint32_t seed) {
  return g.add_constant(name, std::make_shared<const TensorData>(random_tensor(shape, seed)));
}

Attrs pointwise_conv_attrs() {
  return Attrs()
      .set("dilations", std::vector<int64_t>{1, 1})
      .set("group", int64_t{1})
      .set("pads", std::vector<int64_t>{0, 0, 0, 0})
      .set("strides", std::vector<int64_t>{1, 1});
}

Attrs resize_attrs(const Shape& in, const Shape& out, const std::string& mode = "linear",
                   const std::string& coord_mode = "half_pixel") {
  std::vector<double> scales;
  for (size_t i = 0; i < in.size(); ++i) scales.push_back(static_cast<double>(out[i]) / in[i]);
  return Attrs()
      .set("sizes", out)
      .set("scales", scales)
      .set("roi", std::vector<double>{0, 0, 0, 0, 1, 1, 1, 1})
      .set("mode", mode)
      .set("coord_mode", coord_mode)
      .set("nearest_mode", std::string("floor"))
      .set("cubic_coeff_a", -0.75)
      .set("exclude_outside", int64_t{0})
      .set("extrapolation_value", 0.0);
}

int count(const PrimGraph& g, PrimOp op) {
  int n = 0;
  for (const Primitive& p : g.prims()) n += p.op == op;
  return n;
}

// Multiply-adds of every Conv and MatMul in g.
double linear_macs(const PrimGraph& g) {
  double macs = 0;
  for (const Primitive& p : g.prims()) {
    if (p.op == PrimOp::Conv) {
      const Shape& w = g.tensor(p.inputs[1]).shape;
      double per_output = 1;
      for (size_t i = 1; i < w.size(); ++i) per_output *= w[i];
      macs += per_output * num_elements(g.tensor(p.output).shape);
    } else if (p.op == PrimOp::MatMul) {
      const Shape& a = g.tensor(p.inputs[0]).shape;
      macs += static_cast<double>(a.back()) * num_elements(g.tensor(p.output).shape);
    }
  }
  return macs;
}

// Runs both graphs on the same random inputs; outputs agree to float rounding.
void expect_same_values(const PrimGraph& before, const PrimGraph& after) {
  ASSERT_EQ(before.inputs().size(), after.inputs().size());
  std::vector<TensorData> inputs;
  for (size_t i = 0; i < before.inputs().size(); ++i)
    inputs.push_back(random_tensor(before.tensor(before.inputs()[i]).shape, 100 + static_cast<uint32_t>(i)));
  std::vector<TensorData> want = reference::run_graph(before, inputs);
  std::vector<TensorData> got = reference::run_graph(after, inputs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(want[o].shape(), got[o].shape());
    EXPECT_EQ(before.tensor(before.outputs()[o]).name, after.tensor(after.outputs()[o]).name);
    double worst = 0;
    for (int64_t i = 0; i < want[o].size(); ++i) {
      double w = want[o].get_f64(i), g = got[o].get_f64(i);
      worst = std::max(worst, std::abs(w - g) / (1e-3 + std::abs(w)));
    }
    EXPECT_LT(worst, 1e-4) << "output " << o;
  }
}

// The SegFormer decode head in small: token-major MatMul projections per stage, turned
// channel-major, resized to the first stage's size (identity for it), concatenated and
// mixed by a pointwise Conv with bias, then ReLU.
PrimGraph segformer_head(int64_t hidden = 16) {
  PrimGraph g;
  const std::vector<int64_t> channels = {8, 12, 20}, sides = {8, 4, 2};
  std::vector<TensorId> resized;
  for (size_t i = 0; i < channels.size(); ++i) {
    int64_t c = channels[i], s = sides[i];
    TensorId x = g.add_input("stage" + std::to_string(i), DType::F32, {1, s * s, c});
    TensorId y = g.add_primitive(PrimOp::MatMul, {x, weights(g, "w" + std::to_string(i), {c, hidden}, 10 + i)}, {});
    y = g.add_primitive(PrimOp::Add, {weights(g, "b" + std::to_string(i), {hidden}, 20 + i), y}, {});
    y = g.add_primitive(PrimOp::Transpose, {y}, Attrs().set("perm", std::vector<int64_t>{0, 2, 1}));
    y = g.add_primitive(PrimOp::Reshape, {y}, Attrs().set("shape", std::vector<int64_t>{1, hidden, s, s}));
    resized.push_back(g.add_primitive(PrimOp::Resize, {y}, resize_attrs({1, hidden, s, s}, {1, hidden, 8, 8})));
  }
  TensorId cat = g.add_primitive(PrimOp::Concat, resized, Attrs().set("axis", int64_t{1}));
  TensorId f =
      g.add_primitive(PrimOp::Conv, {cat, weights(g, "fuse", {hidden, 3 * hidden, 1, 1}, 30)}, pointwise_conv_attrs());
  f = g.add_primitive(PrimOp::Add, {f, weights(g, "fuse_bias", {1, hidden, 1, 1}, 31)}, {});
  TensorId out = g.add_primitive(PrimOp::Relu, {f}, {}, kNone, "logits");
  g.mark_output(out);
  return g;
}

TEST(Rewrite, SegformerHeadRunsEveryRuleAndKeepsValues) {
  PrimGraph before = segformer_head();
  RewriteStats stats;
  PrimGraph after = rewrite_graph(before, &stats);
  EXPECT_EQ(stats.fired["remove_identity_resize"], 1);
  EXPECT_EQ(stats.fired["split_pointwise_conv_over_concat"], 1);
  EXPECT_EQ(stats.fired["commute_pointwise_conv_with_resize"], 2);
  EXPECT_EQ(stats.fired["compose_channel_linear_maps"], 3);
  EXPECT_EQ(count(after, PrimOp::Concat), 0);
  EXPECT_EQ(count(after, PrimOp::Conv), 0);
  EXPECT_EQ(count(after, PrimOp::Resize), 2);
  EXPECT_EQ(count(after, PrimOp::MatMul), 3);
  EXPECT_LT(linear_macs(after), linear_macs(before) / 4);
  expect_same_values(before, after);
  // A fixpoint: nothing more to do.
  RewriteStats again;
  rewrite_graph(after, &again);
  EXPECT_EQ(again.total(), 0);
}

TEST(Rewrite, IdentityResizeOnlyWhenEveryCoordinateMapsToItself) {
  for (const char* coord_mode :
       {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "tf_half_pixel_for_nn"}) {
    for (const char* mode : {"linear", "nearest"}) {
      PrimGraph g;
      TensorId x = g.add_input("x", DType::F32, {1, 2, 5, 5});
      g.mark_output(
          g.add_primitive(PrimOp::Resize, {x}, resize_attrs({1, 2, 5, 5}, {1, 2, 5, 5}, mode, coord_mode), kNone, "y"));
      RewriteStats stats;
      PrimGraph after = rewrite_graph(g, &stats);
      // tf_half_pixel_for_nn samples x + 0.5: linear interpolation averages neighbours.
      bool identity = std::string(coord_mode) != "tf_half_pixel_for_nn" || std::string(mode) == "nearest";
      EXPECT_EQ(stats.fired["remove_identity_resize"], identity ? 1 : 0) << coord_mode << " " << mode;
      EXPECT_EQ(count(after, PrimOp::Resize), identity ? 0 : 1);
      // The output is still computed (a copy of the input) and keeps its name.
      EXPECT_EQ(after.tensor(after.outputs()[0]).name, "y");
      expect_same_values(g, after);
    }
  }
}

TEST(Rewrite, PointwiseConvCommutesWithEveryResizeMode) {
  for (const char* mode : {"linear", "nearest", "cubic"}) {
    PrimGraph g;
    TensorId x = g.add_input("x", DType::F32, {1, 6, 3, 5});
    TensorId up = g.add_primitive(PrimOp::Resize, {x}, resize_attrs({1, 6, 3, 5}, {1, 6, 7, 10}, mode));
    g.mark_output(g.add_primitive(PrimOp::Conv, {up, weights(g, "w", {4, 6, 1, 1}, 3)}, pointwise_conv_attrs()));
    RewriteStats stats;
    PrimGraph after = rewrite_graph(g, &stats);
    EXPECT_EQ(stats.fired["commute_pointwise_conv_with_resize"], 1) << mode;
    EXPECT_EQ(after.tensor(after.prims()[0].output).shape, (Shape{1, 4, 3, 5}));  // the Conv runs first, small
    expect_same_values(g, after);
  }
}

TEST(Rewrite, LeavesLookAlikesAlone) {
  // A Concat read twice stays (splitting would not remove it); a strided or 3x3 Conv does
  // not commute with a Resize; a downsampling Resize is not worth moving below.
  {
    PrimGraph g;
    TensorId a = g.add_input("a", DType::F32, {1, 4, 2, 2});
    TensorId b = g.add_input("b", DType::F32, {1, 4, 4, 4});
    TensorId up = g.add_primitive(PrimOp::Resize, {a}, resize_attrs({1, 4, 2, 2}, {1, 4, 4, 4}));
    TensorId cat = g.add_primitive(PrimOp::Concat, {up, b}, Attrs().set("axis", int64_t{1}));
    g.mark_output(g.add_primitive(PrimOp::Conv, {cat, weights(g, "w", {3, 8, 1, 1}, 1)}, pointwise_conv_attrs()));
    g.mark_output(g.add_primitive(PrimOp::Relu, {cat}, {}));
    RewriteStats stats;
    rewrite_graph(g, &stats);
    EXPECT_EQ(stats.total(), 0);
  }
  {
    PrimGraph g;
    TensorId a = g.add_input("a", DType::F32, {1, 4, 3, 3});
    TensorId up = g.add_primitive(PrimOp::Resize, {a}, resize_attrs({1, 4, 3, 3}, {1, 4, 6, 6}));
    Attrs strided = pointwise_conv_attrs().set("strides", std::vector<int64_t>{2, 2});
    g.mark_output(g.add_primitive(PrimOp::Conv, {up, weights(g, "w", {3, 4, 1, 1}, 1)}, strided));
    TensorId up2 = g.add_primitive(PrimOp::Resize, {a}, resize_attrs({1, 4, 3, 3}, {1, 4, 6, 6}));
    Attrs padded = pointwise_conv_attrs().set("pads", std::vector<int64_t>{1, 1, 1, 1});
    g.mark_output(g.add_primitive(PrimOp::Conv, {up2, weights(g, "w3", {3, 4, 3, 3}, 2)}, padded));
    TensorId down = g.add_primitive(PrimOp::Resize, {a}, resize_attrs({1, 4, 3, 3}, {1, 4, 2, 2}));
    g.mark_output(g.add_primitive(PrimOp::Conv, {down, weights(g, "w4", {3, 4, 1, 1}, 3)}, pointwise_conv_attrs()));
    RewriteStats stats;
    rewrite_graph(g, &stats);
    EXPECT_EQ(stats.total(), 0);
  }
  {
    // Composing a narrow bottleneck (64 -> 2 -> 64) would cost more than the two maps.
    PrimGraph g;
    TensorId x = g.add_input("x", DType::F32, {1, 4, 64});
    TensorId y = g.add_primitive(PrimOp::MatMul, {x, weights(g, "w", {64, 2}, 1)}, {});
    y = g.add_primitive(PrimOp::Transpose, {y}, Attrs().set("perm", std::vector<int64_t>{0, 2, 1}));
    y = g.add_primitive(PrimOp::Reshape, {y}, Attrs().set("shape", std::vector<int64_t>{1, 2, 2, 2}));
    g.mark_output(g.add_primitive(PrimOp::Conv, {y, weights(g, "f", {64, 2, 1, 1}, 2)}, pointwise_conv_attrs()));
    RewriteStats stats;
    rewrite_graph(g, &stats);
    EXPECT_EQ(stats.total(), 0);
  }
}

TEST(Rewrite, ComposesWithoutBiasAndWithBiasOnEitherSide) {
  for (int bias : {0, 1, 2}) {
    PrimGraph g;
    TensorId x = g.add_input("x", DType::F32, {1, 6, 5});
    TensorId y = g.add_primitive(PrimOp::MatMul, {x, weights(g, "w", {5, 8}, 1)}, {});
    TensorId b = weights(g, "b", {1, 1, 8}, 2);
    if (bias == 1) y = g.add_primitive(PrimOp::Add, {y, b}, {});
    if (bias == 2) y = g.add_primitive(PrimOp::Add, {b, y}, {});
    y = g.add_primitive(PrimOp::Transpose, {y}, Attrs().set("perm", std::vector<int64_t>{0, 2, 1}));
    y = g.add_primitive(PrimOp::Reshape, {y}, Attrs().set("shape", std::vector<int64_t>{1, 8, 2, 3}));
    g.mark_output(g.add_primitive(PrimOp::Conv, {y, weights(g, "f", {7, 8, 1, 1}, 3)}, pointwise_conv_attrs()));
    RewriteStats stats;
    PrimGraph after = rewrite_graph(g, &stats);
    EXPECT_EQ(stats.fired["compose_channel_linear_maps"], 1) << bias;
    EXPECT_EQ(count(after, PrimOp::Conv), 0);
    expect_same_values(g, after);
  }
}

// YOLOX's Focus stem: x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]
// (each a Slice over H, then one over W, the first shared) concatenated over channels, then a
// padded 3x3 Conv. `phases` lists the (di, dj) order of the Concat; `rows` is H (W is 10).
PrimGraph focus_stem(const std::vector<std::pair<int64_t, int64_t>>& phases, int64_t rows = 8, int64_t kernel = 3,
                     int64_t stride = 1) {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {1, 3, rows, 10});
  auto slice = [&](TensorId t, int axis, int64_t start) {
    Shape s = g.tensor(t).shape;
    std::vector<int64_t> starts(4, 0), steps(4, 1);
    starts[axis] = start;
    steps[axis] = 2;
    s[axis] /= 2;  // with odd rows, the last one is dropped from every phase
    return g.add_primitive(PrimOp::Slice, {t},
                           Attrs().set("starts", starts).set("steps", steps).set("sizes", std::vector<int64_t>(s)));
  };
  std::vector<TensorId> by_rows = {slice(x, 2, 0), slice(x, 2, 1)}, pieces;
  for (auto [di, dj] : phases) pieces.push_back(slice(by_rows[di], 3, dj));
  TensorId cat = g.add_primitive(PrimOp::Concat, pieces, Attrs().set("axis", int64_t{1}));
  int64_t pad = kernel / 2;
  Attrs a = pointwise_conv_attrs()
                .set("pads", std::vector<int64_t>{pad, pad, pad, pad})
                .set("strides", std::vector<int64_t>{stride, stride});
  TensorId y = g.add_primitive(
      PrimOp::Conv, {cat, weights(g, "w", {5, 3 * static_cast<int64_t>(phases.size()), kernel, kernel}, 7)}, a);
  g.mark_output(g.add_primitive(PrimOp::Relu, {y}, {}));
  return g;
}

TEST(Rewrite, ConvAbsorbsASpaceToDepthInAnyPhaseOrder) {
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> orders = {
      {{0, 0}, {1, 0}, {0, 1}, {1, 1}},   // YOLOX
      {{1, 1}, {0, 0}, {0, 1}, {1, 0}}};  // any other order moves the weights
  for (const auto& phases : orders)
    for (int64_t kernel : {1, 3}) {
      PrimGraph g = focus_stem(phases, 8, kernel);
      RewriteStats stats;
      PrimGraph after = rewrite_graph(g, &stats);
      EXPECT_EQ(stats.fired["fold_space_to_depth_into_conv"], 1);
      EXPECT_EQ(count(after, PrimOp::Slice), 0);
      EXPECT_EQ(count(after, PrimOp::Concat), 0);
      ASSERT_EQ(count(after, PrimOp::Conv), 1);
      EXPECT_EQ(linear_macs(after), linear_macs(g));
      expect_same_values(g, after);
    }
}

TEST(Rewrite, SpaceToDepthLookAlikesStay) {
  // A missing or repeated phase, odd rows (the padding would differ), a strided Conv.
  for (PrimGraph g :
       {focus_stem({{0, 0}, {1, 0}, {0, 1}, {0, 1}}), focus_stem({{0, 0}, {1, 0}, {0, 1}}),
        focus_stem({{0, 0}, {1, 0}, {0, 1}, {1, 1}}, 7), focus_stem({{0, 0}, {1, 0}, {0, 1}, {1, 1}}, 8, 3, 2)}) {
    RewriteStats stats;
    rewrite_graph(g, &stats);
    EXPECT_EQ(stats.fired["fold_space_to_depth_into_conv"], 0);
  }
}

// Attention's P V in ONNX, imported without rewrites: scores q k^T (+ a mask), normalised along
// `axis` as a Softmax node ("softmax"), as the exporters' explicit chain ReduceMax, Sub, Exp,
// ReduceSum, Div ("chain"), or with Mul by the Reciprocal of the sum ("reciprocal"); then an
// optional scale ("mul": P * 0.5, "div": P / 4, "vector": P * c with c a constant per key), and
// P V with V: [1, 2, n, d]. `p_output` also makes P a graph output (a second reader).
struct Attention {
  std::string form = "softmax";
  std::string scale = "none";
  int64_t n = 12, d = 8, axis = -1;
  bool mask = false, p_output = false;
};

PrimGraph attention(const Attention& a) {
  const int64_t m = 6;
  OnnxBuilder b(13);
  b.input("q", {1, 2, m, 4}).input("kt", {1, 2, 4, a.n}).input("v", {1, 2, a.n, a.d}).output("y");
  b.node("MatMul", {"q", "kt"}, {"s"});
  std::string s = "s";
  if (a.mask) {
    b.input("mask", {1, 1, 1, a.n});
    b.node("Add", {"s", "mask"}, {"masked"});
    s = "masked";
  }
  if (a.form == "softmax") {
    OnnxBuilder::attr_i(b.node("Softmax", {s}, {"p"}), "axis", a.axis);
  } else {
    OnnxBuilder::attr_ints(b.node("ReduceMax", {s}, {"max"}), "axes", {a.axis});
    b.node("Sub", {s, "max"}, {"shifted"});
    b.node("Exp", {"shifted"}, {"e"});
    TensorData axes(DType::I64, {1});
    axes.data<int64_t>()[0] = a.axis;
    b.initializer("axes", axes);
    b.node("ReduceSum", {"e", "axes"}, {"sum"});
    if (a.form == "chain") {
      b.node("Div", {"e", "sum"}, {"p"});
    } else {
      b.node("Reciprocal", {"sum"}, {"inv"});
      b.node("Mul", {"inv", "e"}, {"p"});
    }
  }
  std::string p = "p";
  if (a.scale != "none") {
    TensorData c = a.scale == "vector" ? random_tensor({a.n}, 5, 0.5, 2.0) : random_tensor({}, 5, 0.5, 2.0);
    b.initializer("c", c);
    b.node(a.scale == "div" ? "Div" : "Mul", {"p", "c"}, {"scaled"});
    p = "scaled";
  }
  b.node("MatMul", {p, "v"}, {"y"});
  if (a.p_output) b.output("p");
  ImportOptions options;
  options.rewrite = false;
  return import_onnx_model(b.model(), "", options).graph;
}

// Divisions and multiplications whose output has shape `shape`.
int scalings_of_shape(const PrimGraph& g, const Shape& shape) {
  int n = 0;
  for (const Primitive& p : g.prims())
    n += (p.op == PrimOp::Div || p.op == PrimOp::Mul) && g.tensor(p.output).shape == shape;
  return n;
}

TEST(Rewrite, SoftmaxNormalisationMovesPastTheMatMul) {
  for (const char* form : {"softmax", "chain", "reciprocal"})
    for (const char* scale : {"none", "mul", "div"})
      for (bool mask : {false, true}) {
        Attention a;
        a.form = form;
        a.scale = scale;
        a.mask = mask;
        PrimGraph before = attention(a);
        RewriteStats stats;
        PrimGraph after = rewrite_graph(before, &stats);
        SCOPED_TRACE(std::string(form) + " " + scale + (mask ? " masked" : ""));
        EXPECT_EQ(stats.fired["defer_softmax_normalization"], 1);
        EXPECT_EQ(stats.total(), 1);
        // Nothing scales the [1, 2, 6, 12] scores any more: the division (and the scale) run on
        // the [1, 2, 6, 8] product; the row sum and the max subtraction stay.
        EXPECT_GE(scalings_of_shape(before, {1, 2, 6, 12}), 1);
        EXPECT_EQ(scalings_of_shape(after, {1, 2, 6, 12}), 0);
        EXPECT_EQ(scalings_of_shape(after, {1, 2, 6, 8}), scalings_of_shape(before, {1, 2, 6, 12}));
        EXPECT_EQ(count(after, PrimOp::ReduceSum), 1);
        EXPECT_EQ(count(after, PrimOp::ReduceMax), 1);
        EXPECT_EQ(count(after, PrimOp::MatMul), 2);
        expect_same_values(before, after);
        RewriteStats again;
        rewrite_graph(after, &again);
        EXPECT_EQ(again.total(), 0);
      }
}

TEST(Rewrite, SoftmaxNormalisationStaysWhereDeferringIsWrongOrCostsMore) {
  auto fired = [](const Attention& a) {
    PrimGraph g = attention(a);
    RewriteStats stats;
    PrimGraph after = rewrite_graph(g, &stats);
    expect_same_values(g, after);
    return stats.fired["defer_softmax_normalization"];
  };
  for (const char* form : {"softmax", "chain"}) {
    Attention a;
    a.form = form;
    a.d = a.n;  // as much work after as before: still deferred
    EXPECT_EQ(fired(a), 1) << form;
    a.d = a.n + 1;  // more work after
    EXPECT_EQ(fired(a), 0) << form;
    a = Attention();
    a.form = form;
    a.p_output = true;  // P read twice: it has to be computed anyway
    EXPECT_EQ(fired(a), 0) << form;
    a = Attention();
    a.form = form;
    a.n = a.d = 6;  // softmax over the queries, not the keys: not constant along the MatMul's sum
    a.axis = 2;
    EXPECT_EQ(fired(a), 0) << form;
    a = Attention();
    a.form = form;
    a.scale = "vector";  // a per-key scale does not factor out of the sum
    EXPECT_EQ(fired(a), 0) << form;
  }
}

TEST(Rewrite, SoftmaxNormalisationDeferredOnThePaperModels) {
  // BERT's two self-attention layers (N = D = 16); SegFormer's efficient attention has 4 keys
  // and 8 or 12 channels per head (D > N); EfficientViT's attention is ReLU-linear (no softmax).
  const std::vector<std::pair<std::string, int>> expected = {
      {"bert_base", 2}, {"segformer_b0", 0}, {"efficientvit_b1", 0}};
  for (const auto& [name, times] : expected) {
    ImportOptions options;
    options.rewrite = true;
    ImportedModel m =
        import_onnx_file(std::string(KORCH_SOURCE_DIR) + "/models/paper/cases/" + name + "_tiny/model.onnx", options);
    EXPECT_EQ(m.rewrites.fired["defer_softmax_normalization"], times) << name;
  }
}

TEST(Rewrite, EnvironmentSwitchesTheDefault) {
  EXPECT_TRUE(rewrites_enabled_by_default() || std::getenv("KORCH_REWRITE"));
  setenv("KORCH_REWRITE", "off", 1);
  EXPECT_FALSE(rewrites_enabled_by_default());
  setenv("KORCH_REWRITE", "on", 1);
  EXPECT_TRUE(rewrites_enabled_by_default());
  unsetenv("KORCH_REWRITE");
}

}  // namespace
}  // namespace korch
