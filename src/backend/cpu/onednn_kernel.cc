// oneDNN 2.6 backend: a kernel with exactly one Linear primitive becomes ONE oneDNN primitive
// (convolution_forward, deconvolution_forward or matmul) with its neighbours folded in.
//
// Supported (f32 only):
//   Linear   Conv 1-D/2-D/3-D: groups (incl. depthwise), strides, dilations, asymmetric pads.
//            ConvTranspose: the same, output padding (out_spatial) folded into the right pad.
//            MatMul of rank 2..12, numpy broadcasting of batch dims (ranks aligned with 1s).
//            Constant weights are captured and reordered once into oneDNN's preferred layout;
//            runtime weights work too (MatMul: plain, e.g. attention; Conv: reordered per run).
//   Prologue Pad (constant 0, non-negative, spatial dims only) feeding Conv's input: folded
//            into the padding. Transpose feeding a MatMul operand: strides of the operand's
//            memory descriptor (no copy; any permutation).
//   Epilogue a chain hanging off the linear output, every op keeping its shape, as post-ops:
//            - unary: Relu, Tanh, Sigmoid, Exp, Log, Abs, Sqrt, Neg, Reciprocal, Round,
//              Copy / Cast to f32 (dropped);
//            - with a scalar constant: Add/Sub/Mul/Div (eltwise_linear, or eltwise_pow for
//              c / x), Max/Min (eltwise_clip; ReLU6 becomes one clip), Pow (eltwise_pow);
//            - with a tensor (bias, residual, anything oneDNN's binary post-op broadcasts):
//              Add/Sub/Mul/Div/Max/Min as binary post-ops, the running value on either side
//              (o - x = -(x - o), o / x = o * x^-1); a per-channel constant Add right after the
//              linear op becomes the primitive's bias;
//            - x op x: Mul (eltwise_square), Add (x2), Max/Min (identity);
//            - activations fissioned into several primitives that read the running value more
//              than once (GELU erf/tanh, SiLU/Swish, Mish, HardSwish, ELU, Softplus, ...): the
//              elementwise sub-graph from the running value to where it collapses into one value
//              again is evaluated by the reference executor on sample points and matched
//              against oneDNN's eltwise algorithms, with a fitted output scale.
//            Consecutive linear ops are folded into one. oneDNN 2.6's JIT post-op injector keys
//            eltwise injectors by algorithm, so a repeated algorithm with other parameters
//            would silently reuse the first one's (conv + x*3 + (-0.25) computes 9x): such
//            repeats are emitted as binary post-ops with scalar operands.
// Layouts. Activations of Conv/ConvTranspose use oneDNN's preferred layout (format_tag::any:
// nhwc for brgconv, nChw16c for jit) with reorders from/to the plain buffers inside run();
// full-tensor binary operands (residuals) follow the same rule. Exception: 1x1 stride-1
// convs without binary post-ops, which are a plain GEMM on nchw. Measured on one core of this
// AVX-512 EPYC (run() incl. reorders vs plain nchw):
//   3x3 64->64 56x56           plain gemm:jit 2.81 ms   any/nhwc brgconv 1.94 + 0.08 reorders
//   + residual add + relu      plain gemm:jit 18.7 ms   any/nChw16c jit 2.02 ms
//   3x3 depthwise 32ch 112x112 plain gemm:jit 1.73 ms   any/nhwc 0.25 ms
//   1x1 64->256 56x56          plain gemm:jit 0.92 ms   any/nhwc 0.90 + 0.21 reorders
//   1x1 64->64 56x56 + residual plain gemm:jit 12.8 ms  any/nChw16c jit_1x1 0.30 ms
// (oneDNN's gemm convolution applies binary post-ops in a slow separate pass.)
// Between consecutive oneDNN kernels these reorders are skipped where layout_link.h allows:
// the kernels then read and write the internal layout directly (keep_input_layout /
// keep_output_layout), and a kernel may be rebuilt with every activation in one given
// layout (use_format) so that it matches its neighbour's.
// Anything else is rejected with a one-line reason, and so is a fused kernel for which oneDNN
// only has its reference implementation while the bare linear op has an optimised one.
#include <algorithm>
#include <cmath>
#include <dnnl.hpp>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "backend/cpu/compiled_kernel.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch::cpu {

