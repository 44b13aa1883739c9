// Memory-bound kernels as Halide 14 JIT pipelines. Every primitive of the
// kernel becomes a Halide Func over its output coordinates (Halide dimension 0
// is the innermost ONNX axis): elementwise and layout primitives are index maps
// inlined into their consumers; reductions and pooling windows use RDoms and
// are computed once (never inlined); 2-D max pools run as two separable passes.
// The output is vectorised along its innermost dimension and parallelised over
// its outermost non-unit dimension. Kernels of elementwise, broadcast, spatial
// reduction, pad and resize primitives can read and write their 4-D activations
// in oneDNN's layouts between convolutions, nhwc or channel-blocked (nChw8c,
// nChw16c: a 5-D view), through strides, with a schedule that loops channels
// innermost; the values are the same as in the dense layout.
// Softplus (Log(Add(Exp(x), 1))) is computed as max(x, 0) + log1p(exp(-|x|)).
// Exp and Sigmoid use Halide::exp (relative error < 4e-7 over the float range, +inf above
// ln(FLT_MAX), 0 below ln(FLT_MIN)); Halide's fast_exp (2e-6) made YOLOX's outputs twice as far
// from a float64 evaluation as ONNX Runtime's.
// Outputs larger than the last-level cache also get schedule variants whose computed tiles or
// rows are written out with streaming stores (korch_stream_rows, through a custom lowering pass;
// see stream_store.h): no read for ownership of the output's lines.
// Halide runs its parallel loops on korch's OpenMP threads (custom do_par_for),
// so oneDNN and Halide share one pool. Resize reads per-axis tables of the
// reference's own taps (input index, weight), so it indexes exactly like the
// reference. Unsupported cases (Linear primitives, integer division,
// select_last_index arg-reductions, interpolating Resize on integers, ...)
// return nullptr with the reason.
#include <Halide.h>
#include <cpuid.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <optional>

#include "backend/cpu/compiled_kernel.h"
#include "backend/cpu/layout_link.h"
#include "backend/cpu/stream_store.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch::cpu {

namespace {

using Halide::Expr;
using Halide::Func;
using Halide::ImageParam;
using Halide::RDom;
using Halide::Var;

struct Unsupported {
  std::string why;
};

Halide::Type storage_type(DType t) {
  switch (t) {
    case DType::F32: return Halide::Float(32);
    case DType::F64: return Halide::Float(64);
    case DType::I64: return Halide::Int(64);
    case DType::I32: return Halide::Int(32);
    case DType::I8: return Halide::Int(8);
    case DType::U8: return Halide::UInt(8);
    case DType::Bool: return Halide::UInt(8);
  }
  return Halide::Float(32);
}

int omp_do_par_for(Halide::JITUserContext* ctx, int (*f)(Halide::JITUserContext*, int, uint8_t*), int min, int extent,
                   uint8_t* closure) {
  int result = 0;
#pragma omp parallel for schedule(static)
  for (int i = min; i < min + extent; ++i) {
    int r = f(ctx, i, closure);
    if (r != 0) {
#pragma omp atomic write
      result = r;
    }
  }
  return result;
}

// Builds the Funcs of one kernel.
class Generator {
 public:
  // channels_last: some tensors are stored nhwc or channel-blocked; spatial reductions then
  // become explicit Funcs (explicit_reductions()) that the channels-last schedule loops
  // channels-innermost. input_blocks: the inputs stored channel-blocked, with their block; their
  // ImageParams are 5-D (block, w, h, channel blocks, n) and read at (c % block, w, h, c / block, n).
  Generator(const PrimGraph& g, const Kernel& k, bool channels_last = false, std::map<TensorId, int> input_blocks = {})
      : g_(g), k_(k), channels_last_(channels_last), input_blocks_(std::move(input_blocks)) {}

  Func build() {
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      const TensorInfo& t = g_.tensor(k_.inputs[i]);
      int rank = input_blocks_.count(k_.inputs[i]) ? 5 : static_cast<int>(t.shape.size());
      params_.emplace(k_.inputs[i], ImageParam(storage_type(t.dtype), rank, "in" + std::to_string(i)));
    }
    for (PrimId p : k_.prims) define(p);
    return funcs_.at(k_.output);
  }
  const std::map<TensorId, ImageParam>& params() const { return params_; }
  const std::vector<Func>& materialised() const { return materialised_; }
  const std::vector<Func>& shared() const { return shared_; }
  const std::vector<Func>& stencils() const { return stencils_; }
  struct ExplicitReduction {
    Func func;
    RDom domain;
    int channel_arg;  // index in func.args() of the channel axis
    bool sum;         // a sum (or mean): accumulated per row first (schedule_channel_reductions)
  };
  const std::vector<ExplicitReduction>& explicit_reductions() const { return explicit_reductions_; }
  // Value of tensor t (a kernel input or a primitive's output) at ONNX index `idx`.
  Expr value_at(TensorId t, const std::vector<Expr>& idx) { return at(t, idx); }

 private:
  static std::vector<Var> vars(size_t rank) {
    std::vector<Var> v;
    for (size_t i = 0; i < rank; ++i) v.emplace_back("x" + std::to_string(i));
    return v;
  }
  // ONNX-order index expressions for Halide vars (x0 innermost).
  static std::vector<Expr> onnx_index(const std::vector<Var>& v) {
    std::vector<Expr> idx(v.size());
    for (size_t a = 0; a < v.size(); ++a) idx[a] = v[v.size() - 1 - a];
    return idx;
  }
  // Value of tensor t at ONNX index `idx` (in range).
  Expr at(TensorId t, const std::vector<Expr>& idx) {
    std::vector<Expr> rev(idx.rbegin(), idx.rend());
    auto f = funcs_.find(t);
    if (f != funcs_.end()) return rev.empty() ? f->second() : f->second(rev);
    ImageParam& p = params_.at(t);
    auto blocked = input_blocks_.find(t);
    if (blocked != input_blocks_.end()) {  // rev = (w, h, c, n)
      Expr block = blocked->second;
      return p(rev[2] % block, rev[0], rev[1], rev[2] / block, rev[3]);
    }
    return rev.empty() ? p() : p(rev);
  }
  // Value of tensor t broadcast to an output of rank `out_rank` at `idx`.
  Expr broadcast_at(TensorId t, const std::vector<Expr>& idx) {
    const Shape& s = g_.tensor(t).shape;
    size_t shift = idx.size() - s.size();
    std::vector<Expr> in(s.size());
    for (size_t j = 0; j < s.size(); ++j) in[j] = s[j] == 1 ? Expr(0) : idx[shift + j];
    return at(t, in);
  }
  // Whether tensor t, broadcast to `out`, takes one value along the output's innermost axis.
  bool constant_along_rows(TensorId t, const Shape& out) const {
    const Shape& s = g_.tensor(t).shape;
    return !out.empty() && out.back() > 1 && (s.empty() || s.back() == 1) && g_.tensor(t).dtype == DType::F32;
  }
  Expr as_bool(Expr e) { return e.type().is_bool() ? e : e != Halide::cast(e.type(), 0); }
  Expr store(Expr e, DType t) {
    if (e.type().is_bool())
      return Halide::select(e, Halide::cast(storage_type(t), 1), Halide::cast(storage_type(t), 0));
    return Halide::cast(storage_type(t), e);
  }

  void define(PrimId p) {
    const Primitive& prim = g_.prim(p);
    const TensorInfo& out = g_.tensor(prim.output);
    std::vector<Var> v = vars(out.shape.size());
    std::vector<Expr> idx = onnx_index(v);
    Func f("p" + std::to_string(p) + "_" + prim_op_name(prim.op));
    Expr value;
    switch (prim_kind(prim.op)) {
      case PrimKind::Elementwise: value = elementwise(prim, idx, out.dtype); break;
      case PrimKind::Reduce: value = reduce(prim, idx, out); break;
      case PrimKind::Broadcast: value = broadcast_at(prim.inputs[0], idx); break;
      case PrimKind::Layout: value = layout(prim, idx); break;
      case PrimKind::Window: value = window(prim, idx); break;
      case PrimKind::Linear: throw Unsupported{"Linear primitives belong to oneDNN kernels"};
    }
    std::vector<Halide::Var> hv(v.begin(), v.end());
    if (hv.empty())
      f() = store(value, out.dtype);
    else
      f(hv) = store(value, out.dtype);
    if (prim_kind(prim.op) == PrimKind::Reduce || prim_kind(prim.op) == PrimKind::Window) {
      if (prim.output != k_.output) materialised_.push_back(f);
    } else if (prim.output != k_.output && consumers_inside(prim.output) > 1 && !out.shape.empty()) {
      // Read by several primitives of the kernel: computed once per slice, not
      // re-inlined.
      shared_.push_back(f);
    }
    funcs_.emplace(prim.output, f);
  }

