// Fission rule for CastLike: a Cast to the element type of the second input (onnx_cast).
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

void register_castlike_rule() {
  register_fission_rule("CastLike",
                        [](FissionContext& c) { c.set_output(0, onnx_cast(c, c.input(0), c.dtype(c.input(1)))); });
}

}  // namespace korch
