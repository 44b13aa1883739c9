// Building the oneDNN primitive of an analysed linear kernel (onednn_analysis.cc) in one of its
// schedule variants, with its constants captured and its runtime inputs bound.
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
// A fused kernel for which oneDNN only has its reference implementation while the bare linear op
// has an optimised one is rejected with a one-line reason.
#include <omp.h>

#include <algorithm>
#include <optional>
#include <sstream>

#include "backend/cpu/onednn_internal.h"

namespace korch::cpu {

namespace onednn_detail {

namespace {

bool is_ref_impl(const char* impl) { return std::string(impl).rfind("ref", 0) == 0; }

class Builder {
 public:
  // fixed: as build_onednn_kernel's.
  Builder(const PrimGraph& g, const Kernel& k, const Analysis& a, std::optional<memory::format_tag> fixed)
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
    if (k_.schedule == 2) return row_blocks(a_) > 1 ? build_row_blocks() : build_gemv();
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
      kernel->args_[arg] =
          capture_constant(*kernel, value, value->raw(), user_md, pd->query_md(dnnl::query::exec_arg_md, arg));
    };
    auto bind = [&](int arg, TensorId t, const MD& user_md) {
      MD internal_md = pd->query_md(dnnl::query::exec_arg_md, arg);
      const TensorInfo& ti = g_.tensor(t);
      if (ti.is_constant()) {
        bind_constant(arg, ti.constant, user_md);
        return;
      }
      OnednnKernel::Binding b{input_index(t), arg, memory(user_md, eng, DNNL_MEMORY_NONE), {}, {}, {}, {}};
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

  // Schedule variant 2 of a MatMul with constant B: row_blocks(a_) primitives, each over one block
  // of consecutive output rows (and the same rows of A and of full binary operands), sharing the
  // constants reordered once. oneDNN 2.6's brgemm matmul runs some row counts well below its
  // usual rate and others faster in one piece (Xeon VM, 2 threads, [M,768]x[768,3072]: 576 or 590
  // rows 315-317 GFLOP/s, 577 rows 238-278, 577 rows as blocks of 289 and 288: 294-300; 3136 x
  // [64,256]: one piece 277-287, two blocks 239); profiling keeps whichever variant is faster.
  std::unique_ptr<OnednnKernel> build_row_blocks() {
    const int blocks = row_blocks(a_);
    if (blocks < 2) unsupported("no row blocks for ", describe_core());
    const size_t r = a_.dst_dims.size();
    const int64_t rows = a_.dst_dims[r - 2];
    dnnl::engine& eng = cpu_engine();
    auto kernel = std::make_unique<OnednnKernel>();
    kernel->graph_ = &g_;
    kernel->kernel_ = k_;
    std::vector<dnnl::primitive_desc> pds;
    for (int b = 0; b < blocks; ++b) {
      pds.push_back(make_pd(true, true, true, rows * (b + 1) / blocks - rows * b / blocks));
      if (is_ref_impl(pds.back().impl_info_str()))
        unsupported("a block of rows of ", describe_core(), " leaves only the reference implementation");
    }
    std::vector<Captured> captured;  // constants reordered once serve every block
    size_t scratch_bytes = 0;
    for (const dnnl::primitive_desc& pd : pds) scratch_bytes = std::max(scratch_bytes, pd.scratchpad_desc().get_size());
    memory scratch;
    if (scratch_bytes > 0)
      scratch = memory(MD({static_cast<int64_t>(scratch_bytes)}, memory::data_type::u8, Dims{1}), eng);
    for (int b = 0; b < blocks; ++b) {
      const dnnl::primitive_desc& pd = pds[b];
      const int64_t first = rows * b / blocks, count = rows * (b + 1) / blocks - first;
      OnednnKernel::RowBlock block;
      // sliced: the operand has the output's rows (else it is read whole by every block).
      auto bind = [&](int arg, TensorId t, ConstTensorPtr value, const MD& whole_md, bool sliced) {
        bind_block_arg(*kernel, block, pd, arg, t, std::move(value), sliced ? row_slice(whole_md, count) : whole_md,
                       sliced ? row_offset_bytes(whole_md, first) : 0, captured);
      };
      bind(DNNL_ARG_SRC, a_.src, nullptr, a_.src_md, true);
      bind(DNNL_ARG_WEIGHTS, a_.weights, nullptr, a_.weights_md, false);
      if (a_.bias != kNone) bind(DNNL_ARG_BIAS, a_.bias, nullptr, bias_md(), false);
      for (size_t i = 0; i < a_.post_ops.size(); ++i) {
        const PostOp& p = a_.post_ops[i];
        if (p.binary)
          bind(DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_SRC_1, p.value ? kNone : p.operand,
               p.value, p.operand_md, p.operand_md.dims()[r - 2] != 1);
      }
      bind(DNNL_ARG_DST, kNone, nullptr, dense_md(a_.dst_dims), true);
      if (scratch) block.args[DNNL_ARG_SCRATCHPAD] = memory(pd.scratchpad_desc(), eng, scratch.get_data_handle());
      block.primitive = dnnl::primitive(pd);
      kernel->row_blocks_.push_back(std::move(block));
    }
    if (scratch) kernel->args_[DNNL_ARG_SCRATCHPAD] = scratch;  // held by the kernel
    kernel->description_ = str_cat("onednn ", describe_core(), post_op_list(), " (", pds[0].impl_info_str(), ")");
    return kernel;
  }

  // Schedule variant 2 of a MatMul of at most kGemvMaxRows rows with constant B (gemv_applies):
  // korch's GEMV writes partial sums over parts of K (one part per thread, at least 2), and a oneDNN
  // binary primitive adds the first two into the output with the bias and the post-ops. Profiling
  // keeps it where it beats oneDNN's matmul (onednn_gemv.cc says why it can).
  std::unique_ptr<OnednnKernel> build_gemv() {
    if (!gemv_applies(g_, a_)) unsupported("no GEMV for ", describe_core());
    dnnl::engine& eng = cpu_engine();
    auto kernel = std::make_unique<OnednnKernel>();
    kernel->graph_ = &g_;
    kernel->kernel_ = k_;
    const size_t r = a_.dst_dims.size();
    const Dims w_dims = a_.weights_md.dims();
    OnednnKernel::Gemv& gemv = kernel->gemv_.emplace();
    gemv.src_input = input_index(a_.src);
    gemv.parts = std::max(2, omp_get_max_threads());
    const ConstTensorPtr& w = g_.tensor(a_.weights).constant;
    gemv.lda = a_.src_md.data.format_desc.blocking.strides[r - 2];
    gemv.rows = a_.dst_dims[r - 2];
    gemv.k = w_dims[w_dims.size() - 2];
    gemv.n = a_.dst_dims[r - 1];
    gemv.weights = capture_constant(*kernel, w, w->raw(), a_.weights_md, dense_md(w_dims));
    gemv.partials = memory(dense_md({gemv.parts, gemv.rows, gemv.n}), eng);

    dnnl::primitive_attr attr;
    dnnl::post_ops po;
    Dims bias_dims(r, 1);  // the bias as an operand of the output's rank
    bias_dims.back() = gemv.n;
    const MD bias = dense_md(bias_dims);
    if (a_.bias != kNone) po.append_binary(algorithm::binary_add, bias);
    append_post_ops(po, [](const PostOp& p) { return p.operand_md; });
    attr.set_post_ops(po);
    const MD part_md = dense_md(a_.dst_dims);
    dnnl::binary::primitive_desc pd(dnnl::binary::desc(algorithm::binary_add, part_md, part_md, part_md), attr, eng);
    if (is_ref_impl(pd.impl_info_str()))
      unsupported("the GEMV's epilogue", post_op_list(), " leaves only oneDNN's reference implementation");
    OnednnKernel::RowBlock epilogue;
    auto* partials = static_cast<char*>(gemv.partials.get_data_handle());
    epilogue.args[DNNL_ARG_SRC_0] = memory(part_md, eng, partials);
    epilogue.args[DNNL_ARG_SRC_1] = memory(part_md, eng, partials + part_md.get_size());
    std::vector<Captured> captured;
    int post_op = 0;
    if (a_.bias != kNone)
      bind_block_arg(*kernel, epilogue, pd, DNNL_ARG_ATTR_MULTIPLE_POST_OP(post_op++) | DNNL_ARG_SRC_1, a_.bias,
                     nullptr, bias, 0, captured);
    for (const PostOp& p : a_.post_ops) {
      const int arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(post_op++) | DNNL_ARG_SRC_1;
      if (p.binary)
        bind_block_arg(*kernel, epilogue, pd, arg, p.value ? kNone : p.operand, p.value, p.operand_md, 0, captured);
    }
    bind_block_arg(*kernel, epilogue, pd, DNNL_ARG_DST, kNone, nullptr, part_md, 0, captured);
    epilogue.primitive = dnnl::primitive(pd);
    kernel->row_blocks_.push_back(std::move(epilogue));
    kernel->description_ = str_cat("korch gemv ", describe_core(), post_op_list(), " (K in ", gemv.parts,
                                   " parts; epilogue ", pd.impl_info_str(), ")");
    return kernel;
  }

  // The kernel's post-ops appended to `po` in order: eltwise ones as they are, binary ones reading
  // their operand as operand_md(post-op) describes it.
  template <typename OperandMd>
  void append_post_ops(dnnl::post_ops& po, const OperandMd& operand_md) const {
    for (const PostOp& p : a_.post_ops) {
      if (p.binary)
        po.append_binary(p.alg, operand_md(p));
      else
        po.append_eltwise(p.scale, p.alg, p.alpha, p.beta);
    }
  }

  // A constant already captured for one primitive (row blocks share them).
  struct Captured {
    const void* data;
    MD user, internal;
    memory mem;
  };

  // Binds execution argument `arg` of `block`, whose primitive descriptor is pd: a constant (t's
  // or `value`) at `offset` bytes, seen as user_md, captured once in pd's layout; else runtime
  // input t, or the output where t is kNone, at `offset` bytes on every run, which pd must read
  // in user_md's layout.
  void bind_block_arg(OnednnKernel& kernel, OnednnKernel::RowBlock& block, const dnnl::primitive_desc& pd, int arg,
                      TensorId t, ConstTensorPtr value, const MD& user_md, int64_t offset,
                      std::vector<Captured>& captured) const {
    MD internal_md = pd.query_md(dnnl::query::exec_arg_md, arg);
    if (!value && t != kNone && g_.tensor(t).is_constant()) value = g_.tensor(t).constant;
    if (value) {
      const void* data = static_cast<const char*>(value->raw()) + offset;
      for (const Captured& c : captured)
        if (c.data == data && c.user == user_md && c.internal == internal_md) {
          block.args[arg] = c.mem;
          return;
        }
      memory mem = capture_constant(kernel, value, data, user_md, internal_md);
      captured.push_back({data, user_md, internal_md, mem});
      block.args[arg] = mem;
      return;
    }
    if (internal_md != user_md)
      unsupported("row blocks and the GEMV's epilogue need every runtime operand in its own layout");
    block.args[arg] = memory(user_md, cpu_engine(), DNNL_MEMORY_NONE);
    block.runtime.push_back({arg, t == kNone ? -1 : input_index(t), offset});
  }

  // A constant at `data` seen as user_md, in the primitive's layout internal_md: its own bytes where
  // the two agree, else a copy reordered once. The kernel keeps `value` alive.
  memory capture_constant(OnednnKernel& kernel, const ConstTensorPtr& value, const void* data, const MD& user_md,
                          const MD& internal_md) const {
    kernel.constants_.push_back(value);
    memory user(user_md, cpu_engine(), const_cast<void*>(data));
    if (internal_md == user_md) return user;
    memory internal(internal_md, cpu_engine());
    dnnl::reorder(user, internal).execute(cpu_stream(), user, internal);
    cpu_stream().wait();
    return internal;
  }

  // The position of runtime tensor t among the kernel's inputs.
  int input_index(TensorId t) const {
    int input = static_cast<int>(std::find(k_.inputs.begin(), k_.inputs.end(), t) - k_.inputs.begin());
    KORCH_CHECK(input < static_cast<int>(k_.inputs.size()), "tensor ", g_.tensor(t).name, " is not a kernel input");
    return input;
  }

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

  // block_rows: a MatMul over that many of its output rows (the row-block variant); 0: all.
  dnnl::primitive_desc make_pd(bool any_layout, bool with_post_ops, bool with_prologue, int64_t block_rows = 0) const {
    const Primitive& L = *a_.linear;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (with_post_ops) {
      dnnl::post_ops po;
      append_post_ops(po, [&](const PostOp& p) {
        if (block_rows) return row_slice(p.operand_md, block_rows);
        return any_layout && p.full ? activation_md(p.operand_md.dims()) : p.operand_md;
      });
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
      MD dst = dense_md(dst_dims);
      if (block_rows) {
        src = row_slice(src, block_rows);
        dst = row_slice(dst, block_rows);
      }
      dnnl::matmul::desc d(src, w, bias, dst);
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
      if (k_.schedule == 2 && row_blocks(a_) > 1) os << " [rows in " << row_blocks(a_) << " blocks]";
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

}  // namespace

int row_blocks(const Analysis& a) {
  const size_t r = a.dst_dims.size();
  if (a.linear->op != PrimOp::MatMul || r < 2) return 1;
  const int64_t rows = a.dst_dims[r - 2];
  if (rows < kRowBlockMinRows) return 1;
  // Plain strided descriptors of the output's rank, batch dims of 1, with the rows or broadcast.
  auto rows_of = [&](const MD& md, bool broadcast) {
    const Dims d = md.dims();
    if (md.data.format_kind != dnnl_blocked || md.data.format_desc.blocking.inner_nblks != 0 || d.size() != r)
      return false;
    for (size_t i = 0; i + 2 < r; ++i)
      if (d[i] != 1) return false;
    return d[r - 2] == rows || (broadcast && d[r - 2] == 1);
  };
  if (!rows_of(a.src_md, false) || !rows_of(dense_md(a.dst_dims), false)) return 1;
  for (const PostOp& p : a.post_ops)
    if (p.binary && !rows_of(p.operand_md, true)) return 1;
  return 2;
}

bool gemv_applies(const PrimGraph& g, const Analysis& a) {
  const size_t r = a.dst_dims.size();
  const Dims wd = a.weights_md.dims(), sd = a.src_md.dims();
  if (a.linear->op != PrimOp::MatMul || !gemv_supported() || r < 2 || wd.size() < 2 || sd.size() != r ||
      a.dst_dims[r - 2] > kGemvMaxRows || !g.tensor(a.weights).is_constant() || g.tensor(a.src).is_constant())
    return false;
  auto ones = [](Dims::const_iterator first, Dims::const_iterator last) {
    return std::all_of(first, last, [](int64_t d) { return d == 1; });
  };
  const auto& blocking = a.src_md.data.format_desc.blocking;
  return ones(wd.begin(), wd.end() - 2) && ones(a.dst_dims.begin(), a.dst_dims.end() - 2) &&
         ones(sd.begin(), sd.end() - 2) && sd[r - 2] == a.dst_dims[r - 2] &&
         a.src_md.data.format_kind == dnnl_blocked && blocking.inner_nblks == 0 && a.src_md.data.offset0 == 0 &&
         blocking.strides[r - 1] == 1;
}

int matmul_variants(const PrimGraph& g, const Analysis& a) {
  const TensorInfo& w = g.tensor(a.weights);
  if (!w.is_constant() || w.shape.size() < 2) return 1;
  return row_blocks(a) > 1 || gemv_applies(g, a) ? 3 : 2;
}

std::unique_ptr<OnednnKernel> build_onednn_kernel(const PrimGraph& g, const Kernel& k, const Analysis& a,
                                                  std::optional<memory::format_tag> fixed) {
  return Builder(g, k, a, fixed).build();
}

}  // namespace onednn_detail

int onednn_schedule_variants(const PrimGraph& g, const Kernel& k) {
  try {
    onednn_detail::Analysis analysis = onednn_detail::analyse_linear_kernel(g, k);
    return analysis.linear->op == PrimOp::MatMul ? onednn_detail::matmul_variants(g, analysis) : 2;
  } catch (const onednn_detail::Unsupported&) {
  }
  return 1;
}

}  // namespace korch::cpu
