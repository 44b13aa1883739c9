// Conversions between ONNX TensorProto / element types and korch's TensorData / DType.
#pragma once
#include <string>

#include "ir/tensor_data.h"

namespace onnx {
class TensorProto;
}

namespace korch {

// ONNX TensorProto.DataType -> DType; throws korch::Error for types korch does not support.
DType dtype_from_onnx(int onnx_type, const std::string& what);
int dtype_to_onnx(DType t);
// Decodes a TensorProto (raw_data or typed fields; external data is resolved relative to
// `base_dir`). `what` names the tensor in error messages.
TensorData tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir, const std::string& what);
void tensor_to_proto(const TensorData& t, const std::string& name, onnx::TensorProto* proto);
// Reads a serialized TensorProto file (the ONNX test-case input_N.pb / output_N.pb).
TensorData read_tensor_file(const std::string& path, std::string* name = nullptr);
void write_tensor_file(const std::string& path, const TensorData& t, const std::string& name);

}  // namespace korch
