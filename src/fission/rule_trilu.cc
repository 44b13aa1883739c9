// Fission rule for Trilu: Where(mask, x, 0) with a constant [N, M] mask over the last two axes
// (upper: keep j - i >= k; lower: keep j - i <= k).
#include "fission/fission.h"

namespace korch {

void register_trilu_rule() {
  register_fission_rule("Trilu", [](FissionContext& c) {
    TensorId x = c.input(0);
    if (c.rank(x) < 2) c.error("input must have rank >= 2");
    int64_t k = c.has_input(1) ? c.constant_ints(1).at(0) : 0;
    bool upper = c.attr_i("upper", 1) != 0;
    int64_t n = c.shape(x)[c.rank(x) - 2], m = c.shape(x)[c.rank(x) - 1];
    TensorData mask(DType::Bool, {n, m});
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) mask.set_i64(i * m + j, upper ? j - i >= k : j - i <= k);
    c.set_output(0, c.emit(PrimOp::Where, {c.constant(std::move(mask)), x, c.scalar(0, c.dtype(x))}));
  });
}

}  // namespace korch
