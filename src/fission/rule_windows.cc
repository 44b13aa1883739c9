// Fission rules for the window functions HannWindow, HammingWindow and BlackmanWindow: constants
// computed at import from the constant size (periodic: N = size, symmetric: N = size - 1).
#include <cmath>

#include "fission/fission.h"
#include "fission/onnx_tensor.h"

namespace korch {

namespace {

// a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)
void window_rule(const std::string& op_type, double a0, double a1, double a2) {
  register_fission_rule(op_type, [a0, a1, a2](FissionContext& c) {
    std::vector<int64_t> size = c.constant_ints(0);
    if (size.size() != 1 || size[0] < 0) c.error("size must be one non-negative value");
    int64_t n = size[0];
    DType t = dtype_from_onnx(static_cast<int>(c.attr_i("output_datatype", 1)), "output_datatype");
    double denom = static_cast<double>(c.attr_i("periodic", 1) ? n : n - 1);
    TensorData w(t, {n});
    for (int64_t i = 0; i < n; ++i) {
      double x = 2.0 * M_PI * static_cast<double>(i) / denom;
      w.set_f64(i, a0 - a1 * std::cos(x) + a2 * std::cos(2 * x));
    }
    c.set_output(0, c.constant(std::move(w)));
  });
}

}  // namespace

void register_window_rules() {
  window_rule("HannWindow", 0.5, 0.5, 0.0);
  window_rule("HammingWindow", 25.0 / 46.0, 1.0 - 25.0 / 46.0, 0.0);
  window_rule("BlackmanWindow", 0.42, 0.5, 0.08);
}

}  // namespace korch