  Expr elementwise(const Primitive& prim, const std::vector<Expr>& idx, DType out_dtype) {
    std::vector<Expr> a;
    for (TensorId t : prim.inputs) a.push_back(broadcast_at(t, idx));
    DType in_dtype = g_.tensor(prim.inputs[0]).dtype;
    bool fp = is_floating(in_dtype);
    Halide::Type ty = a[0].type();
    auto need_float = [&] {
      if (!fp) throw Unsupported{str_cat(prim_op_name(prim.op), " on integers")};
    };
    switch (prim.op) {
      case PrimOp::Neg: return -a[0];
      case PrimOp::Abs: return Halide::cast(ty, Halide::abs(a[0]));
      case PrimOp::Exp: need_float(); return Halide::exp(a[0]);
      case PrimOp::Log:
        need_float();
        if (std::optional<TensorId> x = softplus_argument(prim)) return softplus(broadcast_at(*x, idx));
        return Halide::log(a[0]);
      case PrimOp::Sqrt: need_float(); return Halide::sqrt(a[0]);
      case PrimOp::Reciprocal: need_float(); return Halide::cast(ty, 1) / a[0];
      case PrimOp::Sin: need_float(); return Halide::sin(a[0]);
      case PrimOp::Cos: need_float(); return Halide::cos(a[0]);
      case PrimOp::Tanh: need_float(); return Halide::tanh(a[0]);
      case PrimOp::Sigmoid:  // exp(-x) capped at exp(88) (sigmoid(-88) = 6e-39): never inf
        need_float();
        return Halide::cast(ty, 1) / (Halide::cast(ty, 1) + Halide::exp(Halide::min(-a[0], Halide::cast(ty, 88))));
      case PrimOp::Erf: need_float(); return Halide::erf(a[0]);
      case PrimOp::Floor: return fp ? Halide::floor(a[0]) : a[0];
      case PrimOp::Ceil: return fp ? Halide::ceil(a[0]) : a[0];
      case PrimOp::Round: return fp ? Halide::round(a[0]) : a[0];
      case PrimOp::Sign:
        return Halide::select(a[0] > Halide::cast(ty, 0), Halide::cast(ty, 1),
                              Halide::select(a[0] < Halide::cast(ty, 0), Halide::cast(ty, -1), Halide::cast(ty, 0)));
      case PrimOp::Not: return !as_bool(a[0]);
      case PrimOp::Relu: return Halide::max(a[0], Halide::cast(ty, 0));
      case PrimOp::Copy: return a[0];
      case PrimOp::Cast:
        if (out_dtype == DType::Bool) return as_bool(a[0]);
        if (in_dtype == DType::Bool) return Halide::cast(storage_type(out_dtype), a[0]);
        return Halide::cast(storage_type(out_dtype), a[0]);
      case PrimOp::Add: return a[0] + a[1];
      case PrimOp::Sub: return a[0] - a[1];
      case PrimOp::Mul: return a[0] * a[1];
      case PrimOp::Div:
        if (!fp) throw Unsupported{"integer division (Halide rounds toward -inf, ONNX toward 0)"};
        // A divisor constant along the output's rows (softmax's sum, a norm's deviation):
        // multiply by its reciprocal, which Halide hoists out of the row loop when the row is
        // the innermost loop (a vector division per element costs more than the memory
        // traffic; after a transpose it is a division and a multiply per element). Differs
        // from a / b by fp32 rounding (<= 1.5 ulp) for |b| in [2^-126, 2^126]; outside, 1 / b
        // overflows or loses precision (Halide's default float flags allow no inf/nan
        // guarantees there either).
        if (constant_along_rows(prim.inputs[1], g_.tensor(prim.output).shape)) return a[0] * (1.0f / a[1]);
        return a[0] / a[1];
      case PrimOp::Pow:
        if (!fp || !is_floating(g_.tensor(prim.inputs[1]).dtype)) throw Unsupported{"integer Pow"};
        return Halide::pow(a[0], a[1]);
      case PrimOp::Max: return Halide::max(a[0], a[1]);
      case PrimOp::Min: return Halide::min(a[0], a[1]);
      case PrimOp::Mod: {
        if (!fp) throw Unsupported{"integer Mod"};
        Expr r = a[0] - a[1] * Halide::trunc(a[0] / a[1]);
        if (prim.attrs.i_or("fmod", 0)) return r;
        return Halide::select(r != 0 && ((r < 0) != (a[1] < 0)), r + a[1], r);
      }
      case PrimOp::Equal: return a[0] == a[1];
      case PrimOp::Less: return a[0] < a[1];
      case PrimOp::Greater: return a[0] > a[1];
      case PrimOp::LessEqual: return a[0] <= a[1];
      case PrimOp::GreaterEqual: return a[0] >= a[1];
      case PrimOp::And: return as_bool(a[0]) && as_bool(a[1]);
      case PrimOp::Or: return as_bool(a[0]) || as_bool(a[1]);
      case PrimOp::Xor: return as_bool(a[0]) != as_bool(a[1]);
      case PrimOp::Where: return Halide::select(as_bool(a[0]), a[1], a[2]);
      default: break;
    }
    throw Unsupported{str_cat("elementwise ", prim_op_name(prim.op))};
  }

  // Softplus as fission writes it, Log(Add(Exp(x), 1)) with all three primitives in this
  // kernel: returns x. Computed as written, 1 + exp(x) rounds away exp(x)'s low bits for x < 0
  // (relative error ~2^-24 / exp(x); softplus(-17) comes out 0, softplus(-12) 0.9% off);
  // softplus() below stays within a few ulp everywhere.
  std::optional<TensorId> softplus_argument(const Primitive& log_prim) const {
    auto producer_in_kernel = [&](TensorId t, PrimOp op) -> const Primitive* {
      PrimId p = g_.tensor(t).producer;
      if (p == kNone || !funcs_.count(t) || g_.prim(p).op != op) return nullptr;
      return &g_.prim(p);
    };
    auto is_one = [&](TensorId t) {
      const TensorInfo& info = g_.tensor(t);
      return info.is_constant() && num_elements(info.shape) == 1 && is_floating(info.dtype) &&
             info.constant->get_f64(0) == 1.0;
    };
    const Primitive* add = producer_in_kernel(log_prim.inputs[0], PrimOp::Add);
    if (!add || add->inputs.size() != 2 || g_.tensor(log_prim.inputs[0]).dtype != DType::F32) return std::nullopt;
    for (int e = 0; e < 2; ++e) {
      const Primitive* exp = producer_in_kernel(add->inputs[e], PrimOp::Exp);
      if (exp && is_one(add->inputs[1 - e]) && g_.tensor(add->inputs[e]).shape == g_.tensor(log_prim.inputs[0]).shape)
        return exp->inputs[0];
    }
    return std::nullopt;
  }
  // max(x, 0) + log1p(exp(-|x|)), with log1p(u) for u in [0, 1] as 2 atanh(s), s = u / (2 + u)
  // <= 1/3, by its odd series to s^15 (truncation < 2e-9 relative): no cancellation, and no
  // (1 + u) - 1 for Halide's simplifier to fold away.
  static Expr softplus(Expr x) {
    Expr u = Halide::exp(-Halide::abs(x));
    Expr s = u / (2.0f + u);
    Expr s2 = s * s;
    Expr series = 1.0f / 15.0f;
    for (float k : {13.0f, 11.0f, 9.0f, 7.0f, 5.0f, 3.0f}) series = series * s2 + 1.0f / k;
    series = series * s2 + 1.0f;
    return Halide::max(x, 0.0f) + 2.0f * s * series;
  }

  Expr reduce(const Primitive& prim, const std::vector<Expr>& idx, const TensorInfo& out) {
    TensorId x = prim.inputs[0];
    const Shape& s = g_.tensor(x).shape;
    if (prim.op == PrimOp::ArgMax || prim.op == PrimOp::ArgMin) {
      if (prim.attrs.i_or("select_last_index", 0)) throw Unsupported{"select_last_index"};
      int64_t axis = prim.attrs.i("axis");
      bool keep = prim.attrs.i("keepdims") != 0;
      RDom r(0, static_cast<int>(s[axis]));
      std::vector<Expr> in;
      size_t o = 0;
      for (size_t a = 0; a < s.size(); ++a) {
        if (static_cast<int64_t>(a) == axis) {
          in.push_back(r.x);
          if (keep) ++o;
        } else {
          in.push_back(idx[o++]);
        }
      }
      Expr v = at(x, in);
      Halide::Tuple t = prim.op == PrimOp::ArgMax ? Halide::argmax(r, v) : Halide::argmin(r, v);
      return Halide::cast(Halide::Int(64), t[0]);
    }
    const auto& axes = prim.attrs.ints("axes");
    bool keep = prim.attrs.i("keepdims") != 0;
    // RDom dimension 0 is the innermost loop: reduced axes enter innermost-first, so that the
    // reduction walks memory contiguously.
    std::vector<int64_t> reduced;
    for (int64_t a = static_cast<int64_t>(s.size()) - 1; a >= 0; --a)
      if (std::find(axes.begin(), axes.end(), a) != axes.end()) reduced.push_back(a);
    Halide::Region ranges;
    for (int64_t a : reduced) ranges.emplace_back(0, static_cast<int>(s[a]));
    if (ranges.empty()) throw Unsupported{"reduction over no axes"};
    RDom r(ranges);
    Expr v = reduced_value(x, reduced, r, keep, idx);
    double count = 1;
    for (int64_t a : axes) count *= static_cast<double>(s[a]);
    if (channels_last_ && s.size() == 4 && reduced.size() <= 2 && reduced.back() >= 2)
      return explicit_reduction(prim, x, reduced, r, keep, idx, count);
    if (prim.op == PrimOp::ReduceMean && !is_floating(out.dtype)) throw Unsupported{"integer mean"};
    if ((prim.op == PrimOp::ReduceSum || prim.op == PrimOp::ReduceMean) && ranges.size() >= 2) {
      // Over several axes, each row (the innermost reduced axis) is summed first, then the rows:
      // shorter partial sums, and the same order as the channels-last schedule's row-first plane
      // sums (schedule_channel_reductions), so that an exported package (dense kernels) and
      // `korch run` (the same kernel linked channels-last) agree bit for bit under strict_float.
      RDom inner({ranges[0]}, "t" + std::to_string(prim.output) + "_row");
      RDom outer(Halide::Region(ranges.begin() + 1, ranges.end()), "t" + std::to_string(prim.output) + "_rows");
      std::vector<Expr> pos = {inner.x};
      for (int i = 0; i < outer.dimensions(); ++i) pos.push_back(outer[i]);
      Expr total = Halide::sum(outer, Halide::sum(inner, reduced_value_at(x, reduced, pos, keep, idx)));
      if (prim.op == PrimOp::ReduceSum) return total;
      return total / Halide::cast(v.type(), Expr(static_cast<float>(count)));
    }
    switch (prim.op) {
      case PrimOp::ReduceSum: return Halide::sum(r, v);
      case PrimOp::ReduceMean: return Halide::sum(r, v) / Halide::cast(v.type(), Expr(static_cast<float>(count)));
      case PrimOp::ReduceMax: return Halide::maximum(r, v);
      case PrimOp::ReduceMin: return Halide::minimum(r, v);
      case PrimOp::ReduceProd: return Halide::product(r, v);
      default: break;
    }
    throw Unsupported{str_cat("reduction ", prim_op_name(prim.op))};
  }

  // The reduction's input x at output index `idx` and RDom point `r` (r[i] runs over axis
  // reduced[i]); at least 32-bit floats.
  Expr reduced_value(TensorId x, const std::vector<int64_t>& reduced, const RDom& r, bool keep,
                     const std::vector<Expr>& idx) {
    std::vector<Expr> pos;
    for (int i = 0; i < r.dimensions(); ++i) pos.push_back(r[i]);
    return reduced_value_at(x, reduced, pos, keep, idx);
  }
  // The same at given positions along the reduced axes (pos[i] along axis reduced[i]).
  Expr reduced_value_at(TensorId x, const std::vector<int64_t>& reduced, const std::vector<Expr>& pos, bool keep,
                        const std::vector<Expr>& idx) {
    const Shape& s = g_.tensor(x).shape;
    std::vector<Expr> in;
    size_t o = 0;
    for (size_t a = 0; a < s.size(); ++a) {
      auto axis = std::find(reduced.begin(), reduced.end(), static_cast<int64_t>(a));
      if (axis != reduced.end()) {
        in.push_back(pos[static_cast<int>(axis - reduced.begin())]);
        if (keep) ++o;
      } else {
        in.push_back(idx[o++]);
      }
    }
    Expr v = at(x, in);
    if (v.type().is_float() && v.type().bits() < 32) v = Halide::cast(Halide::Float(32), v);
    return v;
  }

