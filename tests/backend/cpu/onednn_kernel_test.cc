// oneDNN kernels checked element by element against the reference executor, in the spirit
// of ggml's test-backend-ops: small primitive graphs, one kernel each, random inputs.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <random>

#include "backend/cpu/compiled_kernel.h"
#include "backend/cpu/onednn_internal.h"
#include "plan/kernel.h"
#include "reference/reference.h"

namespace korch {
namespace {

using Ints = std::vector<int64_t>;

TensorData random_tensor(const Shape& shape, std::mt19937& rng, float lo = -1, float hi = 1) {
  TensorData t(DType::F32, shape);
  std::uniform_real_distribution<float> dist(lo, hi);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.size(); ++i) p[i] = dist(rng);
  return t;
}

class Builder {
 public:
  PrimGraph g;
  std::mt19937 rng{1234};

  TensorId input(const Shape& s) { return g.add_input(name('x'), DType::F32, s); }
  TensorId constant(const Shape& s) {
    return g.add_constant(name('c'), std::make_shared<TensorData>(random_tensor(s, rng)));
  }
  TensorId scalar(double v) {
    return g.add_constant(name('s'), std::make_shared<TensorData>(TensorData::scalar_f32(static_cast<float>(v))));
  }
  std::string name(char prefix) const {
    std::string n(1, prefix);
    n += std::to_string(g.num_tensors());
    return n;
  }
  TensorId conv(TensorId x, TensorId w, Ints strides, Ints pads, Ints dilations, int64_t group = 1) {
    return g.add_primitive(
        PrimOp::Conv, {x, w},
        Attrs().set("strides", strides).set("pads", pads).set("dilations", dilations).set("group", group));
  }
  TensorId conv_transpose(TensorId x, TensorId w, Ints strides, Ints pads, Ints dilations, int64_t group,
                          Ints out_spatial) {
    return g.add_primitive(PrimOp::ConvTranspose, {x, w},
                           conv_transpose_attrs(strides, pads, dilations, group, out_spatial));
  }
  TensorId op(PrimOp op, std::vector<TensorId> in, Attrs a = Attrs()) {
    return g.add_primitive(op, std::move(in), std::move(a));
  }
  TensorId transpose(TensorId x, Ints perm) { return op(PrimOp::Transpose, {x}, Attrs().set("perm", perm)); }
  TensorId pad(TensorId x, Ints pads, double value = 0) {
    return op(PrimOp::Pad, {x}, Attrs().set("pads", pads).set("mode", std::string("constant")).set("value", value));
  }
  // GELU exactly as fission emits it: 0.5 x * (erf(x * 1/sqrt2) + 1).
  TensorId gelu(TensorId x) {
    TensorId inner = op(PrimOp::Erf, {op(PrimOp::Mul, {x, scalar(M_SQRT1_2)})});
    TensorId half_x = op(PrimOp::Mul, {x, scalar(0.5)});
    return op(PrimOp::Mul, {half_x, op(PrimOp::Add, {inner, scalar(1)})});
  }
  std::vector<PrimId> all_prims() const {
    std::vector<PrimId> p(g.num_prims());
    for (PrimId i = 0; i < g.num_prims(); ++i) p[i] = i;
    return p;
  }
};

// Reference values of every tensor, primitive by primitive.
std::map<TensorId, TensorData> reference_values(const PrimGraph& g, const std::map<TensorId, TensorData>& inputs) {
  std::map<TensorId, TensorData> v = inputs;
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).is_constant()) v[t] = *g.tensor(t).constant;
  for (const Primitive& p : g.prims()) {
    std::vector<const TensorData*> args;
    for (TensorId t : p.inputs) args.push_back(&v.at(t));
    v[p.output] = reference::evaluate(p, args, g.tensor(p.output).dtype, g.tensor(p.output).shape);
  }
  return v;
}

// Compiles the kernel of `prims` (default: the whole graph), runs it on random inputs and
// compares every element with the reference. Returns the kernel's description.
std::string check_kernel(Builder& b, std::vector<PrimId> prims = {}, int runs = 2, int schedule = 0) {
  if (prims.empty()) prims = b.all_prims();
  Kernel k = make_kernel(b.g, prims);
  k.schedule = schedule;
  std::string why;
  auto kernel = cpu::compile_onednn_kernel(b.g, k, &why);
  EXPECT_TRUE(kernel) << why;
  if (!kernel) return "";
  for (int run = 0; run < runs; ++run) {  // twice: buffers are rebound on every run
    std::map<TensorId, TensorData> inputs;
    for (TensorId t : b.g.inputs()) inputs[t] = random_tensor(b.g.tensor(t).shape, b.rng);
    auto expect = reference_values(b.g, inputs);
    std::vector<const void*> ptrs;
    for (TensorId t : k.inputs) ptrs.push_back(expect.at(t).raw());
    const TensorInfo& out = b.g.tensor(k.output);
    TensorData got(out.dtype, out.shape);
    std::fill_n(got.data<float>(), got.size(), std::nanf(""));
    kernel->run(ptrs, got.raw());
    const float* g = got.data<float>();
    const float* e = expect.at(k.output).data<float>();
    int bad = 0;
    for (int64_t i = 0; i < got.size() && bad < 5; ++i)
      if (!(std::abs(g[i] - e[i]) <= 1e-4f + 1e-3f * std::abs(e[i]))) {
        ADD_FAILURE() << kernel->describe() << ": element " << i << " got " << g[i] << ", expected " << e[i];
        ++bad;
      }
  }
  std::cout << "    " << kernel->describe() << "\n";
  return kernel->describe();
}

