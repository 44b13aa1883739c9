// Fission rule for MeanVarianceNormalization, as ONNX's function body defines it:
// (X - mean(X)) / (sqrt(mean(X^2) - mean(X)^2) + 1e-9), the means over `axes` (default
// 0, 2, 3) with the reduced axes kept. Floating inputs only.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

void register_mean_variance_normalization_rule() {
  register_fission_rule("MeanVarianceNormalization", [](FissionContext& c) {
    TensorId x = c.input(0);
    require_floating(c, x);
    DType t = c.dtype(x);
    std::vector<int64_t> axes;
    for (int64_t a : c.attr_ints("axes", {0, 2, 3})) axes.push_back(normalize_axis(a, c.rank(x)));
    TensorId mean = c.reduce(PrimOp::ReduceMean, x, axes, true);
    TensorId mean_of_squares = c.reduce(PrimOp::ReduceMean, c.binary(PrimOp::Mul, x, x), axes, true);
    TensorId variance = c.binary(PrimOp::Sub, mean_of_squares, c.binary(PrimOp::Mul, mean, mean));
    TensorId deviation = c.binary(PrimOp::Add, c.unary(PrimOp::Sqrt, variance), c.scalar(1e-9, t));
    c.set_output(0, c.binary(PrimOp::Div, c.binary(PrimOp::Sub, x, mean), deviation));
  });
}

}  // namespace korch
