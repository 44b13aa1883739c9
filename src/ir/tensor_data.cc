#include "ir/tensor_data.h"

#include <cmath>
#include <limits>

#include "ir/float_formats.h"
#include "util/error.h"

namespace korch {

namespace {
// double -> integer without undefined behaviour: NaN becomes 0, out-of-range values saturate.
template <typename T>
T saturate(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}
}  // namespace

TensorData::TensorData(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), size_(num_elements(shape_)) {
  bytes_.resize(checked_num_elements(shape_, dtype_size(dtype), "tensor") * dtype_size(dtype));
}

uint16_t TensorData::narrow_bits(int64_t i) const {
  return dtype_size(dtype_) == 2 ? data<uint16_t>()[i] : data<uint8_t>()[i];
}

void TensorData::set_narrow_bits(int64_t i, uint16_t bits) {
  if (dtype_size(dtype_) == 2)
    data<uint16_t>()[i] = bits;
  else
    data<uint8_t>()[i] = static_cast<uint8_t>(bits);
}

double TensorData::get_f64(int64_t i) const {
  if (is_narrow_float(dtype_)) return decode_narrow_float(dtype_, narrow_bits(i));
  switch (dtype_) {
    case DType::F32: return data<float>()[i];
    case DType::F64: return data<double>()[i];
    case DType::U64: return static_cast<double>(data<uint64_t>()[i]);
    default: return static_cast<double>(get_i64(i));
  }
}

int64_t TensorData::get_i64(int64_t i) const {
  if (is_floating(dtype_)) return saturate<int64_t>(get_f64(i));
  switch (dtype_) {
    case DType::I64: return data<int64_t>()[i];
    case DType::I32: return data<int32_t>()[i];
    case DType::I16: return data<int16_t>()[i];
    case DType::I8: return data<int8_t>()[i];
    case DType::U8: return data<uint8_t>()[i];
    case DType::Bool: return data<uint8_t>()[i] ? 1 : 0;
    case DType::U16: return data<uint16_t>()[i];
    case DType::U32: return data<uint32_t>()[i];
    case DType::U64: return static_cast<int64_t>(data<uint64_t>()[i]);  // two's complement bits
    default: {  // the sub-byte integers: the low bits, sign-extended where signed
      int bits = dtype_bits(dtype_);
      int64_t v = data<uint8_t>()[i] & ((1 << bits) - 1);
      return integer_min(dtype_) < 0 && v >= (int64_t{1} << (bits - 1)) ? v - (int64_t{1} << bits) : v;
    }
  }
}

void TensorData::set_f64(int64_t i, double v) {
  // The narrow floats round through float32, as numpy and ml_dtypes compute their operations
  // in float32 and round the result to the type.
  if (is_narrow_float(dtype_)) return set_narrow_bits(i, encode_narrow_float(dtype_, static_cast<float>(v)));
  switch (dtype_) {
    case DType::F32: data<float>()[i] = static_cast<float>(v); return;
    case DType::F64: data<double>()[i] = v; return;
    case DType::I64: data<int64_t>()[i] = saturate<int64_t>(v); return;
    case DType::I32: data<int32_t>()[i] = saturate<int32_t>(v); return;
    case DType::I16: data<int16_t>()[i] = saturate<int16_t>(v); return;
    case DType::I8: data<int8_t>()[i] = saturate<int8_t>(v); return;
    case DType::U8: data<uint8_t>()[i] = saturate<uint8_t>(v); return;
    case DType::Bool: data<uint8_t>()[i] = v != 0.0; return;
    case DType::U16: data<uint16_t>()[i] = saturate<uint16_t>(v); return;
    case DType::U32: data<uint32_t>()[i] = saturate<uint32_t>(v); return;
    case DType::U64: data<uint64_t>()[i] = saturate<uint64_t>(v); return;
    default: {  // the sub-byte integers, as ml_dtypes converts floats: truncation, 0 when out of range
      double t = std::trunc(v);
      bool in_range = t >= static_cast<double>(integer_min(dtype_)) && t <= static_cast<double>(integer_max(dtype_));
      set_i64(i, in_range ? static_cast<int64_t>(t) : 0);
      return;
    }
  }
}

void TensorData::set_i64(int64_t i, int64_t v) {
  if (is_floating(dtype_)) return set_f64(i, static_cast<double>(v));
  switch (dtype_) {
    case DType::I64: data<int64_t>()[i] = v; return;
    case DType::I32: data<int32_t>()[i] = static_cast<int32_t>(v); return;
    case DType::I16: data<int16_t>()[i] = static_cast<int16_t>(v); return;
    case DType::I8: data<int8_t>()[i] = static_cast<int8_t>(v); return;
    case DType::U8: data<uint8_t>()[i] = static_cast<uint8_t>(v); return;
    case DType::Bool: data<uint8_t>()[i] = v != 0; return;
    case DType::U16: data<uint16_t>()[i] = static_cast<uint16_t>(v); return;
    case DType::U32: data<uint32_t>()[i] = static_cast<uint32_t>(v); return;
    case DType::U64: data<uint64_t>()[i] = static_cast<uint64_t>(v); return;
    default:  // the sub-byte integers wrap to their low bits
      data<uint8_t>()[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) & ((1u << dtype_bits(dtype_)) - 1));
      return;
  }
}

std::vector<double> TensorData::to_f64() const {
  std::vector<double> out(size());
  if (dtype_ == DType::F32) {
    const float* p = data<float>();
    for (int64_t i = 0; i < size(); ++i) out[i] = p[i];
  } else {
    for (int64_t i = 0; i < size(); ++i) out[i] = get_f64(i);
  }
  return out;
}

std::vector<int64_t> TensorData::to_i64() const {
  std::vector<int64_t> out(size());
  for (int64_t i = 0; i < size(); ++i) out[i] = get_i64(i);
  return out;
}

TensorData TensorData::from_f64(DType dtype, Shape shape, const std::vector<double>& values) {
  TensorData t(dtype, std::move(shape));
  KORCH_CHECK(static_cast<int64_t>(values.size()) == t.size());
  if (dtype == DType::F32) {
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.size(); ++i) p[i] = static_cast<float>(values[i]);
  } else {
    for (int64_t i = 0; i < t.size(); ++i) t.set_f64(i, values[i]);
  }
  return t;
}

TensorData TensorData::from_i64(DType dtype, Shape shape, const std::vector<int64_t>& values) {
  TensorData t(dtype, std::move(shape));
  KORCH_CHECK(static_cast<int64_t>(values.size()) == t.size());
  for (int64_t i = 0; i < t.size(); ++i) t.set_i64(i, values[i]);
  return t;
}

TensorData TensorData::scalar_f32(float v) {
  TensorData t(DType::F32, {});
  t.data<float>()[0] = v;
  return t;
}

TensorData TensorData::reshaped(Shape shape) const {
  KORCH_CHECK(num_elements(shape) == size(), "reshape ", shape_str(shape_), " -> ", shape_str(shape));
  TensorData t = *this;
  t.shape_ = std::move(shape);
  return t;
}

}  // namespace korch