// Expects the kernel to be rejected; returns the reason.
std::string rejection(Builder& b, std::vector<PrimId> prims = {}) {
  if (prims.empty()) prims = b.all_prims();
  Kernel k = make_kernel(b.g, prims);
  std::string why;
  auto kernel = cpu::compile_onednn_kernel(b.g, k, &why);
  EXPECT_FALSE(kernel) << "unexpectedly compiled: " << kernel->describe();
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(why.find('\n'), std::string::npos);
  std::cout << "    rejected: " << why << "\n";
  return why;
}

// ---- Conv -------------------------------------------------------------------------------

TEST(OnednnKernel, ConvLayoutVariants) {
  // Variant 1 of a convolution uses the other activation layout; both match the reference.
  Builder b;
  TensorId y = b.conv(b.input({1, 32, 20, 20}), b.constant({3, 32, 9, 9}), {1, 1}, {4, 4, 4, 4}, {1, 1});
  b.op(PrimOp::Add, {y, b.constant({1, 3, 1, 1})});
  Kernel k = make_kernel(b.g, b.all_prims());
  ASSERT_EQ(cpu::schedule_variants(b.g, k), 2);
  std::string v0 = check_kernel(b), v1 = check_kernel(b, {}, 2, 1);
  // The variants differ where oneDNN has an implementation for each layout (AVX-512 CPUs); on
  // AVX2 both resolve to the plain GEMM convolution for this 3-output-channel 9x9 conv.
  EXPECT_TRUE(v0 != v1 || v0.find("gemm") != std::string::npos) << v0;
  k.schedule = 2;
  std::string why;
  EXPECT_EQ(cpu::compile_kernel(b.g, k, &why), nullptr);
  EXPECT_NE(why.find("no schedule variant"), std::string::npos) << why;
  Builder m;  // a MatMul with a runtime B has one schedule
  m.op(PrimOp::MatMul, {m.input({4, 8}), m.input({8, 6})});
  EXPECT_EQ(cpu::schedule_variants(m.g, make_kernel(m.g, m.all_prims())), 1);
}

// A cache reset evicts what the kernel holds (held_memory): its constant weights (at least their
// bytes) but never the run's input or output buffers, which the profiler passes itself.
TEST(OnednnKernel, HeldMemoryHasTheWeightsAndNotTheRunsBuffers) {
  Builder b;
  TensorId y = b.conv(b.input({1, 16, 12, 12}), b.constant({32, 16, 3, 3}), {1, 1}, {1, 1, 1, 1}, {1, 1});
  b.op(PrimOp::Add, {y, b.constant({1, 32, 1, 1})});
  Kernel k = make_kernel(b.g, b.all_prims());
  std::string why;
  std::unique_ptr<cpu::CompiledKernel> compiled = cpu::compile_kernel(b.g, k, &why);
  ASSERT_NE(compiled, nullptr) << why;
  TensorData x(DType::F32, {1, 16, 12, 12}), out(DType::F32, {1, 32, 12, 12});
  compiled->run({x.raw(), nullptr, nullptr}, out.raw());
  int64_t held = 0;
  for (const auto& [data, bytes] : compiled->held_memory()) {
    EXPECT_NE(data, x.raw());
    EXPECT_NE(data, static_cast<const void*>(out.raw()));
    EXPECT_GT(bytes, 0);
    held += bytes;
  }
  EXPECT_GE(held, int64_t{32 * 16 * 3 * 3 * 4});
}

TEST(OnednnKernel, MatMulConstantBTransposedVariant) {
  // Variant 1 of a MatMul with a constant B stores B transposed (N x K); both variants match
  // the reference, with a bias and a residual, for 2-D and batched (broadcast) B.
  Builder b;
  TensorId y = b.op(PrimOp::MatMul, {b.input({2, 9, 24}), b.constant({24, 40})});
  b.op(PrimOp::Add, {b.op(PrimOp::Add, {y, b.constant({40})}), b.input({2, 9, 40})});
  ASSERT_EQ(cpu::schedule_variants(b.g, make_kernel(b.g, b.all_prims())), 2);
  std::string v0 = check_kernel(b), v1 = check_kernel(b, {}, 2, 1);
  EXPECT_EQ(v0.find("stored transposed"), std::string::npos) << v0;
  EXPECT_NE(v1.find("const-B stored transposed"), std::string::npos) << v1;
  Builder c;
  c.op(PrimOp::MatMul, {c.input({2, 3, 5, 8}), c.constant({3, 8, 6})});
  ASSERT_EQ(cpu::schedule_variants(c.g, make_kernel(c.g, c.all_prims())), 2);
  check_kernel(c, {}, 2, 1);
}