  // A reduction over spatial axes of a 4-D tensor as its own Func (init, then an update over the
  // RDom), so that a channels-last schedule can loop channels innermost inside the RDom.
  Expr explicit_reduction(const Primitive& prim, TensorId x, const std::vector<int64_t>& reduced, const RDom& r,
                          bool keep, const std::vector<Expr>& idx, double count) {
    std::vector<Var> rv = vars(idx.size());
    Expr v = reduced_value(x, reduced, r, keep, onnx_index(rv));
    std::vector<Halide::Var> hv(rv.begin(), rv.end());
    Func red("t" + std::to_string(prim.output) + "_" + std::string(prim_op_name(prim.op)));
    switch (prim.op) {
      case PrimOp::ReduceSum:
      case PrimOp::ReduceMean:
        red(hv) = Halide::cast(v.type(), 0);
        red(hv) = red(hv) + v;
        break;
      case PrimOp::ReduceMax:
        red(hv) = v.type().min();
        red(hv) = Halide::max(red(hv), v);
        break;
      case PrimOp::ReduceMin:
        red(hv) = v.type().max();
        red(hv) = Halide::min(red(hv), v);
        break;
      default: throw Unsupported{str_cat("channels-last reduction ", prim_op_name(prim.op))};
    }
    // The channel axis (ONNX axis 1, never reduced here) is Halide argument rank - 2.
    explicit_reductions_.push_back(
        {red, r, static_cast<int>(idx.size()) - 2, prim.op == PrimOp::ReduceSum || prim.op == PrimOp::ReduceMean});
    std::vector<Expr> rev(idx.rbegin(), idx.rend());
    Expr value = red(rev);
    if (prim.op == PrimOp::ReduceMean) value = value / Halide::cast(v.type(), Expr(static_cast<float>(count)));
    return value;
  }

  Expr layout(const Primitive& prim, const std::vector<Expr>& idx) {
    TensorId x = prim.inputs[0];
    const Shape& s = g_.tensor(x).shape;
    const Attrs& a = prim.attrs;
    switch (prim.op) {
      case PrimOp::Transpose: {
        const auto& perm = a.ints("perm");
        std::vector<Expr> in(s.size());
        for (size_t j = 0; j < perm.size(); ++j) in[perm[j]] = idx[j];
        return at(x, in);
      }
      case PrimOp::Reshape: {
        const Shape& o = g_.tensor(prim.output).shape;
        // Linear index in the output, then coordinates in the input.
        Expr lin = 0;
        std::vector<int64_t> os = strides_of(o), is = strides_of(s);
        for (size_t j = 0; j < o.size(); ++j)
          if (o[j] != 1) lin = lin + idx[j] * static_cast<int>(os[j]);
        std::vector<Expr> in(s.size());
        for (size_t j = 0; j < s.size(); ++j)
          in[j] = s[j] == 1 ? Expr(0) : (lin / static_cast<int>(is[j])) % static_cast<int>(s[j]);
        return at(x, in);
      }
      case PrimOp::Slice: {
        const auto& st = a.ints("starts");
        const auto& sp = a.ints("steps");
        std::vector<Expr> in(s.size());
        for (size_t j = 0; j < s.size(); ++j) in[j] = static_cast<int>(st[j]) + idx[j] * static_cast<int>(sp[j]);
        return at(x, in);
      }
      case PrimOp::Concat: {
        int64_t axis = a.i("axis");
        Expr value;
        int64_t offset = 0;
        std::vector<std::pair<Expr, Expr>> cases;
        for (TensorId t : prim.inputs) {
          int64_t len = g_.tensor(t).shape[axis];
          std::vector<Expr> in = idx;
          in[axis] =
              Halide::clamp(idx[axis] - static_cast<int>(offset), 0, static_cast<int>(std::max<int64_t>(len - 1, 0)));
          if (len > 0) cases.emplace_back(idx[axis] < static_cast<int>(offset + len), at(t, in));
          offset += len;
        }
        value = cases.back().second;
        for (int i = static_cast<int>(cases.size()) - 2; i >= 0; --i)
          value = Halide::select(cases[i].first, cases[i].second, value);
        return value;
      }
      case PrimOp::Pad: {
        const auto& pads = a.ints("pads");
        const std::string& mode = a.s("mode");
        size_t r = s.size();
        std::vector<Expr> in(r);
        Expr inside = Halide::cast(Halide::Bool(), true);
        for (size_t j = 0; j < r; ++j) {
          Expr c = idx[j] - static_cast<int>(pads[j]);
          int n = static_cast<int>(s[j]);
          if (mode == "constant") {
            inside = inside && c >= 0 && c < n;
            in[j] = Halide::clamp(c, 0, n - 1);
          } else if (mode == "edge") {
            in[j] = Halide::clamp(c, 0, n - 1);
          } else {
            if (n == 1) {
              in[j] = 0;
            } else {
              int period = 2 * (n - 1);
              Expr m = ((c % period) + period) % period;
              in[j] = Halide::clamp(Halide::select(m >= n, period - m, m), 0,
                                    n - 1);  // clamp: tells bounds inference
            }
          }
        }
        Expr v = at(x, in);
        if (mode != "constant") return v;
        return Halide::select(inside, v, Halide::cast(v.type(), Expr(static_cast<float>(a.f("value")))));
      }
      case PrimOp::Gather: {
        int64_t axis = a.i("axis");
        TensorId indices = prim.inputs[1];
        size_t ir = g_.tensor(indices).shape.size();
        std::vector<Expr> iidx(idx.begin() + axis, idx.begin() + axis + ir);
        Expr j = Halide::cast(Halide::Int(32), at(indices, iidx));
        int len = static_cast<int>(s[axis]);
        j = Halide::clamp(Halide::select(j < 0, j + len, j), 0, len - 1);
        std::vector<Expr> in(idx.begin(), idx.begin() + axis);
        in.push_back(j);
        in.insert(in.end(), idx.begin() + axis + ir, idx.end());
        return at(x, in);
      }
      case PrimOp::Resize: return resize(prim, idx);
      default: break;
    }
    throw Unsupported{str_cat("layout ", prim_op_name(prim.op))};
  }

  // Resize: for every axis that changes, tables indexed by the output
  // coordinate hold the reference's taps (clamped input index and weight, and
  // whether the coordinate is inside the input for tf_crop_and_resize); the
  // value is the tensor product of the axes' taps.
  Expr resize(const Primitive& prim, const std::vector<Expr>& idx) {
    TensorId x = prim.inputs[0];
    const Shape& s = g_.tensor(x).shape;
    const Shape& o = g_.tensor(prim.output).shape;
    const Attrs& a = prim.attrs;
    const std::string& mode = a.s("mode");
    Halide::Type ty = storage_type(g_.tensor(x).dtype);
    int taps_per_axis = mode == "nearest" ? 1 : mode == "linear" ? 2 : mode == "cubic" ? 4 : 0;
    if (taps_per_axis == 0) throw Unsupported{str_cat("Resize mode ", mode)};
    if (taps_per_axis > 1 && !ty.is_float()) throw Unsupported{"interpolating Resize on integers"};
    bool f64 = ty.is_float() && ty.bits() == 64;
    int64_t rank = static_cast<int64_t>(s.size());
    struct AxisTable {
      int axis;
      Expr coord;  // output coordinate, clamped to the table
      Halide::Buffer<int32_t> index;
      Halide::Buffer<float> weight;
      Halide::Buffer<double> weight64;
      Halide::Buffer<uint8_t> inside;
      bool any_outside = false;
    };
    std::vector<AxisTable> tables;
    std::vector<reference::ResizeTap> taps;
    for (int64_t axis = 0; axis < rank; ++axis) {
      if (reference::resize_axis_is_identity(a, axis, s[axis], o[axis])) continue;
      if (s[axis] <= 0 || o[axis] <= 0) throw Unsupported{"Resize of an empty axis"};
      int n = static_cast<int>(o[axis]);
      std::string name = str_cat("resize_p", prim.output, "_a", axis);
      AxisTable t{static_cast<int>(axis),
                  Halide::clamp(idx[axis], 0, n - 1),
                  Halide::Buffer<int32_t>({n, taps_per_axis}, name + "_index"),
                  Halide::Buffer<float>({n, taps_per_axis}, name + "_weight"),
                  Halide::Buffer<double>({n, taps_per_axis}, name + "_weight64"),
                  Halide::Buffer<uint8_t>({n}, name + "_inside")};
      for (int j = 0; j < n; ++j) {
        bool inside = reference::resize_taps(a, axis, rank, j, s[axis], o[axis], &taps);
        t.inside(j) = inside ? 1 : 0;
        t.any_outside |= !inside;
        KORCH_CHECK(!inside || static_cast<int>(taps.size()) == taps_per_axis, "Resize tap count");
        for (int k = 0; k < taps_per_axis; ++k) {
          t.index(j, k) = inside ? static_cast<int32_t>(taps[k].index) : 0;
          t.weight(j, k) = inside ? static_cast<float>(taps[k].weight) : 0.0f;
          t.weight64(j, k) = inside ? taps[k].weight : 0.0;
        }
      }
      tables.push_back(std::move(t));
    }
    int combos = 1;
    for (size_t i = 0; i < tables.size(); ++i) combos *= taps_per_axis;
    Expr value;
    for (int c = 0; c < combos; ++c) {
      std::vector<Expr> in = idx;
      Expr weight;
      int rest = c;
      for (AxisTable& t : tables) {
        int k = rest % taps_per_axis;
        rest /= taps_per_axis;
        int len = static_cast<int>(s[t.axis]);
        in[t.axis] = Halide::clamp(t.index(t.coord, k), 0, len - 1);
        if (taps_per_axis > 1) {
          Expr w = f64 ? Expr(t.weight64(t.coord, k)) : Halide::cast(ty, t.weight(t.coord, k));
          weight = weight.defined() ? weight * w : w;
        }
      }
      Expr term = at(x, in);
      if (weight.defined()) term = term * weight;
      value = value.defined() ? value + term : term;
    }
    Expr inside;
    for (AxisTable& t : tables)
      if (t.any_outside) {
        Expr i = t.inside(t.coord) != 0;
        inside = inside.defined() ? (inside && i) : i;
      }
    if (inside.defined()) value = Halide::select(inside, value, Halide::cast(ty, Expr(a.f("extrapolation_value"))));
    return value;
  }

  Expr window(const Primitive& prim, const std::vector<Expr>& idx) {
    TensorId x = prim.inputs[0];
    const Shape& s = g_.tensor(x).shape;
    const Attrs& a = prim.attrs;
    const auto& k = a.ints("kernel");
    const auto& st = a.ints("strides");
    const auto& pd = a.ints("pads");
    const auto& dl = a.ints("dilations");
    size_t nsp = k.size();
    if (prim.op == PrimOp::MaxPool && nsp == 2 && dl[0] == 1 && dl[1] == 1)
      return separable_max_pool(x, k, st, pd, idx);
    Halide::Region ranges;  // innermost spatial axis first (RDom dimension 0 is the inner loop)
    for (size_t i = nsp; i-- > 0;) ranges.emplace_back(0, static_cast<int>(k[i]));
    RDom r(ranges);
    std::vector<Expr> in = {idx[0], idx[1]};
    Expr inside = Halide::cast(Halide::Bool(), true), in_padded = Halide::cast(Halide::Bool(), true);
    for (size_t i = 0; i < nsp; ++i) {
      Expr c = idx[2 + i] * static_cast<int>(st[i]) - static_cast<int>(pd[i]) +
               r[static_cast<int>(nsp - 1 - i)] * static_cast<int>(dl[i]);
      int n = static_cast<int>(s[2 + i]);
      inside = inside && c >= 0 && c < n;
      in_padded = in_padded && c < n + static_cast<int>(pd[nsp + i]);
      in.push_back(Halide::clamp(c, 0, n - 1));
    }
    Expr v = at(x, in);
    if (prim.op == PrimOp::MaxPool) return Halide::maximum(r, Halide::select(inside, v, v.type().min()));
    Expr total = Halide::sum(r, Halide::select(inside, v, Halide::cast(v.type(), 0)));
    Expr count = Halide::sum(r, Halide::select(a.i_or("count_include_pad", 0) ? in_padded : inside, 1, 0));
    return total / Halide::cast(v.type(), Halide::max(count, 1));
  }

