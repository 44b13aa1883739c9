// Pattern analysis of a linear kernel: a kernel with exactly one Linear primitive becomes ONE oneDNN
// primitive (convolution_forward, deconvolution_forward or matmul) with its neighbours folded in;
// this finds which tensor plays which role, or the reason why the kernel is not such a pattern.
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
#include <algorithm>
#include <map>
#include <optional>

#include "backend/cpu/onednn_internal.h"

namespace korch::cpu {

namespace onednn_detail {

namespace {

// The analysis, run by the constructor (throws Unsupported).
class Analyser : public Analysis {
 public:
  Analyser(const PrimGraph& g, const Kernel& k) : g_(g), k_(k) {
    for (PrimId p : k.prims) in_kernel_[p] = 1;
    for (PrimId p : k.prims)
      for (TensorId t : g.prim(p).inputs)
        if (produced_inside(t)) consumers_[t].push_back(p);
    for (auto& [t, c] : consumers_) c.erase(std::unique(c.begin(), c.end()), c.end());
    run();
  }

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
    std::optional<PostOp> op = fit_eltwise(g_, cur, region, result);
    if (!op) return kNone;
    add(*op);
    for (PrimId p : region) visited_[p] = 1;
    return result;
  }
};

}  // namespace

Analysis analyse_linear_kernel(const PrimGraph& g, const Kernel& k) {
  Analyser analyser(g, k);
  return analyser;  // the result, without the analyser's state
}

}  // namespace onednn_detail

bool onednn_supports(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  try {
    onednn_detail::analyse_linear_kernel(g, k);
    return true;
  } catch (const onednn_detail::Unsupported& u) {
    if (why_not) *why_not = u.why;
  }
  return false;
}

}  // namespace korch::cpu
