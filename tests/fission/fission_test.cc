// Fission tests: rules produce the documented primitive structure, fold constants at import,
// and compute what the ONNX operator means (checked against direct formulas). The per-op
// oracle on random inputs is ONNX Runtime (tests/fission/make_random_op_cases.py).
#include "fission/fission.h"

#include <gtest/gtest.h>

#include <cmath>

#include "frontend/onnx_import.h"
#include "onnx_builder.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch {
namespace {

using testing::OnnxBuilder;
using testing::random_tensor;

int count_op(const PrimGraph& g, PrimOp op) {
  int n = 0;
  for (const Primitive& p : g.prims()) n += p.op == op;
  return n;
}

TEST(Fission, RegistryCoversTheRequiredOperators) {
  const char* required[] = {"Abs",
                            "Add",
                            "And",
                            "ArgMax",
                            "AveragePool",
                            "BatchNormalization",
                            "Cast",
                            "Ceil",
                            "Clip",
                            "Concat",
                            "Constant",
                            "ConstantOfShape",
                            "Conv",
                            "ConvTranspose",
                            "Cos",
                            "DepthToSpace",
                            "Div",
                            "Dropout",
                            "Elu",
                            "Equal",
                            "Erf",
                            "Exp",
                            "Expand",
                            "Flatten",
                            "Floor",
                            "Gather",
                            "Gemm",
                            "GlobalAveragePool",
                            "GlobalMaxPool",
                            "Greater",
                            "HardSigmoid",
                            "HardSwish",
                            "Identity",
                            "InstanceNormalization",
                            "LayerNormalization",
                            "LeakyRelu",
                            "Less",
                            "Log",
                            "LogSoftmax",
                            "MatMul",
                            "Max",
                            "MaxPool",
                            "Mean",
                            "Min",
                            "Mod",
                            "Mul",
                            "Neg",
                            "Not",
                            "Pad",
                            "Pow",
                            "PRelu",
                            "Range",
                            "Reciprocal",
                            "ReduceL2",
                            "ReduceMax",
                            "ReduceMean",
                            "ReduceMin",
                            "ReduceProd",
                            "ReduceSum",
                            "ReduceSumSquare",
                            "Relu",
                            "Reshape",
                            "Resize",
                            "Selu",
                            "Shape",
                            "Sigmoid",
                            "Sign",
                            "Sin",
                            "Slice",
                            "Softmax",
                            "Softplus",
                            "Softsign",
                            "SpaceToDepth",
                            "Split",
                            "Sqrt",
                            "Squeeze",
                            "Sub",
                            "Sum",
                            "Tanh",
                            "Tile",
                            "Transpose",
                            "Unsqueeze",
                            "Upsample",
                            "Where",
                            "GroupNormalization",
                            "Gelu"};
  for (const char* op : required) EXPECT_NE(find_fission_rule(op), nullptr) << op;
  EXPECT_EQ(find_fission_rule("NoSuchOp"), nullptr);
}

TEST(Fission, SoftmaxIsStableAndSubtractsTheMax) {
  OnnxBuilder b(13);
  b.input("x", {2, 3}).output("y");
  b.node("Softmax", {"x"}, {"y"});
  ImportedModel m = import_onnx_model(b.model(), ".");
  EXPECT_EQ(count_op(m.graph, PrimOp::ReduceMax), 1);
  EXPECT_EQ(count_op(m.graph, PrimOp::ReduceSum), 1);
  EXPECT_EQ(count_op(m.graph, PrimOp::Exp), 1);
  TensorData x = TensorData::from_f64(DType::F32, {2, 3}, {1000, 1001, 1002, -5, 0, 5});
  TensorData y = reference::run_graph(m.graph, {x})[0];
  double e0 = std::exp(-2.0), e1 = std::exp(-1.0), s = e0 + e1 + 1.0;
  EXPECT_NEAR(y.get_f64(0), e0 / s, 1e-6);
  EXPECT_NEAR(y.get_f64(2), 1.0 / s, 1e-6);
  EXPECT_FALSE(std::isnan(y.get_f64(1)));
}

TEST(Fission, BatchNormFoldsToMulAdd) {
  OnnxBuilder b(13);
  b.input("x", {1, 2, 2, 2}).output("y");
  b.initializer("s", TensorData::from_f64(DType::F32, {2}, {2, 3}));
  b.initializer("bias", TensorData::from_f64(DType::F32, {2}, {1, -1}));
  b.initializer("mean", TensorData::from_f64(DType::F32, {2}, {0.5, 1}));
  b.initializer("var", TensorData::from_f64(DType::F32, {2}, {4, 9}));
  auto& n = b.node("BatchNormalization", {"x", "s", "bias", "mean", "var"}, {"y"});
  OnnxBuilder::attr_f(n, "epsilon", 0.0f);
  ImportedModel m = import_onnx_model(b.model(), ".");
  EXPECT_EQ(m.graph.num_prims(), 2);  // Mul + Add, parameters folded
  TensorData x = random_tensor({1, 2, 2, 2}, 1);
  TensorData y = reference::run_graph(m.graph, {x})[0];
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 4; ++i) {
      double scale = c == 0 ? 2.0 / 2.0 : 3.0 / 3.0, mean = c == 0 ? 0.5 : 1.0, bias = c == 0 ? 1.0 : -1.0;
      EXPECT_NEAR(y.get_f64(c * 4 + i), (x.get_f64(c * 4 + i) - mean) * scale + bias, 1e-5);
    }
}

