// dense_view / view_through / reshape_view: strides composed through layout primitives.
// Reshape follows numpy's no-copy rule: the old and new dims are matched in groups of equal
// element count, and a group of old dims regroups only where it is contiguous within itself.
#include "ir/strided_view.h"

namespace korch {

StridedView dense_view(const Shape& shape) { return StridedView{0, shape, strides_of(shape)}; }

std::optional<StridedView> reshape_view(const StridedView& v, const Shape& shape) {
  if (num_elements(shape) != num_elements(v.shape)) return std::nullopt;
  // Size-1 dims carry no stride information: drop them from the old view.
  Shape old_shape;
  std::vector<int64_t> old_strides;
  for (size_t i = 0; i < v.shape.size(); ++i)
    if (v.shape[i] != 1) {
      old_shape.push_back(v.shape[i]);
      old_strides.push_back(v.strides[i]);
    }
  StridedView out{v.offset, shape, std::vector<int64_t>(shape.size(), 0)};
  size_t oi = 0, ni = 0;
  while (ni < shape.size()) {
    if (shape[ni] == 1) {
      out.strides[ni] = 1;
      ++ni;
      continue;
    }
    if (oi >= old_shape.size()) return std::nullopt;
    // One group: old dims [oi, oj) and new dims [ni, nj) of the same element count.
    size_t oj = oi + 1, nj = ni + 1;
    int64_t old_count = old_shape[oi], new_count = shape[ni];
    while (old_count != new_count) {
      if (old_count < new_count) {
        if (oj >= old_shape.size()) return std::nullopt;
        old_count *= old_shape[oj++];
      } else {
        if (nj >= shape.size()) return std::nullopt;
        new_count *= shape[nj++];
      }
    }
    for (size_t k = oi; k + 1 < oj; ++k)
      if (old_strides[k] != old_strides[k + 1] * old_shape[k + 1]) return std::nullopt;
    // The group's innermost stride, scaled up through the new dims from the inside out.
    int64_t stride = old_strides[oj - 1];
    for (size_t k = nj; k-- > ni;) {
      out.strides[k] = stride;
      stride *= shape[k];
    }
    oi = oj;
    ni = nj;
  }
  return out;
}

std::optional<StridedView> view_through(const StridedView& input, const Primitive& p) {
  switch (p.op) {
    case PrimOp::Transpose: {
      const std::vector<int64_t>& perm = p.attrs.ints("perm");
      if (perm.size() != input.shape.size()) return std::nullopt;
      StridedView out{input.offset, {}, {}};
      for (int64_t axis : perm) {
        out.shape.push_back(input.shape.at(axis));
        out.strides.push_back(input.strides.at(axis));
      }
      return out;
    }
    case PrimOp::Slice: {
      const std::vector<int64_t>& starts = p.attrs.ints("starts");
      const std::vector<int64_t>& steps = p.attrs.ints("steps");
      const std::vector<int64_t>& sizes = p.attrs.ints("sizes");
      if (starts.size() != input.shape.size()) return std::nullopt;
      StridedView out = input;
      for (size_t i = 0; i < starts.size(); ++i) {
        out.offset += starts[i] * input.strides[i];
        out.shape[i] = sizes[i];
        out.strides[i] = input.strides[i] * steps[i];
      }
      return out;
    }
    case PrimOp::Reshape: return reshape_view(input, p.attrs.ints("shape"));
    default: return std::nullopt;
  }
}

}  // namespace korch
