// Private to the CUDA backend's linear kernels (linear_*.cc): the library call a linear kernel
// becomes, as plain data. linear_epilogue.cc finds the epilogue (alpha, bias, residual,
// activation), linear_plan.cc the operands and geometry of the call; neither calls CUDA, so
// the plan of every kernel is computed (and evaluated on the CPU, in tests) without a GPU.
// linear_kernels.cc turns a planned call into cuBLASLt / cuDNN descriptors and runs it.
//
// Guarantees: a planned call computes exactly the kernel's output from Kernel::inputs (dense
// row-major f32 buffers, indexed by their position in Kernel::inputs) under the documented
// semantics of the one library call it names; nothing else is needed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/prim_graph.h"
#include "plan/kernel.h"

namespace korch::cuda::linear_detail {

enum class Activation { None, Relu, GeluTanh };
const char* activation_name(Activation a);

// The epilogue of a linear primitive in the order the libraries apply it:
//   out = act(alpha * linear + residual + bias)
struct Epilogue {
  float alpha = 1;            // a scalar Mul/Div folded right after the linear primitive
  TensorId bias = kNone;      // per-channel vector (numel == channels)
  TensorId residual = kNone;  // an added tensor of the output's shape (or batch-broadcast)
  Activation act = Activation::None;
  std::vector<PrimId> prims;  // the epilogue's primitives
};

// Finds the epilogue hanging off `linear` inside kernel k (channel_axis: the axis a bias runs
// along). False with the reason when the chain is not of the form above.
bool analyse_epilogue(const PrimGraph& g, const Kernel& k, PrimId linear, size_t channel_axis, Epilogue* ep,
                      std::string* why_not);

// cuBLASLt's column-major view of the call (row-major D = A B is computed as D^T = B^T A^T):
//   D[b](i, j) = act(alpha * sum_l op(A[b])(i, l) * op(B[b])(l, j) + beta * C[b](i, j) + bias[i])
// with X[b](i, j) = X[b * stride + i + j * ld] (stride 0: the same matrix for every batch),
// op(X) = X or X^T (trans), i < m, j < n, l < k. Operands are kernel input indices (-1: none;
// no C means beta = 0 and C is D).
enum class GemmEpilogue { Default, Relu, Bias, ReluBias, Gelu, GeluBias };
const char* gemm_epilogue_name(GemmEpilogue e);

struct GemmCall {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;  // D has ldc too
  int64_t stride_a = 0, stride_b = 0, stride_c = 0, stride_d = 0;
  float alpha = 1, beta = 0;
  GemmEpilogue epilogue = GemmEpilogue::Default;
  int a = -1, b = -1, c = -1, bias = -1;
};

// cuDNN's NCHW view of the call (1-D convolutions with H = 1). Forward (Conv):
//   y = act(alpha * conv(x, w) + z + bias)        (fused: cudnnConvolutionBiasActivationForward)
//   y = alpha * conv(x, w)                         (cudnnConvolutionForward)
// cross-correlation, y[n][k][p][q] = sum_{c in group, r, s} w[k][c'][r][s] *
//   x[n][c][p * stride0 - pad0 + r * dil0][q * stride1 - pad1 + s * dil1] (zero outside).
// Backward data (ConvTranspose): `in` is dy, `out` is dx of the forward convolution from dx to
// dy with these parameters (cudnnConvolutionBackwardData), alpha = 1, no epilogue.
struct ConvCall {
  bool backward_data = false;
  int64_t in[4] = {0, 0, 0, 0}, filter[4] = {0, 0, 0, 0}, out[4] = {0, 0, 0, 0};
  int64_t pad[2] = {0, 0}, stride[2] = {1, 1}, dilation[2] = {1, 1}, groups = 1;
  bool fused = false;  // bias + activation (+ residual) call
  bool relu = false;
  float alpha = 1;
  int x = -1, w = -1, bias = -1, z = -1;  // kernel input indices; bias -1 when fused: zeros
};

struct PlannedCall {
  bool gemm = false;  // else conv
  GemmCall g;
  ConvCall c;
  std::vector<std::string> folded;  // prologue ops folded into the call ("transposed A", "pad")
  std::string description;
};

// The call for kernel k, or false with a one-line reason.
bool plan_linear(const PrimGraph& g, const Kernel& k, PlannedCall* call, std::string* why_not);

// Schedule variants (library heuristic results tried) of a planned call.
int planned_variants(const PlannedCall& call);

}  // namespace korch::cuda::linear_detail
