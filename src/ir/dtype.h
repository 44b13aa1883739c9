// Element types korch understands, and small helpers on them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace korch {

enum class DType : uint8_t { F32, F64, I64, I32, I8, U8, Bool };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
bool is_floating(DType t);

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
