// Private to the oneDNN backend (the onednn_*.cc files): how a linear kernel becomes one oneDNN
// primitive. onednn_analysis.cc finds the kernel's linear primitive, the prologues folded into
// its operands and the epilogue folded into post-ops (onednn_post_ops.cc); onednn_builder.cc
// creates the oneDNN primitive for that pattern, with the memory descriptors and layouts of
// onednn_layout.cc; onednn_kernel.cc runs it as a CompiledKernel. None of these use Halide: the
// exported package's runtime compiles them.
#pragma once
#include <dnnl.hpp>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cpu/compiled_kernel.h"
#include "util/error.h"

namespace korch::cpu::onednn_detail {

using dnnl::algorithm;
using dnnl::memory;
using MD = dnnl::memory::desc;
using Dims = dnnl::memory::dims;

// The CPU engine and the stream every oneDNN kernel runs on.
dnnl::engine& cpu_engine();
dnnl::stream& cpu_stream();

// Thrown while analysing a kernel; becomes *why_not.
struct Unsupported {
  std::string why;
};

template <typename... Args>
[[noreturn]] void unsupported(const Args&... args) {
  throw Unsupported{str_cat(args...)};
}

// ---------------------------------------------------------------------------------------
// Memory descriptors and layouts (onednn_layout.cc)

Dims dense_strides(const Dims& dims);
MD strided_md(const Dims& dims, const Dims& strides);
MD dense_md(const Dims& dims);
// A dense layout of `dims` with the last two axes swapped in memory (a MatMul's B stored N x K).
MD transposed_md(const Dims& dims);
// Rows `rows` of a plain strided descriptor: its second-to-last dim set to `rows` unless it is 1
// (broadcast), the strides kept; row_offset_bytes: where row `first_row` starts.
MD row_slice(const MD& md, int64_t rows);
int64_t row_offset_bytes(const MD& md, int64_t first_row);
// Layout left to oneDNN (format_tag::any).
MD any_md(const Dims& dims);
// A shape aligned to `rank` by prepending 1s (numpy broadcasting).
Dims aligned(const Shape& s, size_t rank);
// Activation layout name: nchw, nhwc, nChw16c, ... (dims n, c, then d/h/w).
std::string layout_name(const MD& md);
// An opaque key of a memory layout: equal keys mean the same bytes hold the same elements.
// "" for layouts that are not plain blocked ones (never linked).
std::string layout_key(const MD& md);
// The oneDNN format tag of an activation layout name (layout_name's spelling).
std::optional<memory::format_tag> format_tag_of(const std::string& name);

// ---------------------------------------------------------------------------------------
// Post-ops (onednn_post_ops.cc)

struct PostOp {
  bool binary = false;
  algorithm alg = algorithm::undef;
  float scale = 1, alpha = 0, beta = 0;  // eltwise: dst = scale * f_{alpha,beta}(dst)
  TensorId operand = kNone;              // binary: the other operand (a kernel input or constant)
  ConstTensorPtr value;                  // binary: or a scalar made up here
  MD operand_md;                         // binary: view of the operand's dense buffer
  bool full = false;                     // binary: the operand has the output's shape (no broadcast)
};

constexpr float kInf = std::numeric_limits<float>::infinity();

PostOp eltwise(algorithm alg, float alpha = 0, float beta = 0, float scale = 1);
PostOp linear_op(float a, float b);
// Max/Min with constants (a ReLU when that is what it is).
PostOp clip_op(float lo, float hi);
// A binary post-op with the scalar operand v, broadcast to an output of `rank` dims.
PostOp scalar_binary(algorithm alg, float v, size_t rank);
std::string post_op_name(const PostOp& p);
std::vector<PostOp> normalize_post_ops(const std::vector<PostOp>& ops, size_t rank);
// The post-op computing `result` from `start` through `region` (elementwise primitives in
// execution order, whose other operands are scalar constants) when that is scale * f(x) for one
// of oneDNN's eltwise algorithms f; nullopt otherwise.
std::optional<PostOp> fit_eltwise(const PrimGraph& graph, TensorId start, const std::vector<PrimId>& region,
                                  TensorId result);

// ---------------------------------------------------------------------------------------
// Pattern analysis (onednn_analysis.cc): which tensor plays which role.

struct Analysis {
  const Primitive* linear = nullptr;
  PrimId linear_id = kNone;
  TensorId src = kNone, weights = kNone;
  MD src_md, weights_md;                      // operand views (prologues folded)
  Dims dst_dims;                              // the output view (a MatMul's batch dims may fold into rows)
  std::vector<int64_t> pads_begin, pads_end;  // conv / deconv, folded Pad included
  TensorId bias = kNone;
  std::vector<PostOp> post_ops;
  std::vector<std::string> prologue;  // descriptions of folded prologue ops
};

// The analysis of a kernel with one linear primitive; throws Unsupported (with the reason) for
// kernels that are not one oneDNN primitive with post-ops.
Analysis analyse_linear_kernel(const PrimGraph& g, const Kernel& k);

// ---------------------------------------------------------------------------------------
// The compiled kernel (onednn_kernel.cc), made by build_onednn_kernel (onednn_builder.cc)

class OnednnKernel final : public CompiledKernel {
 public:
  void run(const std::vector<const void*>& inputs, void* output) override;
  std::string describe() const override;
  // Its execution arguments that are not the run's inputs or output: constant weights, bias and
  // binary operands (reordered at build time or wrapped), reorder targets.
  std::vector<std::pair<const void*, int64_t>> held_memory() const override;

