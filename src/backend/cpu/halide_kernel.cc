// Memory-bound kernels as Halide 14 JIT pipelines (build_halide_pipeline, compiled for
// halide_jit_target() once per process for every kernel with the same program: compiled_pipeline).
// Halide runs its parallel loops on korch's OpenMP threads (custom do_par_for), so oneDNN and
// Halide share one pool. A kernel sets the pipeline's parameters to its buffers and runs it under
// the pipeline's lock, so kernels sharing a pipeline never see each other's buffers, even from
// different threads. A kernel reads and writes dense buffers
// until layout linking keeps some of its tensors in an activation layout; it then rebuilds its
// pipeline for those layouts before its next run, and never reorders a tensor.
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "backend/cpu/halide_internal.h"
#include "backend/cpu/layout_link.h"
#include "util/error.h"

namespace korch::cpu {

namespace halide_detail {

namespace {

int omp_do_par_for(Halide::JITUserContext* ctx, int (*f)(Halide::JITUserContext*, int, uint8_t*), int min, int extent,
                   uint8_t* closure) {
  int result = 0;
#pragma omp parallel for schedule(static)
  for (int i = min; i < min + extent; ++i) {
    int r = f(ctx, i, closure);
    if (r != 0) {
#pragma omp atomic write
      result = r;
    }
  }
  return result;
}

}  // namespace

void compile_jit(Halide::Pipeline* pipeline, const Halide::Target& target) {
  pipeline->jit_handlers().custom_do_par_for = omp_do_par_for;
  pipeline->compile_jit(target);
}

namespace {

// A kernel buffer over `data`: dense, or (in_layout) stored in `format`; a channel Concat's output
// (concat_output) through its 5-D view.
Halide::Buffer<> wrap(const TensorInfo& t, const void* data, bool in_layout = false, const std::string& format = "",
                      bool concat_output = false) {
  if (in_layout) {
    std::vector<halide_dimension_t> d =
        concat_output ? concat_output_dimensions(t.shape, format) : layout_dimensions(t.shape, format);
    return Halide::Buffer<>(storage_type(t.dtype), const_cast<void*>(data), static_cast<int>(d.size()), d.data());
  }
  return halide_lowering::dense_buffer(t, data);
}

// A JIT-compiled Halide kernel. Its channels-last candidates (channels_last_candidates) take
// part in layout linking like oneDNN's activations: each reports its layout in its format (the
// kernel's one format, nhwc unless use_format chose nChw8c / nChw16c, oneDNN's blocked layouts;
// or, after use_tensor_format, nhwc for some tensors and this CPU's blocked format for others),
// and a tensor that link_layouts keeps in it is read or written through strides (a 5-D view for
// the blocked ones). The pipeline is rebuilt (once, on the next run) for the kept layouts;
// nothing is ever reordered.
class HalideKernel : public CompiledKernel {
 public:
  HalideKernel(const PrimGraph& g, const Kernel& k, const Halide::Target& target, CompiledPipeline compiled,
               std::string description)
      : graph_(&g),
        kernel_(k),
        target_(target),
        compiled_(std::move(compiled)),
        description_(std::move(description)),
        candidates_(halide_layout_links_enabled() ? channels_last_candidates(g, k) : HalideLayouts{}) {
    for (TensorId t : k.inputs) inputs_.push_back(g.tensor(t));
    output_ = g.tensor(k.output);
    kept_.inputs.assign(k.inputs.size(), 0);
    kept_.format = candidates_.format;
    candidates_.inputs.resize(k.inputs.size(), 0);
    built_ = kept_;
  }
  void run(const std::vector<const void*>& inputs, void* output) override {
    if (!same_layouts(kept_, built_)) rebuild();  // a kept layout changed since the last build
    std::lock_guard<std::mutex> lock(*compiled_.running);
    for (size_t i = 0; i < compiled_.params.size(); ++i)
      compiled_.params[i].set(wrap(inputs_[i], inputs[i], kept_.inputs[i], kept_.input_format(i)));
    Halide::Buffer<> out = wrap(output_, output, kept_.output, kept_.format, candidates_.concat_output);
    compiled_.pipeline.realize(Halide::Realization({out}));
  }
  std::string describe() const override {
    std::string in_format;  // the kept inputs' format, "mixed" when they differ
    for (size_t i = 0; i < kept_.inputs.size(); ++i)
      if (kept_.inputs[i])
        in_format = in_format.empty() || in_format == kept_.input_format(i) ? kept_.input_format(i) : "mixed";
    if (in_format.empty()) return kept_.output ? description_ + " [" + kept_.format + " out kept]" : description_;
    if (!kept_.output) return description_ + " [" + in_format + " in kept]";
    if (in_format == kept_.format) return description_ + " [" + in_format + " in/out kept]";
    return description_ + " [" + in_format + " in/" + kept_.format + " out kept]";
  }

