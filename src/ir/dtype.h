// Element types korch understands, and small helpers on them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace korch {

// The values are stable (packages record them). The narrow float types (F16 ... F4E2M1, see
// ir/float_formats.h) hold bit patterns; the sub-byte types (I4, U4, I2, U2, F4E2M1) hold one
// element per byte (the low bits; ONNX files pack them, see fission/onnx_tensor.cc).
enum class DType : uint8_t {
  F32,
  F64,
  I64,
  I32,
  I8,
  U8,
  Bool,
  F16,
  BF16,
  I16,
  U16,
  U32,
  U64,
  F8E4M3FN,
  F8E4M3FNUZ,
  F8E5M2,
  F8E5M2FNUZ,
  I4,
  U4,
  I2,
  U2,
  F4E2M1,
};
constexpr int kNumDTypes = static_cast<int>(DType::F4E2M1) + 1;

// Bytes per element in memory.
size_t dtype_size(DType t);
// Bits per element in an ONNX file (4 and 2 for the packed sub-byte types).
int dtype_bits(DType t);
const char* dtype_name(DType t);
bool is_floating(DType t);
// True for the types stored as a bit pattern of a narrow float format (F16, BF16, F8*, F4E2M1).
bool is_narrow_float(DType t);
bool is_unsigned_integer(DType t);
// The smallest and largest values of an integer (or bool) type.
int64_t integer_min(DType t);
uint64_t integer_max(DType t);
// The types korch's code-generating backends (Halide, oneDNN, the CUDA kernels) compute on:
// f32, f64, i64, i32, i8, u8 and bool. Kernels touching any other type run on the reference.
bool is_kernel_dtype(DType t);

using Shape = std::vector<int64_t>;

int64_t num_elements(const Shape& shape);
// Like num_elements, but throws korch::Error when a dimension is negative or the element
// count (times `elem_size` bytes) exceeds max_tensor_bytes(). `what` names the tensor.
int64_t checked_num_elements(const Shape& shape, size_t elem_size, const std::string& what);
// Largest tensor korch will allocate or accept from a model (default 16 GiB).
size_t max_tensor_bytes();
void set_max_tensor_bytes(size_t bytes);
std::string shape_str(const Shape& shape);
// Row-major strides of a shape, in elements.
std::vector<int64_t> strides_of(const Shape& shape);
// numpy-style broadcast of two shapes; throws korch::Error when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b);
// Normalises a possibly negative axis for a tensor of the given rank; throws when out of range.
int64_t normalize_axis(int64_t axis, int64_t rank);

}  // namespace korch