namespace {

using dnnl::algorithm;
using dnnl::memory;
using MD = dnnl::memory::desc;
using Dims = dnnl::memory::dims;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpu_stream() {
  static dnnl::stream stream(cpu_engine());
  return stream;
}

// Thrown while analysing a kernel; becomes *why_not.
struct Unsupported {
  std::string why;
};

template <typename... Args>
[[noreturn]] void unsupported(const Args&... args) {
  throw Unsupported{str_cat(args...)};
}

Dims dense_strides(const Dims& dims) {
  Dims s(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * std::max<int64_t>(dims[i + 1], 1);
  return s;
}

MD strided_md(const Dims& dims, const Dims& strides) { return MD(dims, memory::data_type::f32, strides); }
MD dense_md(const Dims& dims) { return strided_md(dims, dense_strides(dims)); }
// A dense layout of `dims` with the last two axes swapped in memory (a MatMul's B stored N x K).
MD transposed_md(const Dims& dims) {
  size_t r = dims.size();
  Dims swapped = dims;
  std::swap(swapped[r - 2], swapped[r - 1]);
  Dims strides = dense_strides(swapped);
  std::swap(strides[r - 2], strides[r - 1]);
  return strided_md(dims, strides);
}
MD any_md(const Dims& dims) { return MD(dims, memory::data_type::f32, memory::format_tag::any); }

// A shape aligned to `rank` by prepending 1s (numpy broadcasting).
Dims aligned(const Shape& s, size_t rank) {
  Dims d(rank - s.size(), 1);
  d.insert(d.end(), s.begin(), s.end());
  return d;
}

// Activation layout name: nchw, nhwc, nChw16c, ... (dims n, c, then d/h/w).
std::string layout_name(const MD& md) {
  const auto& d = md.data;
  if (d.format_kind != dnnl_blocked || d.ndims < 3 || d.ndims > 5) return "?";
  const auto& b = d.format_desc.blocking;
  std::string letters = std::string("nc") + std::string("dhw").substr(5 - d.ndims);
  std::vector<int> order(d.ndims);
  for (int i = 0; i < d.ndims; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return b.strides[x] > b.strides[y]; });
  std::vector<char> blocked(d.ndims, 0);
  for (int i = 0; i < b.inner_nblks; ++i) blocked[b.inner_idxs[i]] = 1;
  std::string s;
  for (int i : order) s += blocked[i] ? static_cast<char>(letters[i] - 'a' + 'A') : letters[i];
  for (int i = 0; i < b.inner_nblks; ++i) {
    s += std::to_string(b.inner_blks[i]);
    s += letters[b.inner_idxs[i]];
  }
  return s;
}

// An opaque key of a memory layout: equal keys mean the same bytes hold the same elements.
// "" for layouts that are not plain blocked ones (never linked).
std::string layout_key(const MD& md) {
  const auto& d = md.data;
  if (d.format_kind != dnnl_blocked || d.extra.flags != 0) return "";
  const auto& b = d.format_desc.blocking;
  std::ostringstream os;
  os << "t" << d.data_type << " o" << d.offset0;
  for (int i = 0; i < d.ndims; ++i)
    os << " " << d.dims[i] << "/" << d.padded_dims[i] << "+" << d.padded_offsets[i] << ":" << b.strides[i];
  for (int i = 0; i < b.inner_nblks; ++i) os << " b" << b.inner_blks[i] << "@" << b.inner_idxs[i];
  return os.str();
}

bool is_ref_impl(const char* impl) { return std::string(impl).rfind("ref", 0) == 0; }

std::string fmt_float(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// ---------------------------------------------------------------------------------------
// Post-ops

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

PostOp eltwise(algorithm alg, float alpha = 0, float beta = 0, float scale = 1) {
  PostOp p;
  p.alg = alg;
  p.alpha = alpha;
  p.beta = beta;
  p.scale = scale;
  return p;
}

PostOp linear_op(float a, float b) { return eltwise(algorithm::eltwise_linear, a, b); }

PostOp clip_op(float lo, float hi) {
  if (lo == 0 && hi == kInf) return eltwise(algorithm::eltwise_relu);
  return eltwise(algorithm::eltwise_clip_v2, lo, hi);
}

PostOp scalar_binary(algorithm alg, float v, size_t rank) {
  PostOp p;
  p.binary = true;
  p.alg = alg;
  p.value = std::make_shared<TensorData>(TensorData::scalar_f32(v));
  p.operand_md = dense_md(Dims(rank, 1));
  return p;
}

std::string post_op_name(const PostOp& p) {
  static const std::map<algorithm, const char*> names = {{algorithm::binary_add, "binary_add"},
                                                         {algorithm::binary_sub, "binary_sub"},
                                                         {algorithm::binary_mul, "binary_mul"},
                                                         {algorithm::binary_div, "binary_div"},
                                                         {algorithm::binary_max, "binary_max"},
                                                         {algorithm::binary_min, "binary_min"},
                                                         {algorithm::eltwise_relu, "relu"},
                                                         {algorithm::eltwise_tanh, "tanh"},
                                                         {algorithm::eltwise_logistic, "logistic"},
                                                         {algorithm::eltwise_exp, "exp"},
                                                         {algorithm::eltwise_log, "log"},
                                                         {algorithm::eltwise_abs, "abs"},
                                                         {algorithm::eltwise_sqrt, "sqrt"},
                                                         {algorithm::eltwise_round, "round"},
                                                         {algorithm::eltwise_square, "square"},
                                                         {algorithm::eltwise_linear, "linear"},
                                                         {algorithm::eltwise_clip_v2, "clip"},
                                                         {algorithm::eltwise_pow, "pow"},
                                                         {algorithm::eltwise_gelu_erf, "gelu_erf"},
                                                         {algorithm::eltwise_gelu_tanh, "gelu_tanh"},
                                                         {algorithm::eltwise_swish, "swish"},
                                                         {algorithm::eltwise_mish, "mish"},
                                                         {algorithm::eltwise_hardswish, "hardswish"},
                                                         {algorithm::eltwise_elu, "elu"},
                                                         {algorithm::eltwise_soft_relu, "soft_relu"},
                                                         {algorithm::eltwise_logsigmoid, "logsigmoid"}};
  auto it = names.find(p.alg);
  std::string name = it == names.end() ? "?" : it->second;
  if (p.binary) return p.value ? name + "(" + fmt_float(p.value->get_f64(0)) + ")" : name;
  name = "eltwise_" + name;
  switch (p.alg) {
    case algorithm::eltwise_linear:
    case algorithm::eltwise_clip_v2:
    case algorithm::eltwise_pow: name += "(" + fmt_float(p.alpha) + "," + fmt_float(p.beta) + ")"; break;
    case algorithm::eltwise_swish:
    case algorithm::eltwise_elu:
      if (p.alpha != 1) name += "(" + fmt_float(p.alpha) + ")";
      break;
    default: break;
  }
  return p.scale == 1 ? name : fmt_float(p.scale) + "*" + name;
}

// Simplifies a post-op chain (identities dropped, linear ops folded into their neighbours)
// and works around oneDNN 2.6's JIT post-op injector, which keys eltwise injectors by
// algorithm: a second eltwise of the same algorithm with other parameters silently reuses
// the first one's (conv + linear(3,0) + linear(1,-0.25) computes 9x). Such repeats become
// binary post-ops with scalar operands, or are rejected.
std::vector<PostOp> normalize_post_ops(const std::vector<PostOp>& ops, size_t rank) {
  std::vector<PostOp> folded;
  for (const PostOp& p : ops) {
    bool linear = !p.binary && p.alg == algorithm::eltwise_linear;
    if (linear && p.scale * p.alpha == 1 && p.beta == 0) continue;
    PostOp* q = folded.empty() || folded.back().binary ? nullptr : &folded.back();
    if (linear && q && q->alg == algorithm::eltwise_linear) {  // a2 s2 (s1 (a1 x + b1)) + s2 b2
      float a = p.scale * p.alpha * q->scale;
      q->beta = a * q->beta + p.scale * p.beta;
      q->alpha = a * q->alpha;
      q->scale = 1;
      if (q->alpha == 1 && q->beta == 0) folded.pop_back();
      continue;
    }
    if (linear && q && p.beta == 0) {  // a (s f(x)) = (a s) f(x)
      q->scale *= p.scale * p.alpha;
      continue;
    }
    folded.push_back(p);
  }
  std::vector<PostOp> out;
  std::map<algorithm, const PostOp*> first;
  for (const PostOp& p : folded) {
    if (p.binary) {
      out.push_back(p);
      continue;
    }
    auto [it, inserted] = first.emplace(p.alg, &p);
    const PostOp& f = *it->second;
    if (inserted || (f.scale == p.scale && f.alpha == p.alpha && f.beta == p.beta)) {
      out.push_back(p);
    } else if (p.alg == algorithm::eltwise_linear) {
      if (p.scale * p.alpha != 1) out.push_back(scalar_binary(algorithm::binary_mul, p.scale * p.alpha, rank));
      if (p.beta != 0) out.push_back(scalar_binary(algorithm::binary_add, p.scale * p.beta, rank));
    } else if (p.alg == algorithm::eltwise_clip_v2 && p.scale == 1) {
      if (p.alpha > -kInf) out.push_back(scalar_binary(algorithm::binary_max, p.alpha, rank));
      if (p.beta < kInf) out.push_back(scalar_binary(algorithm::binary_min, p.beta, rank));
    } else if (f.scale == 1 && f.alpha == p.alpha && f.beta == p.beta) {
      out.push_back(eltwise(p.alg, p.alpha, p.beta));
      out.push_back(scalar_binary(algorithm::binary_mul, p.scale, rank));
    } else {
      unsupported("oneDNN 2.6 cannot chain ", post_op_name(f), " and ", post_op_name(p),
                  " (same algorithm, other parameters)");
    }
  }
  return out;
}

// Activation families the sub-graph fitting tries (dst = scale * f(x)).
struct Candidate {
  algorithm alg;
  double (*f)(double x, double alpha);
};

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double softplus(double x) { return x > 30 ? x : std::log1p(std::exp(x)); }

const Candidate kCandidates[] = {
    {algorithm::eltwise_gelu_erf, [](double x, double) { return 0.5 * x * (1 + std::erf(x * M_SQRT1_2)); }},
    {algorithm::eltwise_gelu_tanh,
     [](double x, double) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }},
    {algorithm::eltwise_swish, [](double x, double a) { return x * sigmoid(a * x); }},
    {algorithm::eltwise_mish, [](double x, double) { return x * std::tanh(softplus(x)); }},
    {algorithm::eltwise_hardswish, [](double x, double) { return x * std::clamp(x + 3, 0.0, 6.0) / 6; }},
    {algorithm::eltwise_elu, [](double x, double a) { return x > 0 ? x : a * (std::exp(x) - 1); }},
    {algorithm::eltwise_soft_relu, [](double x, double) { return softplus(x); }},
    {algorithm::eltwise_logsigmoid, [](double x, double) { return -softplus(-x); }},
    {algorithm::eltwise_logistic, [](double x, double) { return sigmoid(x); }},
    {algorithm::eltwise_tanh, [](double x, double) { return std::tanh(x); }},
    {algorithm::eltwise_relu, [](double x, double) { return std::max(x, 0.0); }},
    {algorithm::eltwise_abs, [](double x, double) { return std::abs(x); }},
    {algorithm::eltwise_square, [](double x, double) { return x * x; }},
    {algorithm::eltwise_exp, [](double x, double) { return std::exp(x); }},
};

// ---------------------------------------------------------------------------------------
// Analysis: which tensor plays which role.

class Analysis {
 public:
  Analysis(const PrimGraph& g, const Kernel& k) : g_(g), k_(k) {
    for (PrimId p : k.prims) in_kernel_[p] = 1;
    for (PrimId p : k.prims)
      for (TensorId t : g.prim(p).inputs)
        if (produced_inside(t)) consumers_[t].push_back(p);
    for (auto& [t, c] : consumers_) c.erase(std::unique(c.begin(), c.end()), c.end());
    run();
  }

