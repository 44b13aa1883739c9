// The reference executor: naive, obviously-correct evaluation of every
// primitive and of whole primitive graphs. It is the ground truth every
// generated kernel is checked against.
#pragma once
#include <map>
#include <vector>

#include "ir/prim_graph.h"
#include "ir/tensor_data.h"

namespace korch::reference {

// Evaluates one primitive. `out_dtype`/`out_shape` are the inferred output
// type.
TensorData evaluate(const Primitive& prim, const std::vector<const TensorData*>& inputs, DType out_dtype,
                    const Shape& out_shape);

// Evaluates `prims` of g in order, with `values` for some tensors and the graph's constants for the
// other inputs; each output's shape is the broadcast of its inputs' actual shapes (so that a chain
// of elementwise primitives runs on sample vectors), its dtype the graph's. Returns `result`'s value.
TensorData evaluate_chain(const PrimGraph& g, const std::vector<PrimId>& prims, std::map<TensorId, TensorData> values,
                          TensorId result);

// Runs the whole graph; `inputs` follow g.inputs() order and must match their
// dtypes and shapes (korch::Error otherwise). Returns the values of
// g.outputs(), in order.
std::vector<TensorData> run_graph(const PrimGraph& g, const std::vector<TensorData>& inputs);

// Per-kind entry points (one file each).
TensorData eval_elementwise(const Primitive& prim, const std::vector<const TensorData*>& inputs, DType out_dtype,
                            const Shape& out_shape);
TensorData eval_reduce(const Primitive& prim, const TensorData& x, DType out_dtype, const Shape& out_shape);
TensorData eval_layout(const Primitive& prim, const std::vector<const TensorData*>& inputs, DType out_dtype,
                       const Shape& out_shape);
TensorData eval_window(const Primitive& prim, const TensorData& x, const Shape& out_shape);
TensorData eval_linear(const Primitive& prim, const TensorData& x, const TensorData& w, const Shape& out_shape);

// Resize along one axis (ONNX semantics), shared with code generators so that
// they index exactly like the reference: the taps (clamped input index, weight)
// of output coordinate `x` on an axis of input length `in_len`; false when the
// coordinate lies outside the input under tf_crop_and_resize (the extrapolation
// value applies). Weights of one coordinate sum to 1 for linear and cubic
// modes; nearest has one tap of weight 1.
struct ResizeTap {
  int64_t index;
  double weight;
};
bool resize_taps(const Attrs& a, int64_t axis, int64_t rank, int64_t x, int64_t in_len, int64_t out_len,
                 std::vector<ResizeTap>* taps);
// True when Resize leaves `axis` unchanged (the reference skips it).
bool resize_axis_is_identity(const Attrs& a, int64_t axis, int64_t in_len, int64_t out_len);

// Offset of each output element in an input that broadcasts to `out_shape`
// (numpy rules).
std::vector<int64_t> broadcast_offsets(const Shape& in_shape, const Shape& out_shape);

}  // namespace korch::reference
