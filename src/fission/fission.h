// Fission: one rule per ONNX operator turns the node into primitives. Rules see the node
// through FissionContext, which resolves inputs to tensors, reads attributes, and emits
// primitives. Emitting a primitive whose inputs are all constants evaluates it with the
// reference executor instead (constant folding), so shape arithmetic that PyTorch exports
// (Shape -> Gather -> Concat -> Reshape) becomes static on the fly.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ir/prim_graph.h"
#include "util/error.h"

namespace onnx {
class NodeProto;
class AttributeProto;
}  // namespace onnx

namespace korch {

class FissionContext {
 public:
  FissionContext(PrimGraph& graph, const onnx::NodeProto& node, int opset, int32_t origin,
                 std::vector<TensorId> inputs);

  const std::string& op_type() const;
  int opset() const { return opset_; }
  PrimGraph& graph() { return graph_; }

  // Inputs (an empty ONNX input name is an omitted optional input).
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[i] != kNone; }
  TensorId input(int i) const;
  const TensorInfo& info(TensorId t) const { return graph_.tensor(t); }
  const Shape& shape(TensorId t) const { return graph_.tensor(t).shape; }
  DType dtype(TensorId t) const { return graph_.tensor(t).dtype; }
  int64_t rank(TensorId t) const { return static_cast<int64_t>(graph_.tensor(t).shape.size()); }
  bool is_constant(TensorId t) const { return graph_.tensor(t).is_constant(); }
  // The value of input i, which must be a constant after folding (error otherwise).
  const TensorData& constant_input(int i) const;
  std::vector<int64_t> constant_ints(int i) const;
  std::vector<double> constant_floats(int i) const;

  // Attributes.
  bool has_attr(const std::string& name) const;
  int64_t attr_i(const std::string& name, int64_t fallback) const;
  double attr_f(const std::string& name, double fallback) const;
  std::string attr_s(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> fallback = {}) const;
  std::vector<double> attr_floats(const std::string& name, std::vector<double> fallback = {}) const;
  const onnx::AttributeProto* attr(const std::string& name) const;

  // Emitting.
  TensorId emit(PrimOp op, std::vector<TensorId> inputs, Attrs attrs = {});
  TensorId constant(TensorData value);
  TensorId scalar(double value, DType dtype);
  // Frequently used shapes of emission.
  TensorId unary(PrimOp op, TensorId x) { return emit(op, {x}); }
  TensorId binary(PrimOp op, TensorId a, TensorId b) { return emit(op, {a, b}); }
  TensorId reshape(TensorId x, const Shape& shape);
  TensorId reduce(PrimOp op, TensorId x, std::vector<int64_t> axes, bool keepdims);
  TensorId cast(TensorId x, DType to);

  int num_outputs() const;
  bool wants_output(int i) const;  // output i exists and has a non-empty name
  void set_output(int i, TensorId t);
  const std::vector<std::pair<int, TensorId>>& outputs() const { return outputs_; }

  // Throws korch::Error naming the node: "node 'name' (Op): message".
  template <typename... Args>
  [[noreturn]] void error(const Args&... args) const;
  [[noreturn]] void error_message(const std::string& message) const;

 private:
  PrimGraph& graph_;
  const onnx::NodeProto& node_;
  int opset_;
  int32_t origin_;
  std::vector<TensorId> inputs_;
  std::vector<std::pair<int, TensorId>> outputs_;
};

template <typename... Args>
void FissionContext::error(const Args&... args) const {
  error_message(str_cat(args...));
}

using FissionRule = std::function<void(FissionContext&)>;

// The rule for an ONNX op_type (default domain), or nullptr.
const FissionRule* find_fission_rule(const std::string& op_type);
std::vector<std::string> supported_onnx_ops();

// Registration, one call per rule family (rules_*.cc).
void register_fission_rule(const std::string& op_type, FissionRule rule);
void register_elementwise_rules();
void register_reduce_rules();
void register_layout_rules();
void register_linear_rules();
void register_normalization_rules();
void register_constant_rules();
// One operator (or a tight group) per file: rule_<op>.cc.
void register_castlike_rule();
void register_trilu_rule();
void register_cumsum_rules();
void register_hardmax_rule();
void register_isinf_isnan_rules();
void register_shrink_rule();
void register_lrn_rule();
void register_hyperbolic_rules();
void register_rmsnorm_rule();
void register_onehot_rule();
void register_eyelike_rule();
void register_window_rules();
void register_lpnorm_rule();
void register_gathernd_rule();
void register_scatter_elements_rules();
void register_gather_elements_rule();
void register_loss_rules();
void register_attention_rule();
void register_einsum_rule();
void register_center_crop_pad_rule();
void register_topk_rule();
void register_rnn_rules();
void register_rotary_embedding_rule();
void register_dft_rules();
void register_quantize_rules();
void register_bitwise_rules();
void register_inverse_trig_rules();
void register_grid_sample_rule();
void register_swiglu_rule();
void register_reverse_sequence_rule();
void register_col2im_rule();
void register_affine_grid_rule();
void register_det_rule();
void register_max_unpool_rule();
void register_roi_align_rule();
void register_mean_variance_normalization_rule();
void register_deform_conv_rule();
void register_tensor_scatter_rule();

}  // namespace korch