  const Primitive* linear = nullptr;
  PrimId linear_id = kNone;
  TensorId src = kNone, weights = kNone;
  MD src_md, weights_md;                      // operand views (prologues folded)
  Dims dst_dims;                              // the output view (a MatMul's batch dims may fold into rows)
  std::vector<int64_t> pads_begin, pads_end;  // conv / deconv, folded Pad included
  TensorId bias = kNone;
  std::vector<PostOp> post_ops;
  std::vector<std::string> prologue;  // descriptions of folded prologue ops

 private:
  const PrimGraph& g_;
  const Kernel& k_;
  std::map<PrimId, char> in_kernel_;
  std::map<TensorId, std::vector<PrimId>> consumers_;
  std::map<PrimId, char> visited_;

  bool produced_inside(TensorId t) const {
    PrimId p = g_.tensor(t).producer;
    return p != kNone && in_kernel_.count(p);
  }
  const std::vector<PrimId>& consumers(TensorId t) const {
    static const std::vector<PrimId> none;
    auto it = consumers_.find(t);
    return it == consumers_.end() ? none : it->second;
  }
  const TensorInfo& info(TensorId t) const { return g_.tensor(t); }
  const char* op_name(PrimId p) const { return prim_op_name(g_.prim(p).op); }

  void require_f32(TensorId t, const char* what) const {
    if (info(t).dtype != DType::F32)
      unsupported(what, " '", info(t).name, "' is ", dtype_name(info(t).dtype), " (oneDNN kernels are f32 only)");
  }

  bool is_scalar_constant(TensorId t) const {
    return !produced_inside(t) && info(t).is_constant() && num_elements(info(t).shape) == 1;
  }
  double scalar_value(TensorId t) const { return info(t).constant->get_f64(0); }

  void run() {
    for (PrimId p : k_.prims)
      if (prim_kind(g_.prim(p).op) == PrimKind::Linear) {
        if (linear)
          unsupported("kernel has more than one linear primitive (", prim_op_name(linear->op), ", ", op_name(p), ")");
        linear = &g_.prim(p);
        linear_id = p;
      }
    if (!linear) unsupported("kernel has no linear primitive");
    visited_[linear_id] = 1;
    require_f32(linear->inputs[0], "input");
    require_f32(linear->inputs[1], "weight");
    require_f32(linear->output, "output");
    if (linear->op == PrimOp::MatMul)
      analyse_matmul();
    else
      analyse_conv();
    analyse_epilogue();
    post_ops = normalize_post_ops(post_ops, info(linear->output).shape.size());
    const Shape& out = info(linear->output).shape;
    dst_dims.assign(out.begin(), out.end());
    if (linear->op == PrimOp::MatMul) fold_matmul_batch();
    for (PrimId p : k_.prims)
      if (!visited_.count(p))
        unsupported("primitive ", op_name(p), " is neither a foldable prologue nor on the epilogue chain");
  }

  // The producer of a linear operand inside the kernel (a prologue), or kNone.
  PrimId prologue_of(TensorId t) {
    if (!produced_inside(t)) return kNone;
    PrimId p = info(t).producer;
    if (consumers(t).size() != 1)
      unsupported(op_name(p), " feeding ", prim_op_name(linear->op), " is also used elsewhere in the kernel");
    if (produced_inside(g_.prim(p).inputs[0]))
      unsupported("prologue ", op_name(p), " of ", prim_op_name(linear->op), " is itself computed inside the kernel");
    visited_[p] = 1;
    return p;
  }

  void analyse_matmul() {
    const Shape& out = info(linear->output).shape;
    size_t rank = out.size();
    if (rank > DNNL_MAX_NDIMS) unsupported("MatMul of rank ", rank);
    TensorId operand[2];
    MD md[2];
    for (int i = 0; i < 2; ++i) {
      TensorId t = linear->inputs[i];
      PrimId p = prologue_of(t);
      if (p == kNone) {
        operand[i] = t;
        md[i] = dense_md(aligned(info(t).shape, rank));
        continue;
      }
      const Primitive& pro = g_.prim(p);
      if (pro.op != PrimOp::Transpose)
        unsupported("prologue op ", op_name(p), " of MatMul is not foldable (only Transpose is)");
      operand[i] = pro.inputs[0];
      require_f32(operand[i], "MatMul operand");
      const Shape& xs = info(operand[i]).shape;
      const auto& perm = pro.attrs.ints("perm");
      std::vector<int64_t> xstr = strides_of(xs);
      Dims dims = aligned(info(t).shape, rank), strides = dense_strides(dims);
      size_t shift = rank - xs.size();
      for (size_t d = 0; d < xs.size(); ++d) strides[shift + d] = xstr[perm[d]];
      md[i] = strided_md(dims, strides);
      prologue.push_back(std::string("transposed ") + (i == 0 ? "A" : "B"));
    }
    src = operand[0];
    weights = operand[1];
    src_md = md[0];
    weights_md = md[1];
  }

  // A MatMul whose B has no batch dimensions and whose A is dense: A's batch dimensions are
  // more rows of one GEMM ([b.., M, K] x [K, N] = [b..*M, K] x [K, N]) instead of b small
  // products (a [128, 1, 768] x [768, 2304] projection was 128 matrix-vector products). Binary
  // post-op operands must be full or broadcast over all folded dimensions.
  void fold_matmul_batch() {
    size_t r = dst_dims.size();
    if (r < 3) return;
    Dims sd = src_md.dims(), wd = weights_md.dims();
    if (src_md != dense_md(sd)) return;  // a transposed A is not a plain row block
    for (size_t i = 0; i + 2 < r; ++i)
      if (wd[i] != 1 || sd[i] != dst_dims[i]) return;
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < r; ++i) rows *= dst_dims[i];
    std::vector<bool> full(post_ops.size(), false);
    for (size_t j = 0; j < post_ops.size(); ++j) {
      if (!post_ops[j].binary) continue;
      Dims od = post_ops[j].operand_md.dims();
      if (post_ops[j].operand_md != dense_md(od)) return;
      bool all = true, none = true;
      for (size_t i = 0; i + 1 < r; ++i) {
        all = all && od[i] == dst_dims[i];
        none = none && od[i] == 1;
      }
      if (!all && !none) return;
      full[j] = all;
    }
    const auto& ws = weights_md.data.format_desc.blocking.strides;
    weights_md = strided_md({wd[r - 2], wd[r - 1]}, {ws[r - 2], ws[r - 1]});
    src_md = dense_md({rows, sd[r - 1]});
    for (size_t j = 0; j < post_ops.size(); ++j) {
      if (!post_ops[j].binary) continue;
      Dims od = post_ops[j].operand_md.dims();
      post_ops[j].operand_md = dense_md({full[j] ? rows : 1, od[r - 1]});
    }
    dst_dims = {rows, dst_dims[r - 1]};
    prologue.push_back("batch folded into rows");
  }

