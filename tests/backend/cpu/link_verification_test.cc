// Link verification: a Halide kernel's strided build (its tensors in nhwc or the blocked format)
// is compared with its dense build before it links; one that differs, or fails, is reported and
// keeps all its tensors dense, and link_layouts then links nothing around it.
#include "backend/cpu/link_verification.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include "backend/cpu/compiled_kernel.h"
#include "backend/cpu/layout_link.h"
#include "plan/plan.h"

namespace korch {
namespace {

using Ints = std::vector<int64_t>;

TensorId conv(PrimGraph& g, TensorId x, int64_t out_c, std::vector<PrimId>* prims) {
  int64_t in_c = g.tensor(x).shape[1];
  std::mt19937 rng(static_cast<uint32_t>(g.num_tensors()));
  std::uniform_real_distribution<float> dist(-1, 1);
  TensorData w(DType::F32, {out_c, in_c, 3, 3});
  for (int64_t i = 0; i < w.size(); ++i) w.data<float>()[i] = dist(rng) / std::sqrt(static_cast<float>(in_c * 9));
  TensorId wt = g.add_constant("w" + std::to_string(g.num_tensors()), std::make_shared<TensorData>(std::move(w)));
  TensorId y = g.add_primitive(PrimOp::Conv, {x, wt},
                               Attrs()
                                   .set("strides", Ints{1, 1})
                                   .set("pads", Ints{1, 1, 1, 1})
                                   .set("dilations", Ints{1, 1})
                                   .set("group", int64_t{1}));
  prims->push_back(g.tensor(y).producer);
  return y;
}

// SiLU: one memory-bound kernel whose input and output are channels-last candidates.
TensorId silu(PrimGraph& g, TensorId x, std::vector<PrimId>* prims) {
  TensorId s = g.add_primitive(PrimOp::Sigmoid, {x}, Attrs());
  prims->push_back(g.tensor(s).producer);
  TensorId y = g.add_primitive(PrimOp::Mul, {x, s}, Attrs());
  prims->push_back(g.tensor(y).producer);
  return y;
}

TEST(LinkVerification, HalideKernelMatchesInEveryFormatItTakes) {
  PrimGraph g;
  std::vector<PrimId> prims;
  TensorId x = g.add_input("x", DType::F32, {1, 16, 9, 7});
  g.mark_output(silu(g, x, &prims));
  Kernel k = make_kernel(g, prims);
  for (const std::string& format : {std::string("nhwc"), cpu::native_blocked_format()}) {
    std::string why;
    std::unique_ptr<cpu::CompiledKernel> compiled = cpu::compile_kernel(g, k, &why);
    ASSERT_TRUE(compiled) << why;
    ASSERT_TRUE(compiled->layout_by_strides());
    ASSERT_TRUE(compiled->use_format(format, true)) << format;
    EXPECT_TRUE(strided_layout_matches_dense(g, k, *compiled, &why)) << why;
    // Left with nothing kept: the dense build runs until a link keeps tensors again.
    EXPECT_EQ(compiled->describe().find("kept"), std::string::npos) << compiled->describe();
    compiled->keep_input_layout(0);
    compiled->keep_output_layout();
    EXPECT_NE(compiled->describe().find("[" + format + " in/out kept]"), std::string::npos) << compiled->describe();
  }
}

// A stand-in for a Halide kernel whose strided build is wrong (adds `error` to every value) or
// throws: the verification must say so, with the format.
class WrongWhenStrided : public cpu::CompiledKernel {
 public:
  WrongWhenStrided(int64_t elements, float error, bool throws) : elements_(elements), error_(error), throws_(throws) {}
  void run(const std::vector<const void*>& inputs, void* output) override {
    if (kept_ && throws_) throw std::runtime_error("strided build exploded");
    const float* in = static_cast<const float*>(inputs[0]);
    float* out = static_cast<float*>(output);
    for (int64_t i = 0; i < elements_; ++i) out[i] = in[i] + (kept_ ? error_ : 0.0f);
  }
  std::string describe() const override { return "wrong-when-strided"; }
  std::string output_layout() const override { return "nhwc-key"; }
  std::string input_layout(int) const override { return "nhwc-key"; }
  std::string output_format() const override { return "nhwc"; }
  std::string input_format(int) const override { return "nhwc"; }
  void keep_input_layout(int) override { kept_ = true; }
  void keep_output_layout() override { kept_ = true; }
  bool layout_by_strides() const override { return true; }
  bool reset_to_dense() override {
    kept_ = false;
    return true;
  }
  bool kept() const { return kept_; }

