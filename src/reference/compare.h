// Comparing a result with the expected tensor: an element passes when |a - b| <= atol + rtol * |b|
// (NaN must match NaN, infinities must match exactly, integers and booleans must be equal);
// a dtype or shape difference fails the whole tensor.
#pragma once
#include <cstdint>
#include <string>

#include "ir/tensor_data.h"

namespace korch {

struct Tolerance {
  double atol = 1e-4;
  double rtol = 1e-3;
};

struct Comparison {
  bool pass = true;
  double max_abs_error = 0;
  double max_rel_error = 0;
  int64_t mismatches = 0;
  std::string problem;  // dtype/shape mismatch, when any
};

Comparison compare_tensors(const TensorData& actual, const TensorData& expected, const Tolerance& tol);

}  // namespace korch