  void analyse_conv() {
    const Attrs& a = linear->attrs;
    const Shape& xs = info(linear->inputs[0]).shape;
    size_t nsp = xs.size() - 2;
    if (nsp < 1 || nsp > 3) unsupported(prim_op_name(linear->op), " with ", nsp, " spatial dims");
    const auto& p = a.ints("pads");
    pads_begin.assign(p.begin(), p.begin() + nsp);
    pads_end.assign(p.begin() + nsp, p.end());
    weights = linear->inputs[1];
    if (produced_inside(weights))
      unsupported("the weight of ", prim_op_name(linear->op), " is computed inside the kernel");
    src = linear->inputs[0];
    if (PrimId pp = prologue_of(src); pp != kNone) {
      const Primitive& pad = g_.prim(pp);
      if (pad.op != PrimOp::Pad || linear->op != PrimOp::Conv)
        unsupported("prologue op ", op_name(pp), " of ", prim_op_name(linear->op),
                    " is not foldable (only Pad into Conv is)");
      const auto& pads = pad.attrs.ints("pads");
      size_t rank = xs.size();
      if (pad.attrs.s("mode") != "constant" || pad.attrs.f("value") != 0.0)
        unsupported("Pad folded into Conv must be constant-mode with value 0");
      if (pads[0] || pads[1] || pads[rank] || pads[rank + 1])
        unsupported("Pad folded into Conv pads batch/channel dims");
      for (size_t i = 0; i < nsp; ++i) {
        if (pads[2 + i] < 0 || pads[rank + 2 + i] < 0) unsupported("Pad folded into Conv has negative pads");
        pads_begin[i] += pads[2 + i];
        pads_end[i] += pads[rank + 2 + i];
      }
      src = pad.inputs[0];
      require_f32(src, "input");
      prologue.push_back("pad folded");
    }
    src_md = dense_md(info(src).shape);
    const Shape& ws = info(weights).shape;
    int64_t group = a.i("group");
    Dims kernel(ws.begin() + 2, ws.end());
    int64_t kvol = num_elements(kernel);
    Dims wdims, wstrides;
    if (linear->op == PrimOp::Conv) {
      // ONNX [G*OCg, ICg, k...] is dense goihw / oihw.
      if (group > 1)
        wdims = {group, ws[0] / group, ws[1]};
      else
        wdims = {ws[0], ws[1]};
      wdims.insert(wdims.end(), kernel.begin(), kernel.end());
      wstrides = dense_strides(wdims);
    } else {
      // ONNX [G*ICg, OCg, k...]; oneDNN wants (g,) o, i, k... dims.
      int64_t icg = ws[0] / group, ocg = ws[1];
      if (group > 1) {
        wdims = {group, ocg, icg};
        wstrides = {icg * ocg * kvol, kvol, ocg * kvol};
      } else {
        wdims = {ocg, icg};
        wstrides = {kvol, ocg * kvol};
      }
      wdims.insert(wdims.end(), kernel.begin(), kernel.end());
      Dims ks = dense_strides(kernel);
      wstrides.insert(wstrides.end(), ks.begin(), ks.end());
    }
    weights_md = strided_md(wdims, wstrides);
  }

  // Channel dimension of the linear output (bias / per-channel post-ops).
  size_t channel_dim() const { return linear->op == PrimOp::MatMul ? info(linear->output).shape.size() - 1 : 1; }

  void analyse_epilogue() {
    TensorId cur = linear->output;
    const Shape& shape = info(cur).shape;
    while (cur != k_.output) {
      const auto& cons = consumers(cur);
      KORCH_CHECK(!cons.empty(), "non-sink value without consumers");
      PrimId p = cons[0];
      std::string why;
      if (cons.size() == 1 && simple_post_op(p, cur, &why)) {
        visited_[p] = 1;
        cur = g_.prim(p).output;
      } else if (TensorId next = fit_activation(cur); next != kNone) {
        cur = next;
      } else if (cons.size() == 1) {
        unsupported(why);
      } else {
        unsupported("the linear result feeds ", cons.size(), " epilogue ops (", op_name(cons[0]), ", ",
                    op_name(cons[1]), ") that do not form a known activation");
      }
      if (info(cur).shape != shape) unsupported("epilogue changes the shape to ", shape_str(info(cur).shape));
      require_f32(cur, "epilogue value");
    }
  }