TEST(OnednnKernel, MatMulRowBlockVariant) {
  // Variant 2 of a MatMul with a constant B and at least kRowBlockMinRows rows runs the rows in
  // blocks: A's rows, a residual's rows and the output's rows at each block's offset, the bias and
  // a per-column operand whole; it matches the reference on batch
  // dims folded into rows (an odd row count), a transposed A, and a constant full operand.
  const int64_t rows = cpu::onednn_detail::kRowBlockMinRows + 33;
  Builder b;
  TensorId y = b.op(PrimOp::MatMul, {b.input({1, rows, 24}), b.constant({24, 40})});
  y = b.op(PrimOp::Add, {b.op(PrimOp::Add, {y, b.constant({40})}), b.input({1, rows, 40})});
  b.op(PrimOp::Mul, {y, b.constant({1, 1, 40})});
  ASSERT_EQ(cpu::schedule_variants(b.g, make_kernel(b.g, b.all_prims())), 3);
  std::string v2 = check_kernel(b, {}, 2, 2);
  EXPECT_NE(v2.find("rows in 2 blocks"), std::string::npos) << v2;

  Builder folded;  // [3, rows/3... ] batch folded into rows
  folded.op(PrimOp::Add, {folded.op(PrimOp::MatMul, {folded.input({3, 100, 16}), folded.constant({16, 24})}),
                          folded.constant({3, 100, 24})});
  ASSERT_EQ(cpu::schedule_variants(folded.g, make_kernel(folded.g, folded.all_prims())), 3);
  check_kernel(folded, {}, 2, 2);

  Builder transposed;  // A read through a transpose: rows strided
  transposed.op(PrimOp::MatMul,
                {transposed.transpose(transposed.input({32, rows}), {1, 0}), transposed.constant({32, 8})});
  ASSERT_EQ(cpu::schedule_variants(transposed.g, make_kernel(transposed.g, transposed.all_prims())), 3);
  check_kernel(transposed, {}, 2, 2);

  Builder few;  // fewer rows: no such variant
  few.op(PrimOp::MatMul, {few.input({cpu::onednn_detail::kRowBlockMinRows - 1, 16}), few.constant({16, 8})});
  EXPECT_EQ(cpu::schedule_variants(few.g, make_kernel(few.g, few.all_prims())), 2);
  Kernel k = make_kernel(few.g, few.all_prims());
  k.schedule = 2;
  std::string why;
  EXPECT_EQ(cpu::compile_onednn_kernel(few.g, k, &why), nullptr);
}

TEST(OnednnKernel, MatMulGemvVariant) {
  // Variant 2 of a MatMul with a constant B and at most kGemvMaxRows rows is korch's GEMV: partial
  // sums over parts of K added by a oneDNN binary primitive carrying the bias and post-ops. It
  // matches the reference with an output width that is no multiple of 16, K shorter than the
  // rows it reads together, a runtime residual, more parts than two (three threads), and B of
  // leading dims 1.
  Builder b;
  TensorId y = b.op(PrimOp::MatMul, {b.input({1, 70}), b.constant({70, 37})});
  b.op(PrimOp::Relu, {b.op(PrimOp::Add, {y, b.constant({37})})});
  ASSERT_EQ(cpu::schedule_variants(b.g, make_kernel(b.g, b.all_prims())), 3);
  std::string v2 = check_kernel(b, {}, 2, 2);
  EXPECT_NE(v2.find("korch gemv"), std::string::npos) << v2;

  Builder residual;
  TensorId r = residual.op(PrimOp::MatMul, {residual.input({3, 5}), residual.constant({5, 33})});
  r = residual.op(PrimOp::Add, {r, residual.input({3, 33})});
  residual.op(PrimOp::Mul, {r, residual.constant({33})});
  const int threads = omp_get_max_threads();
  omp_set_num_threads(3);
  std::string three = check_kernel(residual, {}, 2, 2);
  omp_set_num_threads(threads);
  EXPECT_NE(three.find("K in 3 parts"), std::string::npos) << three;

  Builder batched;
  batched.op(PrimOp::MatMul, {batched.input({1, 1, 4, 40}), batched.constant({1, 40, 48})});
  check_kernel(batched, {}, 2, 2);

  Builder transposed;  // A read with a column stride: no GEMV
  transposed.op(PrimOp::MatMul,
                {transposed.transpose(transposed.input({16, 2}), {1, 0}), transposed.constant({16, 8})});
  EXPECT_EQ(cpu::schedule_variants(transposed.g, make_kernel(transposed.g, transposed.all_prims())), 2);
  Builder five;  // more rows than kGemvMaxRows: no GEMV
  five.op(PrimOp::MatMul, {five.input({cpu::onednn_detail::kGemvMaxRows + 1, 16}), five.constant({16, 8})});
  EXPECT_EQ(cpu::schedule_variants(five.g, make_kernel(five.g, five.all_prims())), 2);
}

