// defer_softmax_normalization: a row normalisation before a MatMul moves after it. Fission
// turns softmax(x) along the last axis into E / rowsum(E) with E = exp(x - max) and rowsum a
// ReduceSum over the last axis that keeps it ([..., M, 1]); when that P = E / rowsum(E)
// ([..., M, N]) is the left operand of P V (V: [..., N, D]), then
//   (E / s) V = (E V) / s        (s = rowsum(E), constant along N, so it factors out of the sum)
// and the division runs on the [..., M, D] product instead of on [..., M, N]. Also matched:
// the division written as E * Reciprocal(s) (either operand order), and a constant scalar
// scale after the normalisation, P * c, c * P or P / c, which moves after the division.
// Only the normalisation moves; the max subtraction and the exp (with any mask added before
// them) stay as they are.
//
// Guarantees: exact in real arithmetic (only float rounding differs). Applied only when P
// (and the scaled P) is read by the MatMul alone, the ReduceSum reduces exactly the last
// axis of the very tensor it divides, keeping it, the division does not broadcast E to a
// larger shape, the dtype is floating point, and D <= N: for D > N the deferred division
// would touch more elements than the original, so the pattern is left alone.
#include "rewrite/rewrite.h"
#include "rewrite/rewriter.h"

namespace korch {
namespace {

// A constant holding one value whose broadcast against `shape` is `shape`.
bool is_scalar_constant(const TensorInfo& c, const Shape& shape) {
  return c.is_constant() && num_elements(c.shape) == 1 && c.shape.size() <= shape.size();
}

// The normalisation that produces `p`: sets *numerator (E) and *divisor (s for a Div, the
// Reciprocal's output for a Mul) and returns the op applying the divisor (Div or Mul).
std::optional<PrimOp> row_normalisation(const Rewriter& r, TensorId p, TensorId* numerator, TensorId* divisor) {
  TensorId e = kNone, sum = kNone;
  PrimOp op = PrimOp::Div;
  if (const Primitive* div = r.producer(p, PrimOp::Div)) {
    e = div->inputs[0];
    sum = *divisor = div->inputs[1];
  } else if (const Primitive* mul = r.producer(p, PrimOp::Mul)) {
    op = PrimOp::Mul;
    for (int i = 0; i < 2 && sum == kNone; ++i)
      if (const Primitive* rec = r.producer(mul->inputs[i], PrimOp::Reciprocal)) {
        e = mul->inputs[1 - i];
        *divisor = mul->inputs[i];
        sum = rec->inputs[0];
      }
    if (sum == kNone) return std::nullopt;
  } else {
    return std::nullopt;
  }
  const Primitive* reduce = r.producer(sum, PrimOp::ReduceSum);
  const Shape& shape = r.tensor(e).shape;
  const int64_t last = static_cast<int64_t>(shape.size()) - 1;
  if (!reduce || reduce->inputs[0] != e || reduce->attrs.ints("axes") != std::vector<int64_t>{last} ||
      reduce->attrs.i("keepdims") != 1 || r.tensor(p).shape != shape || !is_floating(r.tensor(e).dtype))
    return std::nullopt;
  *numerator = e;
  return op;
}

}  // namespace

std::optional<TensorId> defer_softmax_normalization(Rewriter& r, PrimId p) {
  const Primitive& matmul = r.prim(p);
  if (matmul.op != PrimOp::MatMul) return std::nullopt;
  TensorId left = matmul.inputs[0];
  if (!r.single_use(left)) return std::nullopt;

  // An optional constant scalar scale between the normalisation and the MatMul.
  const Primitive* scale = r.producer(left, PrimOp::Mul);
  if (!scale) scale = r.producer(left, PrimOp::Div);
  int scale_side = -1;  // which operand of `scale` is the constant
  if (scale) {
    const Shape& shape = r.tensor(left).shape;
    for (int i = scale->op == PrimOp::Div ? 1 : 0; i < 2 && scale_side < 0; ++i)
      if (is_scalar_constant(r.tensor(scale->inputs[i]), shape) && r.tensor(scale->inputs[1 - i]).shape == shape &&
          r.single_use(scale->inputs[1 - i]))
        scale_side = i;
    if (scale_side >= 0) left = scale->inputs[1 - scale_side];
  }

  TensorId e = kNone, divisor = kNone;
  std::optional<PrimOp> normalise = row_normalisation(r, left, &e, &divisor);
  if (!normalise) return std::nullopt;
  const int64_t n = r.tensor(e).shape.back();
  const int64_t d = r.tensor(matmul.inputs[1]).shape.back();
  if (d > n) return std::nullopt;

  const Primitive& norm = r.prim(r.tensor(left).producer);
  TensorId out = r.emit(PrimOp::MatMul, {r.mapped(e), r.mapped(matmul.inputs[1])}, matmul.attrs, matmul.origin);
  out = r.emit(*normalise, {out, r.mapped(divisor)}, {}, r.derived_origin(norm.origin, "deferred"));
  if (scale_side >= 0) {
    std::vector<TensorId> operands(2);
    operands[scale_side] = r.mapped(scale->inputs[scale_side]);
    operands[1 - scale_side] = out;
    out = r.emit(scale->op, operands, {}, scale->origin);
  }
  return out;
}

}  // namespace korch