  // A 2-D max pool as two 1-D passes over a padded copy of each input plane (a window's maximum
  // is the maximum of its rows' maxima): kh + kw comparisons per output instead of kh * kw, and
  // loads free of clamps, so both passes vectorise. The two stages are stencils_ (computed per
  // parallel slice of the kernel's output).
  Expr separable_max_pool(TensorId x, const std::vector<int64_t>& k, const std::vector<int64_t>& st,
                          const std::vector<int64_t>& pd, const std::vector<Expr>& idx) {
    const Shape& s = g_.tensor(x).shape;
    int height = static_cast<int>(s[2]), width = static_cast<int>(s[3]);
    int top = static_cast<int>(pd[0]), left = static_cast<int>(pd[1]);
    Var w("w"), h("h"), c("c"), n("n");
    Expr inside = h >= top && h < top + height && w >= left && w < left + width;
    Expr v = at(x, {n, c, Halide::clamp(h - top, 0, height - 1), Halide::clamp(w - left, 0, width - 1)});
    Func padded("maxpool_padded"), rows("maxpool_rows");
    padded(w, h, c, n) = Halide::select(inside, v, v.type().min());
    RDom rx(0, static_cast<int>(k[1])), ry(0, static_cast<int>(k[0]));
    rows(w, h, c, n) = Halide::maximum(padded(w * static_cast<int>(st[1]) + rx, h, c, n));
    stencils_.push_back(padded);
    stencils_.push_back(rows);
    return Halide::maximum(rows(idx[3], idx[2] * static_cast<int>(st[0]) + ry, idx[1], idx[0]));
  }

  const PrimGraph& g_;
  const Kernel& k_;
  std::map<TensorId, ImageParam> params_;
  std::map<TensorId, Func> funcs_;
  std::vector<Func> materialised_;
  std::vector<Func> shared_;
  std::vector<Func> stencils_;
  bool channels_last_ = false;
  std::map<TensorId, int> input_blocks_;
  std::vector<ExplicitReduction> explicit_reductions_;
  int consumers_inside(TensorId t) const {
    int n = 0;
    for (PrimId p : k_.prims)
      for (TensorId u : g_.prim(p).inputs)
        if (u == t) {
          ++n;
          break;
        }
    return n;
  }
};

// Halide's dimensions (innermost first) of a 4-D tensor [n, c, h, w] stored in `format`: nhwc
// keeps the 4 dimensions (w, h, c, n) with permuted strides; a channel-blocked format has 5
// (c % block, w, h, c / block, n).
std::vector<halide_dimension_t> layout_dimensions(const Shape& s, const std::string& format) {
  int n = static_cast<int>(s[0]), c = static_cast<int>(s[1]), h = static_cast<int>(s[2]), w = static_cast<int>(s[3]);
  int block = channel_block(format);
  KORCH_CHECK(takes_format(s, format), "no Halide layout ", format, " for ", shape_str(s));
  if (block == 0)
    return {halide_dimension_t(0, w, c), halide_dimension_t(0, h, w * c), halide_dimension_t(0, c, 1),
            halide_dimension_t(0, n, h * w * c)};
  return {halide_dimension_t(0, block, 1), halide_dimension_t(0, w, block), halide_dimension_t(0, h, w * block),
          halide_dimension_t(0, c / block, h * w * block), halide_dimension_t(0, n, c * h * w)};
}

// A kernel buffer over `data`: dense, or (in_layout) stored in `format`.
Halide::Buffer<> wrap(const TensorInfo& t, const void* data, bool in_layout = false, const std::string& format = "") {
  if (in_layout) {
    std::vector<halide_dimension_t> d = layout_dimensions(t.shape, format);
    return Halide::Buffer<>(storage_type(t.dtype), const_cast<void*>(data), static_cast<int>(d.size()), d.data());
  }
  std::vector<int> dims(t.shape.rbegin(), t.shape.rend());
  return Halide::Buffer<>(storage_type(t.dtype), const_cast<void*>(data), dims);
}

// A JIT-compiled Halide kernel. Its channels-last candidates (channels_last_candidates) take
// part in layout linking like oneDNN's activations: each reports its layout in the kernel's one
// format (nhwc unless use_format chose nChw8c / nChw16c, oneDNN's blocked layouts), and a tensor
// that link_layouts keeps in it is read or written through strides (a 5-D view for the blocked
// ones). The pipeline is rebuilt (once, on the next run) for the kept layouts; nothing is ever
// reordered.
class HalideKernel : public CompiledKernel {
 public:
  HalideKernel(const PrimGraph& g, const Kernel& k, const Halide::Target& target, Halide::Pipeline pipeline,
               std::vector<ImageParam> params, std::string description)
      : graph_(&g),
        kernel_(k),
        target_(target),
        pipeline_(std::move(pipeline)),
        params_(std::move(params)),
        description_(std::move(description)),
        candidates_(halide_layout_links_enabled() ? channels_last_candidates(g, k) : HalideLayouts{}) {
    for (TensorId t : k.inputs) inputs_.push_back(g.tensor(t));
    output_ = g.tensor(k.output);
    kept_.inputs.assign(k.inputs.size(), 0);
    kept_.format = candidates_.format;
    candidates_.inputs.resize(k.inputs.size(), 0);
    built_ = kept_;
  }
  void run(const std::vector<const void*>& inputs, void* output) override {
    if (!same_layouts(kept_, built_)) rebuild();  // a kept layout changed since the last build
    for (size_t i = 0; i < params_.size(); ++i)
      params_[i].set(wrap(inputs_[i], inputs[i], kept_.inputs[i], kept_.format));
    Halide::Buffer<> out = wrap(output_, output, kept_.output, kept_.format);
    pipeline_.realize(Halide::Realization({out}));
  }
  std::string describe() const override {
    std::string kept;
    for (char c : kept_.inputs)
      if (c) kept = "in";
    if (kept_.output) kept += kept.empty() ? "out" : "/out";
    return kept.empty() ? description_ : description_ + " [" + kept_.format + " " + kept + " kept]";
  }

  std::string output_layout() const override {
    return candidates_.output ? activation_layout_key(output_.shape, candidates_.format) : "";
  }
  int64_t output_layout_bytes() const override { return candidates_.output ? dense_bytes(output_) : 0; }
  std::string input_layout(int input) const override {
    return candidates_.inputs.at(input) ? activation_layout_key(inputs_[input].shape, candidates_.format) : "";
  }
  int64_t input_layout_bytes(int input) const override {
    return candidates_.inputs.at(input) ? dense_bytes(inputs_[input]) : 0;
  }
  void keep_input_layout(int input) override {
    KORCH_CHECK(candidates_.inputs.at(input), "input ", input, " of a Halide kernel cannot be linked");
    kept_.inputs[input] = 1;
  }
  void keep_output_layout() override {
    KORCH_CHECK(candidates_.output, "the Halide kernel's output cannot be linked");
    kept_.output = true;
  }
  std::string output_format() const override { return candidates_.output ? candidates_.format : ""; }
  std::string input_format(int input) const override { return candidates_.inputs.at(input) ? candidates_.format : ""; }
  // Switches every candidate tensor to `format` (nhwc, nChw8c, nChw16c) while none is kept in
  // another one; blocked formats need every candidate's channel count to be a multiple of the
  // block. The pipeline is rebuilt when a tensor is kept.
  bool use_format(const std::string& format, bool apply) override {
    int block = channel_block(format);
    if (block < 0 || !candidates_.any()) return false;
    if (format == candidates_.format) return true;
    if (kept_.any()) return false;
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (candidates_.inputs[i] && !takes_format(inputs_[i].shape, format)) return false;
    if (candidates_.output && !takes_format(output_.shape, format)) return false;
    if (candidates_.blocked_only && !output_concat_takes_format(*graph_, kernel_, format)) return false;
    if (apply) candidates_.format = kept_.format = format;
    return true;
  }
  bool layout_by_strides() const override { return true; }
  bool reset_to_dense() override {
    kept_.inputs.assign(kept_.inputs.size(), 0);
    kept_.output = false;
    return true;
  }

 private:
  static int64_t dense_bytes(const TensorInfo& t) {
    return num_elements(t.shape) * static_cast<int64_t>(dtype_size(t.dtype));
  }
  // Whether two layout choices build the same pipeline (with nothing kept, the format is moot).
  static bool same_layouts(const HalideLayouts& a, const HalideLayouts& b) {
    if (!a.any() && !b.any()) return true;
    return a.inputs == b.inputs && a.output == b.output && a.format == b.format;
  }
  void rebuild() {
    std::string why;
    KORCH_CHECK(build_halide_pipeline(*graph_, kernel_, target_, &pipeline_, &params_, &description_, &why, kept_),
                "Halide kernel for the kept ", kept_.format, " layouts: ", why);
    pipeline_.jit_handlers().custom_do_par_for = omp_do_par_for;
    pipeline_.compile_jit(target_);
    built_ = kept_;
  }

  const PrimGraph* graph_;  // what the kernel was built from (rebuild() builds it again)
  Kernel kernel_;
  Halide::Target target_;
  Halide::Pipeline pipeline_;
  std::vector<ImageParam> params_;
  std::string description_;
  HalideLayouts candidates_;  // what may be linked, and in which format
  HalideLayouts kept_;        // what is (same format)
  HalideLayouts built_;       // what the pipeline is built for (a strided build survives a reset to dense)
  std::vector<TensorInfo> inputs_;
  TensorInfo output_;
};

struct OutputSchedule {
  std::string text;
  bool has_parallel = false;
  Var parallel_var;
  Var block_var;  // BlockTranspose: the loop over 8x8 output blocks (within a tile)
};

// Vectorise the innermost dimension and parallelise the outermost non-unit one;
// kernels that transpose their innermost axis are tiled 16x16 so that reads and
// writes both stay local, or (variant BlockTranspose) 8x8 with the transposed inputs
// loaded as row vectors and transposed in registers.
// Schedule variants (profiling times each one a kernel has and keeps the fastest).
enum class Variant {
  Default,             // vectorised rows (16x16 tiles for transposes), described above
  FusedParallel,       // parallel over all outer axes fused: more, smaller tasks (short outermost axis)
  BlockTranspose,      // 8x8 tiles; inputs read transposed are loaded as 8 row vectors and transposed in registers
  BlockTransposeTall,  // the same, in tiles 8 wide and 16 tall (two blocks): whole input lines per tile
  PiecewiseConcat,     // an innermost-axis Concat output: one update per piece (no per-lane select between pieces)
  StreamedPanels,      // transposes with outputs past the last-level cache: panels written with streaming stores
  StreamedRows,        // other outputs past the last-level cache: the default schedule, rows written the same way
};

