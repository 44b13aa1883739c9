#include "ir/dtype.h"

#include <algorithm>

#include "util/error.h"

namespace korch {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::I64: return 8;
    case DType::I32: return 4;
    case DType::I8: return 1;
    case DType::U8: return 1;
    case DType::Bool: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::I64: return "i64";
    case DType::I32: return "i32";
    case DType::I8: return "i8";
    case DType::U8: return "u8";
    case DType::Bool: return "bool";
  }
  return "?";
}

bool is_floating(DType t) { return t == DType::F32 || t == DType::F64; }

int64_t num_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {
size_t g_max_tensor_bytes = size_t{1} << 34;
}  // namespace

size_t max_tensor_bytes() { return g_max_tensor_bytes; }
void set_max_tensor_bytes(size_t bytes) { g_max_tensor_bytes = bytes; }

int64_t checked_num_elements(const Shape& shape, size_t elem_size, const std::string& what) {
  for (int64_t d : shape)
    if (d < 0) fail(what, " has a negative dimension: ", shape_str(shape));
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t limit = static_cast<int64_t>(max_tensor_bytes() / std::max<size_t>(elem_size, 1));
  int64_t n = 1;
  for (int64_t d : shape) {
    if (n > limit / d) fail(what, " is too large: ", shape_str(shape), " exceeds ", max_tensor_bytes(), " bytes");
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      fail("shapes ", shape_str(a), " and ", shape_str(b), " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t normalize_axis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1) || (rank == 0 && a != 0))
    fail("axis ", axis, " is out of range for a tensor of rank ", rank);
  return a;
}

}  // namespace korch