 private:
  int64_t elements_;
  float error_;
  bool throws_;
  bool kept_ = false;
};

TEST(LinkVerification, AStridedBuildThatDiffersOrFailsIsReported) {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {1, 8, 4, 4});
  TensorId y = g.add_primitive(PrimOp::Relu, {x}, Attrs());
  g.mark_output(y);
  Kernel k = make_kernel(g, {g.tensor(y).producer});
  std::string why;
  WrongWhenStrided exact(128, 0.0f, false);
  EXPECT_TRUE(strided_layout_matches_dense(g, k, exact, &why)) << why;
  WrongWhenStrided off(128, 0.5f, false);
  EXPECT_FALSE(strided_layout_matches_dense(g, k, off, &why));
  EXPECT_NE(why.find("nhwc build differs from its dense build (max abs 0.5, 128 elements)"), std::string::npos) << why;
  EXPECT_FALSE(off.kept());
  WrongWhenStrided throws(128, 0.0f, true);
  EXPECT_FALSE(strided_layout_matches_dense(g, k, throws, &why));
  EXPECT_NE(why.find("nhwc build failed: strided build exploded"), std::string::npos) << why;
  EXPECT_FALSE(throws.kept());
}

// conv -> a -> [SiLU] -> s -> conv -> b -> conv: link_layouts asks about the SiLU kernel once,
// before linking a and s; refused, a and s stay dense and only b (between two convs) links.
TEST(LinkVerification, AKernelThatFailsKeepsItsTensorsDense) {
  PrimGraph g;
  std::vector<std::vector<PrimId>> kernels(4);
  TensorId x = g.add_input("x", DType::F32, {1, 32, 10, 10});
  TensorId a = conv(g, x, 32, &kernels[0]);
  TensorId s = silu(g, a, &kernels[1]);
  TensorId b = conv(g, s, 32, &kernels[2]);
  g.mark_output(conv(g, b, 32, &kernels[3]));
  Plan plan;
  for (const auto& prims : kernels) plan.kernels.push_back(make_kernel(g, prims));
  std::vector<std::unique_ptr<cpu::CompiledKernel>> owned;
  auto compile_all = [&] {
    std::vector<cpu::CompiledKernel*> compiled;
    for (const Kernel& k : plan.kernels) {
      std::string why;
      owned.push_back(cpu::compile_kernel(g, k, &why));
      EXPECT_TRUE(owned.back()) << why;
      compiled.push_back(owned.back().get());
    }
    return compiled;
  };
  std::vector<cpu::CompiledKernel*> accepted = compile_all();
  std::vector<int> asked;
  cpu::LayoutLinks yes = cpu::link_layouts(g, plan.kernels, accepted, [&](int i) {
    asked.push_back(i);
    return true;
  });
  std::string format = accepted[0]->output_format();
  if (format != "nhwc" && format != cpu::native_blocked_format())
    GTEST_SKIP() << "oneDNN runs these convolutions in " << format << ", a format Halide kernels do not take";
  EXPECT_EQ(asked, std::vector<int>{1});
  EXPECT_TRUE(yes.linked[a] && yes.linked[s] && yes.linked[b]);

  std::vector<cpu::CompiledKernel*> refused = compile_all();
  asked.clear();
  cpu::LayoutLinks no = cpu::link_layouts(g, plan.kernels, refused, [&](int i) {
    asked.push_back(i);
    return false;
  });
  EXPECT_EQ(asked, std::vector<int>{1});
  EXPECT_FALSE(no.linked[a] || no.linked[s]);
  EXPECT_TRUE(no.linked[b]);
  EXPECT_EQ(no.num_linked, 1);
  EXPECT_EQ(refused[1]->describe().find("kept"), std::string::npos) << refused[1]->describe();
}

// The blocked format Halide kernels cannot mix with nhwc on this CPU (not its native one).
std::string foreign_blocked_format() { return cpu::native_blocked_format() == "nChw16c" ? "nChw8c" : "nChw16c"; }

// out = x * sigmoid(y) + x over [1, 32, 9, 7]: a kernel with two candidate inputs and a candidate
// output, built with its tensors in different formats (nhwc beside this CPU's blocked format),
// matches its dense build, and says which format each kept tensor is in.
TEST(LinkVerification, HalideKernelMatchesWithNhwcAndBlockedTensorsMixed) {
  PrimGraph g;
  std::vector<PrimId> prims;
  TensorId x = g.add_input("x", DType::F32, {1, 32, 9, 7});
  TensorId y = g.add_input("y", DType::F32, {1, 32, 9, 7});
  auto add = [&](PrimOp op, std::vector<TensorId> in) {
    TensorId t = g.add_primitive(op, std::move(in), Attrs());
    prims.push_back(g.tensor(t).producer);
    return t;
  };
  g.mark_output(add(PrimOp::Add, {add(PrimOp::Mul, {x, add(PrimOp::Sigmoid, {y})}), x}));
  Kernel k = make_kernel(g, prims);
  const std::string nhwc = "nhwc", blocked = cpu::native_blocked_format();
  struct Case {
    std::string x, y, out, kept;
  };
  for (const Case& c : {Case{nhwc, blocked, nhwc, "[mixed in/nhwc out kept]"},
                        Case{nhwc, nhwc, blocked, "[nhwc in/" + blocked + " out kept]"},
                        Case{blocked, blocked, nhwc, "[" + blocked + " in/nhwc out kept]"}}) {
    std::string why;
    std::unique_ptr<cpu::CompiledKernel> compiled = cpu::compile_kernel(g, k, &why);
    ASSERT_TRUE(compiled) << why;
    int ix = k.inputs[0] == x ? 0 : 1, iy = 1 - ix;
    ASSERT_TRUE(compiled->use_tensor_format(ix, c.x, true));
    ASSERT_TRUE(compiled->use_tensor_format(iy, c.y, true));
    ASSERT_TRUE(compiled->use_tensor_format(-1, c.out, true));
    EXPECT_EQ(compiled->input_format(ix), c.x);
    EXPECT_EQ(compiled->input_format(iy), c.y);
    EXPECT_EQ(compiled->output_format(), c.out);
    EXPECT_EQ(compiled->input_layout(ix) == compiled->input_layout(iy), c.x == c.y);
    EXPECT_TRUE(strided_layout_matches_dense(g, k, *compiled, &why)) << why;
    compiled->keep_input_layout(0);
    compiled->keep_input_layout(1);
    compiled->keep_output_layout();
    EXPECT_NE(compiled->describe().find(c.kept), std::string::npos) << compiled->describe();
    // A blocked format other than this CPU's does not mix with nhwc (its channel vectors would
    // span blocks); the whole kernel may still switch to it.
    compiled->reset_to_dense();
    EXPECT_FALSE(compiled->use_tensor_format(ix, foreign_blocked_format(), false));
    EXPECT_TRUE(compiled->use_format(foreign_blocked_format(), false));
  }
}

// A stand-in for a oneDNN kernel whose activations are fixed in `format` (oneDNN kernels are never
// rebuilt for a Halide neighbour).
class FixedLayoutKernel : public cpu::CompiledKernel {
 public:
  FixedLayoutKernel(const PrimGraph& g, const Kernel& k, std::string format) : format_(std::move(format)) {
    output_key_ = cpu::activation_layout_key(g.tensor(k.output).shape, format_);
    for (TensorId t : k.inputs)
      input_keys_.push_back(g.tensor(t).is_constant() ? "" : cpu::activation_layout_key(g.tensor(t).shape, format_));
  }
  void run(const std::vector<const void*>&, void*) override { FAIL() << "link_layouts runs no oneDNN kernel"; }
  std::string describe() const override { return "fixed " + format_; }
  std::string output_layout() const override { return output_key_; }
  std::string input_layout(int input) const override { return input_keys_.at(input); }
  std::string output_format() const override { return format_; }
  std::string input_format(int input) const override { return input_keys_.at(input).empty() ? "" : format_; }
  void keep_input_layout(int) override { ++kept; }
  void keep_output_layout() override { ++kept; }
  int kept = 0;

