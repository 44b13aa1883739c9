// Reshape groups and strided views: the groups a reshape's dims fall into, and views composed
// through reshapes checked element by element against the row-major order they stand for.
#include "ir/strided_view.h"

#include <gtest/gtest.h>

namespace korch {
namespace {

using Dims = std::vector<size_t>;

TEST(ReshapeGroups, TheFewestDimsWithEqualCountsAndNoDimOfExtentOne) {
  auto groups = reshape_groups({2, 3, 4}, {6, 4});
  ASSERT_TRUE(groups);
  ASSERT_EQ(groups->size(), 2u);
  EXPECT_EQ((*groups)[0].from, (Dims{0, 1}));
  EXPECT_EQ((*groups)[0].to, (Dims{0}));
  EXPECT_EQ((*groups)[1].from, (Dims{2}));
  EXPECT_EQ((*groups)[1].to, (Dims{1}));
  groups = reshape_groups({1, 6, 1, 4}, {2, 3, 1, 4, 1});
  ASSERT_TRUE(groups);
  ASSERT_EQ(groups->size(), 2u);
  EXPECT_EQ((*groups)[0].from, (Dims{1}));
  EXPECT_EQ((*groups)[0].to, (Dims{0, 1}));
  EXPECT_EQ((*groups)[1].from, (Dims{3}));
  EXPECT_EQ((*groups)[1].to, (Dims{3}));
  groups = reshape_groups({4, 6}, {3, 8});  // one group across both dims
  ASSERT_TRUE(groups);
  ASSERT_EQ(groups->size(), 1u);
  EXPECT_EQ((*groups)[0].from, (Dims{0, 1}));
  EXPECT_EQ((*groups)[0].to, (Dims{0, 1}));
  groups = reshape_groups({1, 1}, {1});
  ASSERT_TRUE(groups);
  EXPECT_TRUE(groups->empty());
  EXPECT_FALSE(reshape_groups({2, 3}, {5}));
  EXPECT_FALSE(reshape_groups({0, 3}, {3, 0}));
}

// The element of a view at a row-major position of its shape.
int64_t element(const StridedView& v, int64_t position) {
  int64_t at = v.offset;
  for (size_t d = v.shape.size(); d-- > 0;) {
    at += position % v.shape[d] * v.strides[d];
    position /= v.shape[d];
  }
  return at;
}

TEST(ReshapeView, ReadsTheRowMajorElementOfTheViewItRegroups) {
  // A [3, 4] tensor read transposed ([4, 3], strides 1 and 4), then reshaped.
  StridedView transposed{0, {4, 3}, {1, 4}};
  std::optional<StridedView> split = reshape_view(transposed, {2, 2, 1, 3});
  ASSERT_TRUE(split);
  for (int64_t p = 0; p < 12; ++p) EXPECT_EQ(element(*split, p), element(transposed, p)) << p;
  EXPECT_FALSE(reshape_view(transposed, {12}));    // merging the transposed dims needs a copy
  EXPECT_FALSE(reshape_view(transposed, {3, 4}));  // so does regrouping them
  const std::vector<std::pair<Shape, Shape>> dense_pairs = {
      {{2, 3, 4}, {6, 4}}, {{6, 4}, {2, 3, 1, 4}}, {{1, 24}, {4, 6}}, {{4, 6}, {3, 8}}, {{2, 1, 12}, {24, 1}}};
  for (const auto& [from, to] : dense_pairs) {
    StridedView v = dense_view(from);
    v.offset = 5;
    std::optional<StridedView> r = reshape_view(v, to);
    ASSERT_TRUE(r) << shape_str(from) << " -> " << shape_str(to);
    for (int64_t p = 0; p < num_elements(to); ++p) EXPECT_EQ(element(*r, p), element(v, p)) << p;
  }
}

}  // namespace
}  // namespace korch
