// The CUDA backend's linear kernels (src/backend/cuda/linear_*.cc).
//
// Without a GPU (CI): every linear kernel of the tiny paper models and the test models (per-op and
// greedy plans) and a table of hand-made kernels is planned (plan_linear); the counts of accepted
// kernels and refusal reasons are printed and pinned, and each planned call is evaluated on the
// CPU by a small implementation of the library call's documented semantics (cuBLASLt's
// column-major strided-batched GEMM with its epilogue; cuDNN's NCHW cross-correlation, fused
// bias-activation and backward data) and compared with the reference executor. This checks the
// descriptor numbers (swap, transposes, leading dims, batch strides, pads) without CUDA.
// With a GPU: every planned kernel compiled by the "cuda" backend and run on the device, directly
// and replayed from a CUDA graph recorded through Backend::record, against the reference.
#include "backend/cuda/linear_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include "backend/backend.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/linear_internal.h"
#include "check/test_case.h"
#include "orchestrate/baselines.h"
#include "plan/kernel.h"
#include "reference/reference.h"

namespace korch {
namespace {

using cuda::linear_detail::ConvCall;
using cuda::linear_detail::GemmCall;
using cuda::linear_detail::GemmEpilogue;
using cuda::linear_detail::PlannedCall;
using Ints = std::vector<int64_t>;

TensorData random_tensor(const Shape& shape, std::mt19937& rng) {
  TensorData t(DType::F32, shape);
  std::uniform_real_distribution<float> dist(-1, 1);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.size(); ++i) p[i] = dist(rng);
  return t;
}

// Kernel inputs: constants as they are, everything else random.
std::vector<TensorData> kernel_inputs(const PrimGraph& g, const Kernel& k, std::mt19937& rng) {
  std::vector<TensorData> in;
  for (TensorId t : k.inputs) {
    const TensorInfo& i = g.tensor(t);
    if (i.is_constant())
      in.push_back(*i.constant);
    else if (i.dtype == DType::F32)
      in.push_back(random_tensor(i.shape, rng));
    else
      in.emplace_back(i.dtype, i.shape);  // zeros (never read by an accepted kernel)
  }
  return in;
}

std::vector<const void*> pointers(const std::vector<TensorData>& in) {
  std::vector<const void*> p;
  for (const TensorData& t : in) p.push_back(t.raw());
  return p;
}

TensorData reference_output(const PrimGraph& g, const Kernel& k, const std::vector<TensorData>& in) {
  const TensorInfo& out = g.tensor(k.output);
  TensorData want(out.dtype, out.shape);
  make_reference_kernel(g, k)->run(pointers(in), want.raw());
  return want;
}

// ---- the library calls' semantics on the CPU ---------------------------------------------------

double activation(double v, GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::Relu:
    case GemmEpilogue::ReluBias: return std::max(v, 0.0);
    case GemmEpilogue::Gelu:
    case GemmEpilogue::GeluBias: return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    default: return v;
  }
}

// cublasLtMatmul, column-major, strided batched.
void emulate_gemm(const GemmCall& c, const std::vector<const float*>& in, float* d) {
  const float* A = in.at(c.a);
  const float* B = in.at(c.b);
  const float* C = c.c >= 0 ? in.at(c.c) : nullptr;
  const float* bias = c.bias >= 0 ? in.at(c.bias) : nullptr;
  bool has_bias =
      c.epilogue == GemmEpilogue::Bias || c.epilogue == GemmEpilogue::ReluBias || c.epilogue == GemmEpilogue::GeluBias;
  ASSERT_EQ(has_bias, bias != nullptr);
  for (int64_t bt = 0; bt < c.batch; ++bt)
    for (int64_t j = 0; j < c.n; ++j)
      for (int64_t i = 0; i < c.m; ++i) {
        double acc = 0;
        for (int64_t l = 0; l < c.k; ++l) {
          double a = c.trans_a ? A[bt * c.stride_a + l + i * c.lda] : A[bt * c.stride_a + i + l * c.lda];
          double b = c.trans_b ? B[bt * c.stride_b + j + l * c.ldb] : B[bt * c.stride_b + l + j * c.ldb];
          acc += a * b;
        }
        double v = c.alpha * acc;
        if (C) v += c.beta * C[bt * c.stride_c + i + j * c.ldc];
        if (bias) v += bias[i];
        d[bt * c.stride_d + i + j * c.ldc] = static_cast<float>(activation(v, c.epilogue));
      }
}

