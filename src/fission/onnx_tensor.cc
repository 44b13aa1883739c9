// TensorProto <-> TensorData, including external-data weights (location/offset/length).
#include "fission/onnx_tensor.h"

#include <cstring>
#include <fstream>

#include "onnx/onnx_pb.h"
#include "util/error.h"

namespace korch {

namespace {

// TensorProto.DataType values newer than the ONNX headers korch builds with (onnx.proto, IR 9+).
constexpr int kFloat8E4M3FN = 17, kFloat8E4M3FNUZ = 18, kFloat8E5M2 = 19, kFloat8E5M2FNUZ = 20, kUint4 = 21, kInt4 = 22,
              kFloat4E2M1 = 23, kUint2 = 25, kInt2 = 26;

struct OnnxType {
  int onnx;
  DType dtype;
};

constexpr OnnxType kOnnxTypes[] = {
    {onnx::TensorProto::FLOAT, DType::F32},
    {onnx::TensorProto::DOUBLE, DType::F64},
    {onnx::TensorProto::INT64, DType::I64},
    {onnx::TensorProto::INT32, DType::I32},
    {onnx::TensorProto::INT8, DType::I8},
    {onnx::TensorProto::UINT8, DType::U8},
    {onnx::TensorProto::BOOL, DType::Bool},
    {onnx::TensorProto::FLOAT16, DType::F16},
    {onnx::TensorProto::BFLOAT16, DType::BF16},
    {onnx::TensorProto::INT16, DType::I16},
    {onnx::TensorProto::UINT16, DType::U16},
    {onnx::TensorProto::UINT32, DType::U32},
    {onnx::TensorProto::UINT64, DType::U64},
    {kFloat8E4M3FN, DType::F8E4M3FN},
    {kFloat8E4M3FNUZ, DType::F8E4M3FNUZ},
    {kFloat8E5M2, DType::F8E5M2},
    {kFloat8E5M2FNUZ, DType::F8E5M2FNUZ},
    {kInt4, DType::I4},
    {kUint4, DType::U4},
    {kInt2, DType::I2},
    {kUint2, DType::U2},
    {kFloat4E2M1, DType::F4E2M1},
};

}  // namespace

DType dtype_from_onnx(int t, const std::string& what) {
  for (const OnnxType& o : kOnnxTypes)
    if (o.onnx == t) return o.dtype;
  std::string name = onnx::TensorProto::DataType_IsValid(t)
                         ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t))
                         : std::to_string(t);
  fail(what, " has element type ", name, ", which korch does not support");
}

int dtype_to_onnx(DType t) {
  for (const OnnxType& o : kOnnxTypes)
    if (o.dtype == t) return o.onnx;
  return 0;
}

namespace {

std::string read_external(const onnx::TensorProto& proto, const std::string& base_dir, const std::string& what,
                          size_t expected) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : proto.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = std::stoll(kv.value());
    else if (kv.key() == "length")
      length = std::stoll(kv.value());
  }
  if (location.empty()) fail(what, ": external data without a location");
  if (location.find("..") != std::string::npos || (!location.empty() && location[0] == '/'))
    fail(what, ": external data location '", location, "' must be a relative path beside the model");
  std::string path = base_dir.empty() ? location : base_dir + "/" + location;
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(what, ": cannot open external data file '", path, "'");
  f.seekg(0, std::ios::end);
  int64_t file_size = f.tellg();
  if (length < 0) length = file_size - offset;
  if (offset < 0 || offset + length > file_size)
    fail(what, ": external data range [", offset, ", ", offset + length, ") exceeds file '", path, "' of ", file_size,
         " bytes");
  if (static_cast<size_t>(length) != expected)
    fail(what, ": external data has ", length, " bytes, expected ", expected);
  std::string bytes(length, '\0');
  f.seekg(offset);
  f.read(bytes.data(), length);
  if (!f) fail(what, ": short read from '", path, "'");
  return bytes;
}

// ONNX packs the sub-byte types low bits first: two 4-bit or four 2-bit elements per byte.
int64_t file_bytes(DType dtype, int64_t n) { return (n * dtype_bits(dtype) + 7) / 8; }

void unpack_into(TensorData& t, const unsigned char* packed) {
  int bits = dtype_bits(t.dtype());
  if (bits >= 8) {
    if (t.byte_size()) std::memcpy(t.raw(), packed, t.byte_size());
    return;
  }
  int per_byte = 8 / bits;
  unsigned mask = (1u << bits) - 1;
  uint8_t* out = t.data<uint8_t>();
  for (int64_t i = 0; i < t.size(); ++i) out[i] = (packed[i / per_byte] >> (bits * (i % per_byte))) & mask;
}

