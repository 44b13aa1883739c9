// Fission rule for CenterCropPad: per named axis, a centred Slice (crop) or zero Pad to the
// constant target size; an odd difference puts the extra element at the end.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

void register_center_crop_pad_rule() {
  register_fission_rule("CenterCropPad", [](FissionContext& c) {
    TensorId x = c.input(0);
    int64_t rank = c.rank(x);
    std::vector<int64_t> target = c.constant_ints(1);
    std::vector<int64_t> axes = c.attr_ints("axes");
    if (axes.empty())
      for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    if (target.size() != axes.size()) c.error("shape has ", target.size(), " entries for ", axes.size(), " axes");
    TensorId y = x;
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = normalize_axis(axes[i], rank), dim = c.shape(y)[a], size = target[i];
      if (size < 0) c.error("negative target size");
      if (size < dim) y = slice_axis(c, y, a, (dim - size) / 2, size);
      if (size > dim) y = pad_axis(c, y, a, (size - dim) / 2, size - dim - (size - dim) / 2);
    }
    c.set_output(0, y == x ? c.unary(PrimOp::Copy, x) : y);
  });
}

}  // namespace korch