  // Maps one elementwise primitive consuming the running value `cur` to post-ops.
  bool simple_post_op(PrimId pid, TensorId cur, std::string* why) {
    const Primitive& p = g_.prim(pid);
    const char* name = prim_op_name(p.op);
    if (prim_kind(p.op) != PrimKind::Elementwise) {
      *why = str_cat("epilogue op ", name, " is not a oneDNN post-op");
      return false;
    }
    if (info(p.output).shape != info(cur).shape) {
      *why = str_cat("epilogue op ", name, " broadcasts the result to ", shape_str(info(p.output).shape));
      return false;
    }
    if (prim_arity(p.op) == 1) {
      switch (p.op) {
        case PrimOp::Relu: add(eltwise(algorithm::eltwise_relu)); return true;
        case PrimOp::Tanh: add(eltwise(algorithm::eltwise_tanh)); return true;
        case PrimOp::Sigmoid: add(eltwise(algorithm::eltwise_logistic)); return true;
        case PrimOp::Exp: add(eltwise(algorithm::eltwise_exp)); return true;
        case PrimOp::Log: add(eltwise(algorithm::eltwise_log)); return true;
        case PrimOp::Abs: add(eltwise(algorithm::eltwise_abs)); return true;
        case PrimOp::Sqrt: add(eltwise(algorithm::eltwise_sqrt)); return true;
        case PrimOp::Round: add(eltwise(algorithm::eltwise_round)); return true;
        case PrimOp::Neg: add(linear_op(-1, 0)); return true;
        case PrimOp::Reciprocal: add(eltwise(algorithm::eltwise_pow, 1, -1)); return true;
        case PrimOp::Copy: return true;
        case PrimOp::Cast:
          if (info(p.output).dtype == DType::F32) return true;
          break;
        default: break;
      }
      *why = str_cat("epilogue op ", name, " is not a oneDNN post-op");
      return false;
    }
    if (prim_arity(p.op) != 2) {
      *why = str_cat("epilogue op ", name, " is not a oneDNN post-op");
      return false;
    }
    bool left = p.inputs[0] == cur;
    TensorId other = left ? p.inputs[1] : p.inputs[0];
    if (other == cur) {  // x op x
      if (p.op == PrimOp::Mul)
        add(eltwise(algorithm::eltwise_square));
      else if (p.op == PrimOp::Add)
        add(linear_op(2, 0));
      else if (p.op != PrimOp::Max && p.op != PrimOp::Min) {
        *why = str_cat("epilogue op ", name, "(x, x) is not a oneDNN post-op");
        return false;
      }
      return true;
    }
    if (produced_inside(other)) {
      *why = str_cat("operand of epilogue op ", name, " is computed inside the kernel (not a chain)");
      return false;
    }
    if (is_scalar_constant(other) && (p.op == PrimOp::Pow || info(other).dtype == DType::F32)) {
      double c = scalar_value(other);
      auto fc = static_cast<float>(c);
      switch (p.op) {
        case PrimOp::Add: add(linear_op(1, fc)); return true;
        case PrimOp::Mul: add(linear_op(fc, 0)); return true;
        case PrimOp::Sub: add(left ? linear_op(1, static_cast<float>(-c)) : linear_op(-1, fc)); return true;
        case PrimOp::Div:
          if (left)
            add(linear_op(static_cast<float>(1 / c), 0));
          else
            add(eltwise(algorithm::eltwise_pow, fc, -1));
          return true;
        case PrimOp::Max: add_clip(fc, kInf); return true;
        case PrimOp::Min: add_clip(-kInf, fc); return true;
        case PrimOp::Pow:
          if (!left) break;
          add(eltwise(algorithm::eltwise_pow, 1, fc));
          return true;
        default: break;
      }
      *why = str_cat("epilogue op ", name, " with a constant is not a oneDNN post-op");
      return false;
    }
    if (info(other).dtype != DType::F32) {
      *why = str_cat("operand of epilogue op ", name, " is ", dtype_name(info(other).dtype));
      return false;
    }
    algorithm alg;
    switch (p.op) {
      case PrimOp::Add: alg = algorithm::binary_add; break;
      case PrimOp::Sub: alg = algorithm::binary_sub; break;
      case PrimOp::Mul: alg = algorithm::binary_mul; break;
      case PrimOp::Div: alg = algorithm::binary_div; break;
      case PrimOp::Max: alg = algorithm::binary_max; break;
      case PrimOp::Min: alg = algorithm::binary_min; break;
      default: *why = str_cat("epilogue op ", name, " is not a oneDNN post-op"); return false;
    }
    const Shape& out = info(cur).shape;
    Dims od = aligned(info(other).shape, out.size());
    // A per-channel constant added right after the linear op is its bias.
    if (p.op == PrimOp::Add && post_ops.empty() && bias == kNone && info(other).is_constant()) {
      size_t c = channel_dim();
      bool per_channel = true;
      for (size_t i = 0; i < od.size(); ++i) per_channel &= (i == c ? od[i] == out[c] : od[i] == 1);
      if (per_channel) {
        bias = other;
        return true;
      }
    }
    if (!left && p.op == PrimOp::Div) add(eltwise(algorithm::eltwise_pow, 1, -1));
    PostOp b;
    b.binary = true;
    b.alg = (!left && p.op == PrimOp::Div) ? algorithm::binary_mul : alg;
    b.operand = other;
    b.operand_md = dense_md(od);
    b.full = od == Dims(out.begin(), out.end());
    add(b);
    if (!left && p.op == PrimOp::Sub) add(linear_op(-1, 0));  // o - x = -(x - o)
    return true;
  }

  void add(PostOp p) { post_ops.push_back(std::move(p)); }

  // Max/Min with constants: clip(clip(x, a, b), lo, hi) = clip(x, max(a, lo), min(b, hi))
  // when the ranges overlap (ReLU6 as Max + Min becomes one clip).
  void add_clip(float lo, float hi) {
    PostOp* last = post_ops.empty() || post_ops.back().binary ? nullptr : &post_ops.back();
    if (last && last->scale == 1 && (last->alg == algorithm::eltwise_relu || last->alg == algorithm::eltwise_clip_v2)) {
      float a = last->alg == algorithm::eltwise_relu ? 0.f : last->alpha;
      float b = last->alg == algorithm::eltwise_relu ? kInf : last->beta;
      if (std::max(a, lo) <= std::min(b, hi)) {
        *last = clip_op(std::max(a, lo), std::min(b, hi));
        return;
      }
    }
    add(clip_op(lo, hi));
  }

  // The elementwise sub-graph starting at `cur` (other operands: scalar constants) up to the
  // first value every path from `cur` goes through; when it computes scale * f(x) for one of
  // oneDNN's eltwise algorithms, appends that post-op and returns the value. kNone otherwise.
  TensorId fit_activation(TensorId cur) {
    std::vector<PrimId> region;
    std::vector<TensorId> live = {cur};
    std::map<TensorId, int> pending;  // unvisited in-kernel consumers of live values
    pending[cur] = static_cast<int>(consumers(cur).size());
    for (PrimId p : k_.prims) {
      if (p <= info(cur).producer) continue;
      const Primitive& prim = g_.prim(p);
      bool reads_live = false;
      for (TensorId t : prim.inputs) reads_live |= std::count(live.begin(), live.end(), t) > 0;
      if (!reads_live) continue;
      if (prim_kind(prim.op) != PrimKind::Elementwise || region.size() >= 24) return kNone;
      for (TensorId t : prim.inputs)
        if (!std::count(live.begin(), live.end(), t) && !is_scalar_constant(t)) return kNone;
      region.push_back(p);
      std::vector<TensorId> seen;
      for (TensorId t : prim.inputs)
        if (std::count(live.begin(), live.end(), t) && !std::count(seen.begin(), seen.end(), t)) {
          seen.push_back(t);
          if (--pending[t] == 0) live.erase(std::find(live.begin(), live.end(), t));
        }
      live.push_back(prim.output);
      pending[prim.output] = static_cast<int>(consumers(prim.output).size());
      if (live.size() == 1) break;  // every path from `cur` goes through this value
    }
    if (live.size() != 1 || live[0] == cur) return kNone;
    TensorId result = live[0];
    if (info(result).dtype != DType::F32 || info(result).shape != info(cur).shape) return kNone;
    // Evaluate the region on sample points: dense on [-8, 8], sparse out to +-100.
    constexpr int dense = 1601;
    std::vector<double> xs(dense);
    for (int i = 0; i < dense; ++i) xs[i] = -8.0 + 16.0 * i / (dense - 1);
    for (double x : {10.0, 15.0, 20.0, 30.0, 50.0, 100.0}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
    const int64_t n = static_cast<int64_t>(xs.size());
    std::map<TensorId, TensorData> values;
    values[cur] = TensorData::from_f64(DType::F32, {n}, xs);
    for (PrimId p : region) {
      const Primitive& prim = g_.prim(p);
      std::vector<const TensorData*> args;
      Shape out;
      for (TensorId t : prim.inputs) {
        const TensorData* v = values.count(t) ? &values.at(t) : info(t).constant.get();
        args.push_back(v);
        out = broadcast_shapes(out, v->shape());
      }
      values[prim.output] = reference::evaluate(prim, args, info(prim.output).dtype, out);
    }
    const TensorData& fy = values.at(result);
    if (fy.size() != n) return kNone;
    std::vector<double> ys = fy.to_f64();
    auto matches = [&](const Candidate& c, double alpha, double* scale) {
      double num = 0, den = 0;
      for (int i = 0; i < dense; ++i) {
        double g = c.f(xs[i], alpha);
        if (std::isfinite(g) && std::isfinite(ys[i])) num += g * ys[i], den += g * g;
      }
      if (den <= 0) return false;
      double s = num / den, nice = std::round(s * 1024) / 1024;
      if (std::abs(s - nice) <= 1e-6 * std::abs(s)) s = nice;
      for (int64_t i = 0; i < n; ++i) {
        double g = static_cast<float>(s * c.f(xs[i], alpha)), y = ys[i];
        if (std::isfinite(g) != std::isfinite(y)) return false;
        if (std::isfinite(y) && std::abs(g - y) > 2e-5 * (1 + std::abs(y))) return false;
      }
      *scale = s;
      return true;
    };
    auto at = [&](double x) { return ys[static_cast<int>(std::lround((x + 8.0) / 16.0 * (dense - 1)))]; };
    for (const Candidate& c : kCandidates) {
      std::vector<double> alphas = {1.0};
      if (c.alg == algorithm::eltwise_swish && at(1) > 0 && at(1) < 1) alphas.push_back(std::log(at(1) / (1 - at(1))));
      if (c.alg == algorithm::eltwise_elu) alphas.push_back(at(-1) / (std::exp(-1.0) - 1));
      for (double alpha : alphas) {
        double scale;
        if (!matches(c, alpha, &scale)) continue;
        float fa =
            (c.alg == algorithm::eltwise_swish || c.alg == algorithm::eltwise_elu) ? static_cast<float>(alpha) : 0.f;
        add(eltwise(c.alg, fa, 0, static_cast<float>(scale)));
        for (PrimId p : region) visited_[p] = 1;
        return result;
      }
    }
    return kNone;
  }
};

// ---------------------------------------------------------------------------------------
// The compiled kernel

class OnednnKernel final : public CompiledKernel {
 public:
  void run(const std::vector<const void*>& inputs, void* output) override {
    dnnl::stream& s = cpu_stream();
    for (Binding& b : bindings_) {
      void* data = const_cast<void*>(inputs.at(b.input));
      if (b.kept) {
        b.internal.set_data_handle(data);
        continue;
      }
      b.user.set_data_handle(data);
      if (b.reorder) b.reorder->execute(s, b.user, b.internal);
    }
    if (out_kept_)
      out_internal_.set_data_handle(output);
    else
      out_user_.set_data_handle(output);
    primitive_.execute(s, args_);
    if (out_reorder_) out_reorder_->execute(s, out_internal_, out_user_);
    s.wait();
  }
  std::string describe() const override {
    std::vector<std::string> roles;
    std::string layout;
    bool one_layout = true;
    auto add = [&](const std::string& role, const std::string& name) {
      if (std::find(roles.begin(), roles.end(), role) == roles.end()) roles.push_back(role);
      if (!layout.empty() && layout != name) one_layout = false;
      layout = name;
    };
    for (const Binding& b : bindings_)
      if (b.kept) add(b.arg == DNNL_ARG_SRC ? "in" : "residual", b.layout);
    if (out_kept_) add("out", out_layout_name_);
    if (roles.empty()) return description_;
    std::string kept;
    for (const std::string& r : roles) kept += (kept.empty() ? "" : "/") + r;
    return description_ + " [" + (one_layout ? layout + " " : "") + kept + " kept]";
  }

