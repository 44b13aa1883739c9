// PrimGraph: korch's primitive graph. Tensors are values (graph inputs, constants, or
// the single output of one primitive); primitives are kept in a topological order.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/primitive.h"
#include "ir/tensor_data.h"

namespace korch {

using TensorId = int32_t;
using PrimId = int32_t;
constexpr int32_t kNone = -1;

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  ConstTensorPtr constant;  // set for weights and folded constants
  PrimId producer = kNone;  // primitive that computes it, or kNone
  bool is_constant() const { return constant != nullptr; }
};

// Which ONNX operator a primitive came from (for per-op plans and diagnostics).
struct OpOrigin {
  std::string name;
  std::string op_type;
};

struct Primitive {
  PrimOp op;
  std::vector<TensorId> inputs;
  TensorId output = kNone;
  Attrs attrs;
  int32_t origin = kNone;  // index into PrimGraph::origins()
};

class PrimGraph {
 public:
  TensorId add_input(const std::string& name, DType dtype, Shape shape);
  TensorId add_constant(const std::string& name, ConstTensorPtr value);
  // Appends a primitive; infers its output's dtype and shape. Inputs must exist already,
  // so insertion order is a topological order.
  TensorId add_primitive(PrimOp op, std::vector<TensorId> inputs, Attrs attrs, int32_t origin = kNone,
                         const std::string& output_name = "");
  int32_t add_origin(OpOrigin origin);
  void mark_output(TensorId t);

  const TensorInfo& tensor(TensorId t) const { return tensors_.at(t); }
  TensorInfo& mutable_tensor(TensorId t) { return tensors_.at(t); }
  const Primitive& prim(PrimId p) const { return prims_.at(p); }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::vector<Primitive>& prims() const { return prims_; }
  const std::vector<TensorId>& inputs() const { return inputs_; }
  const std::vector<TensorId>& outputs() const { return outputs_; }
  const std::vector<OpOrigin>& origins() const { return origins_; }
  int num_tensors() const { return static_cast<int>(tensors_.size()); }
  int num_prims() const { return static_cast<int>(prims_.size()); }

  // Consumers of each tensor (primitive ids), computed on demand.
  std::vector<std::vector<PrimId>> consumers() const;

  // A copy without primitives that no graph output depends on, and without unused constants.
  PrimGraph without_dead_code() const;

 private:
  std::vector<TensorInfo> tensors_;
  std::vector<Primitive> prims_;
  std::vector<TensorId> inputs_;
  std::vector<TensorId> outputs_;
  std::vector<OpOrigin> origins_;
};

// Output dtype and shape of a primitive given its input tensors (throws korch::Error when
// the attributes or input shapes are inconsistent).
void infer_primitive(PrimOp op, const std::vector<const TensorInfo*>& inputs, const Attrs& attrs, DType* dtype,
                     Shape* shape);

// Whether `conv` is an ungrouped Conv with 1x1 weights (every spatial dim 1) and unit strides: a
// plain GEMM over channels per pixel, if it is not padded (callers check pads their own way).
bool is_unit_stride_1x1_conv(const PrimGraph& g, const Primitive& conv);

}  // namespace korch
