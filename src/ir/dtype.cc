#include "ir/dtype.h"

#include <algorithm>

#include "util/error.h"

namespace korch {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64:
    case DType::I64:
    case DType::U64: return 8;
    case DType::F32:
    case DType::I32:
    case DType::U32: return 4;
    case DType::F16:
    case DType::BF16:
    case DType::I16:
    case DType::U16: return 2;
    case DType::I8:
    case DType::U8:
    case DType::Bool:
    case DType::F8E4M3FN:
    case DType::F8E4M3FNUZ:
    case DType::F8E5M2:
    case DType::F8E5M2FNUZ:
    case DType::I4:
    case DType::U4:
    case DType::I2:
    case DType::U2:
    case DType::F4E2M1: return 1;
  }
  return 0;
}

int dtype_bits(DType t) {
  switch (t) {
    case DType::I4:
    case DType::U4:
    case DType::F4E2M1: return 4;
    case DType::I2:
    case DType::U2: return 2;
    default: return static_cast<int>(dtype_size(t)) * 8;
  }
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
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I16: return "i16";
    case DType::U16: return "u16";
    case DType::U32: return "u32";
    case DType::U64: return "u64";
    case DType::F8E4M3FN: return "f8e4m3fn";
    case DType::F8E4M3FNUZ: return "f8e4m3fnuz";
    case DType::F8E5M2: return "f8e5m2";
    case DType::F8E5M2FNUZ: return "f8e5m2fnuz";
    case DType::I4: return "i4";
    case DType::U4: return "u4";
    case DType::I2: return "i2";
    case DType::U2: return "u2";
    case DType::F4E2M1: return "f4e2m1";
  }
  return "?";
}

bool is_floating(DType t) { return t == DType::F32 || t == DType::F64 || is_narrow_float(t); }

bool is_narrow_float(DType t) {
  switch (t) {
    case DType::F16:
    case DType::BF16:
    case DType::F8E4M3FN:
    case DType::F8E4M3FNUZ:
    case DType::F8E5M2:
    case DType::F8E5M2FNUZ:
    case DType::F4E2M1: return true;
    default: return false;
  }
}

bool is_unsigned_integer(DType t) {
  switch (t) {
    case DType::U8:
    case DType::U16:
    case DType::U32:
    case DType::U64:
    case DType::U4:
    case DType::U2: return true;
    default: return false;
  }
}

int64_t integer_min(DType t) {
  if (is_unsigned_integer(t) || t == DType::Bool) return 0;
  if (t == DType::I64) return INT64_MIN;
  return -(int64_t{1} << (dtype_bits(t) - 1));
}

uint64_t integer_max(DType t) {
  if (t == DType::Bool) return 1;
  if (t == DType::U64) return UINT64_MAX;
  int bits = dtype_bits(t);
  return is_unsigned_integer(t) ? (uint64_t{1} << bits) - 1 : (uint64_t{1} << (bits - 1)) - 1;
}

bool is_kernel_dtype(DType t) { return static_cast<int>(t) <= static_cast<int>(DType::Bool); }

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
