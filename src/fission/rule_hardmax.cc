// Fission rule for Hardmax: ArgMax along the axis (first maximum), compared with an index
// constant and cast to the input's type. Before opset 13 the axis is the flattened trailing
// block [axis, rank), as for Softmax.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

void register_hardmax_rule() {
  register_fission_rule("Hardmax", [](FissionContext& c) {
    TensorId x = c.input(0);
    bool legacy = c.opset() < 13;
    int64_t rank = c.rank(x);
    if (rank == 0) c.error("input must have rank >= 1");
    int64_t axis = normalize_axis(c.attr_i("axis", legacy ? 1 : -1), rank);
    Shape original = c.shape(x);
    TensorId v = x;
    if (legacy) {
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= original[i];
      v = c.reshape(x, {outer, inner});
      axis = 1;
    }
    int64_t n = c.shape(v)[axis];
    TensorId arg = c.emit(PrimOp::ArgMax, {v},
                          Attrs().set("axis", axis).set("keepdims", int64_t{1}).set("select_last_index", int64_t{0}));
    TensorId hot = c.binary(PrimOp::Equal, arg, iota_along(c, n, c.rank(v), axis));
    c.set_output(0, c.reshape(c.cast(hot, c.dtype(x)), original));
  });
}

}  // namespace korch