// The GEMV's AVX2 and AVX-512 code fuse every product with its sum in the same order: the same
// bits on any CPU and in any build (the exported package compiles it with other flags).
TEST(OnednnKernel, GemvPartialSumsAreTheSameBitsInAvx2AndAvx512) {
  if (!cpu::onednn_detail::gemv_supported()) GTEST_SKIP() << "no AVX2+FMA";
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (int64_t rows : {1, 3}) {
    const int64_t k = 203, n = 45, parts = 3;
    std::vector<float> a(rows * k), b(k * n), avx2(parts * rows * n), avx512(parts * rows * n);
    for (float& v : a) v = normal(rng);
    for (float& v : b) v = normal(rng);
    cpu::onednn_detail::gemv_partial_sums(a.data(), k, rows, b.data(), k, n, parts, avx2.data(), false);
    for (int64_t j = 0; j < rows * n; ++j) {  // partial 0 is rows 0-66 of K; 1 holds 67-202
      double expect = 0;
      for (int64_t i = 0; i < k * 1 / parts; ++i) expect += double(a[j / n * k + i]) * b[i * n + j % n];
      EXPECT_NEAR(avx2[j], expect, 1e-4 * (1 + std::abs(expect))) << j;
    }
    if (!cpu::onednn_detail::gemv_has_avx512()) continue;
    cpu::onednn_detail::gemv_partial_sums(a.data(), k, rows, b.data(), k, n, parts, avx512.data(), true);
    EXPECT_EQ(std::memcmp(avx2.data(), avx512.data(), 2 * rows * n * sizeof(float)), 0) << rows << " rows";
  }
}

TEST(OnednnKernel, Conv3x3Pad1) {
  Builder b;
  b.conv(b.input({1, 8, 10, 10}), b.constant({16, 8, 3, 3}), {1, 1}, {1, 1, 1, 1}, {1, 1});
  check_kernel(b);
}

TEST(OnednnKernel, ConvStride2AsymmetricPad) {
  Builder b;
  b.conv(b.input({2, 6, 11, 9}), b.constant({8, 6, 3, 3}), {2, 2}, {0, 1, 2, 1}, {1, 1});
  check_kernel(b);
}

TEST(OnednnKernel, ConvDepthwiseBiasRelu) {
  Builder b;
  TensorId y = b.conv(b.input({1, 16, 12, 12}), b.constant({16, 1, 3, 3}), {1, 1}, {1, 1, 1, 1}, {1, 1}, 16);
  b.op(PrimOp::Relu, {b.op(PrimOp::Add, {y, b.constant({16, 1, 1})})});
  std::string d = check_kernel(b);
  EXPECT_NE(d.find("g16"), std::string::npos);
  EXPECT_NE(d.find("bias"), std::string::npos);
}

TEST(OnednnKernel, ConvDilated) {
  Builder b;
  b.conv(b.input({1, 4, 15, 15}), b.constant({6, 4, 3, 3}), {1, 1}, {2, 2, 2, 2}, {2, 2});
  check_kernel(b);
  Builder c;  // anisotropic dilation and stride
  c.conv(c.input({1, 3, 13, 14}), c.constant({5, 3, 3, 2}), {2, 1}, {1, 0, 0, 1}, {3, 2});
  check_kernel(c);
}

TEST(OnednnKernel, ConvGrouped) {
  Builder b;
  b.conv(b.input({1, 8, 9, 9}), b.constant({12, 4, 3, 3}), {1, 1}, {1, 1, 1, 1}, {1, 1}, 2);
  check_kernel(b);
}

TEST(OnednnKernel, Conv1x1UsesPlainLayout) {
  Builder b;
  b.conv(b.input({2, 16, 7, 7}), b.constant({32, 16, 1, 1}), {1, 1}, {0, 0, 0, 0}, {1, 1});
  EXPECT_NE(check_kernel(b).find(", nchw)"), std::string::npos);
}

TEST(OnednnKernel, Conv1dAnd3d) {
  Builder b;
  b.conv(b.input({2, 4, 20}), b.constant({6, 4, 5}), {2}, {2, 1}, {1});
  check_kernel(b);
  Builder c;
  c.conv(c.input({1, 3, 6, 7, 5}), c.constant({4, 3, 3, 3, 3}), {1, 2, 1}, {1, 1, 0, 1, 0, 1}, {1, 1, 1});
  check_kernel(c);
}

TEST(OnednnKernel, ConvBiasRelu) {
  Builder b;
  TensorId y = b.conv(b.input({1, 8, 10, 10}), b.constant({16, 8, 3, 3}), {1, 1}, {1, 1, 1, 1}, {1, 1});
  b.op(PrimOp::Relu, {b.op(PrimOp::Add, {y, b.constant({16, 1, 1})})});
  std::string d = check_kernel(b);
  EXPECT_NE(d.find("bias"), std::string::npos);
  EXPECT_NE(d.find("eltwise_relu"), std::string::npos);
}