// cuDNN NCHW cross-correlation (forward, fused bias-activation) and backward data.
void emulate_conv(const ConvCall& c, const std::vector<const float*>& in, float* out) {
  const float* x = in.at(c.x);
  const float* w = in.at(c.w);
  const int64_t* fx = c.backward_data ? c.out : c.in;  // forward input
  const int64_t* fy = c.backward_data ? c.in : c.out;  // forward output
  int64_t N = fx[0], C = fx[1], H = fx[2], W = fx[3], K = fy[1], P = fy[2], Q = fy[3];
  int64_t R = c.filter[2], S = c.filter[3], Cg = c.filter[1], Kg = K / c.groups;
  ASSERT_EQ(c.filter[0], K);
  ASSERT_EQ(Cg * c.groups, C);
  ASSERT_EQ(fy[0], N);
  std::vector<double> acc(static_cast<size_t>(c.backward_data ? N * C * H * W : N * K * P * Q), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      int64_t grp = k / Kg;
      for (int64_t cg = 0; cg < Cg; ++cg) {
        int64_t ch = grp * Cg + cg;
        for (int64_t r = 0; r < R; ++r)
          for (int64_t s = 0; s < S; ++s) {
            double wv = w[((k * Cg + cg) * R + r) * S + s];
            for (int64_t p = 0; p < P; ++p) {
              int64_t h = p * c.stride[0] - c.pad[0] + r * c.dilation[0];
              if (h < 0 || h >= H) continue;
              for (int64_t q = 0; q < Q; ++q) {
                int64_t ww = q * c.stride[1] - c.pad[1] + s * c.dilation[1];
                if (ww < 0 || ww >= W) continue;
                int64_t xi = ((n * C + ch) * H + h) * W + ww, yi = ((n * K + k) * P + p) * Q + q;
                if (c.backward_data)
                  acc[xi] += wv * x[yi];  // x is dy
                else
                  acc[yi] += wv * x[xi];
              }
            }
          }
      }
    }
  const float* z = c.z >= 0 ? in.at(c.z) : nullptr;
  const float* bias = c.bias >= 0 ? in.at(c.bias) : nullptr;
  int64_t plane = c.out[2] * c.out[3], channels = c.out[1];
  for (size_t i = 0; i < acc.size(); ++i) {
    double v = c.alpha * acc[i];
    if (c.fused) {
      if (z) v += z[i];
      if (bias) v += bias[(static_cast<int64_t>(i) / plane) % channels];
      if (c.relu) v = std::max(v, 0.0);
    }
    out[i] = static_cast<float>(v);
  }
}

TensorData emulate(const PrimGraph& g, const Kernel& k, const PlannedCall& call, const std::vector<TensorData>& in) {
  const TensorInfo& o = g.tensor(k.output);
  TensorData got(o.dtype, o.shape);
  std::fill_n(got.data<float>(), got.size(), std::nanf(""));
  std::vector<const float*> ptrs;
  for (const TensorData& t : in) ptrs.push_back(t.dtype() == DType::F32 ? t.data<float>() : nullptr);
  if (call.gemm)
    emulate_gemm(call.g, ptrs, got.data<float>());
  else
    emulate_conv(call.c, ptrs, got.data<float>());
  return got;
}

// Max error relative to (1 + |want|); -1 when shapes differ.
double max_error(const TensorData& got, const TensorData& want) {
  if (got.size() != want.size()) return -1;
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  double worst = 0;
  for (int64_t i = 0; i < got.size(); ++i) {
    double e = std::abs(static_cast<double>(g[i]) - w[i]) / (1 + std::abs(w[i]));
    if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
  }
  return worst;
}

