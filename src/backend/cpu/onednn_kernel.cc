// The oneDNN kernel at run time: one primitive, its runtime inputs reordered into the layouts it
// wants and its output reordered back to the dense buffer, inside run(); or primitives over blocks
// of rows, or korch's GEMV and its oneDNN epilogue (schedule variants of a MatMul). Between consecutive
// oneDNN kernels these reorders are skipped where layout_link.h allows: the kernels then read and
// write the internal layout directly (keep_input_layout / keep_output_layout), and a kernel may be
// rebuilt with every activation in one given layout (use_format) so that it matches its
// neighbour's (never changing the layout of a tensor already linked).
#include <algorithm>

#include "backend/cpu/onednn_internal.h"

namespace korch::cpu {

namespace onednn_detail {

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpu_stream() {
  static dnnl::stream stream(cpu_engine());
  return stream;
}

void OnednnKernel::run(const std::vector<const void*>& inputs, void* output) {
  dnnl::stream& s = cpu_stream();
  if (gemv_)
    gemv_partial_sums(static_cast<const float*>(inputs.at(gemv_->src_input)), gemv_->lda, gemv_->rows,
                      static_cast<const float*>(gemv_->weights.get_data_handle()), gemv_->k, gemv_->n, gemv_->parts,
                      static_cast<float*>(gemv_->partials.get_data_handle()));
  if (!row_blocks_.empty()) {
    for (RowBlock& block : row_blocks_) {
      for (const RowBlock::Runtime& r : block.runtime) {
        const void* base = r.input < 0 ? output : inputs.at(r.input);
        block.args[r.arg].set_data_handle(const_cast<char*>(static_cast<const char*>(base) + r.offset));
      }
      block.primitive.execute(s, block.args);
    }
    s.wait();
    return;
  }
  for (Binding& b : bindings_) {
    void* data = const_cast<void*>(inputs.at(b.input));
    if (b.kept) {
      b.internal.set_data_handle(data);
      continue;
    }
    b.user.set_data_handle(data);
    if (b.reorder) b.reorder->execute(s, b.user, b.internal);
  }
  if (out_kept_)
    out_internal_.set_data_handle(output);
  else
    out_user_.set_data_handle(output);
  primitive_.execute(s, args_);
  if (out_reorder_) out_reorder_->execute(s, out_internal_, out_user_);
  s.wait();
}

std::string OnednnKernel::describe() const {
  std::vector<std::string> roles;
  std::string layout;
  bool one_layout = true;
  auto add = [&](const std::string& role, const std::string& name) {
    if (std::find(roles.begin(), roles.end(), role) == roles.end()) roles.push_back(role);
    if (!layout.empty() && layout != name) one_layout = false;
    layout = name;
  };
  for (const Binding& b : bindings_)
    if (b.kept) add(b.arg == DNNL_ARG_SRC ? "in" : "residual", b.layout);
  if (out_kept_) add("out", out_layout_name_);
  if (roles.empty()) return description_;
  std::string kept;
  for (const std::string& r : roles) kept += (kept.empty() ? "" : "/") + r;
  return description_ + " [" + (one_layout ? layout + " " : "") + kept + " kept]";
}

std::vector<std::pair<const void*, int64_t>> OnednnKernel::held_memory() const {
  std::vector<const dnnl_memory*> external;  // bound to the run's inputs and output
  for (const Binding& b : bindings_) {
    external.push_back(b.user.get());
    if (b.kept) external.push_back(b.internal.get());
  }
  external.push_back(out_user_.get(true));
  if (out_kept_) external.push_back(out_internal_.get());
  std::vector<std::pair<const void*, int64_t>> held;
  auto hold = [&](const memory& m) {
    if (!m || std::find(external.begin(), external.end(), m.get()) != external.end()) return;
    const void* data = m.get_data_handle();
    auto bytes = static_cast<int64_t>(m.get_desc().get_size());
    for (const auto& [d, b] : held)
      if (d == data) return;
    if (data && bytes > 0) held.emplace_back(data, bytes);
  };
  for (const auto& [arg, m] : args_) hold(m);
  if (gemv_) {
    hold(gemv_->weights);
    hold(gemv_->partials);
  }
  for (const RowBlock& block : row_blocks_)
    for (const auto& [arg, m] : block.args) {
      bool runtime = std::any_of(block.runtime.begin(), block.runtime.end(),
                                 [&](const RowBlock::Runtime& r) { return r.arg == arg; });
      if (!runtime && arg != DNNL_ARG_SCRATCHPAD) hold(m);  // the scratchpad is args_'s
    }
  return held;
}

std::string OnednnKernel::output_layout() const { return out_reorder_ || out_kept_ ? out_key_ : ""; }

int64_t OnednnKernel::output_layout_bytes() const {
  return out_reorder_ || out_kept_ ? static_cast<int64_t>(out_internal_.get_desc().get_size()) : 0;
}

std::string OnednnKernel::input_layout(int input) const {
  std::string key;
  for (const Binding& b : bindings_) {
    if (b.input != input) continue;
    if (!b.reorder && !b.kept) return "";
    if (!key.empty() && key != b.key) return "";
    key = b.key;
  }
  return key;
}

int64_t OnednnKernel::input_layout_bytes(int input) const {
  if (input_layout(input).empty()) return 0;
  for (const Binding& b : bindings_)
    if (b.input == input) return static_cast<int64_t>(b.internal.get_desc().get_size());
  return 0;
}

void OnednnKernel::keep_input_layout(int input) {
  for (Binding& b : bindings_)
    if (b.input == input && !b.kept) {
      KORCH_CHECK(b.reorder, "input ", input, " of a oneDNN kernel has no internal layout to keep");
      b.reorder.reset();
      b.internal = memory(b.internal.get_desc(), cpu_engine(), DNNL_MEMORY_NONE);
      args_[b.arg] = b.internal;
      b.kept = true;
    }
}

void OnednnKernel::keep_output_layout() {
  if (out_kept_) return;
  KORCH_CHECK(out_reorder_, "the oneDNN kernel writes its output in the dense layout already");
  out_reorder_.reset();
  out_internal_ = memory(out_internal_.get_desc(), cpu_engine(), DNNL_MEMORY_NONE);
  args_[DNNL_ARG_DST] = out_internal_;
  out_kept_ = true;
}

std::string OnednnKernel::output_format() const { return output_layout().empty() ? "" : out_layout_name_; }

std::string OnednnKernel::input_format(int input) const {
  if (input_layout(input).empty()) return "";
  for (const Binding& b : bindings_)
    if (b.input == input) return b.layout;
  return "";
}

bool OnednnKernel::use_format(const std::string& format, bool apply) {
  std::optional<memory::format_tag> tag = format_tag_of(format);
  if (!tag || !graph_) return false;
  std::unique_ptr<OnednnKernel> fresh;
  try {
    fresh = build_onednn_kernel(*graph_, kernel_, analyse_linear_kernel(*graph_, kernel_), tag);
  } catch (const Unsupported&) {
    return false;
  } catch (const dnnl::error&) {
    return false;
  }
  // Tensors already linked must keep their layouts.
  for (const Binding& b : bindings_)
    if (b.kept && fresh->input_layout(b.input) != b.key) return false;
  if (out_kept_ && fresh->output_layout() != out_key_) return false;
  if (!apply) return true;
  for (const Binding& b : bindings_)
    if (b.kept) fresh->keep_input_layout(b.input);
  if (out_kept_) fresh->keep_output_layout();
  *this = std::move(*fresh);
  return true;
}

}  // namespace onednn_detail

std::unique_ptr<CompiledKernel> compile_onednn_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  try {
    return onednn_detail::build_onednn_kernel(g, k, onednn_detail::analyse_linear_kernel(g, k));
  } catch (const onednn_detail::Unsupported& u) {
    if (why_not) *why_not = u.why;
  } catch (const dnnl::error& e) {
    if (why_not) *why_not = str_cat("oneDNN error: ", e.what());
  }
  return nullptr;
}

}  // namespace korch::cpu