TEST(OnednnKernel, ConvResidualAddRelu) {
  Builder b;
  TensorId x = b.input({1, 16, 10, 10});
  TensorId y = b.conv(x, b.constant({16, 16, 3, 3}), {1, 1}, {1, 1, 1, 1}, {1, 1});
  y = b.op(PrimOp::Add, {y, b.constant({1, 16, 1, 1})});
  TensorId residual = b.input({1, 16, 10, 10});
  b.op(PrimOp::Relu, {b.op(PrimOp::Add, {residual, y})});
  std::string d = check_kernel(b);
  EXPECT_NE(d.find("binary_add"), std::string::npos);
  Builder c;  // the residual is the conv's own input
  TensorId x2 = c.input({2, 8, 6, 6});
  c.op(PrimOp::Relu, {c.op(PrimOp::Add, {c.conv(x2, c.constant({8, 8, 3, 3}), {1, 1}, {1, 1, 1, 1}, {1, 1}), x2})});
  check_kernel(c);
}

TEST(OnednnKernel, ConvPadPrologueFolded) {
  Builder b;
  TensorId x = b.pad(b.input({1, 4, 8, 9}), {0, 0, 1, 2, 0, 0, 2, 1});
  b.conv(x, b.constant({6, 4, 3, 3}), {1, 1}, {0, 1, 1, 0}, {1, 1});
  EXPECT_NE(check_kernel(b).find("pad folded"), std::string::npos);
}

TEST(OnednnKernel, ConvRuntimeWeight) {
  Builder b;
  TensorId y = b.conv(b.input({1, 6, 9, 9}), b.input({8, 3, 3, 3}), {1, 1}, {1, 1, 1, 1}, {1, 1}, 2);
  b.op(PrimOp::Relu, {y});
  check_kernel(b, {}, 3);
}

TEST(OnednnKernel, ConvEpilogueChain) {
  // ReLU6 as Max/Min (one clip), scalar arithmetic, a tensor on the left of Sub, Div by a
  // per-channel runtime tensor, and a Sigmoid.
  Builder b;
  TensorId y = b.conv(b.input({2, 8, 7, 7}), b.constant({8, 8, 3, 3}), {1, 1}, {1, 1, 1, 1}, {1, 1});
  y = b.op(PrimOp::Mul, {y, b.scalar(3.0)});
  y = b.op(PrimOp::Sub, {y, b.scalar(0.25)});
  y = b.op(PrimOp::Max, {y, b.scalar(0)});
  y = b.op(PrimOp::Min, {b.scalar(6), y});
  y = b.op(PrimOp::Sub, {b.input({2, 8, 7, 7}), y});
  y = b.op(PrimOp::Div, {y, b.op(PrimOp::Abs, {b.input({1, 8, 1, 1})})});
  // ^ the Abs is outside the kernel (its output is an input of the kernel)
  y = b.op(PrimOp::Sigmoid, {y});
  std::vector<PrimId> prims = b.all_prims();
  prims.erase(prims.begin() + 6);  // the Abs
  std::string d = check_kernel(b, prims);
  EXPECT_NE(d.find("eltwise_clip(0,6)"), std::string::npos);
}

TEST(OnednnKernel, ConvSiluAndHardswish) {
  Builder b;
  TensorId y = b.conv(b.input({1, 8, 8, 8}), b.constant({8, 8, 3, 3}), {1, 1}, {1, 1, 1, 1}, {1, 1});
  b.op(PrimOp::Mul, {y, b.op(PrimOp::Sigmoid, {y})});
  EXPECT_NE(check_kernel(b).find("swish"), std::string::npos);
  Builder c;  // HardSwish as fission would emit it: x * min(max(x + 3, 0), 6) / 6
  TensorId z = c.conv(c.input({1, 8, 8, 8}), c.constant({8, 8, 1, 1}), {1, 1}, {0, 0, 0, 0}, {1, 1});
  TensorId r = c.op(PrimOp::Min, {c.op(PrimOp::Max, {c.op(PrimOp::Add, {z, c.scalar(3)}), c.scalar(0)}), c.scalar(6)});
  c.op(PrimOp::Div, {c.op(PrimOp::Mul, {z, r}), c.scalar(6)});
  EXPECT_NE(check_kernel(c).find("hardswish"), std::string::npos);
}

