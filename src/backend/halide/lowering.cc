// The algorithm of a memory-bound kernel: every primitive becomes a Halide Func over its output
// coordinates (Halide dimension 0 is the innermost ONNX axis). Elementwise and layout primitives
// are index maps inlined into their consumers; reductions and pooling windows use RDoms and are
// computed once (never inlined); 2-D max pools run as two separable passes. The schedules
// (backend/cpu/halide_schedule.cc, backend/cuda/gpu_schedule.cc) decide where and in which loop order these Funcs are
// computed. Softplus (Log(Add(Exp(x), 1))) is computed as max(x, 0) + log1p(exp(-|x|)); float Tanh
// as a rational approximation (tanh_f32). Exp and Sigmoid use Halide::exp
// (relative error < 4e-7 over the float range, +inf above ln(FLT_MAX), 0 below ln(FLT_MIN)); Halide's fast_exp (2e-6)
// made YOLOX's outputs twice as far from a float64 evaluation as ONNX Runtime's. Resize reads per-axis tables of the
// reference's own taps (input index, weight), so it indexes exactly like the reference. Unsupported cases (Linear
// primitives, integer division, select_last_index arg-reductions, interpolating Resize on integers, ...) throw
// Unsupported with the reason.
#include "backend/halide/lowering.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "ir/strided_view.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch::halide_lowering {

Halide::Type storage_type(DType t) {
  switch (t) {
    case DType::F32: return Halide::Float(32);
    case DType::F64: return Halide::Float(64);
    case DType::I64: return Halide::Int(64);
    case DType::I32: return Halide::Int(32);
    case DType::I8: return Halide::Int(8);
    case DType::U8: return Halide::UInt(8);
    case DType::Bool: return Halide::UInt(8);
    default: break;
  }
  throw Unsupported{str_cat("element type ", dtype_name(t))};
}

Func Generator::build() {
  std::string why;
  if (!has_kernel_dtypes(g_, k_, &why)) throw Unsupported{why};
  for (size_t i = 0; i < k_.inputs.size(); ++i) {
    const TensorInfo& t = g_.tensor(k_.inputs[i]);
    int rank = input_blocks_.count(k_.inputs[i]) ? 5 : static_cast<int>(t.shape.size());
    params_.emplace(k_.inputs[i], ImageParam(storage_type(t.dtype), rank, "in" + std::to_string(i)));
  }
  for (PrimId p : k_.prims) define(p);
  return funcs_.at(k_.output);
}

std::vector<Var> Generator::vars(size_t rank) {
  std::vector<Var> v;
  for (size_t i = 0; i < rank; ++i) v.emplace_back("x" + std::to_string(i));
  return v;
}

// ONNX-order index expressions for Halide vars (x0 innermost).
std::vector<Expr> Generator::onnx_index(const std::vector<Var>& v) {
  std::vector<Expr> idx(v.size());
  for (size_t a = 0; a < v.size(); ++a) idx[a] = v[v.size() - 1 - a];
  return idx;
}