// StreamedPanels: each parallel task computes a panel of kStreamColumns output columns, all rows,
// kStreamRows rows at a time (a tile computed in blocks of vector x 8 transposed in registers,
// kept in L1), and each tile goes out through korch_stream_rows. The panel's input is a few whole input
// rows read front to back (prefetchable streams); its output is one or two 64-byte lines per
// output row, which streaming stores write without reading them first.
constexpr int kStreamColumns = 32;
constexpr int kStreamRows = 256;

// Both block transpose variants stage the transposed inputs in 8x8 register blocks.
bool is_block_transpose(Variant v) { return v == Variant::BlockTranspose || v == Variant::BlockTransposeTall; }

// A tiled output runs its tile rows in parallel when the tiled axes are the only non-unit ones,
// else its outermost non-unit axis.
void parallelise_tiles(Func& f, const std::vector<Var>& v, const Var& tile_rows, int par_axis, OutputSchedule* s) {
  int rank = static_cast<int>(v.size());
  if (par_axis == rank - 2) {
    f.parallel(tile_rows);
    s->text += ", parallel tile rows";
  } else if (par_axis >= 0) {
    s->parallel_var = v[rank - 1 - par_axis];
    s->has_parallel = true;
    f.parallel(s->parallel_var);
    s->text += ", parallel axis " + std::to_string(par_axis);
  }
}

OutputSchedule schedule_output(Func& f, const Shape& shape, int vector, bool tile, Variant variant) {
  OutputSchedule s;
  int rank = static_cast<int>(shape.size());
  if (rank == 0) {
    s.text = "scalar";
    return s;
  }
  std::vector<Var> v = f.args();
  int par_axis = -1;
  for (int a = 0; a < rank - 1; ++a)
    if (shape[a] > 1) {
      par_axis = a;
      break;
    }
  if (is_block_transpose(variant)) {
    // The output side; the inputs' blocks are scheduled by the caller.
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    // ShiftInwards: every tile, the last ones too, is a full 8x8 block (axes are >= 8 long), so
    // the wrapped inputs' footprints are constant. The last tile row or column overlaps the one
    // before; with parallel tile rows two threads may store the same elements, with the same
    // values (outputs never share memory with the kernel's inputs: the arena keeps a kernel's
    // inputs live while it runs).
    // Tall tiles: the 16 transposed input elements per input row are a whole 64-byte line.
    // Standalone 16x1024x1024 transposes, same rounds: 59-69% of the triad against 55-59% for 8x8
    // tiles; but with a SiLU fused in, 33% against 44% (so both are variants).
    if (variant == Variant::BlockTransposeTall) {
      Var yio("yio"), yii("yii");
      f.tile(v[0], v[1], xo, yo, xi, yi, 8, 16, Halide::TailStrategy::ShiftInwards)
          .split(yi, yio, yii, 8, Halide::TailStrategy::ShiftInwards)
          .vectorize(xi)
          .unroll(yii);
      s.text = "tile 8x16 of 8x8 blocks, block transpose in registers";
      s.block_var = yio;
    } else {
      f.tile(v[0], v[1], xo, yo, xi, yi, 8, 8, Halide::TailStrategy::ShiftInwards).vectorize(xi).unroll(yi);
      s.text = "tile 8x8, block transpose in registers";
      s.block_var = xo;
    }
    parallelise_tiles(f, v, yo, par_axis, &s);
    return s;
  }
  bool tiled = tile && rank >= 2 && shape[rank - 1] >= 16 && shape[rank - 2] >= 16;
  if (tiled) {
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    f.tile(v[0], v[1], xo, yo, xi, yi, 16, 16, Halide::TailStrategy::GuardWithIf).vectorize(xi, std::min(vector, 16));
    s.text = "tile 16x16, vectorize " + std::to_string(std::min(vector, 16));
    parallelise_tiles(f, v, yo, par_axis, &s);
    return s;
  }
  // Rows narrower than a vector (7x7 or 13x13 feature maps) still take a half vector.
  int width = shape.back() >= vector ? vector : shape.back() >= 8 && vector > 8 ? 8 : 0;
  if (width > 0) {
    f.vectorize(v[0], width, Halide::TailStrategy::GuardWithIf);
    s.text = "vectorize " + std::to_string(width);
  }
  if (variant == Variant::FusedParallel && rank >= 3) {
    Var fused = v[rank - 1];
    for (int a = rank - 2; a >= 1; --a) {
      Var next("fused" + std::to_string(a));
      f.fuse(fused, v[a], next);
      fused = next;
    }
    f.parallel(fused);
    s.text += std::string(s.text.empty() ? "" : ", ") + "parallel over the fused outer axes";
    return s;  // nothing is computed per slice in this variant
  }
  if (par_axis >= 0) {
    s.parallel_var = v[rank - 1 - par_axis];
    s.has_parallel = true;
    f.parallel(s.parallel_var);
    s.text += std::string(s.text.empty() ? "" : ", ") + "parallel axis " + std::to_string(par_axis);
  }
  if (s.text.empty()) s.text = "serial";
  return s;
}

// Spatial reductions and windows of a channels-last kernel, computed up front: channels
// innermost (vectors of `width` channels, 0: none) inside their pixel loops, chunks of channels
// in parallel. Returns the description's suffix.
std::string schedule_channel_reductions(const Generator& gen, int64_t channels, int width) {
  for (Func f : gen.materialised()) {
    f.compute_root();
    std::vector<Var> a = f.args();
    if (a.size() >= 2 && width) f.vectorize(a[a.size() - 2], width, Halide::TailStrategy::GuardWithIf);
  }
  // Each reduction is stored once (a wrapper computed root, chunks of channels in parallel) and
  // accumulated per chunk in a one-vector buffer that LLVM keeps in registers: accumulating
  // straight into the root buffer was 6x slower (a load, add and store per pixel through memory).
  for (const Generator::ExplicitReduction& r : gen.explicit_reductions()) {
    Func f = r.func;
    Func root = f.in();
    root.compute_root();
    std::vector<Var> ra = root.args();
    std::vector<Halide::VarOrRVar> root_order = {ra[r.channel_arg]};
    for (size_t i = 0; i < ra.size(); ++i)
      if (static_cast<int>(i) != r.channel_arg) root_order.push_back(ra[i]);
    root.reorder(root_order);
    std::vector<Var> a = f.args();
    Var c = a[r.channel_arg];
    Halide::LoopLevel level = Halide::LoopLevel(root, ra.back());  // where f is computed
    if (width) {
      Var co("co"), ci("ci");
      root.split(ra[r.channel_arg], co, ci, width, Halide::TailStrategy::GuardWithIf).vectorize(ci);
      if (channels >= 2 * width) root.parallel(co);
      level = Halide::LoopLevel(root, co);
      f.compute_at(level).vectorize(c, width, Halide::TailStrategy::GuardWithIf);
    } else {
      f.compute_at(level);
    }
    std::vector<Halide::VarOrRVar> others;  // f's other arguments, innermost first
    for (size_t i = 0; i < a.size(); ++i)
      if (static_cast<int>(i) != r.channel_arg) others.push_back(a[i]);
    std::vector<Halide::VarOrRVar> order = {c};
    if (r.sum && r.domain.dimensions() == 2) {
      // A plane's sum in two steps: each row's sum (one vector of channels, computed per row of
      // f's update, so it stays in a register), then the sum of the rows. One running sum over a
      // 224x224 plane adds 50176 terms into the same float; rows of 224 and 224 row sums keep
      // every partial short: 14x closer to the exact mean, same time (CpuKernels test). Candy's
      // output was 6x further from a float64 evaluation than ONNX Runtime's with one running sum.
      Var row("row");
      Func rows = f.update().rfactor(r.domain[1], row);
      rows.compute_at(f, r.domain[1]);
      std::vector<Halide::VarOrRVar> row_order = {c, r.domain[0], row};
      row_order.insert(row_order.end(), others.begin(), others.end());
      rows.update().reorder(row_order);
      if (width) {
        rows.vectorize(c, width, Halide::TailStrategy::GuardWithIf);
        rows.update().vectorize(c, width, Halide::TailStrategy::GuardWithIf);
      }
      order.push_back(r.domain[1]);
    } else {
      for (int d = 0; d < r.domain.dimensions(); ++d) order.push_back(r.domain[d]);
    }
    order.insert(order.end(), others.begin(), others.end());
    Halide::Stage update = f.update();
    update.reorder(order);
    if (width) update.vectorize(c, width, Halide::TailStrategy::GuardWithIf);
  }
  // Separable pooling stages (w, h, c, n), computed up front with channels innermost in storage
  // and loops (vectors of channels), rows in parallel. Left inlined, the output would evaluate
  // each window's kh * kw taps again (a 13x13 max pool on 13x13x128 nChw8c: 0.146 ms).
  for (Func f : gen.stencils()) {
    std::vector<Var> a = f.args();
    f.compute_root().reorder_storage(a[2], a[0], a[1], a[3]).reorder(a[2], a[0], a[1], a[3]).parallel(a[1]);
    if (width) f.vectorize(a[2], width, Halide::TailStrategy::GuardWithIf);
  }
  std::string text;
  if (!gen.explicit_reductions().empty()) text += ", reductions compute_root channels innermost";
  if (!gen.stencils().empty()) text += ", separable window channels innermost";
  return text;
}

// The vector width for a loop of `extent` iterations: a whole vector, or half of a 16-lane one
// for extents of 8 to 15, or 0 (not vectorised).
int vector_width(int64_t extent, int vector) { return extent >= vector ? vector : extent >= 8 && vector > 8 ? 8 : 0; }

// The schedule when some tensors are stored nhwc or channel-blocked, except a blocked output
// (channels_last_candidates' kernels): a 4-D output written nhwc, or with one pixel per channel,
// loops channels innermost (vectorised) and runs its rows in parallel; a dense 4-D output keeps
// vectorised rows (its nhwc inputs are then read with a stride: a transpose). Spatial reductions
// as schedule_channel_reductions. `width`: the channel vector (0: channels not vectorised).
// Returns the description.
std::string schedule_channels_last(Func& out, const Shape& shape, int vector, int width, bool output_nhwc,
                                   const Generator& gen) {
  auto width_for = [&](int64_t extent) { return vector_width(extent, vector); };
  std::string text = "channels-last";
  std::vector<Var> v = out.args();
  if (shape.size() == 4) {
    bool channels_inner = output_nhwc || shape[2] * shape[3] == 1;
    Var w = v[0], h = v[1], c = v[2], n = v[3];
    if (channels_inner) {
      out.reorder(c, w, h, n);
      if (width) {
        out.vectorize(c, width, Halide::TailStrategy::GuardWithIf);
        text += ", channels vectorized " + std::to_string(width);
      }
      if (shape[2] > 1) {
        out.parallel(h);
        text += ", parallel rows";
      }
    } else {
      if (int w_width = width_for(shape[3])) out.vectorize(w, w_width, Halide::TailStrategy::GuardWithIf);
      out.parallel(c);
      text += ", dense output rows, parallel channels";
    }
  } else if (!v.empty()) {
    if (int w_width = width_for(shape.back())) out.vectorize(v[0], w_width, Halide::TailStrategy::GuardWithIf);
  }
  return text + schedule_channel_reductions(gen, shape.size() >= 2 ? shape[1] : 1, width);
}

