// Reference elementwise primitives with numpy broadcasting. Floating inputs compute in
// double (the narrow float types round once, when stored); integer and bool inputs compute in
// int64 (exact; uint64 division, modulo, min/max and comparisons as unsigned).
#include <cmath>
#include <optional>

#include "ir/float_formats.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch::reference {

namespace {

double unary_f(PrimOp op, double x) {
  switch (op) {
    case PrimOp::Neg: return -x;
    case PrimOp::Abs: return std::fabs(x);
    case PrimOp::Exp: return std::exp(x);
    case PrimOp::Log: return std::log(x);
    case PrimOp::Sqrt: return std::sqrt(x);
    case PrimOp::Reciprocal: return 1.0 / x;
    case PrimOp::Sin: return std::sin(x);
    case PrimOp::Cos: return std::cos(x);
    case PrimOp::Tanh: return std::tanh(x);
    case PrimOp::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case PrimOp::Erf: return std::erf(x);
    case PrimOp::Asin: return std::asin(x);
    case PrimOp::Acos: return std::acos(x);
    case PrimOp::Atan: return std::atan(x);
    case PrimOp::Floor: return std::floor(x);
    case PrimOp::Ceil: return std::ceil(x);
    case PrimOp::Round: return std::nearbyint(x);
    case PrimOp::Sign: return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
    case PrimOp::Not: return x == 0 ? 1.0 : 0.0;
    case PrimOp::Relu: return x > 0 ? x : 0.0;
    case PrimOp::Cast:
    case PrimOp::Copy: return x;
    default: break;
  }
  fail("reference: ", prim_op_name(op), " is not a unary float op");
}

// Two's-complement wrapping arithmetic (what ONNX runtimes do for integer overflow; signed
// overflow is undefined behaviour in C++).
int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

int64_t unary_i(PrimOp op, int64_t x) {
  switch (op) {
    case PrimOp::Neg: return wrap_sub(0, x);
    case PrimOp::Abs: return x < 0 ? wrap_sub(0, x) : x;
    case PrimOp::Sign: return x > 0 ? 1 : (x < 0 ? -1 : 0);
    case PrimOp::Not: return x == 0;
    case PrimOp::Relu: return x > 0 ? x : 0;
    case PrimOp::BitNot: return ~x;
    case PrimOp::Floor:
    case PrimOp::Ceil:
    case PrimOp::Round:
    case PrimOp::Cast:
    case PrimOp::Copy: return x;
    default: break;
  }
  fail("reference: ", prim_op_name(op), " is not defined on integers");
}

double binary_f(PrimOp op, double a, double b, bool c_fmod) {
  switch (op) {
    case PrimOp::Add: return a + b;
    case PrimOp::Sub: return a - b;
    case PrimOp::Mul: return a * b;
    case PrimOp::Div: return a / b;
    case PrimOp::Pow: return std::pow(a, b);
    case PrimOp::Max: return std::isnan(a) || std::isnan(b) ? NAN : (a > b ? a : b);
    case PrimOp::Min: return std::isnan(a) || std::isnan(b) ? NAN : (a < b ? a : b);
    case PrimOp::Mod: {
      double r = std::fmod(a, b);
      if (!c_fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
    case PrimOp::Equal: return a == b;
    case PrimOp::Less: return a < b;
    case PrimOp::Greater: return a > b;
    case PrimOp::LessEqual: return a <= b;
    case PrimOp::GreaterEqual: return a >= b;
    case PrimOp::And: return (a != 0) && (b != 0);
    case PrimOp::Or: return (a != 0) || (b != 0);
    case PrimOp::Xor: return (a != 0) != (b != 0);
    default: break;
  }
  fail("reference: ", prim_op_name(op), " is not a binary op");
}

int64_t ipow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : (a == -1 ? (b % 2 ? -1 : 1) : 0);
  int64_t r = 1;
  while (b) {
    if (b & 1) r = wrap_mul(r, a);
    a = wrap_mul(a, a);
    b >>= 1;
  }
  return r;
}

// uint64 operands (held as their two's-complement int64 bits): the operations where the bits'
// meaning matters; nullopt for the others (the same bits as int64 arithmetic).
std::optional<int64_t> binary_u64(PrimOp op, uint64_t a, uint64_t b) {
  switch (op) {
    case PrimOp::Div:
      if (b == 0) fail("integer division by zero");
      return static_cast<int64_t>(a / b);
    case PrimOp::Mod:
      if (b == 0) fail("integer modulo by zero");
      return static_cast<int64_t>(a % b);
    case PrimOp::Max: return static_cast<int64_t>(a > b ? a : b);
    case PrimOp::Min: return static_cast<int64_t>(a < b ? a : b);
    case PrimOp::Less: return a < b;
    case PrimOp::Greater: return a > b;
    case PrimOp::LessEqual: return a <= b;
    case PrimOp::GreaterEqual: return a >= b;
    default: return std::nullopt;
  }
}

int64_t binary_i(PrimOp op, int64_t a, int64_t b, bool c_fmod, bool unsigned64) {
  if (unsigned64)
    if (std::optional<int64_t> r = binary_u64(op, static_cast<uint64_t>(a), static_cast<uint64_t>(b))) return *r;
  switch (op) {
    case PrimOp::Add: return wrap_add(a, b);
    case PrimOp::Sub: return wrap_sub(a, b);
    case PrimOp::Mul: return wrap_mul(a, b);
    case PrimOp::Div:
      if (b == 0) fail("integer division by zero");
      if (b == -1) return wrap_sub(0, a);  // INT64_MIN / -1 traps (SIGFPE)
      return a / b;
    case PrimOp::Pow: return ipow(a, b);
    case PrimOp::Max: return a > b ? a : b;
    case PrimOp::Min: return a < b ? a : b;
    case PrimOp::Mod: {
      if (b == 0) fail("integer modulo by zero");
      if (b == -1) return 0;  // INT64_MIN % -1 traps (SIGFPE)
      int64_t r = a % b;
      if (!c_fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
    case PrimOp::Equal: return a == b;
    case PrimOp::Less: return a < b;
    case PrimOp::Greater: return a > b;
    case PrimOp::LessEqual: return a <= b;
    case PrimOp::GreaterEqual: return a >= b;
    case PrimOp::And: return (a != 0) && (b != 0);
    case PrimOp::Or: return (a != 0) || (b != 0);
    case PrimOp::Xor: return (a != 0) != (b != 0);
    case PrimOp::BitAnd: return a & b;
    case PrimOp::BitOr: return a | b;
    case PrimOp::BitXor: return a ^ b;
    default: break;
  }
  fail("reference: ", prim_op_name(op), " is not a binary op");
}

// a shifted by b bits in an integer type of `bits` bits (a holds the value as get_i64 reads it:
// sign-extended when signed, zero-extended when unsigned, the bits of a uint64 as they are).
int64_t shift(PrimOp op, int64_t a, int64_t b, int bits, bool is_signed) {
  if (b < 0 || b >= bits) return op == PrimOp::ShiftRight && is_signed && a < 0 ? -1 : 0;
  if (op == PrimOp::ShiftLeft) return static_cast<int64_t>(static_cast<uint64_t>(a) << b);
  if (is_signed) return a >> b;  // arithmetic
  return static_cast<int64_t>(static_cast<uint64_t>(a) >> b);
}

}  // namespace

TensorData eval_elementwise(const Primitive& prim, const std::vector<const TensorData*>& in, DType out_dtype,
                            const Shape& out_shape) {
  TensorData out(out_dtype, out_shape);
  int64_t n = out.size();
  // Each input's element offset per output element; not built for float32 inputs of the output's
  // own shape (the all-float32 path indexes them directly: a 64 M-element attention score tensor
  // would take 512 MB of offsets).
  bool all_f32 = out_dtype == DType::F32 && prim.op != PrimOp::Cast;
  for (const TensorData* t : in) all_f32 &= t->dtype() == DType::F32;
  std::vector<std::vector<int64_t>> offsets;
  std::vector<bool> dense;
  for (const TensorData* t : in) {
    dense.push_back(all_f32 && t->shape() == out_shape);
    offsets.push_back(dense.back() ? std::vector<int64_t>{} : broadcast_offsets(t->shape(), out_shape));
  }
  PrimOp op = prim.op;
  if (op == PrimOp::Where) {
    const TensorData &c = *in[0], &a = *in[1], &b = *in[2];
    if (is_floating(a.dtype())) {
      for (int64_t i = 0; i < n; ++i)
        out.set_f64(i, c.get_i64(offsets[0][i]) ? a.get_f64(offsets[1][i]) : b.get_f64(offsets[2][i]));
    } else {
      for (int64_t i = 0; i < n; ++i)
        out.set_i64(i, c.get_i64(offsets[0][i]) ? a.get_i64(offsets[1][i]) : b.get_i64(offsets[2][i]));
    }
    return out;
  }
  if (op == PrimOp::ShiftLeft || op == PrimOp::ShiftRight) {
    DType t = in[0]->dtype();
    if (is_floating(t) || t == DType::Bool) fail("reference: ", prim_op_name(op), " needs integer operands");
    int bits = dtype_bits(t);
    bool is_signed = integer_min(t) < 0;
    for (int64_t i = 0; i < n; ++i)
      out.set_i64(i, shift(op, in[0]->get_i64(offsets[0][i]), in[1]->get_i64(offsets[1][i]), bits, is_signed));
    return out;
  }
  bool c_fmod = prim.attrs.i_or("fmod", 0) != 0;
  // Cast's saturate (float8 targets): out-of-range values and infinities clamp to the largest finite value.
  double saturate_at = op == PrimOp::Cast && prim.attrs.i_or("saturate", 0) != 0 && is_narrow_float(out_dtype)
                           ? narrow_float_max(out_dtype)
                           : INFINITY;
  // Cast to/from floating types goes through double; integer to integer through int64.
  bool float_domain = is_floating(in[0]->dtype()) || (op == PrimOp::Cast && is_floating(out_dtype)) ||
                      (in.size() > 1 && is_floating(in[1]->dtype()));
  if (all_f32) {  // the same double arithmetic, without the per-element type dispatch
    float* o = out.data<float>();
    const float* a = in[0]->data<float>();
    const int64_t* oa = offsets[0].data();
    if (in.size() == 1) {
      if (dense[0])
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(unary_f(op, a[i]));
      else
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(unary_f(op, a[oa[i]]));
    } else {
      const float* b = in[1]->data<float>();
      const int64_t* ob = offsets[1].data();
      if (dense[0] && dense[1])
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(binary_f(op, a[i], b[i], c_fmod));
      else
        for (int64_t i = 0; i < n; ++i)
          o[i] = static_cast<float>(binary_f(op, dense[0] ? a[i] : a[oa[i]], dense[1] ? b[i] : b[ob[i]], c_fmod));
    }
  } else if (float_domain) {
    if (in.size() == 1) {
      for (int64_t i = 0; i < n; ++i) {
        double v = unary_f(op, in[0]->get_f64(offsets[0][i]));
        if (op == PrimOp::Cast && !is_floating(out_dtype) && out_dtype != DType::Bool) v = std::trunc(v);
        if (op == PrimOp::Cast && out_dtype == DType::Bool) v = v != 0;
        if (std::fabs(v) > saturate_at) v = std::copysign(saturate_at, v);
        out.set_f64(i, v);
      }
    } else {
      for (int64_t i = 0; i < n; ++i)
        out.set_f64(i, binary_f(op, in[0]->get_f64(offsets[0][i]), in[1]->get_f64(offsets[1][i]), c_fmod));
    }
  } else {
    if (in.size() == 1) {
      for (int64_t i = 0; i < n; ++i) out.set_i64(i, unary_i(op, in[0]->get_i64(offsets[0][i])));
    } else {
      bool unsigned64 = in[0]->dtype() == DType::U64 || in[1]->dtype() == DType::U64;
      for (int64_t i = 0; i < n; ++i)
        out.set_i64(i, binary_i(op, in[0]->get_i64(offsets[0][i]), in[1]->get_i64(offsets[1][i]), c_fmod, unsigned64));
    }
  }
  return out;
}

}  // namespace korch::reference
