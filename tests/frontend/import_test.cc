// Import tests: static shapes, overrides, external data, and every kind of bad input ends
// in one korch::Error naming what is wrong (never a crash).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "fission/fission.h"
#include "fission/onnx_tensor.h"
#include "fission/onnx_versions.h"
#include "frontend/onnx_import.h"
#include "onnx_builder.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch {
namespace {

namespace fs = std::filesystem;
using testing::OnnxBuilder;

class ImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("korch_import_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  // Expects import to fail with a message containing every fragment.
  void expect_error(const std::string& path, const std::vector<std::string>& fragments, const ImportOptions& o = {}) {
    try {
      import_onnx_file(path, o);
      FAIL() << "import of " << path << " should fail";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
      for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
    }
  }
  static OnnxBuilder relu_model(std::vector<int64_t> dims = {1, 4}) {
    OnnxBuilder b(13);
    b.input("x", dims).output("y");
    b.node("Relu", {"x"}, {"y"});
    return b;
  }
  fs::path dir_;
};

TEST_F(ImportTest, ImportsAStaticModel) {
  std::string path = write("m.onnx", relu_model().bytes());
  ImportedModel m = import_onnx_file(path);
  EXPECT_EQ(m.opset, 13);
  EXPECT_EQ(m.input_names, std::vector<std::string>{"x"});
  EXPECT_EQ(m.output_names, std::vector<std::string>{"y"});
  EXPECT_EQ(m.op_histogram.at("Relu"), 1);
  EXPECT_EQ(m.graph.num_prims(), 1);
}

TEST_F(ImportTest, FileImportFreesRawBytesButKeepsEveryWeight) {
  // import_onnx_file frees each initializer's raw bytes once converted; the weights must be the
  // in-memory import's, bit for bit (several initializers, one of them read by two nodes).
  OnnxBuilder b(13);
  b.input("x", {2, 3}).output("y");
  b.initializer("w", TensorData::from_f64(DType::F32, {3, 4}, {1, -2, 3.5, 4, 5, 6, -7, 8, 9, 10, 11, 0.25}));
  b.initializer("bias", TensorData::from_f64(DType::F32, {4}, {0.5, -1, 2, 3}));
  b.node("MatMul", {"x", "w"}, {"xw"});
  b.node("Add", {"xw", "bias"}, {"h"});
  b.node("Add", {"h", "bias"}, {"y"});
  ImportedModel from_file = import_onnx_file(write("m.onnx", b.bytes()));
  ImportedModel from_memory = import_onnx_model(b.model(), dir_.string());
  const std::vector<TensorData> x = {TensorData::from_f64(DType::F32, {2, 3}, {1, 2, 3, -1, 0.5, 4})};
  const TensorData a = reference::run_graph(from_file.graph, x)[0], c = reference::run_graph(from_memory.graph, x)[0];
  ASSERT_EQ(a.size(), c.size());
  for (int64_t i = 0; i < a.size(); ++i) EXPECT_EQ(a.get_f64(i), c.get_f64(i)) << i;
  EXPECT_EQ(from_file.num_parameters, 16);
}

TEST_F(ImportTest, GarbageAndTruncatedFiles) {
  expect_error(write("garbage.onnx", std::string("\xff\xff\xff\xff not a model", 18)), {"not a valid ONNX model"});
  expect_error(write("empty.onnx", ""), {"empty"});
  std::string bytes = relu_model().bytes();
  expect_error(write("truncated.onnx", bytes.substr(0, bytes.size() / 2)), {"truncated.onnx"});
  expect_error((dir_ / "missing.onnx").string(), {"cannot open"});
}

TEST_F(ImportTest, UnsupportedOperatorNamesNodeAndAlternatives) {
  OnnxBuilder b(13);
  b.input("x", {1, 4}).output("y");
  b.node("Unique", {"x"}, {"y"}, "my_unique");
  expect_error(write("m.onnx", b.bytes()), {"my_unique", "Unique", "not supported", "supported operators", "Conv"});
}

TEST_F(ImportTest, MissingInitializer) {
  OnnxBuilder b(13);
  b.input("x", {1, 4}).output("y");
  b.node("Add", {"x", "w"}, {"y"}, "adder");
  expect_error(write("m.onnx", b.bytes()), {"adder", "'w'", "missing initializer"});
}

TEST_F(ImportTest, DynamicShapeNeedsOverride) {
  std::string path = write("m.onnx", relu_model({-1, 4}).bytes());
  expect_error(path, {"input 'x'", "dynamic", "--input-shape x="});
  ImportOptions o;
  o.input_shapes["x"] = {3, 4};
  EXPECT_EQ(import_onnx_file(path, o).graph.tensor(0).shape, (Shape{3, 4}));
  o.input_shapes["x"] = {3, 5};
  expect_error(path, {"fixes it to 4"}, o);
  ImportOptions wrong_name;
  wrong_name.input_shapes["nope"] = {1};
  expect_error(write("m2.onnx", relu_model().bytes()), {"'nope'", "not an input"}, wrong_name);
  EXPECT_THROW(parse_input_shape("x=1,a"), Error);
  EXPECT_EQ(parse_input_shape("x=1,3").second, (Shape{1, 3}));
}

TEST_F(ImportTest, WrongInputShapeAtRunTime) {
  ImportedModel m = import_onnx_file(write("m.onnx", relu_model().bytes()));
  try {
    reference::run_graph(m.graph, {TensorData(DType::F32, {1, 5})});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x' must be f32[1,4]"), std::string::npos) << e.what();
  }
}

TEST_F(ImportTest, ExternalDataWeightsLoad) {
  OnnxBuilder b(13);
  b.input("x", {2}).output("y");
  auto* w = b.model().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add_kv = [&](const char* k, const std::string& v) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add_kv("location", "weights.bin");
  add_kv("offset", "4");
  add_kv("length", "8");
  b.node("Add", {"x", "w"}, {"y"});
  float data[3] = {99.0f, 1.5f, -2.0f};
  write("weights.bin", std::string(reinterpret_cast<const char*>(data), sizeof(data)));
  ImportedModel m = import_onnx_file(write("m.onnx", b.bytes()));
  TensorData y = reference::run_graph(m.graph, {TensorData::from_f64(DType::F32, {2}, {1, 1})})[0];
  EXPECT_EQ(y.get_f64(0), 2.5);
  EXPECT_EQ(y.get_f64(1), -1.0);
  fs::remove(dir_ / "weights.bin");
  expect_error(dir_ / "m.onnx", {"initializer 'w'", "weights.bin"});
  write("weights.bin", std::string(6, '\0'));
  expect_error(dir_ / "m.onnx", {"initializer 'w'", "exceeds"});
}

TEST_F(ImportTest, CorruptInitializerAndUnsupportedTypes) {
  OnnxBuilder b(13);
  b.input("x", {2}).output("y");
  auto* w = b.model().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->set_raw_data(std::string(7, '\0'));
  b.node("Add", {"x", "w"}, {"y"});
  expect_error(write("m.onnx", b.bytes()), {"initializer 'w'", "7 bytes"});
  OnnxBuilder h(13);
  h.input("x", {2}, onnx::TensorProto::STRING).output("y", onnx::TensorProto::STRING);
  h.node("Identity", {"x"}, {"y"});
  expect_error(write("h.onnx", h.bytes()), {"input 'x'", "STRING", "does not support"});
}

TEST_F(ImportTest, ForeignDomainAndOpset) {
  OnnxBuilder b(13);
  b.input("x", {2}).output("y");
  b.node("Relu", {"x"}, {"y"}).set_domain("com.microsoft");
  expect_error(write("m.onnx", b.bytes()), {"com.microsoft"});
  OnnxBuilder future(99);
  future.input("x", {2}).output("y");
  future.node("Relu", {"x"}, {"y"});
  expect_error(write("f.onnx", future.bytes()), {"opset 99"});
}

TEST_F(ImportTest, OperatorVersionAtOpset) {
  EXPECT_EQ(onnx_since_version("Relu", 13), 13);
  EXPECT_EQ(onnx_since_version("Relu", 28), 14);
  EXPECT_EQ(onnx_since_version("Gelu", 17), 0);  // not defined yet
  EXPECT_EQ(onnx_since_version("NoSuchOp", 20), 0);
  EXPECT_FALSE(rule_handles_version("Relu", 99));
  // Every rule lists the versions it implements, each a real version of its operator.
  for (const std::string& op : supported_onnx_ops()) {
    auto it = rule_handled_versions().find(op);
    if (it == rule_handled_versions().end()) {
      ADD_FAILURE() << op << " has no entry in rule_versions.cc";
      continue;
    }
    const auto& all = onnx_since_versions().at(op);
    for (int v : it->second) EXPECT_NE(std::find(all.begin(), all.end(), v), all.end()) << op << " version " << v;
  }
  // Opsets after 21: each operator at the version in force there.
  OnnxBuilder b(onnx_newest_opset());
  b.input("x", {2, 3}).output("y");
  b.node("Relu", {"x"}, {"y"});
  auto m = import_onnx_file(write("new.onnx", b.bytes()));
  EXPECT_EQ(m.opset, onnx_newest_opset());
}

TEST_F(ImportTest, BadAttributesAreErrorsNotCrashes) {
  OnnxBuilder b(13);
  b.input("x", {1, 1, 4, 4}).output("y");
  b.initializer("w", TensorData(DType::F32, {1, 1, 3, 3}));
  auto& n = b.node("Conv", {"x", "w"}, {"y"}, "bad_conv");
  OnnxBuilder::attr_ints(n, "strides", {0, 1});
  expect_error(write("m.onnx", b.bytes()), {"bad_conv", "stride"});
  OnnxBuilder t(13);
  t.input("x", {2, 3}).output("y");
  auto& p = t.node("Transpose", {"x"}, {"y"});
  OnnxBuilder::attr_ints(p, "perm", {0, 0});
  expect_error(write("t.onnx", t.bytes()), {"Transpose", "permutation"});
}

TEST_F(ImportTest, TensorFilesRoundTrip) {
  TensorData t = TensorData::from_f64(DType::F32, {2, 2}, {1, 2, 3, 4});
  std::string path = (dir_ / "t.pb").string();
  write_tensor_file(path, t, "name");
  std::string name;
  TensorData back = read_tensor_file(path, &name);
  EXPECT_EQ(name, "name");
  EXPECT_EQ(back.shape(), t.shape());
  EXPECT_EQ(back.get_f64(3), 4.0);
}

}  // namespace
}  // namespace korch
