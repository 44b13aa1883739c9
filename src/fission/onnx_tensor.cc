// TensorProto <-> TensorData, including external-data weights (location/offset/length).
#include "fission/onnx_tensor.h"

#include <cstring>
#include <fstream>

#include "onnx/onnx_pb.h"
#include "util/error.h"

namespace korch {

DType dtype_from_onnx(int t, const std::string& what) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return DType::F32;
    case onnx::TensorProto::DOUBLE: return DType::F64;
    case onnx::TensorProto::INT64: return DType::I64;
    case onnx::TensorProto::INT32: return DType::I32;
    case onnx::TensorProto::INT8: return DType::I8;
    case onnx::TensorProto::UINT8: return DType::U8;
    case onnx::TensorProto::BOOL: return DType::Bool;
    default: break;
  }
  std::string name = onnx::TensorProto::DataType_IsValid(t)
                         ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t))
                         : std::to_string(t);
  fail(what, " has element type ", name,
       ", which korch does not support (supported: float, double, int64, int32, int8, uint8, bool)");
}

int dtype_to_onnx(DType t) {
  switch (t) {
    case DType::F32: return onnx::TensorProto::FLOAT;
    case DType::F64: return onnx::TensorProto::DOUBLE;
    case DType::I64: return onnx::TensorProto::INT64;
    case DType::I32: return onnx::TensorProto::INT32;
    case DType::I8: return onnx::TensorProto::INT8;
    case DType::U8: return onnx::TensorProto::UINT8;
    case DType::Bool: return onnx::TensorProto::BOOL;
  }
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

}  // namespace

TensorData tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir, const std::string& what) {
  DType dtype = dtype_from_onnx(proto.data_type(), what);
  Shape shape(proto.dims().begin(), proto.dims().end());
  for (int64_t d : shape)
    if (d < 0) fail(what, " has a negative dimension");
  int64_t n = checked_num_elements(shape, dtype_size(dtype), what);
  size_t bytes = static_cast<size_t>(n) * dtype_size(dtype);
  // Validate the payload size before allocating: a tiny file may declare a huge shape.
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string raw = read_external(proto, base_dir, what, bytes);
    TensorData t(dtype, shape);
    if (bytes) std::memcpy(t.raw(), raw.data(), bytes);
    return t;
  }
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != bytes)
      fail(what, ": raw_data has ", proto.raw_data().size(), " bytes, expected ", bytes, " for ", dtype_name(dtype),
           shape_str(shape));
    TensorData t(dtype, shape);
    if (bytes) std::memcpy(t.raw(), proto.raw_data().data(), bytes);
    return t;
  }
  auto check_count = [&](int count) {
    if (count != n) fail(what, ": has ", count, " values, expected ", n, " for shape ", shape_str(shape));
  };
  switch (dtype) {
    case DType::F32: check_count(proto.float_data_size()); break;
    case DType::F64: check_count(proto.double_data_size()); break;
    case DType::I64: check_count(proto.int64_data_size()); break;
    default: check_count(proto.int32_data_size()); break;
  }
  TensorData t(dtype, shape);
  switch (dtype) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = proto.float_data(i);
      break;
    case DType::F64:
      for (int64_t i = 0; i < n; ++i) t.data<double>()[i] = proto.double_data(i);
      break;
    case DType::I64:
      for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = proto.int64_data(i);
      break;
    default:  // int32, int8, uint8, bool are stored in int32_data
      for (int64_t i = 0; i < n; ++i) t.set_i64(i, proto.int32_data(i));
      break;
  }
  return t;
}

void tensor_to_proto(const TensorData& t, const std::string& name, onnx::TensorProto* proto) {
  proto->Clear();
  proto->set_name(name);
  proto->set_data_type(dtype_to_onnx(t.dtype()));
  for (int64_t d : t.shape()) proto->add_dims(d);
  proto->set_raw_data(std::string(static_cast<const char*>(t.raw()), t.byte_size()));
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