  std::string output_layout() const override { return out_reorder_ || out_kept_ ? out_key_ : ""; }
  int64_t output_layout_bytes() const override {
    return out_reorder_ || out_kept_ ? static_cast<int64_t>(out_internal_.get_desc().get_size()) : 0;
  }
  std::string input_layout(int input) const override {
    std::string key;
    for (const Binding& b : bindings_) {
      if (b.input != input) continue;
      if (!b.reorder && !b.kept) return "";
      if (!key.empty() && key != b.key) return "";
      key = b.key;
    }
    return key;
  }
  int64_t input_layout_bytes(int input) const override {
    if (input_layout(input).empty()) return 0;
    for (const Binding& b : bindings_)
      if (b.input == input) return static_cast<int64_t>(b.internal.get_desc().get_size());
    return 0;
  }
  void keep_input_layout(int input) override {
    for (Binding& b : bindings_)
      if (b.input == input && !b.kept) {
        KORCH_CHECK(b.reorder, "input ", input, " of a oneDNN kernel has no internal layout to keep");
        b.reorder.reset();
        b.internal = memory(b.internal.get_desc(), cpu_engine(), DNNL_MEMORY_NONE);
        args_[b.arg] = b.internal;
        b.kept = true;
      }
  }
  void keep_output_layout() override {
    if (out_kept_) return;
    KORCH_CHECK(out_reorder_, "the oneDNN kernel writes its output in the dense layout already");
    out_reorder_.reset();
    out_internal_ = memory(out_internal_.get_desc(), cpu_engine(), DNNL_MEMORY_NONE);
    args_[DNNL_ARG_DST] = out_internal_;
    out_kept_ = true;
  }

  std::string output_format() const override { return output_layout().empty() ? "" : out_layout_name_; }
  std::string input_format(int input) const override {
    if (input_layout(input).empty()) return "";
    for (const Binding& b : bindings_)
      if (b.input == input) return b.layout;
    return "";
  }
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
  dnnl::primitive primitive_;
  std::unordered_map<int, memory> args_;
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

// Schedule variants of a MatMul kernel: 2 (oneDNN's layout for B, B stored transposed) when B
// is a constant of at least 2 dims, else 1.
int matmul_variants(const PrimGraph& g, const Analysis& a) {
  const TensorInfo& w = g.tensor(a.weights);
  return w.is_constant() && w.shape.size() >= 2 ? 2 : 1;
}

class Builder {
 public:
  // fixed: every activation (conv src, dst and full-tensor binary operands) in this format
  // instead of oneDNN's choice; the build fails unless oneDNN has a non-reference
  // implementation for it.
  Builder(const PrimGraph& g, const Kernel& k, const Analysis& a, std::optional<memory::format_tag> fixed = {})
      : g_(g), k_(k), a_(a), fixed_(fixed) {}