// The schedule of an output written channel-blocked (5-D, block innermost): one vector per
// block of channels, the rows of every channel block in parallel. Returns the description.
std::string schedule_blocked_output(Func& out, const std::string& format, const Generator& gen, int64_t channels) {
  int block = channel_block(format);
  std::vector<Var> v = out.args();  // (c % block, w, h, c / block, n)
  Var rows("block_rows");
  out.vectorize(v[0], block).fuse(v[2], v[3], rows).parallel(rows);
  std::string text = format + ", one vector per channel block, parallel rows";
  return text + schedule_channel_reductions(gen, channels, block);
}

constexpr size_t kMaxBlockInputs = 2;  // inputs a BlockTranspose kernel may wrap (compile time)

// For a kernel of elementwise, broadcast and transpose primitives only, the inputs whose last two
// axes are the output's last two axes swapped (what a register block transpose serves). Empty
// when the kernel has other primitives or reads an input through two different axis maps.
std::vector<TensorId> inputs_read_transposed(const PrimGraph& g, const Kernel& k) {
  const Shape& out = g.tensor(k.output).shape;
  int rank = static_cast<int>(out.size());
  if (rank < 2) return {};
  // For every tensor of the kernel: which output axis indexes each of its axes (-1: broadcast).
  std::map<TensorId, std::vector<int>> axis_map;
  std::vector<int> identity(rank);
  for (int a = 0; a < rank; ++a) identity[a] = out[a] == 1 ? -1 : a;  // size-1 axes index nothing
  axis_map[k.output] = identity;
  auto assign = [&](TensorId t, std::vector<int> m) {
    auto [it, inserted] = axis_map.emplace(t, m);
    return inserted || it->second == m;
  };
  for (auto p = k.prims.rbegin(); p != k.prims.rend(); ++p) {
    const Primitive& prim = g.prim(*p);
    auto found = axis_map.find(prim.output);
    if (found == axis_map.end()) return {};
    std::vector<int> m = found->second;
    PrimKind kind = prim_kind(prim.op);
    for (TensorId in : prim.inputs) {
      const Shape& s = g.tensor(in).shape;
      std::vector<int> mi(s.size(), -1);
      if (kind == PrimKind::Elementwise || kind == PrimKind::Broadcast) {
        if (s.size() > m.size()) return {};
        size_t shift = m.size() - s.size();
        for (size_t j = 0; j < s.size(); ++j) mi[j] = s[j] == 1 ? -1 : m[shift + j];
      } else if (prim.op == PrimOp::Transpose) {
        const auto& perm = prim.attrs.ints("perm");
        for (size_t j = 0; j < perm.size(); ++j) mi[perm[j]] = s[perm[j]] == 1 ? -1 : m[j];
      } else {
        return {};
      }
      if (!assign(in, mi)) return {};
    }
  }
  std::vector<TensorId> transposed;
  for (TensorId in : k.inputs) {
    auto m = axis_map.find(in);
    if (m == axis_map.end()) continue;
    const std::vector<int>& mi = m->second;
    size_t r = mi.size();
    if (r >= 2 && mi[r - 1] == rank - 2 && mi[r - 2] == rank - 1) transposed.push_back(in);
  }
  return transposed;
}

bool transposes_innermost(const PrimGraph& g, const Kernel& k) {
  for (PrimId p : k.prims) {
    const Primitive& prim = g.prim(p);
    if (prim.op != PrimOp::Transpose) continue;
    const auto& perm = prim.attrs.ints("perm");
    if (!perm.empty() && perm.back() != static_cast<int64_t>(perm.size()) - 1) return true;
  }
  return false;
}

// The variants that make sense for a kernel; index 0 is always the default.
// The kernel's output primitive when it is a Concat over the innermost axis (YOLOX's box decode
// writes [.., 85] rows as pieces of 2, 2 and 81): vectorised as one expression, every lane
// evaluates every piece and selects; written piece by piece, each piece is its own loop.
std::optional<PrimId> output_innermost_concat(const PrimGraph& g, const Kernel& k) {
  for (PrimId p : k.prims) {
    const Primitive& prim = g.prim(p);
    int64_t rank = static_cast<int64_t>(g.tensor(prim.output).shape.size());
    if (prim.output == k.output && prim.op == PrimOp::Concat && rank >= 2 && prim.attrs.i("axis") == rank - 1) return p;
  }
  return std::nullopt;
}

std::vector<Variant> variants_of(const PrimGraph& g, const Kernel& k, const Generator& gen) {
  // Plans store variant indices: a new variant is appended after the existing ones, so that an
  // index keeps its meaning for every kernel that had it.
  std::vector<Variant> v = {Variant::Default};
  const Shape& out = g.tensor(k.output).shape;
  int rank = static_cast<int>(out.size());
  bool tiled = transposes_innermost(g, k) && rank >= 2 && out[rank - 1] >= 16 && out[rank - 2] >= 16;
  if (!tiled && rank >= 3 && gen.materialised().empty() && gen.stencils().empty()) {
    int64_t outer = 1;
    for (int a = 0; a < rank - 1; ++a) outer *= out[a];
    int64_t first = 1;
    for (int a = 0; a < rank - 1; ++a)
      if (out[a] > 1) {
        first = out[a];
        break;
      }
    if (outer > first) v.push_back(Variant::FusedParallel);
  }
  // The block transpose: two unrolled 8x8 stages per wrapped input (at most kMaxBlockInputs), which
  // LLVM compiles in ~0.1 s. (Vectorising the output Func itself in both tile dimensions, tried
  // before, gave 64-lane shuffles that took LLVM minutes on some kernels.)
  size_t transposed = inputs_read_transposed(g, k).size();
  if (rank >= 2 && out[rank - 1] >= 8 && out[rank - 2] >= 8 && transposed > 0 && transposed <= kMaxBlockInputs) {
    v.push_back(Variant::BlockTranspose);
    if (out[rank - 2] >= 16) v.push_back(Variant::BlockTransposeTall);
  }
  if (output_innermost_concat(g, k) && gen.materialised().empty() && gen.stencils().empty())
    v.push_back(Variant::PiecewiseConcat);
  int64_t output_bytes = num_elements(out) * static_cast<int64_t>(dtype_size(g.tensor(k.output).dtype));
  if (rank < 2 || output_bytes < streaming_output_bytes()) return v;
  if (out[rank - 1] >= kStreamColumns && out[rank - 2] >= 8 && transposed > 0 && transposed <= kMaxBlockInputs &&
      gen.materialised().empty() && gen.stencils().empty())
    v.push_back(Variant::StreamedPanels);
  // Rows of whole vectors (of at most 16 lanes, which divide 16), so that no row has a tail.
  if (!transposes_innermost(g, k) && out[rank - 1] % 16 == 0 && !output_innermost_concat(g, k))
    v.push_back(Variant::StreamedRows);
  return v;
}

// The PiecewiseConcat variant's output: undefined, then one update per piece of the innermost
// Concat over that piece's columns (vectorised when it spans a vector), rows in parallel over
// the outermost axis longer than 1. The pieces cover the output exactly once.
Func piecewise_concat_output(const PrimGraph& g, const Kernel& k, Generator& gen, const std::vector<Var>& v, int vector,
                             std::string* description) {
  const Primitive& concat = g.prim(*output_innermost_concat(g, k));
  const Shape& shape = g.tensor(k.output).shape;
  int rank = static_cast<int>(shape.size());
  int par = -1;  // Func argument index (innermost first) of the parallel axis
  for (int a = 0; a < rank - 1; ++a)
    if (shape[a] > 1) {
      par = rank - 1 - a;
      break;
    }
  Func f("concat_output");
  f(v) = Halide::undef(storage_type(g.tensor(k.output).dtype));
  int offset = 0, piece = 0;
  for (TensorId t : concat.inputs) {
    int len = static_cast<int>(g.tensor(t).shape.back());
    if (len == 0) continue;
    RDom r(0, len, "piece" + std::to_string(piece));
    std::vector<Expr> lhs(v.begin(), v.end()), idx(rank);
    lhs[0] = r.x + offset;
    for (int a = 0; a < rank - 1; ++a) idx[a] = v[rank - 1 - a];
    idx[rank - 1] = r.x;
    f(lhs) = gen.value_at(t, idx);
    Halide::Stage update = f.update(piece);
    if (len >= vector) update.vectorize(r.x, vector, Halide::TailStrategy::GuardWithIf);
    if (par > 0) update.parallel(v[par]);
    offset += len;
    ++piece;
  }
  if (description)
    *description = str_cat("halide: innermost concat, one update per piece (", piece, "), vectorize ", vector,
                           par > 0 ? ", parallel axis " + std::to_string(rank - 1 - par) : std::string());
  return f;
}

// Each input read transposed, staged per block of `consumer` (the loop `block`): its block loaded
// as row vectors into one buffer, then stored transposed into a second one (a register transpose
// after LLVM), so that the consumer reads rows too. Wrappers of all calls: the kernel's other
// Funcs are inlined into the consumer.
void stage_transposed_inputs(const PrimGraph& g, const Kernel& k, Generator& gen, Func consumer, const Var& block) {
  for (TensorId t : inputs_read_transposed(g, k)) {
    ImageParam input = gen.params().at(t);  // a handle: wraps the pipeline's parameter
    Func rows = input.in();
    std::vector<Var> a = rows.args();
    rows.compute_at(consumer, block).vectorize(a[0]).unroll(a[1]);
    Func staged = rows.in();
    std::vector<Var> b = staged.args();
    std::vector<Var> storage = b;
    std::swap(storage[0], storage[1]);
    staged.reorder_storage(storage).compute_at(consumer, block).vectorize(b[0]).unroll(b[1]);
  }
}

// Replaces the loop of dense vector stores that copies a computed tile or row into the output
// (StreamedPanels, StreamedRows) with one korch_stream_rows call: per tile, its rows; per row,
// its vectors (as rows one vector long, consecutive). Every output store must be replaced, else
// compilation fails (the variant would be the plain one).
class StreamOutputRows : public Halide::Internal::IRMutator {
 public:
  explicit StreamOutputRows(std::string output) : output_(std::move(output)) {}
  using IRMutator::mutate;
  Halide::Internal::Stmt mutate(const Halide::Internal::Stmt& s) override {
    ++depth_;
    Halide::Internal::Stmt result = IRMutator::mutate(s);
    if (--depth_ == 0 && (replaced_ == 0 || kept_stores_ > 0))
      throw Halide::CompileError(
          str_cat("streaming stores: ", replaced_, " copy loops replaced, ", kept_stores_, " output stores left"));
    return result;
  }