constexpr double kTolerance = 1e-4;

// Plans kernel k and checks the planned call on the CPU; the description, or "" when refused.
std::string check_planned(const PrimGraph& g, const Kernel& k, std::mt19937& rng, std::string* why = nullptr) {
  PlannedCall call;
  std::string reason;
  if (!cuda::linear_detail::plan_linear(g, k, &call, &reason)) {
    EXPECT_FALSE(reason.empty());
    EXPECT_EQ(reason.find('\n'), std::string::npos) << reason;
    if (why) *why = reason;
    return "";
  }
  cuda::LinearCall pub;
  EXPECT_TRUE(cuda::plan_linear_call(g, k, &pub, nullptr));
  EXPECT_EQ(pub.description, call.description);
  EXPECT_GE(cuda::linear_schedule_variants(g, k), 1);
  std::vector<TensorData> in = kernel_inputs(g, k, rng);
  TensorData want = reference_output(g, k, in);
  TensorData got = emulate(g, k, call, in);
  double err = max_error(got, want);
  EXPECT_TRUE(err >= 0 && err <= kTolerance) << call.description << ": error " << err;
  return call.description;
}

// ---- hand-made kernels -------------------------------------------------------------------

class Builder {
 public:
  PrimGraph g;
  std::mt19937 rng{4321};

  TensorId input(const Shape& s) { return g.add_input(name('x'), DType::F32, s); }
  TensorId constant(const Shape& s) {
    return g.add_constant(name('c'), std::make_shared<TensorData>(random_tensor(s, rng)));
  }
  TensorId scalar(double v) {
    return g.add_constant(name('s'), std::make_shared<TensorData>(TensorData::scalar_f32(static_cast<float>(v))));
  }
  std::string name(char prefix) const { return std::string(1, prefix) + std::to_string(g.num_tensors()); }
  TensorId op(PrimOp op, std::vector<TensorId> in, Attrs a = Attrs()) {
    return g.add_primitive(op, std::move(in), std::move(a));
  }
  TensorId conv(TensorId x, TensorId w, Ints strides, Ints pads, Ints dilations, int64_t group = 1) {
    return op(PrimOp::Conv, {x, w},
              Attrs().set("strides", strides).set("pads", pads).set("dilations", dilations).set("group", group));
  }
  TensorId conv_transpose(TensorId x, TensorId w, Ints strides, Ints pads, Ints dilations, int64_t group,
                          Ints out_spatial) {
    return op(PrimOp::ConvTranspose, {x, w}, conv_transpose_attrs(strides, pads, dilations, group, out_spatial));
  }
  TensorId matmul(TensorId a, TensorId b) { return op(PrimOp::MatMul, {a, b}); }
  TensorId transpose(TensorId x, Ints perm) { return op(PrimOp::Transpose, {x}, Attrs().set("perm", perm)); }
  TensorId pad(TensorId x, Ints pads) {
    return op(PrimOp::Pad, {x}, Attrs().set("pads", pads).set("mode", std::string("constant")).set("value", 0.0));
  }
  TensorId add(TensorId a, TensorId b) { return op(PrimOp::Add, {a, b}); }
  TensorId mul(TensorId a, TensorId b) { return op(PrimOp::Mul, {a, b}); }
  TensorId relu(TensorId x) { return op(PrimOp::Relu, {x}); }
  // GELU as fission emits it: 0.5 x * (erf(x / sqrt2) + 1).
  TensorId gelu_erf(TensorId x) {
    TensorId inner = op(PrimOp::Erf, {mul(x, scalar(M_SQRT1_2))});
    return mul(mul(x, scalar(0.5)), add(inner, scalar(1)));
  }
  // The tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  TensorId gelu_tanh(TensorId x) {
    TensorId cube = mul(mul(x, x), x);
    TensorId inner = mul(add(x, mul(cube, scalar(0.044715))), scalar(std::sqrt(2 / M_PI)));
    return mul(mul(x, scalar(0.5)), add(op(PrimOp::Tanh, {inner}), scalar(1)));
  }
  Kernel kernel() const {
    std::vector<PrimId> p(g.num_prims());
    for (PrimId i = 0; i < g.num_prims(); ++i) p[i] = i;
    return make_kernel(g, p);
  }
};

