// Fission rule for Col2Im: the column blocks summed back into the image are a ConvTranspose of
// the columns (reshaped to [N, C * prod(block), blocks along each axis...]) with C groups whose
// weights are one-hot: input channel c * prod(block) + k adds to output channel c at kernel
// position k. Strides, dilations and pads are Col2Im's; the output is image_shape. Floating
// inputs only.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

void register_col2im_rule() {
  register_fission_rule("Col2Im", [](FissionContext& c) {
    TensorId x = c.input(0);
    const Shape xs = c.shape(x);
    DType t = c.dtype(x);
    require_floating(c, x);
    std::vector<int64_t> image = c.constant_ints(1), block = c.constant_ints(2);
    size_t nsp = image.size();
    if (nsp == 0 || block.size() != nsp) c.error("image_shape and block_shape must have one equal, positive length");
    if (c.rank(x) != 3) c.error("the input must have rank 3, got ", c.rank(x));
    std::vector<int64_t> strides = c.attr_ints("strides", std::vector<int64_t>(nsp, 1));
    std::vector<int64_t> dilations = c.attr_ints("dilations", std::vector<int64_t>(nsp, 1));
    std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * nsp, 0));
    if (strides.size() != nsp || dilations.size() != nsp || pads.size() != 2 * nsp)
      c.error("strides/dilations/pads do not match ", nsp, " spatial dims");
    int64_t kernel = 1, blocks = 1;
    Shape columns = {xs[0], xs[1]};
    for (size_t i = 0; i < nsp; ++i) {
      if (image[i] <= 0 || block[i] <= 0 || strides[i] <= 0 || dilations[i] <= 0 || pads[i] < 0 || pads[nsp + i] < 0)
        c.error("image_shape, block_shape, strides and dilations must be positive and pads non-negative");
      int64_t span = image[i] + pads[i] + pads[nsp + i] - dilations[i] * (block[i] - 1) - 1;
      if (span < 0) c.error("the block does not fit the padded image along axis ", i);
      columns.push_back(span / strides[i] + 1);
      kernel *= block[i];
      blocks *= columns.back();
    }
    if (xs[1] % kernel != 0) c.error("input channels ", xs[1], " are not a multiple of prod(block_shape) ", kernel);
    if (xs[2] != blocks) c.error("the input has ", xs[2], " blocks, the image and attributes give ", blocks);
    int64_t channels = xs[1] / kernel;
    Shape ws = {xs[1], 1};
    ws.insert(ws.end(), block.begin(), block.end());
    TensorData weights(t, ws);
    for (int64_t ck = 0; ck < xs[1]; ++ck) weights.set_f64(ck * kernel + ck % kernel, 1.0);
    TensorId column_grid = c.reshape(x, columns);
    c.set_output(0, c.emit(PrimOp::ConvTranspose, {column_grid, c.constant(std::move(weights))},
                           conv_transpose_attrs(strides, pads, dilations, channels, image)));
  });
}

}  // namespace korch