 private:
  using IRMutator::visit;
  // A store of the output that copies a dense vector from a buffer (the computed tile or row).
  struct DenseCopy {
    const Halide::Internal::Store* store = nullptr;
    const Halide::Internal::Load* load = nullptr;
    const Halide::Internal::Ramp* to = nullptr;    // the store's index
    const Halide::Internal::Ramp* from = nullptr;  // the load's index
  };
  std::optional<DenseCopy> dense_copy(const Halide::Internal::Store* store) const {
    namespace HI = Halide::Internal;
    if (!store || store->name != output_) return std::nullopt;
    DenseCopy c{store, copied_load(store->value), store->index.as<HI::Ramp>(), nullptr};
    c.from = c.load ? c.load->index.as<HI::Ramp>() : nullptr;
    if (!(c.to && c.from && HI::is_const_one(c.to->stride) && HI::is_const_one(c.from->stride) &&
          HI::is_const_one(store->predicate) && HI::is_const_one(c.load->predicate)))
      return std::nullopt;
    return c;
  }
  Halide::Internal::Stmt visit(const Halide::Internal::For* loop) override {
    namespace HI = Halide::Internal;
    if (std::optional<DenseCopy> c = dense_copy(loop->body.as<HI::Store>())) {
      auto at = [&](const Expr& e, const Expr& row) { return HI::simplify(HI::substitute(loop->name, row, e)); };
      Expr to_first = at(c->to->base, loop->min), from_first = at(c->from->base, loop->min);
      Expr to_stride = HI::simplify(at(c->to->base, loop->min + 1) - to_first);
      Expr from_stride = HI::simplify(at(c->from->base, loop->min + 1) - from_first);
      if (!HI::expr_uses_var(to_stride, loop->name) && !HI::expr_uses_var(from_stride, loop->name)) {
        ++replaced_;
        return stream_call(*c, to_first, from_first, loop->extent, to_stride, from_stride);
      }
    }
    return IRMutator::visit(loop);
  }
  // A row that is one vector has no loop of its own: its store becomes a call for one row.
  Halide::Internal::Stmt visit(const Halide::Internal::Store* store) override {
    if (store->name != output_) return IRMutator::visit(store);
    std::optional<DenseCopy> c = dense_copy(store);
    if (!c) {
      ++kept_stores_;
      return IRMutator::visit(store);
    }
    ++replaced_;
    return stream_call(*c, c->to->base, c->from->base, 1, 0, 0);
  }
  Halide::Internal::Stmt stream_call(const DenseCopy& c, Expr to, Expr from, Expr rows, Expr to_stride,
                                     Expr from_stride) {
    namespace HI = Halide::Internal;
    const HI::Store* store = c.store;
    const HI::Load* load = c.load;
    return HI::Evaluate::make(HI::Call::make(
        Halide::Int(32), "korch_stream_rows",
        {HI::Variable::make(Halide::Handle(), store->name), std::move(to),
         HI::Variable::make(Halide::Handle(), load->name), std::move(from), std::move(rows),
         store->value.type().lanes(), store->value.type().bytes(), std::move(to_stride), std::move(from_stride)},
        HI::Call::Extern));
  }

  // The value a store copies: a load, possibly wrapped in strict_float (targets with strict_float,
  // such as the export test's, wrap every float value).
  static const Halide::Internal::Load* copied_load(const Expr& value) {
    namespace HI = Halide::Internal;
    if (const HI::Call* c = value.as<HI::Call>(); c && c->is_intrinsic(HI::Call::strict_float) && c->args.size() == 1)
      return c->args[0].as<HI::Load>();
    return value.as<HI::Load>();
  }

  std::string output_;
  int depth_ = 0, replaced_ = 0, kept_stores_ = 0;
};

// Makes `pipeline` (whose output is `out`) write its output through korch_stream_rows.
void add_streaming_pass(Func out, Halide::Pipeline* pipeline) {
  pipeline->add_custom_lowering_pass(new StreamOutputRows(out.name()));
  pipeline->set_jit_externs({{"korch_stream_rows", Halide::JITExtern(korch_stream_rows)}});
}

// The StreamedRows output: a copy of `values` (the kernel's output Func), which is computed one
// output row at a time (vectorised; a row stays in L1), over constant bounds (every row is whole
// vectors, so the copy loop is one dense store per vector, which the pass replaces). The caller
// schedules the returned Func like any output (rows or slices in parallel, reductions per slice).
Func streamed_rows_output(const PrimGraph& g, const Kernel& k, Func values, int vector) {
  const Shape& shape = g.tensor(k.output).shape;
  std::vector<Var> v = values.args();
  Func out("streamed_output");
  out(v) = values(v);
  for (size_t d = 0; d < shape.size(); ++d)
    out.output_buffer().dim(static_cast<int>(d)).set_bounds(0, static_cast<int>(shape[shape.size() - 1 - d]));
  values.compute_at(out, v[1]).vectorize(v[0], vector);
  return out;
}

// The StreamedPanels output: `values` (the kernel's output Func) computed one tile at a time in
// blocks of vector x 8 with the transposed inputs staged in registers, copied out by
// korch_stream_rows. Tiles at the far edges shift inwards (they overlap the one before; every
// axis is at least a tile long). Panels, and the outer axes, in parallel.
Func streamed_panels_output(const PrimGraph& g, const Kernel& k, Generator& gen, Func values, int vector,
                            Halide::Pipeline* pipeline, std::string* description) {
  const Shape& shape = g.tensor(k.output).shape;
  int rank = static_cast<int>(shape.size());
  std::vector<Var> v = values.args();
  Func out("streamed_output");
  out(v) = values(v);
  int rows = static_cast<int>(std::min<int64_t>(kStreamRows, shape[rank - 2] / 8 * 8));
  int block = std::min(vector, 16);
  Var xo("xo"), xi("xi"), yo("yo"), yi("yi");
  out.split(v[0], xo, xi, kStreamColumns, Halide::TailStrategy::ShiftInwards)
      .split(v[1], yo, yi, rows, Halide::TailStrategy::ShiftInwards);
  std::vector<Halide::VarOrRVar> order = {xi, yi, yo, xo};
  for (int a = 2; a < rank; ++a) order.push_back(v[a]);
  out.reorder(order).vectorize(xi);
  Var task = xo;
  for (int a = 2; a < rank; ++a) {
    Var next("task" + std::to_string(a));
    out.fuse(task, v[a], next);
    task = next;
  }
  out.parallel(task);
  values.compute_at(out, yo);
  Var bxo("bxo"), byo("byo"), bxi("bxi"), byi("byi");
  values.tile(v[0], v[1], bxo, byo, bxi, byi, block, 8, Halide::TailStrategy::ShiftInwards).vectorize(bxi).unroll(byi);
  stage_transposed_inputs(g, k, gen, values, bxo);
  *pipeline = Halide::Pipeline(out);
  add_streaming_pass(out, pipeline);
  if (description)
    *description = str_cat("halide: panels of ", kStreamColumns, " columns, tiles of ", rows, " rows, ", block,
                           "x8 block transpose in registers, streaming stores, parallel panels");
  return out;
}

}  // namespace

int halide_schedule_variants(const PrimGraph& g, const Kernel& k) {
  if (k.num_linear > 0) return 1;
  try {
    Generator gen(g, k);
    gen.build();
    return static_cast<int>(variants_of(g, k, gen).size());
  } catch (const Unsupported&) {
  } catch (const Halide::Error&) {
  }
  return 1;
}

bool halide_supports(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  if (k.num_linear > 0) {
    if (why_not) *why_not = "kernel has a Linear primitive";
    return false;
  }
  try {
    Generator gen(g, k);
    gen.build();  // definitions only: no JIT compilation
    return true;
  } catch (const Unsupported& u) {
    if (why_not) *why_not = u.why;
  } catch (const Halide::Error& e) {
    if (why_not) *why_not = str_cat("Halide: ", e.what());
  }
  return false;
}

int channel_block(const std::string& format) {
  if (format == "nhwc") return 0;
  if (format == "nChw8c") return 8;
  if (format == "nChw16c") return 16;
  return -1;
}

// The kernel's last primitive when it is a Concat of 4-D tensors over channels.
static std::optional<PrimId> output_channel_concat(const PrimGraph& g, const Kernel& k) {
  for (PrimId p : k.prims) {
    const Primitive& prim = g.prim(p);
    if (prim.output == k.output && prim.op == PrimOp::Concat && g.tensor(prim.output).shape.size() == 4 &&
        prim.attrs.i("axis") == 1)
      return p;
  }
  return std::nullopt;
}

bool takes_format(const Shape& shape, const std::string& format) {
  int block = channel_block(format);
  return shape.size() == 4 && block >= 0 && (block == 0 || shape[1] % block == 0);
}

TensorData permute_activation(const TensorData& t, const std::string& format, bool to_layout) {
  const Shape& s = t.shape();
  KORCH_CHECK(takes_format(s, format), "permute_activation: no layout ", format, " for ", shape_str(s));
  int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  int64_t block = channel_block(format);
  // Element (in, ic, ih, iw)'s offset in the layout: its coordinates in layout_dimensions' view
  // times that view's strides, so each layout is defined in one place.
  std::vector<halide_dimension_t> d = layout_dimensions(s, format);
  auto stored = [&](int64_t in, int64_t ic, int64_t ih, int64_t iw) {
    std::vector<int64_t> at =
        block == 0 ? std::vector<int64_t>{iw, ih, ic, in} : std::vector<int64_t>{ic % block, iw, ih, ic / block, in};
    int64_t offset = 0;
    for (size_t i = 0; i < at.size(); ++i) offset += at[i] * d[i].stride;
    return offset;
  };
  TensorData r(t.dtype(), s);
  size_t bytes = dtype_size(t.dtype());
  const char* src = static_cast<const char*>(t.raw());
  char* dst = static_cast<char*>(r.raw());
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t ih = 0; ih < h; ++ih)
        for (int64_t iw = 0; iw < w; ++iw) {
          int64_t nchw = ((in * c + ic) * h + ih) * w + iw, at = stored(in, ic, ih, iw);
          std::memcpy(dst + (to_layout ? at : nchw) * bytes, src + (to_layout ? nchw : at) * bytes, bytes);
        }
  return r;
}

bool HalideLayouts::any() const {
  return output || std::any_of(inputs.begin(), inputs.end(), [](char c) { return c != 0; });
}

bool output_concat_takes_format(const PrimGraph& g, const Kernel& k, const std::string& format) {
  std::optional<PrimId> concat = output_channel_concat(g, k);
  if (!concat) return true;
  int block = channel_block(format);
  if (block <= 0) return false;
  return std::all_of(g.prim(*concat).inputs.begin(), g.prim(*concat).inputs.end(),
                     [&](TensorId t) { return g.tensor(t).shape[1] % block == 0; });
}

