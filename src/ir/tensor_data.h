// TensorData: a dense, row-major, owned tensor value (a constant, an input, or a result).
#pragma once
#include <cstring>
#include <memory>
#include <vector>

#include "ir/dtype.h"

namespace korch {

class TensorData {
 public:
  TensorData() = default;
  TensorData(DType dtype, Shape shape);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t size() const { return num_elements(shape_); }
  size_t byte_size() const { return bytes_.size(); }

  void* raw() { return bytes_.data(); }
  const void* raw() const { return bytes_.data(); }
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(bytes_.data());
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes_.data());
  }

  // Element access converting through double / int64 (any dtype).
  double get_f64(int64_t i) const;
  int64_t get_i64(int64_t i) const;
  void set_f64(int64_t i, double v);
  void set_i64(int64_t i, int64_t v);

  // The whole tensor converted to doubles / int64s.
  std::vector<double> to_f64() const;
  std::vector<int64_t> to_i64() const;
  static TensorData from_f64(DType dtype, Shape shape, const std::vector<double>& values);
  static TensorData from_i64(DType dtype, Shape shape, const std::vector<int64_t>& values);
  static TensorData scalar_f32(float v);

  // Same bytes, different shape (element count must match).
  TensorData reshaped(Shape shape) const;

 private:
  DType dtype_ = DType::F32;
  Shape shape_;
  std::vector<unsigned char> bytes_;
};

using ConstTensorPtr = std::shared_ptr<const TensorData>;

}  // namespace korch
