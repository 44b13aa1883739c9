// FissionContext and the op_type -> rule registry.
#include "fission/fission.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "onnx/onnx_pb.h"
#include "reference/reference.h"

namespace korch {

namespace {

std::map<std::string, FissionRule>& registry() {
  static std::map<std::string, FissionRule> rules;
  return rules;
}

void ensure_registered() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_elementwise_rules();
    register_reduce_rules();
    register_layout_rules();
    register_linear_rules();
    register_normalization_rules();
    register_constant_rules();
    register_castlike_rule();
    register_trilu_rule();
    register_cumsum_rules();
    register_hardmax_rule();
    register_isinf_isnan_rules();
    register_shrink_rule();
    register_lrn_rule();
    register_hyperbolic_rules();
    register_rmsnorm_rule();
    register_onehot_rule();
    register_eyelike_rule();
    register_window_rules();
    register_lpnorm_rule();
    register_gathernd_rule();
    register_scatter_elements_rules();
    register_gather_elements_rule();
    register_loss_rules();
    register_attention_rule();
    register_einsum_rule();
    register_center_crop_pad_rule();
    register_topk_rule();
    register_rnn_rules();
    register_rotary_embedding_rule();
    register_dft_rules();
    register_quantize_rules();
    register_bitwise_rules();
    register_inverse_trig_rules();
    register_grid_sample_rule();
    register_swiglu_rule();
    register_reverse_sequence_rule();
    register_col2im_rule();
    register_affine_grid_rule();
    register_det_rule();
    register_max_unpool_rule();
    register_roi_align_rule();
    register_mean_variance_normalization_rule();
    register_deform_conv_rule();
    register_tensor_scatter_rule();
  });
}

}  // namespace

void register_fission_rule(const std::string& op_type, FissionRule rule) { registry()[op_type] = std::move(rule); }

const FissionRule* find_fission_rule(const std::string& op_type) {
  ensure_registered();
  auto it = registry().find(op_type);
  return it == registry().end() ? nullptr : &it->second;
}

std::vector<std::string> supported_onnx_ops() {
  ensure_registered();
  std::vector<std::string> ops;
  for (const auto& [name, rule] : registry()) ops.push_back(name);
  return ops;
}

FissionContext::FissionContext(PrimGraph& graph, const onnx::NodeProto& node, int opset, int32_t origin,
                               std::vector<TensorId> inputs)
    : graph_(graph), node_(node), opset_(opset), origin_(origin), inputs_(std::move(inputs)) {}

const std::string& FissionContext::op_type() const { return node_.op_type(); }

void FissionContext::error_message(const std::string& message) const {
  fail("node '", node_.name(), "' (", node_.op_type(), "): ", message);
}

TensorId FissionContext::input(int i) const {
  if (!has_input(i)) error("required input ", i, " is missing");
  return inputs_[i];
}

const TensorData& FissionContext::constant_input(int i) const {
  TensorId t = input(i);
  if (!is_constant(t)) {
    std::string message = str_cat("node '", node_.name(), "' (", node_.op_type(), "): input ", i, " ('", node_.input(i),
                                  "') must be a constant (computable at import); korch needs static shapes");
    // Name the first graph input the value depends on: binding it lets the chain fold.
    std::vector<TensorId> stack = {t};
    std::vector<char> seen(graph_.num_tensors(), 0);
    while (!stack.empty()) {
      TensorId u = stack.back();
      stack.pop_back();
      if (seen[u]) continue;
      seen[u] = 1;
      const TensorInfo& info = graph_.tensor(u);
      if (info.producer != kNone) {
        for (TensorId v : graph_.prim(info.producer).inputs) stack.push_back(v);
      } else if (!info.is_constant()) {
        throw ConstantInputRequired(message + " (it depends on graph input '" + info.name + "')", info.name);
      }
    }
    fail(message);
  }
  return *graph_.tensor(t).constant;
}

std::vector<int64_t> FissionContext::constant_ints(int i) const { return constant_input(i).to_i64(); }
std::vector<double> FissionContext::constant_floats(int i) const { return constant_input(i).to_f64(); }

