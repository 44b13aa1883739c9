// Fission rule for MaxUnpool: output element k (of the unpooled shape, flattened over every axis
// as MaxPool's indices are) takes the last input element whose index is k, or 0. The last
// writer is found as the largest input position p with indices[p] == k (a one-hot mask of
// unpooled size x input size, reduced by ReduceMax), then one Gather; with output_shape the
// result is padded with zeros at the end of each axis. Indices outside the output are dropped.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

void register_max_unpool_rule() {
  register_fission_rule("MaxUnpool", [](FissionContext& c) {
    TensorId x = c.input(0), indices = c.input(1);
    const Shape xs = c.shape(x);
    int64_t rank = c.rank(x), spatial = rank - 2;
    if (spatial < 1) c.error("the input must have rank >= 3, got ", rank);
    if (c.shape(indices) != xs) c.error("indices must have the input's shape ", shape_str(xs));
    std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
    std::vector<int64_t> strides = c.attr_ints("strides", std::vector<int64_t>(spatial, 1));
    std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * spatial, 0));
    if (static_cast<int64_t>(kernel.size()) != spatial || static_cast<int64_t>(strides.size()) != spatial ||
        static_cast<int64_t>(pads.size()) != 2 * spatial)
      c.error("kernel_shape/strides/pads do not match ", spatial, " spatial dims");
    Shape unpooled = {xs[0], xs[1]};
    for (int64_t i = 0; i < spatial; ++i) {
      unpooled.push_back((xs[i + 2] - 1) * strides[i] - pads[i] - pads[spatial + i] + kernel[i]);
      if (unpooled.back() <= 0) c.error("the unpooled size along spatial axis ", i, " is not positive");
    }
    int64_t outputs = num_elements(unpooled), inputs = num_elements(xs);
    if (outputs * inputs > (int64_t{1} << 26))
      c.error("an unpooled size of ", outputs, " over ", inputs, " inputs is too large for the one-hot scatter");
    TensorId positions = iota_along(c, inputs, 2, 1);  // [1, inputs]
    TensorId targets = iota_along(c, outputs, 2, 0);   // [outputs, 1]
    TensorId flat_indices = c.reshape(c.cast(indices, DType::I64), {1, inputs});
    TensorId hits = c.binary(PrimOp::Equal, flat_indices, targets);
    TensorId last = c.reduce(PrimOp::ReduceMax, c.emit(PrimOp::Where, {hits, positions, c.scalar(-1, DType::I64)}), {1},
                             false);  // [outputs]
    TensorId written = c.binary(PrimOp::GreaterEqual, last, c.scalar(0, DType::I64));
    TensorId source = c.binary(PrimOp::Max, last, c.scalar(0, DType::I64));
    TensorId values = c.emit(PrimOp::Gather, {c.reshape(x, {inputs}), source}, Attrs().set("axis", int64_t{0}));
    TensorId y = c.reshape(c.emit(PrimOp::Where, {written, values, c.scalar(0, c.dtype(x))}), unpooled);
    if (c.has_input(2)) {
      std::vector<int64_t> out = c.constant_ints(2);
      if (static_cast<int64_t>(out.size()) != rank) c.error("output_shape must have ", rank, " entries");
      std::vector<int64_t> extra(2 * rank, 0);
      for (int64_t i = 0; i < rank; ++i) {
        if (out[i] < unpooled[i])
          c.error("output_shape ", shape_str(out), " is smaller than the unpooled shape ", shape_str(unpooled));
        extra[rank + i] = out[i] - unpooled[i];
      }
      if (out != unpooled)
        y = c.emit(PrimOp::Pad, {y}, Attrs().set("pads", extra).set("mode", std::string("constant")).set("value", 0.0));
    }
    c.set_output(0, y);
  });
}

}  // namespace korch
