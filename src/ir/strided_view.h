// Strided views: which element of a dense tensor each element of a layout chain's output is,
// as an offset plus one stride per output dim, where the chain (Transpose, Slice, Reshape) moves
// no data a stride cannot express. A kernel can then read (or write) through the view instead
// of materialising the chain's output.
#pragma once
#include <cstdint>
#include <optional>

#include "ir/prim_graph.h"

namespace korch {

struct StridedView {
  int64_t offset = 0;  // elements
  Shape shape;
  std::vector<int64_t> strides;  // elements, per dim of shape
};

// The dense row-major view of a tensor of `shape`.
StridedView dense_view(const Shape& shape);
// The view of `p`'s output given the view of its (first) input; nullopt when p is no Transpose,
// Slice or Reshape, or (Reshape) when the view's dims cannot be regrouped without a copy.
std::optional<StridedView> view_through(const StridedView& input, const Primitive& p);
// The view regrouped to `shape` (same element count): nullopt when that needs a copy.
std::optional<StridedView> reshape_view(const StridedView& v, const Shape& shape);

}  // namespace korch