// Value of tensor t at ONNX index `idx` (in range).
Expr Generator::at(TensorId t, const std::vector<Expr>& idx) {
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
Expr Generator::broadcast_at(TensorId t, const std::vector<Expr>& idx) {
  const Shape& s = g_.tensor(t).shape;
  size_t shift = idx.size() - s.size();
  std::vector<Expr> in(s.size());
  for (size_t j = 0; j < s.size(); ++j) in[j] = s[j] == 1 ? Expr(0) : idx[shift + j];
  return at(t, in);
}

// Whether tensor t, broadcast to `out`, takes one value along the output's innermost axis.
bool Generator::constant_along_rows(TensorId t, const Shape& out) const {
  const Shape& s = g_.tensor(t).shape;
  return !out.empty() && out.back() > 1 && (s.empty() || s.back() == 1) && g_.tensor(t).dtype == DType::F32;
}

Expr Generator::as_bool(Expr e) { return e.type().is_bool() ? e : e != Halide::cast(e.type(), 0); }

Expr Generator::store(Expr e, DType t) {
  if (e.type().is_bool()) return Halide::select(e, Halide::cast(storage_type(t), 1), Halide::cast(storage_type(t), 0));
  return Halide::cast(storage_type(t), e);
}

void Generator::define(PrimId p) {
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

Expr Generator::elementwise(const Primitive& prim, const std::vector<Expr>& idx, DType out_dtype) {
  std::vector<Expr> a;
  for (TensorId t : prim.inputs) a.push_back(broadcast_at(t, idx));
  DType in_dtype = g_.tensor(prim.inputs[0]).dtype;
  bool fp = is_floating(in_dtype);
  Halide::Type ty = a[0].type();
  auto need_float = [&] {
    if (!fp) throw Unsupported{str_cat(prim_op_name(prim.op), " on integers")};
  };
  auto need_integer = [&] {
    if (fp || in_dtype == DType::Bool) throw Unsupported{str_cat(prim_op_name(prim.op), " on ", dtype_name(in_dtype))};
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
    case PrimOp::Tanh: need_float(); return ty == Halide::Float(32) ? tanh_f32(a[0]) : Halide::tanh(a[0]);
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
      if (std::optional<int> n = small_integer_exponent(g_, prim)) {  // x * x ...: NaN, inf and signs as pow's
        Expr r = a[0];
        for (int i = 1; i < *n; ++i) r = r * a[0];
        return r;
      }
      return Halide::pow(a[0], a[1]);
    case PrimOp::Max: return Halide::max(a[0], a[1]);
    case PrimOp::Min: return Halide::min(a[0], a[1]);
    case PrimOp::Mod: {
      if (!fp) throw Unsupported{"integer Mod"};
      // C's fmod: x - y * trunc(x / y), except that a finite x modulo an infinite y is x.
      Expr r = Halide::select(Halide::is_inf(a[1]) && Halide::is_finite(a[0]), a[0],
                              a[0] - a[1] * Halide::trunc(a[0] / a[1]));
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
    case PrimOp::Asin: need_float(); return Halide::asin(a[0]);
    case PrimOp::Acos: need_float(); return Halide::acos(a[0]);
    case PrimOp::Atan: need_float(); return Halide::atan(a[0]);
    case PrimOp::BitNot: need_integer(); return ~a[0];
    case PrimOp::BitAnd: need_integer(); return a[0] & a[1];
    case PrimOp::BitOr: need_integer(); return a[0] | a[1];
    case PrimOp::BitXor: need_integer(); return a[0] ^ a[1];
    case PrimOp::ShiftLeft:
    case PrimOp::ShiftRight: need_integer(); return shift(prim.op, a[0], a[1]);
    default: break;
  }
  throw Unsupported{str_cat("elementwise ", prim_op_name(prim.op))};
}

// a shifted by b bits, as the reference does: a shift amount outside [0, bits) gives 0, or -1
// for a negative signed value shifted right. A left shift runs on the unsigned bits (signed
// overflow is undefined in Halide's wider types); a right shift is arithmetic on signed types.
Expr Generator::shift(PrimOp op, Expr a, Expr b) {
  Halide::Type ty = a.type();
  Expr out_of_range = b < Halide::cast(ty, 0) || b >= Halide::cast(ty, ty.bits());
  Expr amount = Halide::select(out_of_range, Halide::cast(ty, 0), b);
  if (op == PrimOp::ShiftLeft) {
    Halide::Type bits_type = ty.with_code(Halide::Type::UInt);
    Expr shifted = Halide::reinterpret(ty, Halide::reinterpret(bits_type, a) << Halide::reinterpret(bits_type, amount));
    return Halide::select(out_of_range, Halide::cast(ty, 0), shifted);
  }
  Expr beyond = ty.is_int() ? Halide::select(a < Halide::cast(ty, 0), Halide::cast(ty, -1), Halide::cast(ty, 0))
                            : Halide::cast(ty, 0);
  return Halide::select(out_of_range, beyond, a >> amount);
}

// Softplus as fission writes it, Log(Add(Exp(x), 1)) with all three primitives in this
// kernel: returns x. Computed as written, 1 + exp(x) rounds away exp(x)'s low bits for x < 0
// (relative error ~2^-24 / exp(x); softplus(-17) comes out 0, softplus(-12) 0.9% off);
// softplus() below stays within a few ulp everywhere.
std::optional<TensorId> Generator::softplus_argument(const Primitive& log_prim) const {
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
Expr Generator::softplus(Expr x) {
  Expr u = Halide::exp(-Halide::abs(x));
  Expr s = u / (2.0f + u);
  Expr s2 = s * s;
  Expr series = 1.0f / 15.0f;
  for (float k : {13.0f, 11.0f, 9.0f, 7.0f, 5.0f, 3.0f}) series = series * s2 + 1.0f / k;
  series = series * s2 + 1.0f;
  return Halide::max(x, 0.0f) + 2.0f * s * series;
}

// tanh as the ratio of an odd degree-13 and an even degree-6 polynomial over [-7.9053, 7.9053]
// (Eigen's and ONNX Runtime's MLAS coefficients), x itself below 4e-4 and for NaN: within 3e-7
// of tanh everywhere (CpuKernels test). Halide::tanh calls libm's tanhf per lane
// (scalar, ~20x slower: YOLOv4's Mish kernels spent most of their time in it).
Expr Generator::tanh_f32(Expr x) {
  Expr c = Halide::clamp(x, -7.90531110763549805f, 7.90531110763549805f);
  Expr c2 = c * c;
  Expr p = -2.76076847742355e-16f;
  for (float k : {2.00018790482477e-13f, -8.60467152213735e-11f, 5.12229709037114e-08f, 1.48572235717979e-05f,
                  6.37261928875436e-04f, 4.89352455891786e-03f})
    p = p * c2 + k;
  Expr q = 1.19825839466702e-06f;
  for (float k : {1.18534705686654e-04f, 2.26843463243900e-03f, 4.89352518554385e-03f}) q = q * c2 + k;
  Expr ratio = Halide::clamp(c * p / q, -1.0f, 1.0f);
  Expr value = Halide::select(Halide::abs(x) < 0.0004f, x, ratio);
  // NaN in, NaN out, decided on the bits: Halide compiles float math with LLVM's no-NaNs flag,
  // which folds float NaN tests and selects away.
  Expr bits = Halide::reinterpret(Halide::UInt(32), x);
  Expr is_nan = (bits & Halide::cast(Halide::UInt(32), 0x7fffffff)) > Halide::cast(Halide::UInt(32), 0x7f800000);
  return Halide::reinterpret(Halide::Float(32),
                             Halide::select(is_nan, bits, Halide::reinterpret(Halide::UInt(32), value)));
}

Expr Generator::reduce(const Primitive& prim, const std::vector<Expr>& idx, const TensorInfo& out) {
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
Expr Generator::reduced_value(TensorId x, const std::vector<int64_t>& reduced, const RDom& r, bool keep,
                              const std::vector<Expr>& idx) {
  std::vector<Expr> pos;
  for (int i = 0; i < r.dimensions(); ++i) pos.push_back(r[i]);
  return reduced_value_at(x, reduced, pos, keep, idx);
}

// The same at given positions along the reduced axes (pos[i] along axis reduced[i]).
Expr Generator::reduced_value_at(TensorId x, const std::vector<int64_t>& reduced, const std::vector<Expr>& pos,
                                 bool keep, const std::vector<Expr>& idx) {
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
Expr Generator::explicit_reduction(const Primitive& prim, TensorId x, const std::vector<int64_t>& reduced,
                                   const RDom& r, bool keep, const std::vector<Expr>& idx, double count) {
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

// The dims of a Reshape split into groups of consecutive output and input dims with equal element
// counts (reshape_groups: a reshape merges and splits dims only within them). Inside a group the input coordinates
// come from the group's linear index, the outermost without a modulo, and a dim that is its
// group's only one on both sides is read as is. So Halide's bounds inference stays exact on every
// dim the reshape keeps: with one linear index over all dims and a modulo per dim, a reduction
// computed per parallel row behind a reshape was computed over the whole tensor for every row.
std::vector<Expr> reshape_source_index(const Shape& out, const Shape& in, const std::vector<Expr>& idx) {
  std::vector<Expr> coords(in.size(), Expr(0));
  std::optional<std::vector<ReshapeGroup>> groups = reshape_groups(in, out);
  if (!groups) return coords;
  for (const ReshapeGroup& group : *groups) {
    if (group.from.size() == 1 && group.to.size() == 1) {
      coords[group.from[0]] = idx[group.to[0]];
      continue;
    }
    Expr lin = 0;
    int64_t stride = 1;
    for (size_t a = group.to.size(); a-- > 0;) {
      lin = lin + idx[group.to[a]] * static_cast<int>(stride);
      stride *= out[group.to[a]];
    }
    stride = 1;
    for (size_t b = group.from.size(); b-- > 0;) {
      Expr c = stride == 1 ? lin : lin / static_cast<int>(stride);
      coords[group.from[b]] = b == 0 ? c : c % static_cast<int>(in[group.from[b]]);
      stride *= in[group.from[b]];
    }
  }
  return coords;
}

Expr Generator::layout(const Primitive& prim, const std::vector<Expr>& idx) {
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
    case PrimOp::Reshape: return at(x, reshape_source_index(g_.tensor(prim.output).shape, s, idx));
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
// value is the tensor product of the axes' taps. An interpolating Resize that
// changes the innermost axis and others runs in two stages: the other axes'
// taps first, over the input's rows (contiguous loads, a stencil computed per
// slice), then the innermost axis's taps gather from those rows. Inlined in
// one expression, every output lane would gather all taps^axes input values
// (and re-evaluate the input's producers as often): 2-3x slower kernels, and
// LLVM compiling the scalarised gathers took most of a cold optimisation of
// SegFormer.
Expr Generator::resize(const Primitive& prim, const std::vector<Expr>& idx) {
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
    int out_len, in_len;
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
                n,
                static_cast<int>(s[axis]),
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
  // The sum over the taps of `axes` at output position `pos` (ONNX order) of weight x read(input position).
  auto interpolate = [&](const std::vector<AxisTable*>& axes, const std::vector<Expr>& pos,
                         const std::function<Expr(const std::vector<Expr>&)>& read) {
    int combos = 1;
    for (size_t i = 0; i < axes.size(); ++i) combos *= taps_per_axis;
    Expr value;
    for (int c = 0; c < combos; ++c) {
      std::vector<Expr> in = pos;
      Expr weight;
      int rest = c;
      for (AxisTable* t : axes) {
        int k = rest % taps_per_axis;
        rest /= taps_per_axis;
        Expr coord = Halide::clamp(pos[t->axis], 0, t->out_len - 1);
        in[t->axis] = Halide::clamp(t->index(coord, k), 0, t->in_len - 1);
        if (taps_per_axis > 1) {
          Expr w = f64 ? Expr(t->weight64(coord, k)) : Halide::cast(ty, t->weight(coord, k));
          weight = weight.defined() ? weight * w : w;
        }
      }
      Expr term = read(in);
      if (weight.defined()) term = term * weight;
      value = value.defined() ? value + term : term;
    }
    return value;
  };
  auto read_input = [&](const std::vector<Expr>& in) { return at(x, in); };
  std::vector<AxisTable*> outer_axes, innermost_axis, all_axes;
  for (AxisTable& t : tables) {
    all_axes.push_back(&t);
    (t.axis == rank - 1 ? innermost_axis : outer_axes).push_back(&t);
  }
  Expr value;
  if (taps_per_axis > 1 && !innermost_axis.empty() && !outer_axes.empty()) {
    std::vector<Var> v = vars(static_cast<size_t>(rank));
    std::vector<Halide::Var> hv(v.begin(), v.end());
    Func rows(str_cat("resize_p", prim.output, "_rows"));
    rows(hv) = interpolate(outer_axes, onnx_index(v), read_input);
    stencils_.push_back(rows);
    value = interpolate(innermost_axis, idx,
                        [&](const std::vector<Expr>& in) { return rows(std::vector<Expr>(in.rbegin(), in.rend())); });
  } else {
    value = interpolate(all_axes, idx, read_input);
  }
  Expr inside;
  for (AxisTable& t : tables)
    if (t.any_outside) {
      Expr i = t.inside(Halide::clamp(idx[t.axis], 0, t.out_len - 1)) != 0;
      inside = inside.defined() ? (inside && i) : i;
    }
  if (inside.defined()) value = Halide::select(inside, value, Halide::cast(ty, Expr(a.f("extrapolation_value"))));
  return value;
}

Expr Generator::window(const Primitive& prim, const std::vector<Expr>& idx) {
  TensorId x = prim.inputs[0];
  const Shape& s = g_.tensor(x).shape;
  const Attrs& a = prim.attrs;
  const auto& k = a.ints("kernel");
  const auto& st = a.ints("strides");
  const auto& pd = a.ints("pads");
  const auto& dl = a.ints("dilations");
  size_t nsp = k.size();
  if (prim.op == PrimOp::MaxPool && nsp == 2 && dl[0] == 1 && dl[1] == 1) return separable_max_pool(x, k, st, pd, idx);
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
Expr Generator::separable_max_pool(TensorId x, const std::vector<int64_t>& k, const std::vector<int64_t>& st,
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
  pool_rows_.push_back({k[0], st[0]});
  return Halide::maximum(rows(idx[3], idx[2] * static_cast<int>(st[0]) + ry, idx[1], idx[0]));
}

int Generator::consumers_inside(TensorId t) const {
  int n = 0;
  for (PrimId p : k_.prims)
    for (TensorId u : g_.prim(p).inputs)
      if (u == t) {
        ++n;
        break;
      }
  return n;
}

bool try_building(const Kernel& k, std::string* why_not, const std::function<void()>& build) {
  if (k.num_linear > 0) {
    if (why_not) *why_not = "kernel has a Linear primitive";
    return false;
  }
  try {
    build();
    return true;
  } catch (const Unsupported& u) {
    if (why_not) *why_not = u.why;
  } catch (const Halide::Error& e) {
    if (why_not) *why_not = str_cat("Halide: ", e.what());
  }
  return false;
}

bool defines_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  return try_building(k, why_not, [&] {
    Generator gen(g, k);
    gen.build();
  });
}

Halide::Buffer<> dense_buffer(const TensorInfo& t, const void* data) {
  std::vector<int> dims(t.shape.rbegin(), t.shape.rend());
  return Halide::Buffer<>(storage_type(t.dtype), const_cast<void*>(data), dims);
}

}  // namespace korch::halide_lowering
