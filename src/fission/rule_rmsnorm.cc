// Fission rule for RMSNormalization (opset 23): x / sqrt(mean(x^2 over [axis, rank)) + epsilon)
// * scale, computed in the input's type (like LayerNormalization here).
#include "fission/fission.h"

namespace korch {

void register_rmsnorm_rule() {
  register_fission_rule("RMSNormalization", [](FissionContext& c) {
    TensorId x = c.input(0);
    int64_t rank = c.rank(x);
    int64_t axis = normalize_axis(c.attr_i("axis", -1), rank);
    std::vector<int64_t> axes;
    for (int64_t i = axis; i < rank; ++i) axes.push_back(i);
    TensorId ms = c.reduce(PrimOp::ReduceMean, c.binary(PrimOp::Mul, x, x), axes, true);
    TensorId rms = c.unary(PrimOp::Sqrt, c.binary(PrimOp::Add, ms, c.scalar(c.attr_f("epsilon", 1e-5), c.dtype(x))));
    c.set_output(0, c.binary(PrimOp::Mul, c.binary(PrimOp::Div, x, rms), c.input(1)));
  });
}

}  // namespace korch
