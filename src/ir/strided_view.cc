// dense_view / view_through / reshape_view: strides composed through layout primitives.
// Reshape follows numpy's no-copy rule: the old and new dims are matched in groups of equal
// element count (reshape_groups), and a group of old dims regroups only where it is contiguous
// within itself.
#include "ir/strided_view.h"

namespace korch {

StridedView dense_view(const Shape& shape) { return StridedView{0, shape, strides_of(shape)}; }

std::optional<std::vector<ReshapeGroup>> reshape_groups(const Shape& from, const Shape& to) {
  if (num_elements(from) != num_elements(to) || num_elements(from) == 0) return std::nullopt;
  std::vector<ReshapeGroup> groups;
  size_t i = 0, j = 0;
  while (true) {
    while (i < from.size() && from[i] == 1) ++i;
    while (j < to.size() && to[j] == 1) ++j;
    if (i == from.size() || j == to.size()) return groups;  // equal counts: both sides end here
    ReshapeGroup group;
    int64_t from_count = 1, to_count = 1;
    do {
      if (i < from.size() && (from_count <= to_count || j == to.size())) {
        if (from[i] != 1) group.from.push_back(i);
        from_count *= from[i++];
      } else {
        if (to[j] != 1) group.to.push_back(j);
        to_count *= to[j++];
      }
    } while (from_count != to_count);
    groups.push_back(std::move(group));
  }
}

std::optional<StridedView> reshape_view(const StridedView& v, const Shape& shape) {
  std::optional<std::vector<ReshapeGroup>> groups = reshape_groups(v.shape, shape);
  if (!groups) return std::nullopt;
  StridedView out{v.offset, shape, std::vector<int64_t>(shape.size(), 1)};  // dims of extent 1: any stride
  for (const ReshapeGroup& group : *groups) {
    // The group's old dims regroup without a copy only where they are contiguous within the group.
    for (size_t k = 0; k + 1 < group.from.size(); ++k)
      if (v.strides[group.from[k]] != v.strides[group.from[k + 1]] * v.shape[group.from[k + 1]]) return std::nullopt;
    // The group's innermost stride, scaled up through the new dims from the inside out.
    int64_t stride = v.strides[group.from.back()];
    for (size_t k = group.to.size(); k-- > 0;) {
      out.strides[group.to[k]] = stride;
      stride *= shape[group.to[k]];
    }
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
