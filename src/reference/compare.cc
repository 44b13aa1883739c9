// Elementwise comparison of tensors with tolerances (see compare.h).
#include "reference/compare.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace korch {

Comparison compare_tensors(const TensorData& actual, const TensorData& expected, const Tolerance& tol) {
  Comparison c;
  if (actual.shape() != expected.shape()) {
    c.pass = false;
    c.problem = str_cat("shape ", shape_str(actual.shape()), " != expected ", shape_str(expected.shape()));
    return c;
  }
  if (actual.dtype() != expected.dtype()) {
    c.pass = false;
    c.problem = str_cat("dtype ", dtype_name(actual.dtype()), " != expected ", dtype_name(expected.dtype()));
    return c;
  }
  const float* actual_f32 = actual.dtype() == DType::F32 ? actual.data<float>() : nullptr;
  const float* expected_f32 = actual_f32 ? expected.data<float>() : nullptr;
  for (int64_t i = 0; i < actual.size(); ++i) {
    double a = actual_f32 ? actual_f32[i] : actual.get_f64(i), b = expected_f32 ? expected_f32[i] : expected.get_f64(i);
    if (!is_floating(actual.dtype())) {
      int64_t ai = actual.get_i64(i), bi = expected.get_i64(i);
      if (ai != bi) {
        ++c.mismatches;
        c.max_abs_error = std::max(c.max_abs_error, std::fabs(a - b));
      }
      continue;
    }
    if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) != std::isnan(b)) ++c.mismatches;
      continue;
    }
    if (std::isinf(a) || std::isinf(b)) {
      if (a != b) ++c.mismatches;
      continue;
    }
    double err = std::fabs(a - b), magnitude = std::fabs(b);
    c.max_abs_error = std::max(c.max_abs_error, err);
    // Divides only when the relative error grows (a division per element was most of the loop).
    if (b != 0 && err > c.max_rel_error * magnitude) c.max_rel_error = err / magnitude;
    if (err > tol.atol + tol.rtol * magnitude) ++c.mismatches;
  }
  c.pass = c.mismatches == 0;
  return c;
}

}  // namespace korch