TEST(Fission, ShapeArithmeticFoldsAway) {
  // y = Reshape(x, Concat(Gather(Shape(x), 0), [-1])) -> a single Reshape primitive.
  OnnxBuilder b(13);
  b.input("x", {2, 3, 4}).output("y");
  b.initializer("zero", TensorData::from_i64(DType::I64, {1}, {0}));
  b.initializer("minus1", TensorData::from_i64(DType::I64, {1}, {-1}));
  b.node("Shape", {"x"}, {"s"});
  b.node("Gather", {"s", "zero"}, {"n"});
  auto& concat = b.node("Concat", {"n", "minus1"}, {"target"});
  OnnxBuilder::attr_i(concat, "axis", 0);
  b.node("Reshape", {"x", "target"}, {"y"});
  ImportedModel m = import_onnx_model(b.model(), ".");
  ASSERT_EQ(m.graph.num_prims(), 1);
  EXPECT_EQ(m.graph.prim(0).op, PrimOp::Reshape);
  EXPECT_EQ(m.graph.tensor(m.graph.outputs()[0]).shape, (Shape{2, 12}));
}

TEST(Fission, LayerNormalizationMatchesFormula) {
  OnnxBuilder b(17);
  b.input("x", {2, 4}).output("y");
  b.initializer("g", TensorData::from_f64(DType::F32, {4}, {1, 2, 3, 4}));
  b.initializer("beta", TensorData::from_f64(DType::F32, {4}, {0, 1, 0, 1}));
  b.node("LayerNormalization", {"x", "g", "beta"}, {"y"});
  ImportedModel m = import_onnx_model(b.model(), ".");
  TensorData x = random_tensor({2, 4}, 7);
  TensorData y = reference::run_graph(m.graph, {x})[0];
  for (int r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < 4; ++i) mean += x.get_f64(r * 4 + i) / 4;
    for (int i = 0; i < 4; ++i) var += std::pow(x.get_f64(r * 4 + i) - mean, 2) / 4;
    for (int i = 0; i < 4; ++i) {
      double expect = (x.get_f64(r * 4 + i) - mean) / std::sqrt(var + 1e-5) * (i + 1) + (i % 2);
      EXPECT_NEAR(y.get_f64(r * 4 + i), expect, 1e-5);
    }
  }
}

TEST(Fission, GroupNormalizationOpset18PerGroupScale) {
  OnnxBuilder b(18);
  b.input("x", {1, 4, 3}).output("y");
  b.initializer("scale", TensorData::from_f64(DType::F32, {2}, {2, 3}));
  b.initializer("bias", TensorData::from_f64(DType::F32, {2}, {0.5, -0.5}));
  auto& n = b.node("GroupNormalization", {"x", "scale", "bias"}, {"y"});
  OnnxBuilder::attr_i(n, "num_groups", 2);
  ImportedModel m = import_onnx_model(b.model(), ".");
  TensorData x = random_tensor({1, 4, 3}, 3);
  TensorData y = reference::run_graph(m.graph, {x})[0];
  for (int g = 0; g < 2; ++g) {
    double mean = 0, var = 0;
    for (int i = 0; i < 6; ++i) mean += x.get_f64(g * 6 + i) / 6;
    for (int i = 0; i < 6; ++i) var += std::pow(x.get_f64(g * 6 + i) - mean, 2) / 6;
    for (int i = 0; i < 6; ++i) {
      double expect = (x.get_f64(g * 6 + i) - mean) / std::sqrt(var + 1e-5) * (g ? 3 : 2) + (g ? -0.5 : 0.5);
      EXPECT_NEAR(y.get_f64(g * 6 + i), expect, 1e-5);
    }
  }
}

