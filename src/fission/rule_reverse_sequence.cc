// Fission rule for ReverseSequence: with time axis T and batch axis B (0 and 1 in either order),
// output[t, b] = input[t < len[b] ? len[b] - 1 - t : t, b]. The source time of every (t, b) is
// computed from sequence_lens (which may be a graph input) and becomes one Gather over the
// input with its two leading axes flattened. A length outside [0, T] is clamped to it.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

void register_reverse_sequence_rule() {
  register_fission_rule("ReverseSequence", [](FissionContext& c) {
    TensorId x = c.input(0), lens = c.input(1);
    const Shape xs = c.shape(x);
    int64_t rank = c.rank(x);
    if (rank < 2) c.error("the input must have rank >= 2, got ", rank);
    int64_t time_axis = c.attr_i("time_axis", 0), batch_axis = c.attr_i("batch_axis", 1);
    if (!((time_axis == 0 && batch_axis == 1) || (time_axis == 1 && batch_axis == 0)))
      c.error("time_axis and batch_axis must be 0 and 1 in either order, got ", time_axis, " and ", batch_axis);
    int64_t steps = xs[time_axis], batch = xs[batch_axis];
    if (c.rank(lens) != 1 || c.shape(lens)[0] != batch)
      c.error("sequence_lens must be 1-D with one entry per batch index (", batch, ")");
    // Time and batch indices over the two leading axes, laid out as they are in the input.
    TensorId t = iota_along(c, steps, 2, time_axis);
    TensorId b = iota_along(c, batch, 2, batch_axis);
    Shape lens_shape = {1, 1};
    lens_shape[batch_axis] = batch;
    TensorId len = c.reshape(c.cast(lens, DType::I64), lens_shape);
    len = c.binary(PrimOp::Min, c.binary(PrimOp::Max, len, c.scalar(0, DType::I64)), c.scalar(steps, DType::I64));
    TensorId reversed = c.binary(PrimOp::Sub, c.binary(PrimOp::Sub, len, c.scalar(1, DType::I64)), t);
    TensorId source = c.emit(PrimOp::Where, {c.binary(PrimOp::Less, t, len), reversed, t});
    TensorId flat = time_axis == 0
                        ? c.binary(PrimOp::Add, c.binary(PrimOp::Mul, source, c.scalar(batch, DType::I64)), b)
                        : c.binary(PrimOp::Add, c.binary(PrimOp::Mul, b, c.scalar(steps, DType::I64)), source);
    Shape table = {xs[0] * xs[1]};
    table.insert(table.end(), xs.begin() + 2, xs.end());
    c.set_output(0, c.emit(PrimOp::Gather, {c.reshape(x, table), flat}, Attrs().set("axis", int64_t{0})));
  });
}

}  // namespace korch