const onnx::AttributeProto* FissionContext::attr(const std::string& name) const {
  for (const auto& a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

bool FissionContext::has_attr(const std::string& name) const { return attr(name) != nullptr; }

int64_t FissionContext::attr_i(const std::string& name, int64_t fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::INT) error("attribute '", name, "' must be an int");
  return a->i();
}

double FissionContext::attr_f(const std::string& name, double fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::FLOAT) error("attribute '", name, "' must be a float");
  return a->f();
}

std::string FissionContext::attr_s(const std::string& name, const std::string& fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::STRING) error("attribute '", name, "' must be a string");
  return a->s();
}

std::vector<int64_t> FissionContext::attr_ints(const std::string& name, std::vector<int64_t> fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::INTS) error("attribute '", name, "' must be a list of ints");
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::vector<double> FissionContext::attr_floats(const std::string& name, std::vector<double> fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::FLOATS) error("attribute '", name, "' must be a list of floats");
  return std::vector<double>(a->floats().begin(), a->floats().end());
}

// Constant results larger than this are not folded at import (the primitive stays in the
// graph): a few bytes of model must not buy seconds of folding and gigabytes of constants.
constexpr int64_t kMaxFoldElements = int64_t{1} << 24;

TensorId FissionContext::emit(PrimOp op, std::vector<TensorId> inputs, Attrs attrs) {
  bool all_constant = std::all_of(inputs.begin(), inputs.end(), [&](TensorId t) { return is_constant(t); });
  if (all_constant) {
    // Constant folding through the reference executor.
    std::vector<const TensorInfo*> infos;
    std::vector<const TensorData*> values;
    for (TensorId t : inputs) {
      infos.push_back(&graph_.tensor(t));
      values.push_back(graph_.tensor(t).constant.get());
    }
    DType dtype;
    Shape shape;
    try {
      infer_primitive(op, infos, attrs, &dtype, &shape);
      if (checked_num_elements(shape, dtype_size(dtype), str_cat(prim_op_name(op), " output")) <= kMaxFoldElements) {
        Primitive prim{op, inputs, kNone, attrs, origin_};
        return constant(reference::evaluate(prim, values, dtype, shape));
      }
    } catch (const Error& e) {
      error(e.what());
    }
  }
  try {
    return graph_.add_primitive(op, std::move(inputs), std::move(attrs), origin_);
  } catch (const Error& e) {
    error(e.what());
  }
}

TensorId FissionContext::constant(TensorData value) {
  return graph_.add_constant(str_cat(node_.name(), "_const", graph_.num_tensors()),
                             std::make_shared<const TensorData>(std::move(value)));
}

TensorId FissionContext::scalar(double value, DType dtype) {
  TensorData t(dtype, {});
  t.set_f64(0, value);
  return constant(std::move(t));
}

TensorId FissionContext::reshape(TensorId x, const Shape& shape) {
  if (this->shape(x) == shape) return x;
  return emit(PrimOp::Reshape, {x}, Attrs().set("shape", shape));
}

TensorId FissionContext::reduce(PrimOp op, TensorId x, std::vector<int64_t> axes, bool keepdims) {
  int64_t r = rank(x);
  for (int64_t& a : axes) a = normalize_axis(a, r);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return emit(op, {x}, Attrs().set("axes", axes).set("keepdims", int64_t{keepdims ? 1 : 0}));
}

TensorId FissionContext::cast(TensorId x, DType to) {
  if (dtype(x) == to) return x;
  return emit(PrimOp::Cast, {x}, Attrs().set("to", static_cast<int64_t>(to)));
}

int FissionContext::num_outputs() const { return node_.output_size(); }

bool FissionContext::wants_output(int i) const { return i < node_.output_size() && !node_.output(i).empty(); }

void FissionContext::set_output(int i, TensorId t) {
  if (i >= node_.output_size()) return;
  outputs_.emplace_back(i, t);
}

}  // namespace korch
