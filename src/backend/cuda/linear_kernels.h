// Linear kernels on the GPU: a kernel with one Linear primitive (MatMul, Conv, ConvTranspose)
// and the prologue/epilogue the libraries fuse becomes one cuBLASLt matmul (bias, ReLU, GELU
// epilogues; batched/strided; transposes as operand flags) or one cuDNN 9 convolution (bias +
// activation, + residual add). fp32 math; TF32 only when CudaContext::tf32() is on.
//
// Guarantees: plan_linear_call() needs no GPU (it only reads the graph), so the descriptor
// choices of every linear kernel are computed and checked in CI; compile_linear_kernel() builds
// exactly the call plan_linear_call() describes, picks its algorithm (library heuristics, the
// schedule variant indexing them) and runs it on device memory on the context's stream, with
// no host synchronisation in run() (so that a plan's launches can be recorded as a CUDA graph).
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"
#include "ir/prim_graph.h"
#include "plan/kernel.h"

namespace korch::cuda {

class CudaContext;

// The library call a linear kernel becomes, in words and numbers (for tests and logs).
struct LinearCall {
  std::string library;      // "cublasLt" or "cudnn"
  std::string description;  // e.g. "cublasLt: m=197 n=2304 k=768 batch=1 transb epilogue=BIAS"
};

// The call for kernel k, or false with the reason (*why_not) when no single library call computes it.
bool plan_linear_call(const PrimGraph& g, const Kernel& k, LinearCall* call, std::string* why_not);

// Schedule variants compile_linear_kernel can build for k (k.schedule in [0, n)); at least 1
// when plan_linear_call succeeds.
int linear_schedule_variants(const PrimGraph& g, const Kernel& k);

// The compiled kernel, or nullptr with the reason.
std::unique_ptr<CompiledKernel> compile_linear_kernel(CudaContext& ctx, const PrimGraph& g, const Kernel& k,
                                                      std::string* why_not);

}  // namespace korch::cuda
