// Layout linking in the Executor: a chain of oneDNN convolution kernels hands
// activations on in oneDNN's internal layout (no reorders through dense
// buffers), matches the reference executor, and is bit-identical to the same
// plan run with linking turned off; Halide kernels between convolutions take
// nhwc activations through strides without changing the convolutions' layouts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>
#include <sstream>

#include "backend/cpu/compiled_kernel.h"
#include "check/test_case.h"
#include "plan/plan.h"
#include "reference/reference.h"
#include "runtime/executor.h"

namespace korch {
namespace {

using Ints = std::vector<int64_t>;

TensorData random_tensor(const Shape& shape, std::mt19937& rng) {
  TensorData t(DType::F32, shape);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

struct Chain {
  PrimGraph g;
  Plan plan;
  std::mt19937 rng{7};
  std::vector<PrimId> current;  // primitives of the kernel being built

  TensorId add(PrimOp op, std::vector<TensorId> in, Attrs a = Attrs()) {
    TensorId t = g.add_primitive(op, std::move(in), std::move(a));
    current.push_back(g.tensor(t).producer);
    return t;
  }
  TensorId constant(const Shape& s, float scale = 1) {
    TensorData t = random_tensor(s, rng);
    for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] *= scale;
    return g.add_constant("c" + std::to_string(g.num_tensors()), std::make_shared<TensorData>(std::move(t)));
  }
  TensorId conv(TensorId x, int64_t out_c, int64_t k, int64_t group = 1) {
    int64_t in_c = g.tensor(x).shape[1], p = k / 2;
    // Weights scaled by 1/sqrt(fan-in) keep activations O(1) through the chain: with unscaled
    // ones they grow ~10x per 32-channel 3x3 conv, and fp32 cancellation near zero outputs
    // exceeds the tolerance for any summation order (seen with oneDNN's AVX2 kernels).
    TensorId w = constant({out_c, in_c / group, k, k}, 1.0f / std::sqrt(static_cast<float>(in_c / group * k * k)));
    TensorId y = add(PrimOp::Conv, {x, w},
                     Attrs()
                         .set("strides", Ints{1, 1})
                         .set("pads", Ints{p, p, p, p})
                         .set("dilations", Ints{1, 1})
                         .set("group", group));
    return add(PrimOp::Add, {y, constant({1, out_c, 1, 1})});  // bias
  }
  void end_kernel() {
    plan.kernels.push_back(make_kernel(g, current));
    current.clear();
  }
};

// x -> [conv3x3 + relu] -> a -> [conv3x3 + a] -> b -> [depthwise conv3x3 +
// relu] -> c
//   -> [conv3x3] -> out
Chain make_chain(int64_t channels, int64_t size) {
  Chain c;
  TensorId x = c.g.add_input("x", DType::F32, {1, channels, size, size});
  TensorId a = c.add(PrimOp::Relu, {c.conv(x, channels, 3)});
  c.end_kernel();
  TensorId b = c.add(PrimOp::Add, {c.conv(a, channels, 3), a});  // residual
  c.end_kernel();
  TensorId d = c.add(PrimOp::Relu, {c.conv(b, channels, 3, channels)});
  c.end_kernel();
  TensorId out = c.conv(d, channels, 3);
  c.end_kernel();
  c.g.mark_output(out);
  c.plan.strategy = "test";
  return c;
}

// mode: KORCH_LAYOUT_LINK ("" for the default).
std::vector<TensorData> run_plan(const Chain& c, const std::vector<TensorData>& inputs, const char* mode, int* linked,
                                 std::string* descriptions) {
  if (*mode) setenv("KORCH_LAYOUT_LINK", mode, 1);
  Executor exec(make_backend("cpu", BackendOptions{2}), c.g, c.plan);
  unsetenv("KORCH_LAYOUT_LINK");
  exec.set_profiling(true);
  std::vector<TensorData> out = exec.run(inputs);
  out = exec.run(inputs);  // the arena is reused across runs
  *linked = exec.num_linked_tensors();
  EXPECT_TRUE(exec.unlinked_kernels().empty()) << exec.unlinked_kernels().front();
  descriptions->clear();
  for (const KernelTiming& t : exec.last_timings()) *descriptions += t.description + "\n";
  return out;
}

TEST(LayoutLink, ConvChainKeepsInternalLayouts) {
  // 32 channels: a multiple of oneDNN's channel block; 24: blocked layouts pad
  // channels, so linked buffers can be larger than the dense tensors.
  for (int64_t channels : {32, 24}) {
    Chain c = make_chain(channels, 14);
    std::vector<TensorData> inputs = {random_tensor({1, channels, 14, 14}, c.rng)};
    std::vector<TensorData> expected = reference::run_graph(c.g, inputs);
    int linked = 0, exact = 0, unlinked = 0;
    std::string desc, desc_exact, desc_plain;
    std::vector<TensorData> got = run_plan(c, inputs, "", &linked, &desc);
    std::vector<TensorData> got_exact = run_plan(c, inputs, "exact", &exact, &desc_exact);
    std::vector<TensorData> plain = run_plan(c, inputs, "0", &unlinked, &desc_plain);
    std::cout << desc;
    // Every tensor between the four kernels (relayout where the kernels
    // disagree).
    EXPECT_EQ(linked, 3) << desc;
    EXPECT_GT(exact, 0) << desc_exact;
    EXPECT_EQ(unlinked, 0);
    EXPECT_NE(desc.find(" kept]"), std::string::npos) << desc;
    EXPECT_EQ(desc.find("out kept]\n", desc.rfind('\n', desc.size() - 2)), std::string::npos)
        << "the graph output is written dense\n"
        << desc;
    for (const std::vector<TensorData>* out : {&got, &got_exact, &plain}) {
      ASSERT_EQ(out->size(), 1u);
      Comparison cmp = compare_tensors((*out)[0], expected[0], Tolerance{});
      EXPECT_TRUE(cmp.pass) << channels << " channels: max abs " << cmp.max_abs_error << "\n" << desc;
    }
    // Skipping reorders changes no value: same primitives, same results, bit
    // for bit.
    EXPECT_EQ(std::memcmp(got_exact[0].raw(), plain[0].raw(), plain[0].byte_size()), 0) << channels << " channels";
  }
}

// Convolutions with a residual add pick oneDNN's blocked layout (nChw16c); with
// 24 channels its buffers are padded to 32 channels, larger than the dense
// tensors the arena would reserve.
TEST(LayoutLink, PaddedBlockedLayoutsGetLargerBuffers) {
  Chain c;
  const int64_t channels = 24;
  TensorId x = c.g.add_input("x", DType::F32, {1, channels, 10, 10});
  TensorId t = x;
  for (int i = 0; i < 4; ++i) {
    t = c.add(PrimOp::Add, {c.conv(t, channels, 3), t});
    c.end_kernel();
  }
  c.g.mark_output(t);
  std::vector<TensorData> inputs = {random_tensor({1, channels, 10, 10}, c.rng)};
  std::vector<TensorData> expected = reference::run_graph(c.g, inputs);
  int linked = 0, unlinked = 0;
  std::string desc, desc_plain;
  std::vector<TensorData> got = run_plan(c, inputs, "exact", &linked, &desc);
  std::vector<TensorData> plain = run_plan(c, inputs, "0", &unlinked, &desc_plain);
  std::cout << desc;
  EXPECT_EQ(linked, 3) << desc;
  Comparison cmp = compare_tensors(got[0], expected[0], Tolerance{});
  EXPECT_TRUE(cmp.pass) << "max abs " << cmp.max_abs_error << "\n" << desc;
  EXPECT_EQ(std::memcmp(got[0].raw(), plain[0].raw(), plain[0].byte_size()), 0) << desc;
  if (desc.find("nChw16c") != std::string::npos) {
    Executor exec(make_backend("cpu", BackendOptions{2}), c.g, c.plan);
    int64_t dense = static_cast<int64_t>(channels * 10 * 10 * sizeof(float));
    EXPECT_GT(exec.arena().total_bytes, 4 * dense) << "padded internal buffers";
  }
}

// Halide kernels between convolutions read and write their activations in the convolutions'
// layout (whichever of nhwc, nChw8c, nChw16c oneDNN picks; 32 channels take all three) through
// strides:
// conv -> [instance norm + relu + reflect pad] -> conv -> [SiLU] -> {1x1 conv, 3x3 conv} ->
// [residual add]. The 1x1 conv runs oneDNN's plain nchw GEMM here; it is not rebuilt for the
// Halide kernels' sake, so the SiLU output it reads and its own output stay dense, and with
// them every tensor of the two Halide kernels that touch them.
TEST(LayoutLink, HalideKernelsBetweenConvolutionsTakeTheirLayout) {
  Chain c;
  const int64_t channels = 32, size = 12;
  TensorId x = c.g.add_input("x", DType::F32, {1, channels, size, size});
  TensorId a = c.conv(x, channels, 3);
  c.end_kernel();
  TensorId m = c.add(PrimOp::ReduceMean, {a}, Attrs().set("axes", Ints{2, 3}).set("keepdims", int64_t{1}));
  TensorId d = c.add(PrimOp::Sub, {a, m});
  TensorId v = c.add(PrimOp::ReduceMean, {c.add(PrimOp::Mul, {d, d})},
                     Attrs().set("axes", Ints{2, 3}).set("keepdims", int64_t{1}));
  TensorId eps = c.g.add_constant("eps", std::make_shared<TensorData>(TensorData::scalar_f32(1e-5f)));
  TensorId sd = c.add(PrimOp::Sqrt, {c.add(PrimOp::Add, {v, eps})});
  TensorId r = c.add(PrimOp::Relu, {c.add(PrimOp::Div, {d, sd})});
  TensorId p =
      c.add(PrimOp::Pad, {r},
            Attrs().set("pads", Ints{0, 0, 1, 1, 0, 0, 1, 1}).set("mode", std::string("reflect")).set("value", 0.0));
  c.end_kernel();
  // A 3x3 conv without padding of its own (the reflect pad above feeds it).
  TensorId w = c.constant({channels, channels, 3, 3});
  TensorId b = c.add(PrimOp::Conv, {p, w},
                     Attrs()
                         .set("strides", Ints{1, 1})
                         .set("pads", Ints{0, 0, 0, 0})
                         .set("dilations", Ints{1, 1})
                         .set("group", int64_t{1}));
  c.end_kernel();
  TensorId s = c.add(PrimOp::Mul, {b, c.add(PrimOp::Sigmoid, {b})});
  c.end_kernel();
  TensorId e = c.conv(s, channels, 1);
  c.end_kernel();
  TensorId f = c.conv(s, channels, 3);
  c.end_kernel();
  TensorId out = c.add(PrimOp::Add, {e, f});
  c.end_kernel();
  c.g.mark_output(out);
  c.plan.strategy = "test";

  std::vector<TensorData> inputs = {random_tensor({1, channels, size, size}, c.rng)};
  std::vector<TensorData> expected = reference::run_graph(c.g, inputs);
  int linked = 0, onednn_only = 0, unlinked = 0;
  std::string desc, desc_onednn, desc_plain;
  std::vector<TensorData> got = run_plan(c, inputs, "", &linked, &desc);
  std::vector<TensorData> halide_dense = run_plan(c, inputs, "onednn", &onednn_only, &desc_onednn);
  std::vector<TensorData> plain = run_plan(c, inputs, "0", &unlinked, &desc_plain);
  std::cout << desc;
  for (const std::vector<TensorData>* o : {&got, &halide_dense, &plain}) {
    Comparison cmp = compare_tensors((*o)[0], expected[0], Tolerance{});
    EXPECT_TRUE(cmp.pass) << "max abs " << cmp.max_abs_error << "\n" << desc;
  }
  // The layout oneDNN picks for these 3x3 convs: nhwc on AVX-512 CPUs, nChw8c on AVX2 ones.
  std::string format;
  for (std::string f : {"nhwc", "nChw8c", "nChw16c"})
    if (desc_plain.find(", " + f + ")") != std::string::npos) format = f;
  if (format.empty() || (format != "nhwc" && format != cpu::native_blocked_format()))
    GTEST_SKIP() << "oneDNN runs these convolutions in a layout Halide kernels are not verified in here";
  // a and p: the instance-norm kernel links both its tensors. The SiLU kernel's output s goes to
  // the GEMM conv (dense), so the SiLU kernel stays dense (b too); so does the residual add (e
  // comes from the GEMM conv, so f stays dense): no kernel mixes linked and dense tensors.
  EXPECT_EQ(linked, 2) << desc;
  EXPECT_EQ(onednn_only, 0) << desc_onednn;
  EXPECT_EQ(unlinked, 0);
  EXPECT_NE(desc.find(format == "nhwc" ? "halide: channels-last" : "halide: " + format), std::string::npos) << desc;
  EXPECT_NE(desc.find("[" + format + " in/out kept]"), std::string::npos) << desc;
  // No oneDNN kernel changed its implementation or layout for a Halide neighbour.
  auto cores = [](const std::string& d) {
    std::string out;
    std::istringstream lines(d);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("onednn", 0) == 0) out += line.substr(0, line.find(" [")) + "\n";
    return out;
  };
  EXPECT_EQ(cores(desc), cores(desc_onednn));
}

// conv -> [mean-centre] -> [scale + relu] -> conv: two Halide kernels in a row between
// convolutions link to each other and to the convs in the convs' layout, for a channel count every
// format takes (32); with 12 channels a blocked conv layout pads channels, which Halide kernels do
// not take, so there they stay dense (nhwc links still form). Outputs match the reference either way.
TEST(LayoutLink, HalideChainBetweenConvolutionsAndChannelsTheBlockDoesNotDivide) {
  for (int64_t channels : {32, 12}) {
    SCOPED_TRACE(channels);
    Chain c;
    TensorId x = c.g.add_input("x", DType::F32, {1, channels, 10, 10});
    TensorId a = c.conv(x, channels, 3);
    c.end_kernel();
    TensorId m = c.add(PrimOp::ReduceMean, {a}, Attrs().set("axes", Ints{2, 3}).set("keepdims", int64_t{1}));
    TensorId d = c.add(PrimOp::Sub, {a, m});
    c.end_kernel();
    TensorId r = c.add(PrimOp::Relu, {c.add(PrimOp::Mul, {d, c.constant({1, channels, 1, 1})})});
    c.end_kernel();
    TensorId out = c.conv(r, channels, 3);
    c.end_kernel();
    c.g.mark_output(out);
    c.plan.strategy = "test";
    std::vector<TensorData> inputs = {random_tensor({1, channels, 10, 10}, c.rng)};
    std::vector<TensorData> expected = reference::run_graph(c.g, inputs);
    int linked = 0;
    std::string desc;
    std::vector<TensorData> got = run_plan(c, inputs, "", &linked, &desc);
    std::cout << desc;
    Comparison cmp = compare_tensors(got[0], expected[0], Tolerance{});
    EXPECT_TRUE(cmp.pass) << "max abs " << cmp.max_abs_error << "\n" << desc;
    std::string format;
    for (std::string f : {"nhwc", "nChw8c", "nChw16c"})
      if (desc.find(", " + f + ")") != std::string::npos) format = f;
    if (format.empty()) continue;  // oneDNN kept these convs plain: nothing to link
    bool halide_takes = cpu::takes_format({1, channels, 10, 10}, format) &&
                        (format == "nhwc" || format == cpu::native_blocked_format());
    if (halide_takes) {
      EXPECT_EQ(linked, 3) << desc;  // a, d and r
      EXPECT_NE(desc.find("[" + format + " in/out kept]"), std::string::npos) << desc;
    } else {
      EXPECT_EQ(desc.find("halide: " + format), std::string::npos) << desc;
    }
  }
}

// YOLO's CSP and SPP joins between 3x3 convolutions (1x1 ones may run as plain GEMMs):
// [SiLU(a), b] concatenated over channels, then max pools of that concatenated with it. In the
// convs' layout (nhwc or this CPU's blocked format, whichever oneDNN picks here) both Halide kernels
// link on every tensor, each concat piece written as whole channel vectors. Outputs match the
// reference either way.
TEST(LayoutLink, ChannelConcatsBetweenConvolutionsLinkInTheirLayout) {
  Chain c;
  const int64_t channels = 16, size = 13;
  TensorId x = c.g.add_input("x", DType::F32, {1, channels, size, size});
  TensorId a = c.conv(x, channels, 3);
  c.end_kernel();
  TensorId b = c.conv(x, channels, 3);
  c.end_kernel();
  TensorId silu = c.add(PrimOp::Mul, {a, c.add(PrimOp::Sigmoid, {a})});
  TensorId csp = c.add(PrimOp::Concat, {silu, b}, Attrs().set("axis", int64_t{1}));
  c.end_kernel();
  TensorId y = c.conv(csp, 2 * channels, 3);
  c.end_kernel();
  std::vector<TensorId> parts = {y};
  for (int64_t k : {5, 9}) {
    parts.push_back(c.add(PrimOp::MaxPool, {y},
                          Attrs()
                              .set("kernel", Ints{k, k})
                              .set("strides", Ints{1, 1})
                              .set("pads", Ints{k / 2, k / 2, k / 2, k / 2})
                              .set("dilations", Ints{1, 1})
                              .set("ceil_mode", int64_t{0})));
  }
  TensorId spp = c.add(PrimOp::Concat, parts, Attrs().set("axis", int64_t{1}));
  c.end_kernel();
  TensorId out = c.conv(spp, channels, 3);
  c.end_kernel();
  c.g.mark_output(out);
  c.plan.strategy = "test";
  std::vector<TensorData> inputs = {random_tensor({1, channels, size, size}, c.rng)};
  std::vector<TensorData> expected = reference::run_graph(c.g, inputs);
  int linked = 0, unlinked = 0;
  std::string desc, desc_plain;
  std::vector<TensorData> got = run_plan(c, inputs, "", &linked, &desc);
  std::vector<TensorData> plain = run_plan(c, inputs, "0", &unlinked, &desc_plain);
  std::cout << desc;
  for (const std::vector<TensorData>* o : {&got, &plain}) {
    Comparison cmp = compare_tensors((*o)[0], expected[0], Tolerance{});
    EXPECT_TRUE(cmp.pass) << "max abs " << cmp.max_abs_error << "\n" << desc;
  }
  std::string format;
  for (std::string f : {"nhwc", "nChw8c", "nChw16c"})
    if (desc_plain.find(", " + f + ")") != std::string::npos) format = f;
  if (format != "nhwc" && format != cpu::native_blocked_format()) {
    EXPECT_EQ(desc.find("channel concat"), std::string::npos) << desc;
    GTEST_SKIP() << "oneDNN runs these convolutions in " << (format.empty() ? "a plain layout" : format)
                 << ", neither nhwc nor this CPU's blocked format";
  }
  EXPECT_EQ(linked, 5) << desc;  // a, b, csp, y, spp
  size_t first = desc.find("channel concat: one update per piece");
  ASSERT_NE(first, std::string::npos) << desc;
  EXPECT_NE(desc.find("channel concat: one update per piece", first + 1), std::string::npos) << desc;
  std::istringstream lines(desc);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("halide", 0) == 0) {
      EXPECT_NE(line.find("[" + format + " in/out kept]"), std::string::npos) << line;
    }
}

}  // namespace
}  // namespace korch