TEST(Fission, GeluBothApproximations) {
  for (std::string approx : {"none", "tanh"}) {
    OnnxBuilder b(20);
    b.input("x", {5}).output("y");
    auto& n = b.node("Gelu", {"x"}, {"y"});
    OnnxBuilder::attr_s(n, "approximate", approx);
    ImportedModel m = import_onnx_model(b.model(), ".");
    TensorData x = TensorData::from_f64(DType::F32, {5}, {-3, -1, 0, 0.5, 2});
    TensorData y = reference::run_graph(m.graph, {x})[0];
    for (int i = 0; i < 5; ++i) {
      double v = x.get_f64(i);
      double expect = approx == "none" ? 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))
                                       : 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      EXPECT_NEAR(y.get_f64(i), expect, 1e-6) << approx;
    }
  }
}

TEST(Fission, TileAndDepthToSpaceAreLayoutChains) {
  OnnxBuilder b(13);
  b.input("x", {1, 8, 2, 3}).output("y").output("z");
  b.initializer("reps", TensorData::from_i64(DType::I64, {4}, {1, 1, 2, 1}));
  b.node("Tile", {"x", "reps"}, {"y"});
  auto& d = b.node("DepthToSpace", {"x"}, {"z"});
  OnnxBuilder::attr_i(d, "blocksize", 2);
  OnnxBuilder::attr_s(d, "mode", "CRD");
  ImportedModel m = import_onnx_model(b.model(), ".");
  for (const Primitive& p : m.graph.prims())
    EXPECT_TRUE(prim_kind(p.op) == PrimKind::Layout || prim_kind(p.op) == PrimKind::Broadcast) << prim_op_name(p.op);
  TensorData x = random_tensor({1, 8, 2, 3}, 5);
  auto out = reference::run_graph(m.graph, {x});
  ASSERT_EQ(out[0].shape(), (Shape{1, 8, 4, 3}));
  // Tile along H: row h of the output equals row h % 2 of the input.
  for (int c = 0; c < 8; ++c)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 3; ++w) EXPECT_EQ(out[0].get_f64((c * 4 + h) * 3 + w), x.get_f64((c * 2 + h % 2) * 3 + w));
  ASSERT_EQ(out[1].shape(), (Shape{1, 2, 4, 6}));
  // CRD: out[c, h*2+i, w*2+j] = in[c*4 + i*2 + j, h, w]
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 3; ++w)
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j)
            EXPECT_EQ(out[1].get_f64((c * 4 + h * 2 + i) * 6 + w * 2 + j),
                      x.get_f64(((c * 4 + i * 2 + j) * 2 + h) * 3 + w));
}

TEST(Fission, DropoutWithZeroRatioInTrainingModeIsIdentity) {
  OnnxBuilder b(13);
  b.input("x", {3}).output("y");
  b.initializer("ratio", TensorData::from_f64(DType::F32, {}, {0.0}));
  TensorData train(DType::Bool, {});
  train.set_i64(0, 1);
  b.initializer("train", train);
  b.node("Dropout", {"x", "ratio", "train"}, {"y"});
  ImportedModel m = import_onnx_model(b.model(), ".");
  TensorData x = random_tensor({3}, 2);
  EXPECT_EQ(reference::run_graph(m.graph, {x})[0].get_f64(1), x.get_f64(1));
}

TEST(Fission, ScatterNDWithRuntimeDataBecomesGatherWhere) {
  OnnxBuilder b(13);
  b.input("data", {4, 3}).input("updates", {2, 3}).output("y");
  b.initializer("idx", TensorData::from_i64(DType::I64, {2, 1}, {3, -3}));
  b.node("ScatterND", {"data", "idx", "updates"}, {"y"});
  ImportedModel m = import_onnx_model(b.model(), ".");
  EXPECT_EQ(count_op(m.graph, PrimOp::Where), 1);
  TensorData data = random_tensor({4, 3}, 11), updates = random_tensor({2, 3}, 12);
  TensorData y = reference::run_graph(m.graph, {data, updates})[0];
  for (int r = 0; r < 4; ++r)
    for (int col = 0; col < 3; ++col) {
      double expect = r == 3 ? updates.get_f64(col) : r == 1 ? updates.get_f64(3 + col) : data.get_f64(r * 3 + col);
      EXPECT_EQ(y.get_f64(r * 3 + col), expect) << r << "," << col;
    }
}