  std::unique_ptr<OnednnKernel> build() {
    const Primitive& L = *a_.linear;
    const Dims& dst_dims = a_.dst_dims;
    bool conv_like = L.op != PrimOp::MatMul;
    // Layouts left to oneDNN (format_tag::any) first: activations of convolutions, constant
    // MatMul weights. When that only has a reference implementation (or none), plain ones.
    bool any_layout_first = conv_like ? !plain_gemm_conv() : g_.tensor(a_.weights).is_constant();
    std::optional<dnnl::primitive_desc> pd;
    std::string error;
    std::vector<bool> layouts = {any_layout_first};
    if (any_layout_first) layouts.push_back(false);
    // Schedule variant 1 of a convolution: the other activation layout (plain nchw where
    // oneDNN's choice is the default, oneDNN's choice where plain is), so that profiling can
    // keep whichever is faster for this shape (e.g. a 9x9 conv to 3 channels).
    if (k_.schedule < 0 || k_.schedule >= (conv_like ? 2 : matmul_variants(g_, a_)))
      unsupported("no schedule variant ", k_.schedule, " for ", describe_core());
    if (k_.schedule == 1) layouts = {conv_like ? !any_layout_first : true};
    if (fixed_) {
      if (!conv_like) unsupported("only convolutions take a fixed activation layout");
      layouts = {true};
    }
    for (bool any_layout : layouts) {
      try {
        dnnl::primitive_desc candidate = make_pd(any_layout, /*with_post_ops=*/true, /*with_prologue=*/true);
        if (!pd || is_ref_impl(pd->impl_info_str())) pd = candidate;
        if (!is_ref_impl(candidate.impl_info_str())) break;
      } catch (const dnnl::error& e) {
        error = e.what();
      }
    }
    if (!pd) unsupported("oneDNN has no implementation for ", describe_core(), post_op_list(), ": ", error);
    if (fixed_ && is_ref_impl(pd->impl_info_str()))
      unsupported("the fixed layout leaves only the reference implementation");
    if (k_.schedule == 1 && !fixed_ && is_ref_impl(pd->impl_info_str()))
      unsupported(conv_like ? "the alternate activation layout" : "B stored transposed",
                  " leaves only the reference implementation");
    if (is_ref_impl(pd->impl_info_str()) && (!a_.post_ops.empty() || !a_.prologue.empty())) {
      std::optional<dnnl::primitive_desc> bare;
      try {
        bare = make_pd(any_layout_first, false, false);
      } catch (const dnnl::error&) {
      }
      if (bare && !is_ref_impl(bare->impl_info_str()))
        unsupported("fusing ", fused_list(), " into ", describe_core(),
                    " leaves only oneDNN's reference implementation");
    }

    auto kernel = std::make_unique<OnednnKernel>();
    kernel->graph_ = &g_;
    kernel->kernel_ = k_;
    dnnl::engine& eng = cpu_engine();
    // Constants are captured (reordered once into the primitive's layout); runtime inputs
    // are rebound on every run, through a reorder when the primitive wants another layout.
    auto bind_constant = [&](int arg, const ConstTensorPtr& value, const MD& user_md) {
      MD internal_md = pd->query_md(dnnl::query::exec_arg_md, arg);
      kernel->constants_.push_back(value);
      memory user(user_md, eng, const_cast<void*>(value->raw()));
      if (internal_md == user_md) {
        kernel->args_[arg] = user;
      } else {
        memory internal(internal_md, eng);
        dnnl::reorder(user, internal).execute(cpu_stream(), user, internal);
        cpu_stream().wait();
        kernel->args_[arg] = internal;
      }
    };
    auto bind = [&](int arg, TensorId t, const MD& user_md) {
      MD internal_md = pd->query_md(dnnl::query::exec_arg_md, arg);
      const TensorInfo& ti = g_.tensor(t);
      if (ti.is_constant()) {
        bind_constant(arg, ti.constant, user_md);
        return;
      }
      int input = static_cast<int>(std::find(k_.inputs.begin(), k_.inputs.end(), t) - k_.inputs.begin());
      KORCH_CHECK(input < static_cast<int>(k_.inputs.size()), "tensor ", ti.name, " is not a kernel input");
      OnednnKernel::Binding b{input, arg, memory(user_md, eng, DNNL_MEMORY_NONE), {}, {}, {}, {}};
      b.key = layout_key(internal_md);
      b.layout = layout_name(internal_md);
      if (internal_md == user_md) {
        b.internal = b.user;
      } else {
        b.internal = memory(internal_md, eng);
        b.reorder = dnnl::reorder(b.user, b.internal);
      }
      kernel->args_[arg] = b.internal;
      kernel->bindings_.push_back(std::move(b));
    };
    bind(DNNL_ARG_SRC, a_.src, a_.src_md);
    bind(DNNL_ARG_WEIGHTS, a_.weights, a_.weights_md);
    if (a_.bias != kNone) bind(DNNL_ARG_BIAS, a_.bias, bias_md());
    for (size_t i = 0; i < a_.post_ops.size(); ++i) {
      const PostOp& p = a_.post_ops[i];
      int arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_SRC_1;
      if (p.value)
        bind_constant(arg, p.value, p.operand_md);
      else if (p.binary)
        bind(arg, p.operand, p.operand_md);
    }
    MD dst_user = dense_md(dst_dims), dst_internal = pd->dst_desc();
    kernel->out_user_ = memory(dst_user, eng, DNNL_MEMORY_NONE);
    if (dst_internal == dst_user) {
      kernel->args_[DNNL_ARG_DST] = kernel->out_user_;
    } else {
      kernel->out_internal_ = memory(dst_internal, eng);
      kernel->out_reorder_ = dnnl::reorder(kernel->out_internal_, kernel->out_user_);
      kernel->out_key_ = layout_key(dst_internal);
      kernel->out_layout_name_ = layout_name(dst_internal);
      kernel->args_[DNNL_ARG_DST] = kernel->out_internal_;
    }
    MD scratch = pd->scratchpad_desc();
    if (scratch.get_size() > 0) kernel->args_[DNNL_ARG_SCRATCHPAD] = memory(scratch, eng);
    kernel->primitive_ = dnnl::primitive(*pd);

    std::string layout;
    if (conv_like) {
      std::string sl = layout_name(pd->src_desc()), dl = layout_name(dst_internal);
      layout = ", " + (sl == dl ? sl : sl + "->" + dl);
    }
    kernel->description_ = "onednn " + describe_core() + post_op_list() + " (" + pd->impl_info_str() + layout + ")";
    return kernel;
  }

 private:
  const PrimGraph& g_;
  const Kernel& k_;
  const Analysis& a_;
  std::optional<memory::format_tag> fixed_;

  MD activation_md(const Dims& dims) const { return fixed_ ? MD(dims, memory::data_type::f32, *fixed_) : any_md(dims); }

  // 1x1, stride-1, unpadded, ungrouped convolutions are a plain GEMM on nchw: reordering
  // the activations to a blocked layout would cost more than it saves. Not with binary
  // post-ops: oneDNN's gemm convolution applies those in a slow separate pass (a 1x1
  // 64->64 56x56 conv + residual add: 12.8 ms plain vs 0.30 ms blocked incl. reorders).
  bool plain_gemm_conv() const {
    if (!is_unit_stride_1x1_conv(g_, *a_.linear)) return false;
    for (const PostOp& p : a_.post_ops)
      if (p.binary) return false;
    for (size_t i = 0; i < a_.pads_begin.size(); ++i)
      if (a_.pads_begin[i] || a_.pads_end[i]) return false;
    return true;
  }

  MD bias_md() const {
    const Primitive& L = *a_.linear;
    const Shape& out = g_.tensor(L.output).shape;
    if (L.op == PrimOp::MatMul) {
      Dims d(a_.dst_dims.size(), 1);
      d.back() = out.back();
      return dense_md(d);
    }
    return dense_md({out[1]});
  }