struct HandCase {
  std::string name;
  std::function<void(Builder&)> build;
  std::string expect;  // a substring of the description (accepted) or of the reason (refused)
  bool accepted = true;
};

std::vector<HandCase> hand_cases() {
  std::vector<HandCase> c;
  // MatMul -> cuBLASLt
  c.push_back({"matmul_transposed_operands",
               [](Builder& b) {
                 b.matmul(b.transpose(b.input({6, 4}), {1, 0}), b.transpose(b.constant({5, 6}), {1, 0}));
               },
               "m=4 n=5 k=6 batch=1 transa transb"});
  c.push_back({"matmul_batched_transposed_a",
               [](Builder& b) {
                 b.matmul(b.transpose(b.input({2, 3, 6, 4}), {0, 1, 3, 2}), b.input({2, 3, 6, 5}));
               },
               "m=4 n=5 k=6 batch=6 transa"});
  c.push_back({"matmul_batch_broadcast_weight",
               [](Builder& b) {
                 b.matmul(b.transpose(b.input({3, 6, 4}), {0, 2, 1}), b.constant({6, 5}));
               },
               "batch=3 transa shared-B"});
  c.push_back({"matmul_batch_folded_into_rows",
               [](Builder& b) {
                 b.matmul(b.input({2, 3, 4, 6}), b.constant({6, 5}));
               },
               "m=24 n=5 k=6 batch=1"});
  c.push_back({"matmul_shared_a",
               [](Builder& b) {
                 b.matmul(b.constant({4, 6}), b.input({3, 6, 5}));
               },
               "batch=3 shared-A"});
  c.push_back({"matmul_bias_relu",
               [](Builder& b) {
                 b.relu(b.add(b.matmul(b.input({4, 6}), b.constant({6, 5})), b.constant({5})));
               },
               "epilogue=RELU_BIAS"});
  c.push_back({"matmul_relu_max0",
               [](Builder& b) {
                 b.op(PrimOp::Max, {b.matmul(b.input({4, 6}), b.constant({6, 5})), b.scalar(0)});
               },
               "epilogue=RELU"});
  c.push_back({"matmul_bias_gelu_tanh",
               [](Builder& b) {
                 b.gelu_tanh(b.add(b.constant({1, 5}), b.matmul(b.input({3, 4, 6}), b.constant({6, 5}))));
               },
               "epilogue=GELU_BIAS"});
  c.push_back({"matmul_gelu_tanh",
               [](Builder& b) {
                 b.gelu_tanh(b.matmul(b.input({4, 6}), b.constant({6, 5})));
               },
               "epilogue=GELU"});
  c.push_back({"matmul_alpha_residual",
               [](Builder& b) {
                 TensorId s = b.mul(b.matmul(b.input({2, 4, 6}), b.input({2, 6, 5})), b.scalar(0.125));
                 b.add(b.input({2, 4, 5}), s);
               },
               "alpha=0.125 residual(beta=1) epilogue=DEFAULT"});
  c.push_back({"matmul_div_alpha_batch_broadcast_residual",
               [](Builder& b) {
                 TensorId s = b.op(PrimOp::Div, {b.matmul(b.input({2, 4, 6}), b.input({2, 6, 5})), b.scalar(4)});
                 b.add(s, b.constant({1, 4, 5}));
               },
               "alpha=0.25 residual(beta=1)"});
  c.push_back({"matmul_residual_bias_relu",
               [](Builder& b) {
                 TensorId y = b.add(b.matmul(b.input({4, 6}), b.constant({6, 5})), b.input({4, 5}));
                 b.relu(b.add(y, b.constant({5})));
               },
               "residual(beta=1) epilogue=RELU_BIAS"});
  // Conv -> cuDNN
  c.push_back(
      {"conv_grouped_strided_bias_relu",
       [](Builder& b) {
         TensorId y = b.conv(b.input({2, 4, 7, 7}), b.constant({6, 2, 3, 3}), {2, 2}, {1, 1, 1, 1}, {1, 1}, 2);
         b.relu(b.add(y, b.constant({1, 6, 1, 1})));
       },
       "ConvolutionBiasActivationForward in=2x4x7x7 filter=6x2x3x3 pad=1,1 stride=2,2 dil=1,1 groups=2 bias=yes "
       "act=RELU"});
  c.push_back({"conv_depthwise_dilated",
               [](Builder& b) {
                 b.conv(b.input({1, 4, 9, 9}), b.constant({4, 1, 3, 3}), {1, 1}, {2, 2, 2, 2}, {2, 2}, 4);
               },
               "ConvolutionForward in=1x4x9x9 filter=4x1x3x3 pad=2,2 stride=1,1 dil=2,2 groups=4"});
  c.push_back({"conv_padded",
               [](Builder& b) {
                 TensorId x = b.pad(b.input({1, 3, 6, 6}), {0, 0, 1, 2, 0, 0, 1, 2});
                 b.conv(x, b.constant({5, 3, 3, 3}), {1, 1}, {1, 0, 1, 0}, {1, 1});
               },
               "pad=2,2 stride=1,1 dil=1,1 [pad]"});
  c.push_back({"conv1d_residual_relu",
               [](Builder& b) {
                 TensorId y = b.conv(b.input({2, 4, 10}), b.constant({5, 4, 3}), {1}, {2, 2}, {2});
                 b.relu(b.add(y, b.input({2, 5, 10})));
               },
               "in=2x4x1x10 filter=5x4x1x3 pad=0,2 stride=1,1 dil=1,2 bias=zero act=RELU z(alpha2=1)"});
  c.push_back({"conv_residual_identity",
               [](Builder& b) {
                 TensorId y = b.conv(b.input({1, 3, 5, 5}), b.constant({4, 3, 1, 1}), {1, 1}, {0, 0, 0, 0}, {1, 1});
                 b.add(b.add(y, b.constant({4, 1, 1})), b.input({1, 4, 5, 5}));
               },
               "bias=yes act=IDENTITY z(alpha2=1)"});
  c.push_back({"conv_one_channel_scalar_bias",
               [](Builder& b) {
                 TensorId y = b.conv(b.input({1, 4, 5, 5}), b.constant({1, 4, 1, 1}), {1, 1}, {0, 0, 0, 0}, {1, 1});
                 b.add(y, b.scalar(0.25));
               },
               "filter=1x4x1x1 pad=0,0 stride=1,1 dil=1,1 bias=yes act=IDENTITY"});
  c.push_back(
      {"conv_transpose",
       [](Builder& b) {
         b.conv_transpose(b.input({1, 4, 5, 5}), b.constant({4, 3, 3, 3}), {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, {10, 10});
       },
       "ConvolutionBackwardData in=1x4x5x5 filter=4x3x3x3 pad=1,1 stride=2,2"});
  c.push_back({"conv_transpose_grouped_1d",
               [](Builder& b) {
                 b.conv_transpose(b.input({2, 4, 6}), b.constant({4, 3, 4}), {2}, {1, 1}, {1}, 2, {12});
               },
               "ConvolutionBackwardData in=2x4x1x6 filter=4x3x1x4 pad=0,1 stride=1,2 dil=1,1 groups=2"});
  // Refusals
  c.push_back({"refuse_erf_gelu",
               [](Builder& b) {
                 b.gelu_erf(b.matmul(b.input({4, 6}), b.constant({6, 5})));
               },
               "erf GELU", false});
  c.push_back({"refuse_two_linear",
               [](Builder& b) {
                 b.matmul(b.matmul(b.input({4, 6}), b.constant({6, 5})), b.constant({5, 3}));
               },
               "more than one linear primitive", false});
  c.push_back({"refuse_sigmoid_epilogue",
               [](Builder& b) {
                 b.op(PrimOp::Sigmoid, {b.matmul(b.input({4, 6}), b.constant({6, 5}))});
               },
               "not a cuBLASLt/cuDNN epilogue", false});
  c.push_back({"refuse_add_after_relu",
               [](Builder& b) {
                 b.add(b.relu(b.matmul(b.input({4, 6}), b.constant({6, 5}))), b.constant({5}));
               },
               "Add after the activation", false});
  c.push_back({"refuse_scale_after_bias",
               [](Builder& b) {
                 b.mul(b.add(b.matmul(b.input({4, 6}), b.constant({6, 5})), b.constant({5})), b.scalar(2));
               },
               "scaling by a constant after", false});
  c.push_back({"refuse_conv_gelu",
               [](Builder& b) {
                 b.gelu_tanh(b.conv(b.input({1, 3, 5, 5}), b.constant({4, 3, 1, 1}), {1, 1}, {0, 0, 0, 0}, {1, 1}));
               },
               "GELU after Conv", false});
  c.push_back({"refuse_conv_transpose_bias",
               [](Builder& b) {
                 TensorId y = b.conv_transpose(b.input({1, 4, 5, 5}), b.constant({4, 3, 3, 3}), {2, 2}, {1, 1, 1, 1},
                                               {1, 1}, 1, {10, 10});
                 b.add(y, b.constant({3, 1, 1}));
               },
               "ConvTranspose with an epilogue", false});
  c.push_back({"refuse_asymmetric_pad",
               [](Builder& b) {
                 b.conv(b.input({1, 3, 6, 6}), b.constant({4, 3, 3, 3}), {1, 1}, {0, 0, 1, 1}, {1, 1});
               },
               "symmetric padding", false});
  c.push_back(
      {"refuse_conv3d",
       [](Builder& b) {
         b.conv(b.input({1, 2, 4, 4, 4}), b.constant({3, 2, 1, 1, 1}), {1, 1, 1}, {0, 0, 0, 0, 0, 0}, {1, 1, 1});
       },
       "3 spatial dims", false});
  c.push_back({"refuse_row_broadcast_add",
               [](Builder& b) {
                 b.add(b.matmul(b.input({4, 6}), b.constant({6, 5})), b.constant({4, 1}));
               },
               "neither a per-channel bias nor a residual", false});
  c.push_back({"refuse_general_transpose",
               [](Builder& b) {
                 b.matmul(b.transpose(b.input({4, 2, 6}), {1, 0, 2}), b.constant({6, 5}));
               },
               "permutes more than its last two axes", false});
  return c;
}

TEST(CudaLinearPlan, HandMadeKernels) {
  for (const HandCase& hc : hand_cases()) {
    SCOPED_TRACE(hc.name);
    Builder b;
    hc.build(b);
    Kernel k = b.kernel();
    std::string why;
    std::string desc = check_planned(b.g, k, b.rng, &why);
    std::cout << "  " << hc.name << ": " << (desc.empty() ? "refused: " + why : desc) << "\n";
    if (hc.accepted) {
      EXPECT_NE(desc.find(hc.expect), std::string::npos) << "planned: " << (desc.empty() ? why : desc);
    } else {
      EXPECT_TRUE(desc.empty()) << "unexpectedly planned: " << desc;
      EXPECT_NE(why.find(hc.expect), std::string::npos) << why;
    }
  }
}

// ---- the linear kernels of real models ---------------------------------------------------

struct ModelCase {
  std::string name, dir;
};

std::vector<ModelCase> model_cases() {
  std::vector<ModelCase> m;
  std::string src = KORCH_SOURCE_DIR;
  for (const char* p : {"candy", "segformer_b0", "efficientvit_b1", "yolox_nano", "yolov4", "bert_base", "resnet50"})
    m.push_back({std::string("paper_") + p + "_tiny", src + "/models/paper/cases/" + p + "_tiny"});
  m.push_back({"tiny_cnn", src + "/examples/tiny_cnn"});
  return m;
}

// The test models exported at test time (tests/CMakeLists.txt), where they exist.
std::vector<ModelCase> exported_model_cases() {
  std::vector<ModelCase> m;
  for (const char* name : {"tiny_vit", "transformer_encoder", "resnet18", "mobilenet_v3_small"}) {
    std::string dir = std::string(KORCH_CASES_DIR) + "/models/" + name;
    if (std::filesystem::exists(dir + "/model.onnx"))
      m.push_back({name, dir});
    else
      std::cout << "  " << name << ": not exported in this build (" << dir << "), skipped\n";
  }
  return m;
}

ImportedModel import_case(const ModelCase& mc) {
  std::vector<DataSet> sets = load_data_sets(mc.dir);
  std::ostringstream log;
  return import_binding_inputs(mc.dir + "/model.onnx", ImportOptions{}, sets.at(0), log);
}

struct Counts {
  int linear = 0, accepted = 0, cublaslt = 0, cudnn = 0;
  std::map<std::string, int> refused;  // reason -> kernels
};

// Plans (and checks on the CPU) the linear kernels of a plan kind's kernels.
Counts check_model_kernels(const PrimGraph& g, const std::vector<Kernel>& kernels, std::mt19937& rng) {
  Counts c;
  for (const Kernel& k : kernels) {
    if (k.num_linear == 0) continue;
    ++c.linear;
    std::string why;
    std::string desc = check_planned(g, k, rng, &why);
    if (desc.empty()) {
      ++c.refused[why];
      continue;
    }
    ++c.accepted;
    ++(desc.rfind("cublasLt", 0) == 0 ? c.cublaslt : c.cudnn);
  }
  return c;
}

void print(const std::string& what, const Counts& c) {
  std::cout << "  " << what << ": " << c.linear << " linear kernels, " << c.accepted << " planned (" << c.cublaslt
            << " cuBLASLt, " << c.cudnn << " cuDNN), " << (c.linear - c.accepted) << " refused\n";
  for (const auto& [why, n] : c.refused) std::cout << "      " << n << " x " << why << "\n";
}

// The counts of the models kept in the repository, pinned: a change means the planner (or
// fission / rewrites / the baseline groupings) changed what the GPU gets; update them on purpose.
struct Pinned {
  int linear, accepted, cublaslt, cudnn;
};

TEST(CudaLinearPlan, LinearKernelsOfTinyModels) {
  std::mt19937 rng(99);
  const std::map<std::string, Pinned> pinned = {{"per-op", {322, 322, 61, 261}}, {"greedy", {322, 311, 58, 253}}};
  for (bool exported : {false, true}) {
    std::map<std::string, Counts> totals;
    for (const ModelCase& mc : exported ? exported_model_cases() : model_cases()) {
      SCOPED_TRACE(mc.name);
      ImportedModel m = import_case(mc);
      const PrimGraph& g = m.graph;
      for (const char* plan : {"per-op", "greedy"}) {
        PrimGroups groups = std::string(plan) == "per-op" ? per_op_groups(g) : greedy_groups(g);
        Counts c = check_model_kernels(g, kernels_from_groups(g, groups), rng);
        print(mc.name + " " + plan, c);
        Counts& t = totals[plan];
        t.linear += c.linear;
        t.accepted += c.accepted;
        t.cublaslt += c.cublaslt;
        t.cudnn += c.cudnn;
        for (const auto& [why, n] : c.refused) t.refused[why] += n;
      }
    }
    for (const auto& [plan, t] : totals) {
      print(std::string(exported ? "exported test models " : "models in the repository ") + plan, t);
      if (exported) continue;
      const Pinned& p = pinned.at(plan);
      EXPECT_EQ(t.linear, p.linear) << plan;
      EXPECT_EQ(t.accepted, p.accepted) << plan;
      EXPECT_EQ(t.cublaslt, p.cublaslt) << plan;
      EXPECT_EQ(t.cudnn, p.cudnn) << plan;
    }
  }
}

// ---- on the device -----------------------------------------------------------------------

bool gpu_available() {
  std::string why;
  if (cuda::CudaContext::available(&why)) return true;
  std::cout << "  no usable CUDA device: " << why << "\n";
  return false;
}

// Compiles every planned kernel of `kernels` with the cuda backend (every schedule variant the
// heuristics return; variant 0 must compile), runs it on the device and replays it from a CUDA
// graph, and compares both with the reference. Returns the kernels run.
int run_on_device(Backend& backend, const PrimGraph& g, const std::vector<Kernel>& kernels, std::mt19937& rng) {
  int ran = 0;
  for (Kernel k : kernels) {
    if (k.num_linear != 1) continue;
    cuda::LinearCall call;
    if (!cuda::plan_linear_call(g, k, &call, nullptr)) continue;
    std::vector<TensorData> in = kernel_inputs(g, k, rng);
    TensorData want = reference_output(g, k, in);
    std::vector<std::unique_ptr<BackendBuffer>> bufs;
    std::vector<const void*> ptrs;
    for (const TensorData& t : in) {
      bufs.push_back(backend.allocate(static_cast<int64_t>(t.byte_size())));
      backend.upload(bufs.back()->data(), t.raw(), static_cast<int64_t>(t.byte_size()));
      ptrs.push_back(bufs.back()->data());
    }
    auto out = backend.allocate(static_cast<int64_t>(want.byte_size()));
    int variants = backend.schedule_variants(g, k);
    for (int v = 0; v < variants; ++v) {
      k.schedule = v;
      std::string why;
      std::unique_ptr<CompiledKernel> compiled = backend.compile(g, k, &why);
      if (!compiled) {
        EXPECT_NE(v, 0) << call.description << ": " << why;
        continue;
      }
      TensorData got(want.dtype(), want.shape());
      compiled->run(ptrs, out->data());
      backend.synchronize();
      backend.download(got.raw(), out->data(), static_cast<int64_t>(got.byte_size()));
      double err = max_error(got, want);
      EXPECT_TRUE(err >= 0 && err <= kTolerance) << compiled->describe() << ": error " << err;
      // The same launch recorded as a CUDA graph and replayed.
      std::vector<float> nan(static_cast<size_t>(got.size()), std::nanf(""));
      backend.upload(out->data(), nan.data(), static_cast<int64_t>(got.byte_size()));
      std::unique_ptr<RecordedLaunches> rec = backend.record([&] { compiled->run(ptrs, out->data()); }, &why);
      EXPECT_TRUE(rec) << compiled->describe() << ": not recorded: " << why;
      if (rec) {
        rec->replay();
        backend.synchronize();
        backend.download(got.raw(), out->data(), static_cast<int64_t>(got.byte_size()));
        err = max_error(got, want);
        EXPECT_TRUE(err >= 0 && err <= kTolerance) << compiled->describe() << " (CUDA graph): error " << err;
      }
      ++ran;
    }
  }
  return ran;
}

TEST(CudaLinearKernels, HandMadeKernelsOnTheDevice) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device (CudaContext::available() is false)";
  std::unique_ptr<Backend> backend = make_backend("cuda");
  int ran = 0;
  for (const HandCase& hc : hand_cases()) {
    if (!hc.accepted) continue;
    SCOPED_TRACE(hc.name);
    Builder b;
    hc.build(b);
    ran += run_on_device(*backend, b.g, {b.kernel()}, b.rng);
  }
  EXPECT_GT(ran, 0);
}

TEST(CudaLinearKernels, LinearKernelsOfTinyModelsOnTheDevice) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device (CudaContext::available() is false)";
  std::unique_ptr<Backend> backend = make_backend("cuda");
  std::mt19937 rng(7);
  std::vector<ModelCase> cases = model_cases();
  for (const ModelCase& mc : exported_model_cases()) cases.push_back(mc);
  for (const ModelCase& mc : cases) {
    SCOPED_TRACE(mc.name);
    ImportedModel m = import_case(mc);
    for (const PrimGroups& groups : {per_op_groups(m.graph), greedy_groups(m.graph)}) {
      int ran = run_on_device(*backend, m.graph, kernels_from_groups(m.graph, groups), rng);
      std::cout << "  " << mc.name << ": " << ran << " kernel variants run on the device\n";
    }
  }
}

}  // namespace
}  // namespace korch
