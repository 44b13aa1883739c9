// Narrow float formats as (exponent bits, mantissa bits, bias, special values) and one encoder /
// decoder over them (see float_formats.h). NaN patterns follow ml_dtypes: IEEE formats a quiet NaN
// with the sign kept, float8 "fn" formats S.1111.111, "fnuz" formats 0x80 (their only NaN and the
// place of -0, which they lack); float4e2m1 has no NaN and encodes one as +0.
#include "ir/float_formats.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace korch {

namespace {

enum class Specials {
  Ieee,        // all-ones exponent: infinity (zero mantissa) or NaN
  FiniteNan,   // no infinity; S.1...1.1...1 is NaN (float8e4m3fn)
  UnsignedZ,   // no infinity, no -0; 1.0...0 is the NaN (the float8 "fnuz" formats)
  FiniteOnly,  // no infinity, no NaN (float4e2m1)
};

struct Format {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  Specials specials;
  double max_finite;
};

Format format_of(DType t) {
  switch (t) {
    case DType::F16: return {5, 10, 15, Specials::Ieee, 65504.0};
    case DType::BF16: return {8, 7, 127, Specials::Ieee, 3.3895313892515355e38};
    case DType::F8E4M3FN: return {4, 3, 7, Specials::FiniteNan, 448.0};
    case DType::F8E4M3FNUZ: return {4, 3, 8, Specials::UnsignedZ, 240.0};
    case DType::F8E5M2: return {5, 2, 15, Specials::Ieee, 57344.0};
    case DType::F8E5M2FNUZ: return {5, 2, 16, Specials::UnsignedZ, 57344.0};
    case DType::F4E2M1: return {2, 1, 1, Specials::FiniteOnly, 6.0};
    default: break;
  }
  fail("element type ", dtype_name(t), " is not a narrow float format");
}

uint16_t sign_bit(const Format& f) { return static_cast<uint16_t>(1u << (f.exponent_bits + f.mantissa_bits)); }

uint16_t nan_bits(const Format& f, bool negative) {
  uint16_t sign = negative ? sign_bit(f) : 0;
  uint16_t all_ones = static_cast<uint16_t>((1u << (f.exponent_bits + f.mantissa_bits)) - 1);
  switch (f.specials) {
    case Specials::Ieee: return sign | static_cast<uint16_t>(all_ones & ~((1u << (f.mantissa_bits - 1)) - 1));
    case Specials::FiniteNan: return sign | all_ones;
    case Specials::UnsignedZ: return sign_bit(f);
    case Specials::FiniteOnly: return 0;
  }
  return 0;
}

// The pattern of a value already on the format's grid (|m| <= max_finite).
uint16_t pattern_of(const Format& f, bool negative, double m) {
  if (m == 0) return negative && f.specials != Specials::UnsignedZ ? sign_bit(f) : 0;
  int min_exponent = 1 - f.bias;
  int e = std::ilogb(m);
  uint32_t exponent_field = 0, mantissa_field = 0;
  if (e < min_exponent) {
    mantissa_field = static_cast<uint32_t>(std::ldexp(m, f.mantissa_bits - min_exponent));
  } else {
    exponent_field = static_cast<uint32_t>(e + f.bias);
    mantissa_field = static_cast<uint32_t>(std::ldexp(m, f.mantissa_bits - e)) - (1u << f.mantissa_bits);
  }
  return static_cast<uint16_t>((negative ? sign_bit(f) : 0) | (exponent_field << f.mantissa_bits) | mantissa_field);
}

uint16_t overflow_bits(const Format& f, bool negative, bool saturate) {
  if (saturate || f.specials == Specials::FiniteOnly) return pattern_of(f, negative, f.max_finite);
  if (f.specials == Specials::Ieee)
    return static_cast<uint16_t>((negative ? sign_bit(f) : 0) |
                                 (((1u << f.exponent_bits) - 1) << f.mantissa_bits));  // infinity
  return nan_bits(f, negative);
}

}  // namespace

double narrow_float_max(DType t) { return format_of(t).max_finite; }

uint16_t encode_narrow_float(DType t, double v, bool saturate) {
  Format f = format_of(t);
  bool negative = std::signbit(v);
  if (std::isnan(v)) return nan_bits(f, negative);
  double a = std::fabs(v);
  if (std::isinf(a)) return overflow_bits(f, negative, saturate);
  if (a == 0) return pattern_of(f, negative, 0);
  // Round on the grid of a's binade (or of the subnormals): a / quantum is exact, and
  // nearbyint rounds half to even in the default rounding mode.
  int e = std::max(std::ilogb(a), 1 - f.bias);
  double quantum = std::ldexp(1.0, e - f.mantissa_bits);
  double m = std::nearbyint(a / quantum) * quantum;
  if (m > f.max_finite) return overflow_bits(f, negative, saturate);
  return pattern_of(f, negative, m);
}

double decode_narrow_float(DType t, uint16_t bits) {
  Format f = format_of(t);
  uint32_t mantissa_mask = (1u << f.mantissa_bits) - 1, exponent_mask = (1u << f.exponent_bits) - 1;
  bool negative = (bits & sign_bit(f)) != 0;
  uint32_t exponent_field = (bits >> f.mantissa_bits) & exponent_mask, mantissa_field = bits & mantissa_mask;
  switch (f.specials) {
    case Specials::Ieee:
      if (exponent_field == exponent_mask) {
        if (mantissa_field) return NAN;
        return negative ? -INFINITY : INFINITY;
      }
      break;
    case Specials::FiniteNan:
      if (exponent_field == exponent_mask && mantissa_field == mantissa_mask) return NAN;
      break;
    case Specials::UnsignedZ:
      if (negative && exponent_field == 0 && mantissa_field == 0) return NAN;
      break;
    case Specials::FiniteOnly: break;
  }
  double m = exponent_field == 0 ? std::ldexp(mantissa_field, 1 - f.bias - f.mantissa_bits)
                                 : std::ldexp(mantissa_field + (1u << f.mantissa_bits),
                                              static_cast<int>(exponent_field) - f.bias - f.mantissa_bits);
  return negative ? -m : m;
}

}  // namespace korch
