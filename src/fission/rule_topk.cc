// Fission rule for TopK with a constant k, by ranking: along the axis (moved last), element i's
// rank is the number of elements before it in the order (greater, or equal at a lower index,
// for largest; smaller for smallest), from an [n, n] comparison; output r takes the element of
// rank r through a one-hot mask summed over i (values and int64 indices).
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

namespace {

TensorId move_axis(FissionContext& c, TensorId x, int64_t from, int64_t to) {
  if (from == to) return x;
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < c.rank(x); ++i)
    if (i != from) perm.push_back(i);
  perm.insert(perm.begin() + to, from);
  return c.emit(PrimOp::Transpose, {x}, Attrs().set("perm", perm));
}

}  // namespace

void register_topk_rule() {
  register_fission_rule("TopK", [](FissionContext& c) {
    TensorId x = c.input(0);
    int64_t rank = c.rank(x);
    if (rank == 0) c.error("input must have rank >= 1");
    int64_t k = c.opset() < 10 ? c.attr_i("k", -1) : c.constant_ints(1).at(0);
    int64_t axis = normalize_axis(c.attr_i("axis", -1), rank);
    int64_t n = c.shape(x)[axis];
    if (k < 0 || k > n) c.error("k = ", k, " is out of range for an axis of ", n);
    bool largest = c.opset() < 11 || c.attr_i("largest", 1) != 0;
    DType t = c.dtype(x);
    TensorId xt = move_axis(c, x, axis, rank - 1);
    TensorId xi = insert_axis(c, xt, rank), xj = insert_axis(c, xt, rank - 1);  // [..., n, 1], [..., 1, n]
    TensorId ahead = c.binary(largest ? PrimOp::Greater : PrimOp::Less, xj, xi);
    TensorData lower(DType::Bool, {n, n});  // j < i
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) lower.set_i64(i * n + j, j < i);
    TensorId tie = c.binary(PrimOp::And, c.binary(PrimOp::Equal, xj, xi), c.constant(std::move(lower)));
    TensorId before = c.cast(c.binary(PrimOp::Or, ahead, tie), DType::I64);
    TensorId order = c.reduce(PrimOp::ReduceSum, before, {rank}, false);  // [..., n]
    TensorId hot = c.binary(PrimOp::Equal, insert_axis(c, order, rank - 1), iota_along(c, k, rank + 1, rank - 1));
    TensorId values = c.reduce(PrimOp::ReduceSum, c.emit(PrimOp::Where, {hot, xj, c.scalar(0, t)}), {rank}, false);
    TensorId idx = c.reduce(PrimOp::ReduceSum,
                            c.emit(PrimOp::Where, {hot, iota_along(c, n, rank + 1, rank), c.scalar(0, DType::I64)}),
                            {rank}, false);
    c.set_output(0, move_axis(c, values, rank - 1, axis));
    if (c.wants_output(1)) c.set_output(1, move_axis(c, idx, rank - 1, axis));
  });
}

}  // namespace korch