std::string packed_bytes(const TensorData& t) {
  int bits = dtype_bits(t.dtype());
  if (bits >= 8) return std::string(static_cast<const char*>(t.raw()), t.byte_size());
  std::string packed(file_bytes(t.dtype(), t.size()), '\0');
  int per_byte = 8 / bits;
  unsigned mask = (1u << bits) - 1;
  const uint8_t* in = t.data<uint8_t>();
  for (int64_t i = 0; i < t.size(); ++i)
    packed[i / per_byte] = static_cast<char>(packed[i / per_byte] | ((in[i] & mask) << (bits * (i % per_byte))));
  return packed;
}

}  // namespace

TensorData tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir, const std::string& what) {
  DType dtype = dtype_from_onnx(proto.data_type(), what);
  Shape shape(proto.dims().begin(), proto.dims().end());
  for (int64_t d : shape)
    if (d < 0) fail(what, " has a negative dimension");
  int64_t n = checked_num_elements(shape, dtype_size(dtype), what);
  size_t bytes = static_cast<size_t>(file_bytes(dtype, n));
  // Validate the payload size before allocating: a tiny file may declare a huge shape.
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string raw = read_external(proto, base_dir, what, bytes);
    TensorData t(dtype, shape);
    unpack_into(t, reinterpret_cast<const unsigned char*>(raw.data()));
    return t;
  }
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != bytes)
      fail(what, ": raw_data has ", proto.raw_data().size(), " bytes, expected ", bytes, " for ", dtype_name(dtype),
           shape_str(shape));
    TensorData t(dtype, shape);
    unpack_into(t, reinterpret_cast<const unsigned char*>(proto.raw_data().data()));
    return t;
  }
  auto check_count = [&](int count, int64_t expected) {
    if (count != expected)
      fail(what, ": has ", count, " values, expected ", expected, " for ", dtype_name(dtype), shape_str(shape));
  };
  TensorData t(dtype, shape);
  switch (dtype) {
    case DType::F32:
      check_count(proto.float_data_size(), n);
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = proto.float_data(i);
      break;
    case DType::F64:
      check_count(proto.double_data_size(), n);
      for (int64_t i = 0; i < n; ++i) t.data<double>()[i] = proto.double_data(i);
      break;
    case DType::I64:
      check_count(proto.int64_data_size(), n);
      for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = proto.int64_data(i);
      break;
    case DType::U32:
    case DType::U64:
      check_count(proto.uint64_data_size(), n);
      for (int64_t i = 0; i < n; ++i) t.set_i64(i, static_cast<int64_t>(proto.uint64_data(i)));
      break;
    default:
      if (dtype_bits(dtype) < 8) {  // int32_data holds the packed bytes, one per entry
        check_count(proto.int32_data_size(), static_cast<int64_t>(bytes));
        std::string packed(bytes, '\0');
        for (size_t i = 0; i < bytes; ++i) packed[i] = static_cast<char>(proto.int32_data(static_cast<int>(i)));
        unpack_into(t, reinterpret_cast<const unsigned char*>(packed.data()));
        break;
      }
      // int32, int16, uint16, int8, uint8, bool and the bit patterns of the 16- and 8-bit floats:
      // the low bytes of each int32_data entry (little-endian).
      check_count(proto.int32_data_size(), n);
      for (int64_t i = 0; i < n; ++i) {
        uint32_t v = static_cast<uint32_t>(proto.int32_data(static_cast<int>(i)));
        unsigned char le[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                               static_cast<unsigned char>(v >> 16), static_cast<unsigned char>(v >> 24)};
        std::memcpy(static_cast<unsigned char*>(t.raw()) + i * dtype_size(dtype), le, dtype_size(dtype));
      }
      break;
  }
  return t;
}

void tensor_to_proto(const TensorData& t, const std::string& name, onnx::TensorProto* proto) {
  proto->Clear();
  proto->set_name(name);
  proto->set_data_type(dtype_to_onnx(t.dtype()));
  for (int64_t d : t.shape()) proto->add_dims(d);
  proto->set_raw_data(packed_bytes(t));
}

TensorData read_tensor_file(const std::string& path, std::string* name) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open tensor file '", path, "'");
  onnx::TensorProto proto;
  if (!proto.ParseFromIstream(&f)) fail("'", path, "' is not a valid serialized ONNX TensorProto");
  if (name) *name = proto.name();
  std::string dir = path.substr(0, path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/'));
  return tensor_from_proto(proto, dir, "tensor file '" + path + "'");
}

void write_tensor_file(const std::string& path, const TensorData& t, const std::string& name) {
  onnx::TensorProto proto;
  tensor_to_proto(t, name, &proto);
  std::ofstream f(path, std::ios::binary);
  if (!f || !proto.SerializeToOstream(&f)) fail("cannot write tensor file '", path, "'");
}

}  // namespace korch