// YOLOX's `x[..., 1:3] = y`: the indices enumerate a box in row-major order, so the scatter is
// Slices of the data concatenated around the updates; no Gather, no Where.
TEST(Fission, ScatterNDOverABoxBecomesConcatOfSlices) {
  OnnxBuilder b(13);
  b.input("data", {2, 3, 4}).input("updates", {2, 2, 2}).output("y");
  std::vector<int64_t> idx;  // rows 0..1, columns 1..2, depth 1..2 (full-index tuples, k = 3)
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t col = 1; col < 3; ++col)
      for (int64_t z = 1; z < 3; ++z) idx.insert(idx.end(), {r, col, z - 4});  // negative depth index
  b.initializer("idx", TensorData::from_i64(DType::I64, {2, 2, 2, 3}, idx));
  b.node("ScatterND", {"data", "idx", "updates"}, {"y"});
  ImportedModel m = import_onnx_model(b.model(), ".");
  EXPECT_EQ(count_op(m.graph, PrimOp::Where), 0);
  EXPECT_EQ(count_op(m.graph, PrimOp::Gather), 0);
  EXPECT_EQ(count_op(m.graph, PrimOp::Concat), 2);  // columns and depth; rows are covered fully
  TensorData data = random_tensor({2, 3, 4}, 21), updates = random_tensor({2, 2, 2}, 22);
  TensorData y = reference::run_graph(m.graph, {data, updates})[0];
  for (int r = 0; r < 2; ++r)
    for (int col = 0; col < 3; ++col)
      for (int z = 0; z < 4; ++z) {
        bool in_box = col >= 1 && col < 3 && z >= 1 && z < 3;
        double expect = in_box ? updates.get_f64((r * 2 + col - 1) * 2 + z - 1) : data.get_f64((r * 3 + col) * 4 + z);
        EXPECT_EQ(y.get_f64((r * 3 + col) * 4 + z), expect) << r << "," << col << "," << z;
      }
}

TEST(Fission, ScatterNDOutOfBoxOrderKeepsGatherWhere) {
  OnnxBuilder b(13);
  b.input("data", {4, 3}).input("updates", {2, 3}).output("y");
  b.initializer("idx", TensorData::from_i64(DType::I64, {2, 1}, {2, 1}));  // a box, but in reverse order
  b.node("ScatterND", {"data", "idx", "updates"}, {"y"});
  ImportedModel m = import_onnx_model(b.model(), ".");
  EXPECT_EQ(count_op(m.graph, PrimOp::Concat), 0);
  TensorData data = random_tensor({4, 3}, 31), updates = random_tensor({2, 3}, 32);
  TensorData y = reference::run_graph(m.graph, {data, updates})[0];
  for (int col = 0; col < 3; ++col) {
    EXPECT_EQ(y.get_f64(2 * 3 + col), updates.get_f64(col));
    EXPECT_EQ(y.get_f64(1 * 3 + col), updates.get_f64(3 + col));
    EXPECT_EQ(y.get_f64(0 * 3 + col), data.get_f64(col));
  }
}

TEST(Fission, MaxAndMinOverAnEmptyAxisAreTheirIdentities) {
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    OnnxBuilder b(20);
    b.input("x", {2, 0, 3}).output("y");
    b.initializer("axes", TensorData::from_i64(DType::I64, {1}, {1}));
    b.node(op, {"x", "axes"}, {"y"});
    ImportedModel m = import_onnx_model(b.model(), ".");
    TensorData y = reference::run_graph(m.graph, {TensorData(DType::F32, {2, 0, 3})})[0];
    ASSERT_EQ(y.shape(), (Shape{2, 1, 3})) << op;
    EXPECT_EQ(y.get_f64(0), std::string(op) == "ReduceMax" ? -INFINITY : INFINITY) << op;
  }
}

