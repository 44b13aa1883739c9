// The narrow floating-point formats of ONNX (float16, bfloat16, the float8 and float4 formats):
// their bit patterns to and from double. Encoding rounds to nearest, ties to even, directly from
// the double (one rounding), as numpy / ml_dtypes' astype does from float32; subnormals are kept.
// An overflow (a rounded magnitude above the largest finite value) gives infinity where the
// format has one and NaN otherwise, except float4e2m1 (no infinity, no NaN), which saturates;
// `saturate` clamps finite overflows and infinities to the largest finite value instead (ONNX
// Cast's saturate attribute for the float8 types). NaN stays NaN, except in float4e2m1, which has
// none (it becomes +0).
#pragma once
#include <cstdint>

#include "ir/dtype.h"

namespace korch {

// Largest finite value of a narrow float format.
double narrow_float_max(DType t);
// Bit pattern (low bits of the result) of `v` rounded to the format.
uint16_t encode_narrow_float(DType t, double v, bool saturate = false);
// The value of a bit pattern of the format (NaN for NaN patterns).
double decode_narrow_float(DType t, uint16_t bits);

}  // namespace korch
