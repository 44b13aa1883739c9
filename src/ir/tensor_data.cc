#include "ir/tensor_data.h"

#include <cmath>
#include <limits>

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

TensorData::TensorData(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  bytes_.resize(checked_num_elements(shape_, dtype_size(dtype), "tensor") * dtype_size(dtype));
}

double TensorData::get_f64(int64_t i) const {
  switch (dtype_) {
    case DType::F32: return data<float>()[i];
    case DType::F64: return data<double>()[i];
    case DType::I64: return static_cast<double>(data<int64_t>()[i]);
    case DType::I32: return data<int32_t>()[i];
    case DType::I8: return data<int8_t>()[i];
    case DType::U8: return data<uint8_t>()[i];
    case DType::Bool: return data<uint8_t>()[i] ? 1.0 : 0.0;
  }
  return 0;
}

int64_t TensorData::get_i64(int64_t i) const {
  switch (dtype_) {
    case DType::F32: return saturate<int64_t>(data<float>()[i]);
    case DType::F64: return saturate<int64_t>(data<double>()[i]);
    case DType::I64: return data<int64_t>()[i];
    case DType::I32: return data<int32_t>()[i];
    case DType::I8: return data<int8_t>()[i];
    case DType::U8: return data<uint8_t>()[i];
    case DType::Bool: return data<uint8_t>()[i] ? 1 : 0;
  }
  return 0;
}

void TensorData::set_f64(int64_t i, double v) {
  switch (dtype_) {
    case DType::F32: data<float>()[i] = static_cast<float>(v); return;
    case DType::F64: data<double>()[i] = v; return;
    case DType::I64: data<int64_t>()[i] = saturate<int64_t>(v); return;
    case DType::I32: data<int32_t>()[i] = saturate<int32_t>(v); return;
    case DType::I8: data<int8_t>()[i] = saturate<int8_t>(v); return;
    case DType::U8: data<uint8_t>()[i] = saturate<uint8_t>(v); return;
    case DType::Bool: data<uint8_t>()[i] = v != 0.0; return;
  }
}

void TensorData::set_i64(int64_t i, int64_t v) {
  switch (dtype_) {
    case DType::F32: data<float>()[i] = static_cast<float>(v); return;
    case DType::F64: data<double>()[i] = static_cast<double>(v); return;
    case DType::I64: data<int64_t>()[i] = v; return;
    case DType::I32: data<int32_t>()[i] = static_cast<int32_t>(v); return;
    case DType::I8: data<int8_t>()[i] = static_cast<int8_t>(v); return;
    case DType::U8: data<uint8_t>()[i] = static_cast<uint8_t>(v); return;
    case DType::Bool: data<uint8_t>()[i] = v != 0; return;
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
