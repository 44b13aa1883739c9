// Fission rule for LRN (local response normalisation across channels): the squares summed over
// a window of `size` channels (Pad + `size` Slices + Adds), then x * (bias + alpha/size * sum)^-beta.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

void register_lrn_rule() {
  register_fission_rule("LRN", [](FissionContext& c) {
    TensorId x = c.input(0);
    if (c.rank(x) < 3) c.error("input must have rank >= 3 (N, C, D1, ...)");
    int64_t size = c.attr_i("size", 0);
    if (size <= 0) c.error("size must be positive");
    DType t = c.dtype(x);
    double alpha = c.attr_f("alpha", 1e-4), beta = c.attr_f("beta", 0.75), bias = c.attr_f("bias", 1.0);
    int64_t ch = c.shape(x)[1];
    int64_t before = (size - 1) / 2, after = size - 1 - before;
    TensorId padded = pad_axis(c, c.binary(PrimOp::Mul, x, x), 1, before, after);
    TensorId sum = slice_axis(c, padded, 1, 0, ch);
    for (int64_t i = 1; i < size; ++i) sum = c.binary(PrimOp::Add, sum, slice_axis(c, padded, 1, i, ch));
    TensorId base = c.binary(PrimOp::Add, c.binary(PrimOp::Mul, sum, c.scalar(alpha / size, t)), c.scalar(bias, t));
    c.set_output(0, c.binary(PrimOp::Mul, x, c.binary(PrimOp::Pow, base, c.scalar(-beta, t))));
  });
}

}  // namespace korch