  std::string output_layout() const override;
  int64_t output_layout_bytes() const override;
  std::string input_layout(int input) const override;
  int64_t input_layout_bytes(int input) const override;
  void keep_input_layout(int input) override;
  void keep_output_layout() override;

  std::string output_format() const override;
  std::string input_format(int input) const override;
  bool use_format(const std::string& format, bool apply) override;

  // A runtime input bound to an execution argument.
  struct Binding {
    int input;
    int arg;
    memory user, internal;
    std::optional<dnnl::reorder> reorder;
    std::string key, layout;  // the internal layout (layout_key, layout_name)
    bool kept = false;        // the input arrives in the internal layout (no reorder)
  };
  // One primitive over a block of the output's rows (the row-block schedule variant), or the GEMV
  // variant's epilogue: its execution arguments, of which `runtime` are bound to an input
  // (input >= 0) or the output (input < 0) at a byte offset on every run.
  struct RowBlock {
    struct Runtime {
      int arg, input;
      int64_t offset;
    };
    dnnl::primitive primitive;
    std::unordered_map<int, memory> args;
    std::vector<Runtime> runtime;
  };
  dnnl::primitive primitive_;
  std::unordered_map<int, memory> args_;
  // The GEMV schedule variant: A's rows times the constant B (dense K x N) in `parts` partial sums
  // over K (gemv_partial_sums), which row_blocks_[0], a oneDNN binary primitive, adds into the
  // output with the bias and post-ops.
  struct Gemv {
    int src_input = -1;
    int64_t lda = 0, rows = 0, k = 0, n = 0;
    int parts = 2;
    memory weights, partials;
  };
  // When set, run() runs these instead of primitive_ (after the GEMV's partial sums).
  std::vector<RowBlock> row_blocks_;
  std::optional<Gemv> gemv_;
  std::vector<Binding> bindings_;
  memory out_user_, out_internal_;
  std::optional<dnnl::reorder> out_reorder_;
  std::string out_key_, out_layout_name_;
  bool out_kept_ = false;
  std::vector<ConstTensorPtr> constants_;  // keep captured constants alive
  std::string description_;
  const PrimGraph* graph_ = nullptr;  // what the kernel was built from (use_format rebuilds it)
  Kernel kernel_;
};

// Schedule variants of a MatMul kernel: 1, or when B is a constant of at least 2 dims oneDNN's
// layout for B (0), B stored transposed (1) and, where row_blocks(a) > 1, the rows in that many
// blocks of one primitive each (2), or where gemv_applies, korch's GEMV (2).
int matmul_variants(const PrimGraph& g, const Analysis& a);
// The GEMV variant: a MatMul of at most kGemvMaxRows output rows (batch dims of 1), a runtime A
// read with unit column stride and a constant B whose dims before the last two are 1.
constexpr int64_t kGemvMaxRows = 4;
bool gemv_applies(const PrimGraph& g, const Analysis& a);
// partials[p] ([rows, n], p < parts) = A[:, K part p] B[K part p, :] for parts >= 2 consecutive
// parts of k, then partials[1] += partials[p] for p >= 2 (onednn_gemv.cc). A: rows x k, lda apart;
// B: k x n dense. Needs gemv_supported(): a CPU with AVX-512, or AVX2 and FMA; avx512: its AVX-512
// code (where gemv_has_avx512()), else its AVX2 code, both with the same bits.
bool gemv_supported();
bool gemv_has_avx512();
void gemv_partial_sums(const float* a, int64_t lda, int64_t rows, const float* b, int64_t k, int64_t n, int parts,
                       float* partials, bool avx512 = gemv_has_avx512());
// The number of row blocks of the row-block variant of a MatMul with constant B: 2 for outputs of
// at least kRowBlockMinRows rows (batch dims of 1 or folded into rows) whose binary post-op
// operands are full or broadcast over the rows; 1 (no such variant) otherwise.
constexpr int64_t kRowBlockMinRows = 256;
int row_blocks(const Analysis& a);

// The kernel for the analysed pattern `a` in schedule variant k.schedule. fixed: every
// activation (conv src, dst and full-tensor binary operands) in this format instead of oneDNN's
// choice; the build fails unless oneDNN has a non-reference implementation for it. Throws
// Unsupported or dnnl::error.
std::unique_ptr<OnednnKernel> build_onednn_kernel(const PrimGraph& g, const Kernel& k, const Analysis& a,
                                                  std::optional<memory::format_tag> fixed = {});

}  // namespace korch::cpu::onednn_detail