  dnnl::primitive_desc make_pd(bool any_layout, bool with_post_ops, bool with_prologue) const {
    const Primitive& L = *a_.linear;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (with_post_ops) {
      dnnl::post_ops po;
      for (const PostOp& p : a_.post_ops) {
        if (p.binary)
          po.append_binary(p.alg, any_layout && p.full ? activation_md(p.operand_md.dims()) : p.operand_md);
        else
          po.append_eltwise(p.scale, p.alg, p.alpha, p.beta);
      }
      attr.set_post_ops(po);
    }
    const Dims& dst_dims = a_.dst_dims;
    MD bias = a_.bias != kNone ? bias_md() : MD();
    dnnl::engine& eng = cpu_engine();
    if (L.op == PrimOp::MatMul) {
      bool const_w = g_.tensor(a_.weights).is_constant();
      MD src = with_prologue ? a_.src_md : dense_md(a_.src_md.dims());
      MD w = with_prologue ? a_.weights_md : dense_md(a_.weights_md.dims());
      // Schedule variant 1: the constant B stored transposed (N x K). oneDNN 2.6's choice for
      // format any is plain K x N wherever it runs gemm:jit (no brgemm below AVX-512), and its
      // sgemm ran [128,768]x[768,3072] in 7.4-7.9 ms that way and 3.8-4.7 ms with B transposed
      // (AVX2, 2 threads); profiling keeps whichever is faster per shape.
      if (const_w && any_layout) w = k_.schedule == 1 ? transposed_md(w.dims()) : any_md(w.dims());
      dnnl::matmul::desc d(src, w, bias, dense_md(dst_dims));
      return dnnl::matmul::primitive_desc(d, attr, eng);
    }
    MD src = any_layout ? activation_md(a_.src_md.dims()) : a_.src_md;
    MD dst = any_layout ? activation_md(dst_dims) : dense_md(dst_dims);
    MD w = any_md(a_.weights_md.dims());  // runtime weights are reordered in run()
    const Attrs& at = L.attrs;
    Dims strides(at.ints("strides").begin(), at.ints("strides").end());
    Dims dil;
    for (int64_t d : at.ints("dilations")) dil.push_back(d - 1);
    Dims pl(a_.pads_begin.begin(), a_.pads_begin.end()), pr(a_.pads_end.begin(), a_.pads_end.end());
    if (!with_prologue) {  // bare op: only the Conv's own pads
      const auto& p = at.ints("pads");
      pl.assign(p.begin(), p.begin() + pl.size());
      pr.assign(p.begin() + pl.size(), p.end());
    }
    if (L.op == PrimOp::Conv) {
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, algorithm::convolution_direct, src, w, bias,
                                        dst, strides, dil, pl, pr);
      return dnnl::convolution_forward::primitive_desc(d, attr, eng);
    }
    // ConvTranspose: the right pad absorbs output padding (out_spatial), oneDNN derives the
    // output size as (in-1)*s + (k-1)*(dil+1) + 1 - pl - pr.
    const Shape& xs = g_.tensor(a_.src).shape;
    const Shape& ws = g_.tensor(a_.weights).shape;
    for (size_t i = 0; i < pr.size(); ++i) {
      int64_t full = (xs[2 + i] - 1) * strides[i] + (ws[2 + i] - 1) * (dil[i] + 1) + 1;
      pr[i] = full - pl[i] - dst_dims[2 + i];
    }
    dnnl::deconvolution_forward::desc d(dnnl::prop_kind::forward_inference, algorithm::deconvolution_direct, src, w,
                                        bias, dst, strides, dil, pl, pr);
    return dnnl::deconvolution_forward::primitive_desc(d, attr, eng);
  }

  std::string describe_core() const {
    const Primitive& L = *a_.linear;
    std::ostringstream os;
    auto join = [&](const std::vector<int64_t>& v) {
      std::string s;
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) s += 'x';
        s += std::to_string(v[i]);
      }
      return s;
    };
    if (L.op == PrimOp::MatMul) {
      const Shape& out = g_.tensor(L.output).shape;
      const Shape& xs = g_.tensor(L.inputs[0]).shape;
      os << "matmul " << shape_str(out) << " k=" << xs.back();
      if (g_.tensor(a_.weights).is_constant()) os << (k_.schedule == 1 ? " const-B stored transposed" : " const-B");
    } else {
      const Shape& ws = g_.tensor(a_.weights).shape;
      os << (L.op == PrimOp::Conv ? "conv " : "deconv ") << join(Shape(ws.begin() + 2, ws.end()));
      os << " s" << join(L.attrs.ints("strides"));
      const auto& d = L.attrs.ints("dilations");
      if (std::any_of(d.begin(), d.end(), [](int64_t v) { return v != 1; })) os << " d" << join(d);
      if (L.attrs.i("group") != 1) os << " g" << L.attrs.i("group");
      std::vector<int64_t> p = a_.pads_begin;
      p.insert(p.end(), a_.pads_end.begin(), a_.pads_end.end());
      if (std::any_of(p.begin(), p.end(), [](int64_t v) { return v != 0; })) {
        os << " p";
        for (size_t i = 0; i < p.size(); ++i) os << (i ? "," : "") << p[i];
      }
    }
    for (const std::string& s : a_.prologue) os << " [" << s << "]";
    if (a_.bias != kNone) os << " + bias";
    return os.str();
  }

  std::string fused_list() const {
    std::string s;
    auto append = [&](const std::string& item) {
      if (!s.empty()) s += ", ";
      s += item;
    };
    for (const std::string& p : a_.prologue) append(p);
    for (const PostOp& p : a_.post_ops) append(post_op_name(p));
    return s;
  }

  std::string post_op_list() const {
    if (a_.post_ops.empty()) return "";
    std::string s = " + post-ops [";
    for (size_t i = 0; i < a_.post_ops.size(); ++i) {
      if (i) s += ", ";
      s += post_op_name(a_.post_ops[i]);
    }
    return s + "]";
  }
};

// The oneDNN format tag of an activation layout name (layout_name's spelling).
std::optional<memory::format_tag> format_tag_of(const std::string& name) {
  using tag = memory::format_tag;
  static const std::map<std::string, tag> tags = {
      {"nwc", tag::nwc},     {"nCw16c", tag::nCw16c},     {"nCw8c", tag::nCw8c},
      {"nhwc", tag::nhwc},   {"nChw16c", tag::nChw16c},   {"nChw8c", tag::nChw8c},
      {"ndhwc", tag::ndhwc}, {"nCdhw16c", tag::nCdhw16c}, {"nCdhw8c", tag::nCdhw8c}};
  auto it = tags.find(name);
  if (it == tags.end()) return std::nullopt;
  return it->second;
}

bool OnednnKernel::use_format(const std::string& format, bool apply) {
  std::optional<memory::format_tag> tag = format_tag_of(format);
  if (!tag || !graph_) return false;
  std::unique_ptr<OnednnKernel> fresh;
  try {
    Analysis analysis(*graph_, kernel_);
    fresh = Builder(*graph_, kernel_, analysis, tag).build();
  } catch (const Unsupported&) {
    return false;
  } catch (const dnnl::error&) {
    return false;
  }
  // Tensors already linked must keep their layouts.
  for (const Binding& b : bindings_)
    if (b.kept && fresh->input_layout(b.input) != b.key) return false;
  if (out_kept_ && fresh->output_layout() != out_key_) return false;
  if (!apply) return true;
  for (const Binding& b : bindings_)
    if (b.kept) fresh->keep_input_layout(b.input);
  if (out_kept_) fresh->keep_output_layout();
  *this = std::move(*fresh);
  return true;
}

}  // namespace

std::string activation_layout_key(const Shape& shape, const std::string& format) {
  KORCH_CHECK(shape.size() == 4, "activation_layout_key of a ", shape.size(), "-D shape");
  std::optional<memory::format_tag> tag = format_tag_of(format);
  KORCH_CHECK(tag.has_value(), "activation_layout_key: unknown format ", format);
  return layout_key(MD(Dims(shape.begin(), shape.end()), memory::data_type::f32, *tag));
}

std::string native_blocked_format() {
  dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  bool avx512 = isa == dnnl::cpu_isa::avx512_core || isa == dnnl::cpu_isa::avx512_core_vnni ||
                isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx ||
                isa == dnnl::cpu_isa::avx512_mic || isa == dnnl::cpu_isa::avx512_mic_4ops;
  return avx512 ? "nChw16c" : "nChw8c";
}

bool onednn_supports(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  try {
    Analysis analysis(g, k);
    return true;
  } catch (const Unsupported& u) {
    if (why_not) *why_not = u.why;
  }
  return false;
}

int onednn_schedule_variants(const PrimGraph& g, const Kernel& k) {
  try {
    Analysis analysis(g, k);
    return analysis.linear->op == PrimOp::MatMul ? matmul_variants(g, analysis) : 2;
  } catch (const Unsupported&) {
  }
  return 1;
}

std::unique_ptr<CompiledKernel> compile_onednn_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  try {
    Analysis analysis(g, k);
    return Builder(g, k, analysis).build();
  } catch (const Unsupported& u) {
    if (why_not) *why_not = u.why;
  } catch (const dnnl::error& e) {
    if (why_not) *why_not = str_cat("oneDNN error: ", e.what());
  }
  return nullptr;
}

}  // namespace korch::cpu