TEST(Fission, BatchNormalizationTrainingModeUsesBatchStatistics) {
  OnnxBuilder b(15);
  b.input("x", {2, 1, 2}).output("y").output("running_mean").output("running_var");
  for (const char* name : {"scale", "bias", "mean", "var"})
    b.initializer(name, TensorData::from_f64(DType::F32, {1}, {std::string(name) == "scale" ? 2.0 : 1.0}));
  onnx::NodeProto& node =
      b.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y", "running_mean", "running_var"});
  OnnxBuilder::attr_i(node, "training_mode", 1);
  OnnxBuilder::attr_f(node, "epsilon", 0);
  OnnxBuilder::attr_f(node, "momentum", 0.5);
  ImportedModel m = import_onnx_model(b.model(), ".");
  std::vector<TensorData> out =
      reference::run_graph(m.graph, {TensorData::from_f64(DType::F32, {2, 1, 2}, {1, 3, 1, 3})});
  // Batch mean 2, variance 1: y = 2 (x - 2) + 1; running = (1 + 2) / 2 and (1 + 1) / 2.
  EXPECT_EQ(out[0].to_f64(), (std::vector<double>{-1, 3, -1, 3}));
  EXPECT_EQ(out[1].to_f64(), (std::vector<double>{1.5}));
  EXPECT_EQ(out[2].to_f64(), (std::vector<double>{1}));
}

TEST(Fission, WrapPadReadsAroundEachAxis) {
  OnnxBuilder b(19);
  b.input("x", {2, 3}).output("y");
  b.initializer("pads", TensorData::from_i64(DType::I64, {4}, {1, 4, 0, -1}));  // rows +1 / 0, columns +4 / -1
  OnnxBuilder::attr_s(b.node("Pad", {"x", "pads"}, {"y"}), "mode", "wrap");
  ImportedModel m = import_onnx_model(b.model(), ".");
  TensorData y = reference::run_graph(m.graph, {TensorData::from_f64(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6})})[0];
  ASSERT_EQ(y.shape(), (Shape{3, 6}));
  // Row order 1, 0, 1; column order 2, 0, 1, 2, 0, 1.
  EXPECT_EQ(y.to_f64(), (std::vector<double>{6, 4, 5, 6, 4, 5, 3, 1, 2, 3, 1, 2, 6, 4, 5, 6, 4, 5}));
}

TEST(Fission, MaxPoolIndicesAreFlatPositionsOfTheFirstMaximum) {
  for (int64_t storage_order : {0, 1}) {
    OnnxBuilder b(12);
    b.input("x", {1, 2, 2, 3}).output("y").output("i", onnx::TensorProto::INT64);
    onnx::NodeProto& node = b.node("MaxPool", {"x"}, {"y", "i"});
    OnnxBuilder::attr_ints(node, "kernel_shape", {2, 2});
    OnnxBuilder::attr_ints(node, "pads", {0, 0, 0, 1});
    OnnxBuilder::attr_i(node, "storage_order", storage_order);
    ImportedModel m = import_onnx_model(b.model(), ".");
    // Channel 0 has its maximum 9 twice in the second window; channel 1 is all equal.
    TensorData x = TensorData::from_f64(DType::F32, {1, 2, 2, 3}, {1, 9, 2, 3, 4, 9, 5, 5, 5, 5, 5, 5});
    std::vector<TensorData> out = reference::run_graph(m.graph, {x});
    ASSERT_EQ(out[1].shape(), (Shape{1, 2, 1, 3}));
    // Row-major flat index h * 3 + w (column-major w * 2 + h), plus 6 per channel.
    std::vector<int64_t> want =
        storage_order ? std::vector<int64_t>{2, 2, 5, 6, 8, 10} : std::vector<int64_t>{1, 1, 5, 6, 7, 8};
    EXPECT_EQ(out[1].to_i64(), want) << "storage_order " << storage_order;
    EXPECT_EQ(out[0].to_f64(), (std::vector<double>{9, 9, 9, 5, 5, 5}));
  }
}

TEST(Fission, NonConstantShapeParameterIsAClearError) {
  OnnxBuilder b(13);
  b.input("x", {2, 3}).input("shape", {2}, onnx::TensorProto::INT64).output("y");
  b.node("Reshape", {"x", "shape"}, {"y"}, "reshape_node");
  try {
    import_onnx_model(b.model(), ".");
    FAIL() << "expected an error";
  } catch (const ConstantInputRequired& e) {
    EXPECT_EQ(e.input_name(), "shape");
    EXPECT_NE(std::string(e.what()).find("reshape_node"), std::string::npos);
  }
  ImportOptions bind;
  bind.bound_inputs["shape"] = TensorData::from_i64(DType::I64, {2}, {3, 2});
  ImportedModel m = import_onnx_model(b.model(), ".", bind);
  EXPECT_EQ(m.input_names, std::vector<std::string>{"x"});
  EXPECT_EQ(m.graph.tensor(m.graph.outputs()[0]).shape, (Shape{3, 2}));
}

}  // namespace
}  // namespace korch
