// Strided views: which element of a dense tensor each element of a layout chain's output is,
// as an offset plus one stride per output dim, where the chain (Transpose, Slice, Reshape) moves
// no data a stride cannot express. A kernel can then read (or write) through the view instead
// of materialising the chain's output.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "ir/prim_graph.h"

namespace korch {

struct StridedView {
  int64_t offset = 0;  // elements
  Shape shape;
  std::vector<int64_t> strides;  // elements, per dim of shape
};

// One group of a reshape's dims: consecutive dims of each side with the same element count, the
// fewest that close it; `from` and `to` list the group's dims of extent > 1 on each side.
struct ReshapeGroup {
  std::vector<size_t> from, to;
};
// A reshape from `from` to `to` as its groups, in order (dims of extent 1 belong to none; a
// reshape merges and splits dims only within a group); nullopt when the element counts differ or
// are 0.
std::optional<std::vector<ReshapeGroup>> reshape_groups(const Shape& from, const Shape& to);

// The dense row-major view of a tensor of `shape`.
StridedView dense_view(const Shape& shape);
// The view of `p`'s output given the view of its (first) input; nullopt when p is no Transpose,
// Slice or Reshape, or (Reshape) when the view's dims cannot be regrouped without a copy.
std::optional<StridedView> view_through(const StridedView& input, const Primitive& p);
// The view regrouped to `shape` (same element count): nullopt when that needs a copy (or the
// tensor is empty).
std::optional<StridedView> reshape_view(const StridedView& v, const Shape& shape);

}  // namespace korch
