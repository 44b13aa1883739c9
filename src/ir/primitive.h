// Primitive operators: the vocabulary of korch's IR. Every primitive has exactly one
// output. Kinds follow the Korch paper (elementwise, reduce/broadcast, layout, linear)
// plus window (pooling).
#pragma once
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace korch {

enum class PrimKind : uint8_t { Elementwise, Reduce, Broadcast, Layout, Window, Linear };

// The elementwise ops after the linear ones: inverse trigonometric functions (floats), bitwise
// logic and shifts (integers, two's complement bits). A shift by a negative amount or by at least
// the type's width gives 0 (-1 for a negative signed value shifted right).
#define KORCH_PRIM_OPS(X)                                                                                              \
  /* elementwise, unary */                                                                                             \
  X(Neg, Elementwise, 1)                                                                                               \
  X(Abs, Elementwise, 1)                                                                                               \
  X(Exp, Elementwise, 1)                                                                                               \
  X(Log, Elementwise, 1)                                                                                               \
  X(Sqrt, Elementwise, 1)                                                                                              \
  X(Reciprocal, Elementwise, 1) X(Sin, Elementwise, 1) X(Cos, Elementwise, 1) X(Tanh, Elementwise, 1)                  \
      X(Sigmoid, Elementwise, 1) X(Erf, Elementwise, 1) X(Floor, Elementwise, 1) X(Ceil, Elementwise, 1)               \
          X(Round, Elementwise, 1) X(Sign, Elementwise, 1) X(Not, Elementwise, 1) X(Relu, Elementwise, 1)              \
              X(Cast, Elementwise, 1) X(Copy, Elementwise, 1) /* elementwise, binary (numpy broadcasting) */           \
      X(Add, Elementwise, 2) X(Sub, Elementwise, 2) X(Mul, Elementwise, 2) X(Div, Elementwise, 2)                      \
          X(Pow, Elementwise, 2) X(Max, Elementwise, 2) X(Min, Elementwise, 2) X(Mod, Elementwise, 2)                  \
              X(Equal, Elementwise, 2) X(Less, Elementwise, 2) X(Greater, Elementwise, 2) X(LessEqual, Elementwise, 2) \
                  X(GreaterEqual, Elementwise, 2) X(And, Elementwise, 2) X(Or, Elementwise, 2)                         \
                      X(Xor, Elementwise, 2) /* elementwise, ternary */                                                \
      X(Where, Elementwise, 3)               /* reduce: attrs axes (sorted, normalised), keepdims */                   \
      X(ReduceSum, Reduce, 1) X(ReduceMean, Reduce, 1) X(ReduceMax, Reduce, 1) X(ReduceMin, Reduce, 1)                 \
          X(ReduceProd, Reduce, 1) X(ArgMax, Reduce, 1) X(ArgMin, Reduce, 1) /* broadcast: attr shape */               \
      X(Broadcast, Broadcast, 1)                                             /* layout (index maps) */                 \
      X(Transpose, Layout, 1) X(Reshape, Layout, 1) X(Slice, Layout, 1) X(Concat, Layout, -1) X(Pad, Layout, 1)        \
          X(Gather, Layout, 2) X(Resize, Layout, 1) /* window */                                                       \
      X(MaxPool, Window, 1) X(AvgPool, Window, 1)   /* linear */                                                       \
      X(MatMul, Linear, 2) X(Conv, Linear, 2)                                                                          \
          X(ConvTranspose, Linear, 2) /* elementwise, appended (packages store ops by number) */                       \
      X(Asin, Elementwise, 1) X(Acos, Elementwise, 1) X(Atan, Elementwise, 1) X(BitNot, Elementwise, 1)                \
          X(BitAnd, Elementwise, 2) X(BitOr, Elementwise, 2) X(BitXor, Elementwise, 2) X(ShiftLeft, Elementwise, 2)    \
              X(ShiftRight, Elementwise, 2)

enum class PrimOp : uint8_t {
#define KORCH_ENUM(name, kind, arity) name,
  KORCH_PRIM_OPS(KORCH_ENUM)
#undef KORCH_ENUM
};

const char* prim_op_name(PrimOp op);
PrimKind prim_kind(PrimOp op);
const char* prim_kind_name(PrimKind kind);
// Number of inputs, or -1 for variadic.
int prim_arity(PrimOp op);
bool prim_op_from_name(const std::string& name, PrimOp* op);
// The op with the largest number (packages store ops by number).
constexpr PrimOp kLastPrimOp = PrimOp::ShiftRight;
constexpr int kNumPrimKinds = 6;

// Attributes: a small ordered map so that printing and hashing are generic.
using AttrValue = std::variant<int64_t, double, std::vector<int64_t>, std::vector<double>, std::string>;

class Attrs {
 public:
  Attrs() = default;
  Attrs& set(const std::string& key, AttrValue value) {
    values_[key] = std::move(value);
    return *this;
  }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  int64_t i(const std::string& key) const;
  double f(const std::string& key) const;
  const std::vector<int64_t>& ints(const std::string& key) const;
  const std::vector<double>& floats(const std::string& key) const;
  const std::string& s(const std::string& key) const;
  int64_t i_or(const std::string& key, int64_t fallback) const { return has(key) ? i(key) : fallback; }
  const std::map<std::string, AttrValue>& values() const { return values_; }
  std::string str() const;

 private:
  std::map<std::string, AttrValue> values_;
};

// The attributes of a ConvTranspose primitive: explicit pads (begin..., end...) and the
// output's spatial size.
Attrs conv_transpose_attrs(const std::vector<int64_t>& strides, const std::vector<int64_t>& pads,
                           const std::vector<int64_t>& dilations, int64_t group,
                           const std::vector<int64_t>& out_spatial);

}  // namespace korch
