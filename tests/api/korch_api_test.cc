// The public C++ API (include/korch/korch.h), linked through libkorch only
// (korch::korch): import, optimise, plan save/load, run, and the errors of bad
// use.
#include <gtest/gtest.h>
#include <korch/korch.h>

#include <cstdio>
#include <string>

namespace ka = korch::api;

namespace {

const std::string kModel = std::string(KORCH_SOURCE_DIR) + "/examples/tiny_cnn/model.onnx";
const std::string kData = std::string(KORCH_SOURCE_DIR) + "/examples/tiny_cnn/test_data_set_0";

TEST(Api, OptimizeSaveLoadRun) {
  ka::Model model = ka::Model::load(kModel);
  ASSERT_EQ(model.inputs().size(), 1u);
  ASSERT_EQ(model.outputs().size(), 1u);
  EXPECT_GT(model.num_primitives(), 0);
  ka::Plan plan = ka::optimize(model);
  EXPECT_EQ(plan.strategy(), "korch");
  EXPECT_GT(plan.num_kernels(), 0);
  std::string path = ::testing::TempDir() + "korch_api_test_plan.json";
  plan.save(path);
  ka::Plan loaded = ka::Plan::load(model, path);
  std::remove(path.c_str());
  EXPECT_EQ(loaded.num_kernels(), plan.num_kernels());

  std::string name;
  ka::Tensor x = ka::Tensor::read_onnx(kData + "/input_0.pb", &name);
  EXPECT_EQ(name, model.inputs()[0].name);
  ka::Tensor expected = ka::Tensor::read_onnx(kData + "/output_0.pb");
  ka::Session session(model, loaded, 2);
  std::map<std::string, ka::Tensor> out = session.run({{model.inputs()[0].name, x}});
  const ka::Tensor& y = out.at(model.outputs()[0].name);
  ASSERT_EQ(y.shape, expected.shape);
  ASSERT_EQ(y.dtype, ka::DType::F32);
  for (int64_t i = 0; i < y.num_elements(); ++i) EXPECT_NEAR(y.data<float>()[i], expected.data<float>()[i], 1e-4);
  // The vector form gives the same bytes.
  std::vector<ka::Tensor> again = session.run(std::vector<ka::Tensor>{x});
  EXPECT_EQ(again.at(0).bytes, y.bytes);
}

TEST(Api, Errors) {
  EXPECT_THROW(ka::Model::load(std::string(KORCH_SOURCE_DIR) + "/no_such_model.onnx"), ka::Error);
  ka::Model model = ka::Model::load(kModel);
  EXPECT_THROW(ka::Plan::load(model, kModel), ka::Error);  // not a plan file
  ka::OptimizeOptions bad;
  bad.cost = "magic";
  EXPECT_THROW(ka::optimize(model, bad), ka::Error);
  ka::Plan plan = ka::optimize(model);
  ka::Session session(model, plan, 1);
  const ka::TensorSpec& in = model.inputs()[0];
  try {
    session.run({{"nope", ka::Tensor::zeros(in.dtype, in.shape)}});
    FAIL() << "unknown input accepted";
  } catch (const ka::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown input 'nope'"), std::string::npos) << e.what();
  }
  std::vector<int64_t> shape = in.shape;
  shape.back() += 1;
  EXPECT_THROW(session.run({{in.name, ka::Tensor::zeros(in.dtype, shape)}}), ka::Error);
  ka::Model other = ka::Model::load(kModel);
  EXPECT_THROW(ka::Session(other, plan, 1),
               ka::Error);  // plan of another Model object
}

}  // namespace
