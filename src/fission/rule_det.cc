// Fission rule for Det on matrices of order 1 to 4 (the trailing two axes; any leading batch
// axes): the Laplace expansion along the first row, every minor expanded the same way, as
// elementwise products and sums of the matrix entries (at most 24 terms). Floating inputs only;
// larger orders are refused.
#include <functional>

#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

void register_det_rule() {
  register_fission_rule("Det", [](FissionContext& c) {
    TensorId x = c.input(0);
    const Shape xs = c.shape(x);
    require_floating(c, x);
    int64_t rank = c.rank(x);
    if (rank < 2 || xs[rank - 1] != xs[rank - 2]) c.error("the input must end in a square matrix, got ", shape_str(xs));
    int64_t order = xs[rank - 1];
    if (order < 1 || order > 4) c.error("matrices of order ", order, " are not supported (1 to 4)");
    Shape batch(xs.begin(), xs.end() - 2);
    // entry[i][j]: the batch of matrix entries (i, j).
    std::vector<std::vector<TensorId>> entry(order, std::vector<TensorId>(order));
    for (int64_t i = 0; i < order; ++i) {
      TensorId row = slice_axis(c, x, rank - 2, i, 1);
      for (int64_t j = 0; j < order; ++j) entry[i][j] = c.reshape(slice_axis(c, row, rank - 1, j, 1), batch);
    }
    // The determinant of the minor of rows first_row.. and the given columns.
    std::function<TensorId(int64_t, const std::vector<int64_t>&)> minor = [&](int64_t first_row,
                                                                              const std::vector<int64_t>& columns) {
      if (columns.size() == 1) return entry[first_row][columns[0]];
      TensorId sum = kNone;
      for (size_t k = 0; k < columns.size(); ++k) {
        std::vector<int64_t> rest = columns;
        rest.erase(rest.begin() + static_cast<int64_t>(k));
        TensorId term = c.binary(PrimOp::Mul, entry[first_row][columns[k]], minor(first_row + 1, rest));
        if (sum == kNone)
          sum = term;
        else
          sum = c.binary(k % 2 ? PrimOp::Sub : PrimOp::Add, sum, term);
      }
      return sum;
    };
    std::vector<int64_t> all(order);
    for (int64_t j = 0; j < order; ++j) all[j] = j;
    TensorId det = minor(0, all);
    if (order == 1) det = c.unary(PrimOp::Copy, det);
    c.set_output(0, det);
  });
}

}  // namespace korch
