// Fission rule for EyeLike: a constant 2-D identity (ones on diagonal k) of the input's shape,
// in the input's type or `dtype`.
#include "fission/fission.h"
#include "fission/onnx_tensor.h"

namespace korch {

void register_eyelike_rule() {
  register_fission_rule("EyeLike", [](FissionContext& c) {
    TensorId x = c.input(0);
    if (c.rank(x) != 2) c.error("input must be 2-D");
    DType t =
        c.has_attr("dtype") ? dtype_from_onnx(static_cast<int>(c.attr_i("dtype", 1)), "EyeLike dtype") : c.dtype(x);
    int64_t k = c.attr_i("k", 0), n = c.shape(x)[0], m = c.shape(x)[1];
    TensorData eye(t, {n, m});
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) eye.set_f64(i * m + j, j - i == k ? 1.0 : 0.0);
    c.set_output(0, c.constant(std::move(eye)));
  });
}

}  // namespace korch
