// Linear kernels on the GPU: the call plan_linear() describes (linear_internal.h), built as
// cuBLASLt / cuDNN descriptors and run on the context's stream with the context's workspace.
//
// Guarantees:
//  - The algorithm is the library heuristic's result number k.schedule (cuBLASLt:
//    cublasLtMatmulAlgoGetHeuristic; cuDNN: cudnnGet*Algorithm_v7, results that report success
//    and, without TF32, use no tensor-op math). A schedule past the heuristic's results is
//    refused (nullptr with the reason), never replaced by another.
//  - compile() validates the algorithm without running it (cublasLtMatmulAlgoCheck; cuDNN's
//    workspace query for that algorithm fails for unsupported configurations) and sizes the
//    context's workspace; it makes no trial run: the profiler's first, verified run is that.
//  - run() takes device pointers, throws korch::Error when one is not 16-byte aligned, issues
//    exactly one library call on ctx.stream() and never synchronises the host, so a plan's
//    launches can be recorded as a CUDA graph (which then holds the workspace pointer: the
//    workspace only grows while compiling).
//  - Math: fp32 (CUBLAS_COMPUTE_32F, CUDNN_FMA_MATH); TF32 only when ctx.tf32()
//    (CUBLAS_COMPUTE_32F_FAST_TF32, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION).
//  - cuDNN's fused call with alpha2 = 0 does not read z (cuDNN's blending convention: a zero
//    scale means the operand is not read), so z is y there; a missing bias is a zero vector
//    allocated at compile time.
#include "backend/cuda/linear_kernels.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/linear_internal.h"
#include "util/error.h"

