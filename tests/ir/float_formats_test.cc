// Narrow float formats (ir/float_formats.h) and the element types' conversions in TensorData:
// round-to-nearest-even, NaN / infinity, subnormals, overflow with and without saturation, and the
// sub-byte integers' wrapping.
#include "ir/float_formats.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ir/tensor_data.h"

namespace korch {
namespace {

TEST(FloatFormats, Float16RoundsToNearestEven) {
  EXPECT_EQ(encode_narrow_float(DType::F16, 1.0), 0x3C00);
  EXPECT_EQ(encode_narrow_float(DType::F16, -2.0), 0xC000);
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1).
  EXPECT_EQ(encode_narrow_float(DType::F16, 1.0 + std::ldexp(1.0, -11)), 0x3C00);
  // 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(encode_narrow_float(DType::F16, 1.0 + 3 * std::ldexp(1.0, -11)), 0x3C02);
  EXPECT_EQ(encode_narrow_float(DType::F16, 1.0 + 1.1 * std::ldexp(1.0, -11)), 0x3C01);
}

TEST(FloatFormats, Float16SpecialValues) {
  EXPECT_EQ(encode_narrow_float(DType::F16, INFINITY), 0x7C00);
  EXPECT_EQ(encode_narrow_float(DType::F16, -INFINITY), 0xFC00);
  EXPECT_EQ(encode_narrow_float(DType::F16, NAN), 0x7E00);
  EXPECT_EQ(encode_narrow_float(DType::F16, -0.0), 0x8000);
  EXPECT_EQ(encode_narrow_float(DType::F16, 65504.0), 0x7BFF);
  EXPECT_EQ(encode_narrow_float(DType::F16, 65519.0), 0x7BFF);  // rounds down to the largest finite
  EXPECT_EQ(encode_narrow_float(DType::F16, 65520.0), 0x7C00);  // rounds up: infinity
  EXPECT_TRUE(std::isnan(decode_narrow_float(DType::F16, 0x7E00)));
  EXPECT_EQ(decode_narrow_float(DType::F16, 0xFC00), -INFINITY);
  EXPECT_TRUE(std::signbit(decode_narrow_float(DType::F16, 0x8000)));
}

TEST(FloatFormats, Float16Subnormals) {
  double smallest = std::ldexp(1.0, -24);
  EXPECT_EQ(encode_narrow_float(DType::F16, smallest), 0x0001);
  EXPECT_EQ(decode_narrow_float(DType::F16, 0x0001), smallest);
  EXPECT_EQ(decode_narrow_float(DType::F16, 0x03FF), 1023 * smallest);  // largest subnormal
  EXPECT_EQ(encode_narrow_float(DType::F16, smallest / 2), 0x0000);     // tie to even: 0
  EXPECT_EQ(encode_narrow_float(DType::F16, smallest * 1.5), 0x0002);   // tie to even: 2
  EXPECT_EQ(encode_narrow_float(DType::F16, smallest * 0.51), 0x0001);
}

TEST(FloatFormats, BFloat16) {
  EXPECT_EQ(encode_narrow_float(DType::BF16, 1.0), 0x3F80);
  EXPECT_EQ(encode_narrow_float(DType::BF16, NAN), 0x7FC0);
  EXPECT_EQ(encode_narrow_float(DType::BF16, -INFINITY), 0xFF80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even (1).
  EXPECT_EQ(encode_narrow_float(DType::BF16, 1.0 + std::ldexp(1.0, -8)), 0x3F80);
  EXPECT_EQ(encode_narrow_float(DType::BF16, 1.0 + 3 * std::ldexp(1.0, -8)), 0x3F82);
  EXPECT_EQ(decode_narrow_float(DType::BF16, 0x0001), std::ldexp(1.0, -133));  // smallest subnormal
  EXPECT_EQ(encode_narrow_float(DType::BF16, 3.4e38), 0x7F80);                 // overflow: infinity
}

TEST(FloatFormats, Float8E4M3FN) {
  EXPECT_EQ(encode_narrow_float(DType::F8E4M3FN, 448.0), 0x7E);
  EXPECT_EQ(encode_narrow_float(DType::F8E4M3FN, 460.0), 0x7E);            // rounds to 448
  EXPECT_EQ(encode_narrow_float(DType::F8E4M3FN, 470.0), 0x7F);            // beyond: NaN
  EXPECT_EQ(encode_narrow_float(DType::F8E4M3FN, INFINITY), 0x7F);         // no infinity: NaN
  EXPECT_EQ(encode_narrow_float(DType::F8E4M3FN, -INFINITY, true), 0xFE);  // saturated: -448
  EXPECT_EQ(encode_narrow_float(DType::F8E4M3FN, 1000.0, true), 0x7E);
  EXPECT_EQ(encode_narrow_float(DType::F8E4M3FN, std::ldexp(1.0, -9)), 0x01);   // smallest subnormal
  EXPECT_EQ(encode_narrow_float(DType::F8E4M3FN, std::ldexp(1.0, -10)), 0x00);  // tie to even
  EXPECT_TRUE(std::isnan(decode_narrow_float(DType::F8E4M3FN, 0xFF)));
  EXPECT_EQ(decode_narrow_float(DType::F8E4M3FN, 0x7E), 448.0);
}

TEST(FloatFormats, Float8Fnuz) {
  EXPECT_EQ(encode_narrow_float(DType::F8E4M3FNUZ, -0.0), 0x00);  // no negative zero
  EXPECT_EQ(encode_narrow_float(DType::F8E4M3FNUZ, NAN), 0x80);
  EXPECT_EQ(encode_narrow_float(DType::F8E4M3FNUZ, 500.0), 0x80);
  EXPECT_EQ(encode_narrow_float(DType::F8E4M3FNUZ, 240.0), 0x7F);
  EXPECT_TRUE(std::isnan(decode_narrow_float(DType::F8E4M3FNUZ, 0x80)));
  EXPECT_EQ(encode_narrow_float(DType::F8E5M2FNUZ, 60000.0), 0x7F);
  EXPECT_EQ(decode_narrow_float(DType::F8E5M2FNUZ, 0x7F), 57344.0);
}

TEST(FloatFormats, Float8E5M2) {
  EXPECT_EQ(encode_narrow_float(DType::F8E5M2, INFINITY), 0x7C);
  EXPECT_EQ(encode_narrow_float(DType::F8E5M2, 60000.0), 0x7B);
  EXPECT_EQ(encode_narrow_float(DType::F8E5M2, 61440.0), 0x7C);  // tie to even beyond the range: infinity
  EXPECT_EQ(encode_narrow_float(DType::F8E5M2, 61440.0, true), 0x7B);
  EXPECT_EQ(encode_narrow_float(DType::F8E5M2, -NAN), 0xFE);
}

TEST(FloatFormats, Float4E2M1Saturates) {
  EXPECT_EQ(encode_narrow_float(DType::F4E2M1, 100.0), 0x7);
  EXPECT_EQ(encode_narrow_float(DType::F4E2M1, -INFINITY), 0xF);
  EXPECT_EQ(encode_narrow_float(DType::F4E2M1, 5.0), 0x6);  // tie between 4 and 6: 4
  EXPECT_EQ(decode_narrow_float(DType::F4E2M1, 0x1), 0.5);
}

TEST(FloatFormats, EveryPatternRoundTrips) {
  for (DType t :
       {DType::F16, DType::BF16, DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ, DType::F4E2M1}) {
    int patterns = 1 << dtype_bits(t);
    for (int bits = 0; bits < patterns; ++bits) {
      double v = decode_narrow_float(t, static_cast<uint16_t>(bits));
      if (std::isnan(v)) continue;
      EXPECT_EQ(decode_narrow_float(t, encode_narrow_float(t, v)), v) << dtype_name(t) << " pattern " << bits;
    }
  }
}

TEST(ElementTypes, TensorDataConversions) {
  TensorData h = TensorData::from_f64(DType::F16, {3}, {1.0 / 3.0, 70000.0, -0.5});
  EXPECT_EQ(h.data<uint16_t>()[0], 0x3555);
  EXPECT_EQ(h.get_f64(1), INFINITY);
  EXPECT_EQ(h.get_i64(2), 0);
  TensorData u = TensorData::from_i64(DType::U64, {1}, {-1});
  EXPECT_EQ(u.data<uint64_t>()[0], UINT64_MAX);
  EXPECT_EQ(u.get_f64(0), 18446744073709551616.0);
  // Sub-byte integers: integers wrap, floats truncate and become 0 out of range (as ml_dtypes).
  TensorData i4 = TensorData::from_i64(DType::I4, {3}, {7, 8, -9});
  EXPECT_EQ(i4.to_i64(), (std::vector<int64_t>{7, -8, 7}));
  TensorData u4 = TensorData::from_f64(DType::U4, {3}, {15.9, 16.0, -0.5});
  EXPECT_EQ(u4.to_i64(), (std::vector<int64_t>{15, 0, 0}));
  EXPECT_EQ(integer_min(DType::I16), -32768);
  EXPECT_EQ(integer_max(DType::U32), 4294967295u);
  EXPECT_EQ(integer_max(DType::I2), 1u);
}

}  // namespace
}  // namespace korch
