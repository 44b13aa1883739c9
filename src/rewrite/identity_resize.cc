// remove_identity_resize: a Resize whose every axis keeps its length and maps each output
// coordinate onto the same input coordinate (PyTorch exports one for the branch already at
// the target size) is its input.
#include "reference/reference.h"
#include "rewrite/rewrite.h"
#include "rewrite/rewriter.h"

namespace korch {

std::optional<TensorId> remove_identity_resize(Rewriter& r, PrimId p) {
  const Primitive& prim = r.prim(p);
  if (prim.op != PrimOp::Resize) return std::nullopt;
  const Shape& in = r.tensor(prim.inputs[0]).shape;
  const Shape& out = r.tensor(prim.output).shape;
  for (size_t axis = 0; axis < in.size(); ++axis)
    if (!reference::resize_axis_is_identity(prim.attrs, static_cast<int64_t>(axis), in[axis], out[axis]))
      return std::nullopt;
  return r.mapped(prim.inputs[0]);
}

}  // namespace korch