namespace korch::cuda {

using linear_detail::ConvCall;
using linear_detail::GemmCall;
using linear_detail::GemmEpilogue;
using linear_detail::PlannedCall;

namespace {

constexpr int64_t kGemmWorkspaceBytes = 32 << 20;

void check_aligned(const void* p, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
    fail("linear kernel on the GPU: ", what, " pointer ", p, " is not 16-byte aligned");
}

// ---------------------------------------------------------------------------------------------
// cuBLASLt

cublasLtEpilogue_t to_cublaslt(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::Default: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::Relu: return CUBLASLT_EPILOGUE_RELU;
    case GemmEpilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::ReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case GemmEpilogue::Gelu: return CUBLASLT_EPILOGUE_GELU;
    case GemmEpilogue::GeluBias: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

class GemmKernel final : public CompiledKernel {
 public:
  GemmKernel(CudaContext& ctx, const PlannedCall& call) : ctx_(ctx), c_(call.g), description_(call.description) {}
  ~GemmKernel() override {
    if (pref_) cublasLtMatmulPreferenceDestroy(pref_);
    for (cublasLtMatrixLayout_t l : {a_, b_, c_layout_, d_})
      if (l) cublasLtMatrixLayoutDestroy(l);
    if (desc_) cublasLtMatmulDescDestroy(desc_);
  }

  // Builds the descriptors and picks heuristic result `variant`; false with the reason.
  bool build(int variant, std::string* why) {
    cublasComputeType_t compute = ctx_.tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    check_cublas(cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
    cublasOperation_t ta = c_.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = c_.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    set_desc(CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    set_desc(CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    cublasLtEpilogue_t epilogue = to_cublaslt(c_.epilogue);
    set_desc(CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
    // Stored shapes (column-major rows x cols): op(A) is m x k, op(B) is k x n.
    a_ = layout(c_.trans_a ? c_.k : c_.m, c_.trans_a ? c_.m : c_.k, c_.lda);
    b_ = layout(c_.trans_b ? c_.n : c_.k, c_.trans_b ? c_.k : c_.n, c_.ldb);
    c_layout_ = layout(c_.m, c_.n, c_.ldc);
    d_ = layout(c_.m, c_.n, c_.ldc);
    if (c_.batch > 1) set_batch();
    check_cublas(cublasLtMatmulPreferenceCreate(&pref_), "cublasLtMatmulPreferenceCreate");
    uint64_t max_ws = kGemmWorkspaceBytes;
    check_cublas(
        cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws),
        "cublasLtMatmulPreferenceSetAttribute");
    // Operands are only known to be 16-byte aligned (run() checks it), not 256 as the
    // heuristics assume by default: ask for algorithms that work at 16.
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
      uint32_t align = 16;
      check_cublas(cublasLtMatmulPreferenceSetAttribute(pref_, attr, &align, sizeof align),
                   "cublasLtMatmulPreferenceSetAttribute (alignment)");
    }
    std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(variant) + 1);
    int returned = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx_.cublaslt(), desc_, a_, b_, c_layout_, d_, pref_,
                                                       static_cast<int>(results.size()), results.data(), &returned);
    if (st != CUBLAS_STATUS_SUCCESS || returned <= variant) {
      *why = str_cat("cuBLASLt heuristics returned ", returned, " algorithm(s) for ", description_, " (variant ",
                     variant, " asked)");
      return false;
    }
    algo_ = results[variant].algo;
    cublasLtMatmulHeuristicResult_t checked{};
    st = cublasLtMatmulAlgoCheck(ctx_.cublaslt(), desc_, a_, b_, c_layout_, d_, &algo_, &checked);
    if (st != CUBLAS_STATUS_SUCCESS) {
      *why = str_cat("cuBLASLt rejects heuristic algorithm ", variant, " for ", description_);
      return false;
    }
    workspace_bytes_ = static_cast<int64_t>(std::max(results[variant].workspaceSize, checked.workspaceSize));
    if (workspace_bytes_ > 0) ctx_.workspace(workspace_bytes_);
    description_ += str_cat(" algo#", variant, ctx_.tf32() ? " tf32" : "");
    return true;
  }

  void run(const std::vector<const void*>& inputs, void* output) override {
    const void* a = inputs.at(c_.a);
    const void* b = inputs.at(c_.b);
    const void* c = c_.c >= 0 ? inputs.at(c_.c) : output;
    check_aligned(a, "A");
    check_aligned(b, "B");
    check_aligned(c, "C");
    check_aligned(output, "D");
    if (c_.bias >= 0) {
      const void* bias = inputs.at(c_.bias);
      check_aligned(bias, "bias");
      set_desc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    }
    void* ws = workspace_bytes_ > 0 ? ctx_.workspace(workspace_bytes_) : nullptr;
    float alpha = c_.alpha, beta = c_.beta;
    check_cublas(cublasLtMatmul(ctx_.cublaslt(), desc_, &alpha, a, a_, b, b_, &beta, c, c_layout_, output, d_, &algo_,
                                ws, static_cast<size_t>(workspace_bytes_), ctx_.stream()),
                 "cublasLtMatmul");
  }
  std::string describe() const override { return description_; }

 private:
  void set_desc(cublasLtMatmulDescAttributes_t attr, const void* value, size_t bytes) {
    check_cublas(cublasLtMatmulDescSetAttribute(desc_, attr, value, bytes), "cublasLtMatmulDescSetAttribute");
  }
  static cublasLtMatrixLayout_t layout(int64_t rows, int64_t cols, int64_t ld) {
    cublasLtMatrixLayout_t l = nullptr;
    check_cublas(
        cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
        "cublasLtMatrixLayoutCreate");
    return l;
  }
  void set_batch() {
    for (auto [l, stride] : {std::pair{a_, c_.stride_a}, std::pair{b_, c_.stride_b},
                             std::pair{c_layout_, c_.c >= 0 ? c_.stride_c : c_.stride_d}, std::pair{d_, c_.stride_d}}) {
      int32_t count = static_cast<int32_t>(c_.batch);
      check_cublas(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                   "cublasLtMatrixLayoutSetAttribute (batch count)");
      check_cublas(
          cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
          "cublasLtMatrixLayoutSetAttribute (batch stride)");
    }
  }

  CudaContext& ctx_;
  GemmCall c_;
  std::string description_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_layout_ = nullptr, d_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  int64_t workspace_bytes_ = 0;
};

// ---------------------------------------------------------------------------------------------
// cuDNN

class ConvKernel final : public CompiledKernel {
 public:
  ConvKernel(CudaContext& ctx, const PlannedCall& call) : ctx_(ctx), c_(call.c), description_(call.description) {}
  ~ConvKernel() override {
    for (cudnnTensorDescriptor_t t : {in_, out_, bias_})
      if (t) cudnnDestroyTensorDescriptor(t);
    if (filter_) cudnnDestroyFilterDescriptor(filter_);
    if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
    if (act_) cudnnDestroyActivationDescriptor(act_);
  }

  bool build(int variant, std::string* why) {
    in_ = tensor(c_.in);
    out_ = tensor(c_.out);
    check_cudnn(cudnnCreateFilterDescriptor(&filter_), "cudnnCreateFilterDescriptor");
    check_cudnn(cudnnSetFilter4dDescriptor(filter_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, i32(c_.filter[0]),
                                           i32(c_.filter[1]), i32(c_.filter[2]), i32(c_.filter[3])),
                "cudnnSetFilter4dDescriptor");
    check_cudnn(cudnnCreateConvolutionDescriptor(&conv_), "cudnnCreateConvolutionDescriptor");
    check_cudnn(cudnnSetConvolution2dDescriptor(conv_, i32(c_.pad[0]), i32(c_.pad[1]), i32(c_.stride[0]),
                                                i32(c_.stride[1]), i32(c_.dilation[0]), i32(c_.dilation[1]),
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                "cudnnSetConvolution2dDescriptor");
    check_cudnn(cudnnSetConvolutionGroupCount(conv_, i32(c_.groups)), "cudnnSetConvolutionGroupCount");
    cudnnMathType_t math = ctx_.tf32() ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION : CUDNN_FMA_MATH;
    check_cudnn(cudnnSetConvolutionMathType(conv_, math), "cudnnSetConvolutionMathType");
    // The forward geometry (x -> y, or dx -> dy for backward data) must be the planned one.
    const int64_t* fy = c_.backward_data ? c_.in : c_.out;
    int n = 0, k = 0, h = 0, w = 0;
    check_cudnn(cudnnGetConvolution2dForwardOutputDim(conv_, c_.backward_data ? out_ : in_, filter_, &n, &k, &h, &w),
                "cudnnGetConvolution2dForwardOutputDim");
    if (n != fy[0] || k != fy[1] || h != fy[2] || w != fy[3]) {
      *why = str_cat("cuDNN computes a ", n, "x", k, "x", h, "x", w, " output for ", description_);
      return false;
    }
    size_t ws = 0;
    if (c_.backward_data) {
      if (!pick_backward_data(variant, &ws, why)) return false;
    } else {
      if (!pick_forward(variant, &ws, why)) return false;
    }
    workspace_bytes_ = static_cast<int64_t>(ws);
    if (workspace_bytes_ > 0) ctx_.workspace(workspace_bytes_);
    if (c_.fused) {
      bias_ = tensor(std::vector<int64_t>{1, c_.out[1], 1, 1}.data());
      check_cudnn(cudnnCreateActivationDescriptor(&act_), "cudnnCreateActivationDescriptor");
      check_cudnn(cudnnSetActivationDescriptor(act_, c_.relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                               CUDNN_NOT_PROPAGATE_NAN, 0.0),
                  "cudnnSetActivationDescriptor");
      if (c_.bias < 0) {  // the fused call needs a bias: zeros
        auto bytes = static_cast<int64_t>(c_.out[1] * sizeof(float));
        zero_bias_ = ctx_.allocate(bytes);
        std::vector<float> zeros(static_cast<size_t>(c_.out[1]), 0.f);
        ctx_.upload(zero_bias_.get(), zeros.data(), bytes);
      }
    }
    description_ += str_cat(" algo=", algo_, ctx_.tf32() ? " tf32" : "");
    return true;
  }

  void run(const std::vector<const void*>& inputs, void* output) override {
    const void* x = inputs.at(c_.x);
    const void* w = inputs.at(c_.w);
    check_aligned(x, c_.backward_data ? "dy" : "x");
    check_aligned(w, "w");
    check_aligned(output, c_.backward_data ? "dx" : "y");
    void* ws = workspace_bytes_ > 0 ? ctx_.workspace(workspace_bytes_) : nullptr;
    auto ws_bytes = static_cast<size_t>(workspace_bytes_);
    float alpha = c_.alpha, zero = 0;
    if (c_.backward_data) {
      check_cudnn(cudnnConvolutionBackwardData(ctx_.cudnn(), &alpha, filter_, w, in_, x, conv_,
                                               static_cast<cudnnConvolutionBwdDataAlgo_t>(algo_), ws, ws_bytes, &zero,
                                               out_, output),
                  "cudnnConvolutionBackwardData");
    } else if (!c_.fused) {
      check_cudnn(
          cudnnConvolutionForward(ctx_.cudnn(), &alpha, in_, x, filter_, w, conv_,
                                  static_cast<cudnnConvolutionFwdAlgo_t>(algo_), ws, ws_bytes, &zero, out_, output),
          "cudnnConvolutionForward");
    } else {
      const void* bias = c_.bias >= 0 ? inputs.at(c_.bias) : zero_bias_.get();
      const void* z = c_.z >= 0 ? inputs.at(c_.z) : output;
      check_aligned(bias, "bias");
      check_aligned(z, "z");
      float alpha2 = c_.z >= 0 ? 1.f : 0.f;
      check_cudnn(cudnnConvolutionBiasActivationForward(ctx_.cudnn(), &alpha, in_, x, filter_, w, conv_,
                                                        static_cast<cudnnConvolutionFwdAlgo_t>(algo_), ws, ws_bytes,
                                                        &alpha2, out_, z, bias_, bias, act_, out_, output),
                  "cudnnConvolutionBiasActivationForward");
    }
  }
  std::string describe() const override { return description_; }

 private:
  static int i32(int64_t v) {
    if (v > INT32_MAX || v < INT32_MIN) fail("cuDNN dimension ", v, " exceeds 32 bits");
    return static_cast<int>(v);
  }
  static cudnnTensorDescriptor_t tensor(const int64_t* d) {
    cudnnTensorDescriptor_t t = nullptr;
    check_cudnn(cudnnCreateTensorDescriptor(&t), "cudnnCreateTensorDescriptor");
    check_cudnn(
        cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i32(d[0]), i32(d[1]), i32(d[2]), i32(d[3])),
        "cudnnSetTensor4dDescriptor");
    return t;
  }
  // Whether a heuristic result may be used: it succeeded and, without TF32, it is fp32 math.
  bool usable(cudnnStatus_t status, cudnnMathType_t math) const {
    return status == CUDNN_STATUS_SUCCESS && (ctx_.tf32() || math == CUDNN_FMA_MATH || math == CUDNN_DEFAULT_MATH);
  }
  // Heuristic result number `variant` among the usable ones into algo_; false (with the count of
  // usable results in *found) when there are not that many.
  template <typename Perf>
  bool pick_usable(const std::vector<Perf>& perf, int returned, int variant, int* found) {
    for (int i = 0; i < returned; ++i) {
      if (!usable(perf[i].status, perf[i].mathType)) continue;
      if ((*found)++ == variant) {
        algo_ = perf[i].algo;
        return true;
      }
    }
    return false;
  }

  bool pick_forward(int variant, size_t* ws, std::string* why) {
    int found = 0;
    if (c_.fused && !c_.relu) {  // identity activation: only IMPLICIT_PRECOMP_GEMM
      if (variant > 0) {
        *why = "cudnnConvolutionBiasActivationForward with identity activation has one algorithm";
        return false;
      }
      algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    } else {
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
      int returned = 0;
      check_cudnn(cudnnGetConvolutionForwardAlgorithm_v7(ctx_.cudnn(), in_, filter_, conv_, out_,
                                                         static_cast<int>(perf.size()), &returned, perf.data()),
                  "cudnnGetConvolutionForwardAlgorithm_v7");
      if (!pick_usable(perf, returned, variant, &found)) {
        *why = str_cat("cuDNN heuristics returned ", found, " usable forward algorithm(s) for ", description_,
                       " (variant ", variant, " asked)");
        return false;
      }
    }
    cudnnStatus_t st = cudnnGetConvolutionForwardWorkspaceSize(ctx_.cudnn(), in_, filter_, conv_, out_,
                                                               static_cast<cudnnConvolutionFwdAlgo_t>(algo_), ws);
    if (st != CUDNN_STATUS_SUCCESS) {
      *why =
          str_cat("cuDNN forward algorithm ", algo_, " does not support ", description_, ": ", cudnnGetErrorString(st));
      return false;
    }
    return true;
  }

  bool pick_backward_data(int variant, size_t* ws, std::string* why) {
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
    int returned = 0;
    check_cudnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx_.cudnn(), filter_, in_, conv_, out_,
                                                            static_cast<int>(perf.size()), &returned, perf.data()),
                "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    int found = 0;
    if (!pick_usable(perf, returned, variant, &found)) {
      *why = str_cat("cuDNN heuristics returned ", found, " usable backward-data algorithm(s) for ", description_,
                     " (variant ", variant, " asked)");
      return false;
    }
    cudnnStatus_t st = cudnnGetConvolutionBackwardDataWorkspaceSize(
        ctx_.cudnn(), filter_, in_, conv_, out_, static_cast<cudnnConvolutionBwdDataAlgo_t>(algo_), ws);
    if (st != CUDNN_STATUS_SUCCESS) {
      *why = str_cat("cuDNN backward-data algorithm ", algo_, " does not support ", description_, ": ",
                     cudnnGetErrorString(st));
      return false;
    }
    return true;
  }

  CudaContext& ctx_;
  ConvCall c_;
  std::string description_;
  cudnnTensorDescriptor_t in_ = nullptr, out_ = nullptr, bias_ = nullptr;
  cudnnFilterDescriptor_t filter_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnActivationDescriptor_t act_ = nullptr;
  int algo_ = 0;
  int64_t workspace_bytes_ = 0;
  std::shared_ptr<void> zero_bias_;
};

}  // namespace

bool plan_linear_call(const PrimGraph& g, const Kernel& k, LinearCall* call, std::string* why_not) {
  PlannedCall planned;
  if (!linear_detail::plan_linear(g, k, &planned, why_not)) return false;
  if (call) {
    call->library = planned.gemm ? "cublasLt" : "cudnn";
    call->description = planned.description;
  }
  return true;
}

int linear_schedule_variants(const PrimGraph& g, const Kernel& k) {
  PlannedCall planned;
  std::string why;
  if (!linear_detail::plan_linear(g, k, &planned, &why)) return 1;
  return linear_detail::planned_variants(planned);
}

std::unique_ptr<CompiledKernel> compile_linear_kernel(CudaContext& ctx, const PrimGraph& g, const Kernel& k,
                                                      std::string* why_not) {
  PlannedCall planned;
  if (!linear_detail::plan_linear(g, k, &planned, why_not)) return nullptr;
  std::string why;
  if (planned.gemm) {
    auto kernel = std::make_unique<GemmKernel>(ctx, planned);
    if (kernel->build(k.schedule, &why)) return kernel;
  } else {
    auto kernel = std::make_unique<ConvKernel>(ctx, planned);
    if (kernel->build(k.schedule, &why)) return kernel;
  }
  if (why_not) *why_not = why;
  return nullptr;
}

}  // namespace korch::cuda
