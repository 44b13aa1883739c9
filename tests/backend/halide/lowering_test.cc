// The Halide lowering shared by the CPU and CUDA backends: index maps that must stay exact for
// Halide's bounds inference (which decides how much of a reduction a parallel slice computes).
#include "backend/halide/lowering.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace korch::halide_lowering {
namespace {

// Output coordinate variables, one per dim of `out`.
std::vector<Var> coordinate_vars(const Shape& out) {
  std::vector<Var> vars;
  for (size_t d = 0; d < out.size(); ++d) vars.emplace_back("o" + std::to_string(d));
  return vars;
}

// The value of `e` with every output variable set to its coordinate.
int64_t evaluate(Expr e, const std::vector<Var>& vars, const std::vector<int64_t>& at) {
  for (size_t d = 0; d < vars.size(); ++d)
    e = Halide::Internal::substitute(vars[d].name(), Expr(static_cast<int>(at[d])), e);
  e = Halide::Internal::simplify(e);
  const int64_t* value = Halide::Internal::as_const_int(e);  // points into e
  EXPECT_NE(value, nullptr) << e;
  return value ? *value : -1;
}

// At every output coordinate, the input coordinate of the same row-major element.
void expect_reads_same_element(const Shape& out, const Shape& in) {
  SCOPED_TRACE(shape_str(out) + " from " + shape_str(in));
  std::vector<Var> vars = coordinate_vars(out);
  std::vector<Expr> idx(vars.begin(), vars.end());
  std::vector<Expr> coords = reshape_source_index(out, in, idx);
  ASSERT_EQ(coords.size(), in.size());
  std::vector<int64_t> at(out.size(), 0);
  for (int64_t linear = 0; linear < num_elements(out); ++linear) {
    int64_t rest = linear;
    for (size_t d = out.size(); d-- > 0;) {
      at[d] = rest % out[d];
      rest /= out[d];
    }
    rest = linear;
    for (size_t d = in.size(); d-- > 0;) {
      ASSERT_EQ(evaluate(coords[d], vars, at), rest % in[d]) << "input dim " << d << " at element " << linear;
      rest /= in[d];
    }
  }
}

TEST(HalideLowering, ReshapeReadsTheSameRowMajorElement) {
  expect_reads_same_element({16, 16}, {16, 2, 8});   // heads merged into columns
  expect_reads_same_element({8, 15}, {2, 4, 5, 3});  // two merges
  expect_reads_same_element({2, 4, 5, 3}, {8, 15});  // two splits
  expect_reads_same_element({1, 2, 12, 5, 1}, {6, 1, 4, 5});
  expect_reads_same_element({6, 4}, {4, 6});  // no common factor: one group
  expect_reads_same_element({24}, {2, 3, 4});
  expect_reads_same_element({1}, {1, 1});
  expect_reads_same_element({3, 1, 1}, {1, 3});
  expect_reads_same_element({6, 4}, {6, 1, 4});
  expect_reads_same_element({2, 1, 3, 4}, {6, 4});
}

// Over one output row, a dim the reshape keeps is read at that row only (one linear index with a
// modulo per dim made Halide require every row: a reduction computed per parallel row behind the
// reshape was computed over the whole tensor for each row).
TEST(HalideLowering, ReshapeKeepsTheBoundsOfDimsItDoesNotRegroup) {
  const Shape out{16, 16}, in{16, 2, 8};
  std::vector<Var> vars = coordinate_vars(out);
  std::vector<Expr> coords = reshape_source_index(out, in, {vars[0], vars[1]});
  Halide::Internal::Scope<Halide::Internal::Interval> scope;
  scope.push(vars[0].name(), Halide::Internal::Interval(Expr(5), Expr(5)));
  scope.push(vars[1].name(), Halide::Internal::Interval(Expr(0), Expr(15)));
  auto bounds = [&](int d) {
    Halide::Internal::Interval i = Halide::Internal::bounds_of_expr_in_scope(coords[d], scope);
    const Expr min = Halide::Internal::simplify(i.min), max = Halide::Internal::simplify(i.max);
    const int64_t *lo = Halide::Internal::as_const_int(min), *hi = Halide::Internal::as_const_int(max);
    EXPECT_TRUE(lo && hi) << "input dim " << d;
    return std::pair<int64_t, int64_t>(lo ? *lo : -1, hi ? *hi : -1);
  };
  EXPECT_EQ(bounds(0), (std::pair<int64_t, int64_t>(5, 5)));
  EXPECT_EQ(bounds(1), (std::pair<int64_t, int64_t>(0, 1)));
  EXPECT_EQ(bounds(2), (std::pair<int64_t, int64_t>(0, 7)));
  // A dim of extent 1 between kept dims splits no group: the rows are still read as is.
  std::vector<Expr> with_one = reshape_source_index({6, 4}, {6, 1, 4}, {vars[0], vars[1]});
  EXPECT_TRUE(Halide::Internal::equal(with_one[0], vars[0]));
  EXPECT_TRUE(Halide::Internal::equal(with_one[2], vars[1]));
}

}  // namespace
}  // namespace korch::halide_lowering