HalideLayouts channels_last_candidates(const PrimGraph& g, const Kernel& k) {
  HalideLayouts none;
  if (k.num_linear > 0) return none;
  auto spatial_4d = [&](TensorId t) { return g.tensor(t).shape.size() == 4; };
  std::optional<PrimId> concat = output_channel_concat(g, k);
  for (PrimId p : k.prims) {
    const Primitive& prim = g.prim(p);
    PrimKind kind = prim_kind(prim.op);
    bool ok = kind == PrimKind::Elementwise || kind == PrimKind::Broadcast || p == concat;
    if (prim.op == PrimOp::ReduceSum || prim.op == PrimOp::ReduceMean || prim.op == PrimOp::ReduceMax ||
        prim.op == PrimOp::ReduceMin) {
      const auto& axes = prim.attrs.ints("axes");
      ok = spatial_4d(prim.inputs[0]) && !axes.empty() &&
           std::all_of(axes.begin(), axes.end(), [](int64_t a) { return a == 2 || a == 3; });
    } else if (prim.op == PrimOp::Pad) {
      const auto& pads = prim.attrs.ints("pads");
      ok = spatial_4d(prim.inputs[0]) && pads.size() == 8 && pads[0] == 0 && pads[1] == 0 && pads[4] == 0 &&
           pads[5] == 0;
    } else if (prim.op == PrimOp::Resize) {
      const Shape& in = g.tensor(prim.inputs[0]).shape;
      const Shape& out = g.tensor(prim.output).shape;
      ok = in.size() == 4 && out.size() == 4 && in[0] == out[0] && in[1] == out[1];
    } else if (kind == PrimKind::Window) {  // 2-D pooling windows: per channel, over pixels
      ok = spatial_4d(prim.inputs[0]) && prim.attrs.ints("kernel").size() == 2;
    }
    if (!ok) return none;
  }
  auto linkable = [&](TensorId t) {
    const TensorInfo& info = g.tensor(t);
    return !info.is_constant() && info.dtype == DType::F32 && info.shape.size() == 4 && info.shape[1] > 1 &&
           info.shape[2] * info.shape[3] > 1;
  };
  HalideLayouts l;
  for (TensorId t : k.inputs) l.inputs.push_back(linkable(t) ? 1 : 0);
  l.output = linkable(k.output);
  if (concat) {
    l.blocked_only = true;
    l.format = native_blocked_format();
    if (!output_concat_takes_format(g, k, l.format)) return none;
    for (size_t i = 0; i < k.inputs.size(); ++i)
      if (l.inputs[i] && !takes_format(g.tensor(k.inputs[i]).shape, l.format)) return none;
  }
  return l.any() ? l : none;
}

bool build_halide_pipeline(const PrimGraph& g, const Kernel& k, const Halide::Target& target,
                           Halide::Pipeline* pipeline, std::vector<Halide::ImageParam>* params,
                           std::string* description, std::string* why_not, const HalideLayouts& layouts) {
  if (k.num_linear > 0) {
    if (why_not) *why_not = "kernel has a Linear primitive";
    return false;
  }
  try {
    bool channels_last = layouts.any();
    int block = channels_last ? channel_block(layouts.format) : 0;
    if (block < 0) throw Unsupported{str_cat("activation layout ", layouts.format)};
    std::map<TensorId, int> input_blocks;
    for (size_t i = 0; i < k.inputs.size() && block > 0; ++i)
      if (i < layouts.inputs.size() && layouts.inputs[i]) input_blocks[k.inputs[i]] = block;
    Generator gen(g, k, channels_last, input_blocks);
    Func out = gen.build();
    int vector = std::max(4, target.natural_vector_size(storage_type(g.tensor(k.output).dtype)));
    if (channels_last) {
      // Strides of the tensors stored in the layout (constants: Halide folds them into the
      // addressing).
      auto set_layout = [&](Halide::OutputImageParam p, const Shape& shape) {
        std::vector<halide_dimension_t> d = layout_dimensions(shape, layouts.format);
        for (size_t i = 0; i < d.size(); ++i)
          p.dim(static_cast<int>(i)).set_bounds(0, d[i].extent).set_stride(d[i].stride);
      };
      for (size_t i = 0; i < k.inputs.size(); ++i)
        if (i < layouts.inputs.size() && layouts.inputs[i])
          set_layout(gen.params().at(k.inputs[i]), g.tensor(k.inputs[i]).shape);
      const Shape& shape = g.tensor(k.output).shape;
      int64_t channels = shape.size() >= 2 ? shape[1] : 1;
      std::string text;
      if (block > 0 && layouts.output) {
        Var ci("ci"), w("w"), h("h"), cb("cb"), n("n");
        Func blocked("blocked_output");
        if (std::optional<PrimId> concat = output_channel_concat(g, k)) {
          // A channel Concat: each piece is written by its own update over its channel blocks
          // (whole-vector loads and stores, no select between pieces).
          blocked(ci, w, h, cb, n) = Halide::undef(storage_type(g.tensor(k.output).dtype));
          int first_block = 0, piece = 0;
          for (TensorId t : g.prim(*concat).inputs) {
            int blocks = static_cast<int>(g.tensor(t).shape[1] / block);
            RDom r(0, blocks, "piece" + std::to_string(piece));
            blocked(ci, w, h, r.x + first_block, n) = gen.value_at(t, {n, r.x * block + ci, h, w});
            // A piece of several blocks: its blocks in parallel (one parallel loop per piece; rows
            // in parallel per block cost a fork and join per block: +25% on 52x52 pieces).
            Halide::Stage update = blocked.update(piece);
            update.reorder(ci, w, h, r.x, n).vectorize(ci, block);
            if (blocks >= 2)
              update.parallel(r.x);
            else
              update.parallel(h);
            first_block += blocks;
            ++piece;
          }
          text = layouts.format +
                 ", channel concat: one update per piece, one vector per channel block, blocks in parallel" +
                 schedule_channel_reductions(gen, channels, block);
        } else {
          blocked(ci, w, h, cb, n) = out(w, h, cb * block + ci, n);
          text = schedule_blocked_output(blocked, layouts.format, gen, channels);
        }
        set_layout(blocked.output_buffer(), shape);
        out = blocked;
      } else {
        // Blocked inputs are read a whole block of channels per vector.
        int width = block > 0 ? block : vector_width(channels, vector);
        if (layouts.output) {
          set_layout(out.output_buffer(), shape);
        } else {
          // Constant output bounds (every run realises the whole output): the reductions' channel
          // loops then start at 0, so that Halide proves a channel vector never crosses a block
          // and loads it whole (with symbolic bounds it gathered: 3x slower on candy's variances).
          for (size_t d = 0; d < shape.size(); ++d)
            out.output_buffer().dim(static_cast<int>(d)).set_bounds(0, static_cast<int>(shape[shape.size() - 1 - d]));
        }
        text = schedule_channels_last(out, shape, vector, width, layouts.output, gen);
        if (block > 0) text += ", " + layouts.format + " inputs";
      }
      *pipeline = Halide::Pipeline(out);
      params->clear();
      for (TensorId t : k.inputs) params->push_back(gen.params().at(t));
      if (description) *description = "halide: " + text;
      return true;
    }
    std::vector<Variant> variants = variants_of(g, k, gen);
    if (k.schedule < 0 || k.schedule >= static_cast<int>(variants.size()))
      throw Unsupported{str_cat("no schedule variant ", k.schedule, " (this kernel has ", variants.size(), ")")};
    if (variants[k.schedule] == Variant::StreamedPanels) {
      streamed_panels_output(g, k, gen, out, vector, pipeline, description);
      params->clear();
      for (TensorId t : k.inputs) params->push_back(gen.params().at(t));
      return true;
    }
    if (variants[k.schedule] == Variant::PiecewiseConcat) {
      out = piecewise_concat_output(g, k, gen, out.args(), vector, description);
      *pipeline = Halide::Pipeline(out);
      params->clear();
      for (TensorId t : k.inputs) params->push_back(gen.params().at(t));
      return true;
    }
    bool streamed_rows = variants[k.schedule] == Variant::StreamedRows;
    if (streamed_rows) {
      vector = std::min(vector, 16);  // divides the rows (variants_of), so no vector has a tail
      out = streamed_rows_output(g, k, out, vector);
    }
    OutputSchedule schedule = schedule_output(out, g.tensor(k.output).shape, vector, transposes_innermost(g, k),
                                              streamed_rows ? Variant::Default : variants[k.schedule]);
    if (is_block_transpose(variants[k.schedule])) {
      // Each input read transposed: its 8x8 block staged and transposed in registers.
      stage_transposed_inputs(g, k, gen, out, schedule.block_var);
    }
    // Reductions and windows feeding the output are computed per parallel slice
    // of it (so a row's statistics are made right before the row is written),
    // or once up front.
    std::string reductions;
    for (Func f : gen.materialised()) {
      if (schedule.has_parallel) {
        f.compute_at(out, schedule.parallel_var);
        reductions = ", reductions per parallel slice";
      } else {
        f.compute_root();
        std::vector<Var> v = f.args();
        if (!v.empty()) f.parallel(v.back());
        reductions = ", reductions compute_root";
      }
    }
    // Stencil stages (separable pooling) likewise, vectorised along their rows.
    for (Func f : gen.stencils()) {
      std::vector<Var> v = f.args();
      if (schedule.has_parallel) {
        f.compute_at(out, schedule.parallel_var);
      } else {
        f.compute_root();
        f.parallel(v.back());
      }
      f.vectorize(v[0], std::min(vector, 8), Halide::TailStrategy::GuardWithIf);
    }
    if (!gen.stencils().empty()) reductions += ", separable window";
    // In row-wise reduction kernels (softmax, normalisation), values read
    // several times (e.g. exp(x - max)) are stored per slice; elsewhere
    // recomputing them is cheaper.
    if (schedule.has_parallel && !gen.materialised().empty() && !transposes_innermost(g, k))
      for (Func f : gen.shared()) {
        f.compute_at(out, schedule.parallel_var);
        std::vector<Var> v = f.args();
        f.vectorize(v[0], vector, Halide::TailStrategy::GuardWithIf);
        reductions += ", shared values per slice";
      }
    *pipeline = Halide::Pipeline(out);
    if (streamed_rows) {
      add_streaming_pass(out, pipeline);
      reductions += ", rows computed then written with streaming stores";
    }
    params->clear();
    for (TensorId t : k.inputs) params->push_back(gen.params().at(t));
    if (description) *description = str_cat("halide: ", schedule.text, reductions);
    return true;
  } catch (const Unsupported& u) {
    if (why_not) *why_not = u.why;
  } catch (const Halide::Error& e) {
    if (why_not) *why_not = str_cat("Halide: ", e.what());
  }
  return false;
}

namespace {
// CPUID leaf 7 sub-leaf 1, EAX bit 4: AVX-VNNI (the VEX-encoded VNNI instructions).
bool cpu_has_avx_vnni() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return false;
  return (eax >> 4) & 1;
}
}  // namespace

Halide::Target halide_target() {
  Halide::Target t = Halide::get_jit_target_from_environment();
  // Halide 14 infers avx512_sapphirerapids from AVX512-BF16 + VNNI (e.g. on AMD Zen 4) and
  // then emits VEX-encoded vpdpwssd (AVX-VNNI), which such CPUs do not have: SIGILL.
  if (t.has_feature(Halide::Target::AVX512_SapphireRapids) && !cpu_has_avx_vnni())
    t = t.without_feature(Halide::Target::AVX512_SapphireRapids);
  return t;
}

std::unique_ptr<CompiledKernel> compile_halide_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  Halide::Target target = halide_target();
  Halide::Pipeline pipeline;
  std::vector<ImageParam> params;
  std::string description;
  if (!build_halide_pipeline(g, k, target, &pipeline, &params, &description, why_not)) return nullptr;
  try {
    pipeline.jit_handlers().custom_do_par_for = omp_do_par_for;
    pipeline.compile_jit(target);
    return std::make_unique<HalideKernel>(g, k, target, std::move(pipeline), std::move(params), std::move(description));
  } catch (const Halide::Error& e) {
    if (why_not) *why_not = str_cat("Halide: ", e.what());
  }
  return nullptr;
}

}  // namespace korch::cpu