 private:
  std::string format_, output_key_;
  std::vector<std::string> input_keys_;
};

// conv (nhwc) -> a -> [SiLU] -> s -> conv (blocked): the SiLU kernel reads a in nhwc and writes s
// blocked, so both link (one format for the whole kernel would leave one of them dense, reordered
// inside a convolution). With the foreign blocked format on the reading side, nothing mixes:
// a links (the kernel takes nhwc), s stays dense, and then the kernel keeps both dense.
TEST(LinkVerification, HalideKernelBetweenNhwcAndBlockedConvolutionsLinksBoth) {
  for (bool native : {true, false}) {
    PrimGraph g;
    std::vector<std::vector<PrimId>> kernels(3);
    TensorId x = g.add_input("x", DType::F32, {1, 32, 10, 10});
    TensorId a = conv(g, x, 32, &kernels[0]);
    TensorId s = silu(g, a, &kernels[1]);
    g.mark_output(conv(g, s, 32, &kernels[2]));
    Plan plan;
    for (const auto& prims : kernels) plan.kernels.push_back(make_kernel(g, prims));
    const std::string reader_format = native ? cpu::native_blocked_format() : foreign_blocked_format();
    FixedLayoutKernel producer(g, plan.kernels[0], "nhwc"), reader(g, plan.kernels[2], reader_format);
    std::string why;
    std::unique_ptr<cpu::CompiledKernel> halide = cpu::compile_kernel(g, plan.kernels[1], &why);
    ASSERT_TRUE(halide) << why;
    std::vector<cpu::CompiledKernel*> compiled = {&producer, halide.get(), &reader};
    std::vector<int> asked;
    cpu::LayoutLinks links = cpu::link_layouts(g, plan.kernels, compiled, [&](int i) {
      asked.push_back(i);
      return strided_layout_matches_dense(g, plan.kernels[i], *compiled[i], &why);
    });
    if (native) {
      EXPECT_EQ(asked, std::vector<int>{1});
      EXPECT_TRUE(links.linked[a] && links.linked[s]) << why;
      EXPECT_EQ(links.num_linked, 2);
      EXPECT_EQ(producer.kept, 1);
      EXPECT_EQ(reader.kept, 1);
      EXPECT_NE(halide->describe().find("[nhwc in/" + reader_format + " out kept]"), std::string::npos)
          << halide->describe();
    } else {
      EXPECT_EQ(links.num_linked, 0);
      EXPECT_EQ(producer.kept + reader.kept, 0);
      EXPECT_EQ(halide->describe().find("kept"), std::string::npos) << halide->describe();
    }
  }
}

}  // namespace
}  // namespace korch