  std::string output_layout() const override {
    return candidates_.output ? activation_layout_key(output_.shape, candidates_.format) : "";
  }
  int64_t output_layout_bytes() const override { return candidates_.output ? dense_bytes(output_) : 0; }
  std::string input_layout(int input) const override {
    return candidates_.inputs.at(input) ? activation_layout_key(inputs_[input].shape, candidates_.input_format(input))
                                        : "";
  }
  int64_t input_layout_bytes(int input) const override {
    return candidates_.inputs.at(input) ? dense_bytes(inputs_[input]) : 0;
  }
  void keep_input_layout(int input) override {
    KORCH_CHECK(candidates_.inputs.at(input), "input ", input, " of a Halide kernel cannot be linked");
    kept_.inputs[input] = 1;
  }
  void keep_output_layout() override {
    KORCH_CHECK(candidates_.output, "the Halide kernel's output cannot be linked");
    kept_.output = true;
  }
  std::string output_format() const override { return candidates_.output ? candidates_.format : ""; }
  std::string input_format(int input) const override {
    return candidates_.inputs.at(input) ? candidates_.input_format(input) : "";
  }
  // Switches every candidate tensor to `format` (nhwc, nChw8c, nChw16c) while none is kept in
  // another one; blocked formats need every candidate's channel count to be a multiple of the
  // block. The pipeline is rebuilt when a tensor is kept.
  bool use_format(const std::string& format, bool apply) override {
    int block = channel_block(format);
    if (block < 0 || !candidates_.any()) return false;
    if (format == candidates_.format && !candidates_.mixes_formats()) return true;
    if (kept_.any()) return false;
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (candidates_.inputs[i] && !takes_format(inputs_[i].shape, format)) return false;
    if (candidates_.output && !takes_format(output_.shape, format)) return false;
    if (candidates_.concat_output && !output_concat_takes_format(*graph_, kernel_, format)) return false;
    if (apply) {
      candidates_.format = format;
      candidates_.input_formats.clear();
      kept_.format = candidates_.format;
      kept_.input_formats = candidates_.input_formats;
    }
    return true;
  }
  // Switches one candidate tensor (an input, or the output for -1) to `format` while none is
  // kept, where every candidate's format then mixes with every other's (formats_mix) and, in a
  // kernel ending in a channel Concat, the output's takes the pieces (output_concat_takes_format).
  bool use_tensor_format(int input, const std::string& format, bool apply) override {
    if (kept_.any()) return false;
    bool is_output = input < 0;
    if (is_output ? !candidates_.output : !candidates_.inputs.at(input)) return false;
    if (!takes_format(is_output ? output_.shape : inputs_[input].shape, format)) return false;
    if (is_output && !output_concat_takes_format(*graph_, kernel_, format)) return false;
    HalideLayouts next = candidates_;
    next.input_formats.resize(inputs_.size());
    for (size_t i = 0; i < inputs_.size(); ++i) next.input_formats[i] = candidates_.input_format(i);
    (is_output ? next.format : next.input_formats[input]) = format;
    for (std::string& f : next.input_formats)
      if (f == next.format) f.clear();
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (next.inputs[i] && !formats_mix(next.input_format(i), format)) return false;
    if (next.output && !formats_mix(next.format, format)) return false;
    if (apply) {
      candidates_ = next;
      kept_.format = next.format;
      kept_.input_formats = next.input_formats;
    }
    return true;
  }
  bool layout_by_strides() const override { return true; }
  bool reset_to_dense() override {
    kept_.inputs.assign(kept_.inputs.size(), 0);
    kept_.output = false;
    return true;
  }

 private:
  static int64_t dense_bytes(const TensorInfo& t) {
    return num_elements(t.shape) * static_cast<int64_t>(dtype_size(t.dtype));
  }
  // Whether two layout choices build the same pipeline (with nothing kept, the formats are moot).
  static bool same_layouts(const HalideLayouts& a, const HalideLayouts& b) {
    if (!a.any() && !b.any()) return true;
    return a.summary() == b.summary();
  }
  void rebuild() {
    std::string why;
    KORCH_CHECK(compiled_pipeline(*graph_, kernel_, target_, kept_, &compiled_, &description_, &why),
                "Halide kernel for the kept layouts ", kept_.summary(), ": ", why);
    built_ = kept_;
  }

  const PrimGraph* graph_;  // what the kernel was built from (rebuild() builds it again)
  Kernel kernel_;
  Halide::Target target_;
  CompiledPipeline compiled_;
  std::string description_;
  HalideLayouts candidates_;  // what may be linked, and in which format
  HalideLayouts kept_;        // what is (same formats)
  HalideLayouts built_;       // what the pipeline is built for (a strided build survives a reset to dense)
  std::vector<TensorInfo> inputs_;
  TensorInfo output_;
};

}  // namespace

}  // namespace halide_detail

Halide::Target halide_jit_target() {
  const char* asserts = std::getenv("KORCH_HALIDE_ASSERTS");
  Halide::Target t = halide_target();
  t = t.with_feature(Halide::Target::NoBoundsQuery);
  if (asserts && std::strcmp(asserts, "1") == 0) return t;
  return t.with_feature(Halide::Target::NoAsserts);
}

std::unique_ptr<CompiledKernel> compile_halide_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  Halide::Target target = halide_jit_target();
  halide_detail::CompiledPipeline compiled;
  std::string description;
  if (!halide_detail::compiled_pipeline(g, k, target, HalideLayouts{}, &compiled, &description, why_not))
    return nullptr;
  return std::make_unique<halide_detail::HalideKernel>(g, k, target, std::move(compiled), std::move(description));
}

}  // namespace korch::cpu