TEST(OnednnKernel, RepeatedEltwiseAlgorithms) {
  // oneDNN 2.6's JIT kernels share one injector per eltwise algorithm, so a second
  // eltwise_linear / clip with other parameters must not reach them as an eltwise.
  Builder b;
  TensorId y = b.conv(b.input({2, 16, 9, 9}), b.constant({16, 16, 3, 3}), {1, 1}, {1, 1, 1, 1}, {1, 1});
  y = b.op(PrimOp::Mul, {y, b.scalar(2)});
  y = b.op(PrimOp::Relu, {y});
  y = b.op(PrimOp::Add, {y, b.scalar(5)});
  y = b.op(PrimOp::Sigmoid, {y});
  y = b.op(PrimOp::Mul, {y, b.scalar(-2)});
  check_kernel(b);
  Builder c;  // two clips around a residual add, and two full-tensor binary adds
  TensorId z = c.conv(c.input({2, 16, 9, 9}), c.constant({16, 16, 3, 3}), {1, 1}, {1, 1, 1, 1}, {1, 1});
  z = c.op(PrimOp::Max, {z, c.scalar(-1)});
  z = c.op(PrimOp::Add, {z, c.input({2, 16, 9, 9})});
  z = c.op(PrimOp::Min, {z, c.scalar(0.5)});
  z = c.op(PrimOp::Max, {z, c.scalar(-0.75)});
  c.op(PrimOp::Add, {z, c.input({2, 16, 9, 9})});
  check_kernel(c);
  Builder d;  // linear ops fold: (3x - 0.25) * 2 + 1 is one eltwise_linear
  TensorId w = d.op(PrimOp::MatMul, {d.input({6, 16}), d.constant({16, 32})});
  w = d.op(PrimOp::Sub, {d.op(PrimOp::Mul, {w, d.scalar(3)}), d.scalar(0.25)});
  d.op(PrimOp::Add, {d.op(PrimOp::Mul, {d.scalar(2), w}), d.scalar(1)});
  EXPECT_NE(check_kernel(d).find("eltwise_linear(6,0.5)"), std::string::npos);
}

// Activations spelled out the way fission emits them, recognised as one eltwise post-op.
TEST(OnednnKernel, FissionedActivations) {
  auto linear = [](Builder& b) { return b.op(PrimOp::MatMul, {b.input({8, 32}), b.constant({32, 24})}); };
  auto softplus = [](Builder& b, TensorId x) {
    return b.op(PrimOp::Log, {b.op(PrimOp::Add, {b.op(PrimOp::Exp, {x}), b.scalar(1)})});
  };
  {
    Builder b;  // Mish = x * tanh(softplus(x))
    TensorId x = linear(b);
    b.op(PrimOp::Mul, {x, b.op(PrimOp::Tanh, {softplus(b, x)})});
    EXPECT_NE(check_kernel(b).find("eltwise_mish"), std::string::npos);
  }
  {
    Builder b;  // HardSwish = x * max(0, min(1, x/6 + 1/2))
    TensorId x = linear(b);
    TensorId hs = b.op(PrimOp::Add, {b.op(PrimOp::Mul, {x, b.scalar(1.0 / 6)}), b.scalar(0.5)});
    hs = b.op(PrimOp::Max, {b.op(PrimOp::Min, {hs, b.scalar(1)}), b.scalar(0)});
    b.op(PrimOp::Mul, {x, hs});
    EXPECT_NE(check_kernel(b).find("eltwise_hardswish"), std::string::npos);
  }
  {
    Builder b;  // Elu(alpha=0.5) = where(x < 0, (exp(x) - 1) * 0.5, x)
    TensorId x = linear(b);
    TensorId neg = b.op(PrimOp::Less, {x, b.scalar(0)});
    TensorId em1 = b.op(PrimOp::Mul, {b.op(PrimOp::Sub, {b.op(PrimOp::Exp, {x}), b.scalar(1)}), b.scalar(0.5)});
    b.op(PrimOp::Where, {neg, em1, x});
    EXPECT_NE(check_kernel(b).find("eltwise_elu(0.5)"), std::string::npos);
  }
  {
    Builder b;  // GELU, tanh approximation
    TensorId x = linear(b);
    TensorId x3 = b.op(PrimOp::Mul, {b.op(PrimOp::Mul, {x, x}), x});
    TensorId arg = b.op(PrimOp::Add, {x, b.op(PrimOp::Mul, {x3, b.scalar(0.044715)})});
    TensorId inner = b.op(PrimOp::Tanh, {b.op(PrimOp::Mul, {arg, b.scalar(std::sqrt(2.0 / M_PI))})});
    b.op(PrimOp::Mul, {b.op(PrimOp::Mul, {x, b.scalar(0.5)}), b.op(PrimOp::Add, {inner, b.scalar(1)})});
    EXPECT_NE(check_kernel(b).find("eltwise_gelu_tanh"), std::string::npos);
  }
  {
    Builder b;  // quick GELU: x * sigmoid(1.702 x) is swish with alpha 1.702
    TensorId x = linear(b);
    b.op(PrimOp::Mul, {x, b.op(PrimOp::Sigmoid, {b.op(PrimOp::Mul, {x, b.scalar(1.702)})})});
    EXPECT_NE(check_kernel(b).find("eltwise_swish(1.702)"), std::string::npos);
  }
  {
    Builder b;  // almost GELU (wrong constant inside erf): no oneDNN algorithm computes it
    TensorId x = linear(b);
    TensorId inner = b.op(PrimOp::Erf, {b.op(PrimOp::Mul, {x, b.scalar(0.7)})});
    b.op(PrimOp::Mul, {b.op(PrimOp::Mul, {x, b.scalar(0.5)}), b.op(PrimOp::Add, {inner, b.scalar(1)})});
    EXPECT_NE(rejection(b).find("known activation"), std::string::npos);
  }
}

