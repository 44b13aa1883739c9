// Fission rule for CastLike: a Cast to the element type of the second input (a Copy when the
// types already agree).
#include "fission/fission.h"

namespace korch {

void register_castlike_rule() {
  register_fission_rule("CastLike", [](FissionContext& c) {
    TensorId x = c.input(0);
    DType to = c.dtype(c.input(1));
    c.set_output(0, c.dtype(x) == to ? c.unary(PrimOp::Copy, x) : c.cast(x, to));
  });
}

}  // namespace korch