// ---- ConvTranspose -----------------------------------------------------------------------

TEST(OnednnKernel, ConvTransposeStride2) {
  Builder b;
  // out = 2*(5-1) + 3 - 1 - 1 + output_padding 1 = 10
  TensorId y =
      b.conv_transpose(b.input({1, 8, 5, 5}), b.constant({8, 4, 3, 3}), {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, {10, 10});
  b.op(PrimOp::Add, {y, b.constant({4, 1, 1})});
  check_kernel(b);
}

TEST(OnednnKernel, ConvTransposeGroupedDilated) {
  Builder b;
  // out = 2*(6-1) + (3-1)*2 + 1 - 0 - 1 = 14
  b.conv_transpose(b.input({2, 6, 6, 4}), b.constant({6, 2, 3, 2}), {2, 1}, {0, 1, 1, 0}, {2, 1}, 3, {14, 4});
  check_kernel(b);
  Builder c;  // 1-D, pads smaller than output padding
  c.conv_transpose(c.input({1, 4, 7}), c.constant({4, 3, 4}), {3}, {0, 0}, {1}, 1, {24});
  check_kernel(c);
}

// ---- MatMul -------------------------------------------------------------------------------

TEST(OnednnKernel, MatMulConstWeightBiasGelu) {
  Builder b;
  TensorId y = b.op(PrimOp::MatMul, {b.input({7, 24}), b.constant({24, 40})});
  b.gelu(b.op(PrimOp::Add, {y, b.constant({40})}));
  std::string d = check_kernel(b);
  EXPECT_NE(d.find("bias"), std::string::npos);
  EXPECT_NE(d.find("gelu_erf"), std::string::npos);
  Builder c;  // PyTorch's export order: x * (erf(x / sqrt2) + 1) * 0.5, on a 3-D activation
  TensorId z = c.op(PrimOp::MatMul, {c.input({2, 5, 16}), c.constant({16, 12})});
  z = c.op(PrimOp::Add, {c.constant({12}), z});
  TensorId e = c.op(PrimOp::Add, {c.op(PrimOp::Erf, {c.op(PrimOp::Div, {z, c.scalar(std::sqrt(2.0))})}), c.scalar(1)});
  c.op(PrimOp::Mul, {c.op(PrimOp::Mul, {z, e}), c.scalar(0.5)});
  EXPECT_NE(check_kernel(c).find("gelu_erf"), std::string::npos);
}

TEST(OnednnKernel, MatMulBatchedBroadcast) {
  Builder b;
  b.op(PrimOp::MatMul, {b.input({2, 3, 5, 8}), b.input({3, 8, 4})});
  check_kernel(b);
  Builder c;  // both operands broadcast, constant weight
  c.op(PrimOp::MatMul, {c.input({2, 1, 5, 8}), c.constant({1, 4, 8, 6})});
  check_kernel(c);
  Builder d;  // rank 5 with a full-tensor residual and a scalar scale
  TensorId y = d.op(PrimOp::MatMul, {d.input({2, 1, 3, 4, 6}), d.input({1, 2, 1, 6, 5})});
  d.op(PrimOp::Add, {d.op(PrimOp::Mul, {y, d.scalar(0.5)}), d.input({2, 2, 3, 4, 5})});
  check_kernel(d);
}

TEST(OnednnKernel, MatMulBatchFoldedIntoRows) {
  // [seq, batch, d] x [d, 3d] (PyTorch's TransformerEncoder QKV projection): one GEMM with
  // seq*batch rows, not seq matrix-vector products; bias, GELU and a full residual ride along.
  Builder b;
  TensorId y = b.op(PrimOp::MatMul, {b.input({16, 1, 24}), b.constant({24, 40})});
  y = b.op(PrimOp::Add, {y, b.constant({40})});
  b.op(PrimOp::Add, {b.gelu(y), b.input({16, 1, 40})});
  EXPECT_NE(check_kernel(b).find("batch folded into rows"), std::string::npos);
  Builder c;  // a transposed (constant) B folds too; a row-broadcast operand [1, 1, N] as well
  TensorId w = c.transpose(c.constant({12, 8}), {1, 0});
  TensorId z = c.op(PrimOp::MatMul, {c.input({3, 5, 8}), w});
  c.op(PrimOp::Mul, {z, c.input({1, 1, 12})});
  EXPECT_NE(check_kernel(c).find("batch folded into rows"), std::string::npos);
  Builder d;  // an operand broadcast over some batch dims but not others: no folding
  TensorId u = d.op(PrimOp::MatMul, {d.input({2, 3, 4, 8}), d.constant({8, 6})});
  d.op(PrimOp::Add, {u, d.input({2, 1, 4, 6})});
  EXPECT_EQ(check_kernel(d).find("batch folded into rows"), std::string::npos);
}

TEST(OnednnKernel, MatMulTransposedOperand) {
  // Attention scores: Q K^T * scale + mask, K transposed by a Transpose prologue.
  Builder b;
  TensorId kt = b.transpose(b.input({2, 4, 7, 8}), {0, 1, 3, 2});
  TensorId s = b.op(PrimOp::MatMul, {b.input({2, 4, 6, 8}), kt});
  b.op(PrimOp::Add, {b.op(PrimOp::Mul, {s, b.scalar(0.125)}), b.input({2, 4, 6, 7})});
  EXPECT_NE(check_kernel(b).find("transposed B"), std::string::npos);
  Builder l;  // a Linear layer as Gemm(transB=1): constant [out, in] weight, bias, ReLU
  TensorId wt = l.transpose(l.constant({24, 40}), {1, 0});
  TensorId h = l.op(PrimOp::Add, {l.op(PrimOp::MatMul, {l.input({9, 40}), wt}), l.constant({24})});
  l.op(PrimOp::Relu, {h});
  EXPECT_NE(check_kernel(l).find("bias"), std::string::npos);
  Builder c;  // Gemm transA on a constant and transB on an input
  TensorId a = c.transpose(c.constant({9, 5}), {1, 0});
  c.op(PrimOp::MatMul, {a, c.transpose(c.input({4, 9}), {1, 0})});
  check_kernel(c);
  Builder d;  // a batch-dim permutation (heads split by Transpose before the MatMul)
  TensorId v = d.transpose(d.input({2, 6, 3, 5}), {0, 2, 1, 3});
  d.op(PrimOp::MatMul, {d.input({2, 3, 4, 6}), v});
  check_kernel(d);
}

// ---- Rejections ---------------------------------------------------------------------------

TEST(OnednnKernel, RejectsReduceEpilogue) {
  Builder b;
  TensorId y = b.op(PrimOp::MatMul, {b.input({4, 8}), b.constant({8, 6})});
  b.op(PrimOp::ReduceMax, {y}, Attrs().set("axes", Ints{1}).set("keepdims", int64_t{1}));
  EXPECT_NE(rejection(b).find("ReduceMax"), std::string::npos);
  Builder c;  // softmax-like: x - max(x) needs the reduction inside the kernel
  TensorId z = c.op(PrimOp::MatMul, {c.input({4, 8}), c.constant({8, 6})});
  TensorId m = c.op(PrimOp::ReduceMax, {z}, Attrs().set("axes", Ints{1}).set("keepdims", int64_t{1}));
  c.op(PrimOp::Exp, {c.op(PrimOp::Sub, {z, m})});
  rejection(c);
}

TEST(OnednnKernel, RejectsFusionThatOnlyHasAReferenceImplementation) {
  // oneDNN 2.6's matmul has no optimised binary post-op broadcasting over batch dims (a
  // [1,1,M,N] attention mask); the bare matmul does, so the fused kernel is rejected.
  Builder b;
  TensorId s = b.op(PrimOp::MatMul, {b.input({2, 4, 6, 8}), b.input({2, 4, 8, 7})});
  b.op(PrimOp::Add, {s, b.input({1, 1, 6, 7})});
  EXPECT_NE(rejection(b).find("reference implementation"), std::string::npos);
}

TEST(OnednnKernel, RejectsTwoLinearPrims) {
  Builder b;
  TensorId y = b.op(PrimOp::MatMul, {b.input({4, 8}), b.constant({8, 6})});
  b.op(PrimOp::MatMul, {y, b.constant({6, 3})});
  EXPECT_NE(rejection(b).find("more than one linear"), std::string::npos);
}

TEST(OnednnKernel, RejectsOtherShapes) {
  {
    Builder b;  // Reshape of the linear output
    TensorId y = b.op(PrimOp::MatMul, {b.input({4, 8}), b.constant({8, 6})});
    b.op(PrimOp::Reshape, {y}, Attrs().set("shape", Ints{24}));
    EXPECT_NE(rejection(b).find("Reshape"), std::string::npos);
  }
  {
    Builder b;  // Pad with a non-zero value
    TensorId x = b.pad(b.input({1, 4, 8, 8}), {0, 0, 1, 1, 0, 0, 1, 1}, 1.0);
    b.conv(x, b.constant({4, 4, 3, 3}), {1, 1}, {0, 0, 0, 0}, {1, 1});
    rejection(b);
  }
  {
    Builder b;  // an epilogue operand computed inside the kernel
    TensorId y = b.op(PrimOp::MatMul, {b.input({4, 8}), b.constant({8, 6})});
    b.op(PrimOp::Add, {y, b.op(PrimOp::Exp, {b.input({4, 6})})});
    rejection(b);
  }
  {
    Builder b;  // Erf alone is not a oneDNN eltwise
    TensorId y = b.op(PrimOp::MatMul, {b.input({4, 8}), b.constant({8, 6})});
    b.op(PrimOp::Erf, {y});
    EXPECT_NE(rejection(b).find("Erf"), std::string::npos);
  }
  {
    Builder b;  // no linear primitive
    b.op(PrimOp::Relu, {b.input({4, 8})});
    rejection(b);
  }
}

}  // namespace
}  // namespace korch
