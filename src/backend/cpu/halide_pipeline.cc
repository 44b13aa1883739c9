// The Halide pipeline of a memory-bound kernel: its Funcs (backend/halide/lowering.cc) with the schedule
// of its variant k.schedule (halide_schedule.cc, halide_streaming.cc) or, for tensors stored in an
// activation layout, the channels-last schedule (halide_layout.cc). The JIT kernels
// (halide_kernel.cc) and `korch export`'s ahead-of-time kernels both compile this pipeline, for
// the target halide_target() returns.
#include <cpuid.h>

#include <algorithm>
#include <map>
#include <optional>

#include "backend/cpu/halide_internal.h"
#include "util/error.h"

namespace korch::cpu {

namespace halide_detail {

namespace {

// The scheduled output Func of a kernel.
struct ScheduledOutput {
  Func func;
  std::string description;  // the schedule's, for describe()
  bool streamed = false;    // written through korch_stream_rows (the pipeline needs add_streaming_pass)
};

// The kernel inputs stored channel-blocked, with their block.
std::map<TensorId, int> blocked_inputs(const Kernel& k, const HalideLayouts& layouts) {
  std::map<TensorId, int> input_blocks;
  for (size_t i = 0; i < k.inputs.size(); ++i)
    if (i < layouts.inputs.size() && layouts.inputs[i] && channel_block(layouts.input_format(i)) > 0)
      input_blocks[k.inputs[i]] = channel_block(layouts.input_format(i));
  return input_blocks;
}

// The channel block of the kernel's blocked tensors (0 when none is blocked; one block per
// kernel, mixed formats being nhwc and one blocked format); -1 for a format Halide kernels do not
// take.
int kernel_channel_block(const HalideLayouts& layouts) {
  int block = layouts.output ? channel_block(layouts.format) : 0;
  for (size_t i = 0; i < layouts.inputs.size(); ++i) {
    if (!layouts.inputs[i]) continue;
    int b = channel_block(layouts.input_format(i));
    if (b < 0 || (b > 0 && block > 0 && b != block)) return -1;
    block = std::max(block, b);
  }
  return block;
}

// A kernel with tensors stored in activation layouts (block: the channel block of its blocked
// ones, 0 when all are nhwc): the inputs read through their strides, the output written
// channel-blocked when its format is, or else (nhwc or dense) in the channels-last schedule.
ScheduledOutput layout_output(const PrimGraph& g, const Kernel& k, Generator& gen, Func out,
                              const HalideLayouts& layouts, int block, int vector) {
  for (size_t i = 0; i < k.inputs.size(); ++i)
    if (i < layouts.inputs.size() && layouts.inputs[i])
      store_in_layout(gen.params().at(k.inputs[i]), g.tensor(k.inputs[i]).shape, layouts.input_format(i));
  const Shape& shape = g.tensor(k.output).shape;
  int64_t channels = shape.size() >= 2 ? shape[1] : 1;
  std::string text;
  std::optional<PrimId> concat = layouts.output ? output_channel_concat(g, k) : std::nullopt;
  if (concat) {
    Func pieces = blocked_concat_output(g, k, gen, *concat, layouts.format, channels, &text);
    store_with_dimensions(pieces.output_buffer(), concat_output_dimensions(shape, layouts.format));
    return {pieces, text};
  }
  if (channel_block(layouts.format) > 0 && layouts.output) {
    Func blocked = blocked_output(out, layouts.format, gen, channels, &text);
    store_in_layout(blocked.output_buffer(), shape, layouts.format);
    return {blocked, text};
  }
  // Blocked inputs are read a whole block of channels per vector.
  int width = block > 0 ? block : vector_width(channels, vector);
  if (layouts.output) {
    store_in_layout(out.output_buffer(), shape, layouts.format);
  } else {
    // Constant output bounds (every run realises the whole output): the reductions' channel
    // loops then start at 0, so that Halide proves a channel vector never crosses a block
    // and loads it whole (with symbolic bounds it gathered: 3x slower on candy's variances).
    set_output_bounds(out, shape);
  }
  text = schedule_channels_last(out, shape, vector, width, layouts.output, gen);
  if (block > 0) text += str_cat(", nChw", block, "c inputs");
  return {out, text};
}

// The output scheduled by schedule_output in `variant` (Default, FusedParallel, BlockTranspose,
// BlockTransposeTall or StreamedRows), with the transposed inputs staged for block transposes and
// the reductions, windows and shared values placed.
ScheduledOutput scheduled_output(const PrimGraph& g, const Kernel& k, Generator& gen, Func out, int vector,
                                 Variant variant) {
  bool streamed_rows = variant == Variant::StreamedRows;
  if (streamed_rows) {
    vector = std::min(vector, 16);  // divides the rows (variants_of), so no vector has a tail
    out = streamed_rows_output(g, k, out, vector);
  }
  OutputSchedule schedule = schedule_output(out, g.tensor(k.output).shape, vector, transposes_innermost(g, k),
                                            streamed_rows ? Variant::Default : variant);
  // Each input read transposed: its 8x8 block staged and transposed in registers.
  if (is_block_transpose(variant)) stage_transposed_inputs(g, k, gen, out, schedule.block_var);
  std::string text = schedule.text + schedule_intermediates(g, k, gen, out, schedule, vector);
  if (streamed_rows) text += ", rows computed then written with streaming stores";
  return {out, text, streamed_rows};
}

// A dense kernel (no tensor in an activation layout) in its schedule variant k.schedule.
ScheduledOutput variant_output(const PrimGraph& g, const Kernel& k, Generator& gen, Func out, int vector) {
  std::vector<Variant> variants = variants_of(g, k, gen);
  if (k.schedule < 0 || k.schedule >= static_cast<int>(variants.size()))
    throw Unsupported{str_cat("no schedule variant ", k.schedule, " (this kernel has ", variants.size(), ")")};
  Variant variant = variants[k.schedule];
  std::string text;
  if (variant == Variant::StreamedPanels) {
    Func panels = streamed_panels_output(g, k, gen, out, vector, &text);
    return {panels, text, true};
  }
  if (variant == Variant::PiecewiseConcat) return {piecewise_concat_output(g, k, gen, out.args(), vector, &text), text};
  return scheduled_output(g, k, gen, out, vector, variant);
}

}  // namespace

}  // namespace halide_detail

bool build_halide_pipeline(const PrimGraph& g, const Kernel& k, const Halide::Target& target,
                           Halide::Pipeline* pipeline, std::vector<Halide::ImageParam>* params,
                           std::string* description, std::string* why_not, const HalideLayouts& layouts) {
  using halide_detail::Generator;
  using halide_detail::ScheduledOutput;
  return halide_detail::try_building(k, why_not, [&] {
    bool channels_last = layouts.any();
    int block = channels_last ? halide_detail::kernel_channel_block(layouts) : 0;
    if (block < 0) throw halide_detail::Unsupported{str_cat("activation layouts ", layouts.summary())};
    Generator gen(g, k, channels_last, halide_detail::blocked_inputs(k, layouts));
    Halide::Func values = gen.build();
    int vector = std::max(4, target.natural_vector_size(halide_detail::storage_type(g.tensor(k.output).dtype)));
    ScheduledOutput out = channels_last ? halide_detail::layout_output(g, k, gen, values, layouts, block, vector)
                                        : halide_detail::variant_output(g, k, gen, values, vector);
    *pipeline = Halide::Pipeline(out.func);
    if (out.streamed) halide_detail::add_streaming_pass(out.func, pipeline);
    params->clear();
    for (TensorId t : k.inputs) params->push_back(gen.params().at(t));
    if (description) *description = "halide: " + out.description;
  });
}

bool halide_supports(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  return halide_lowering::defines_kernel(g, k, why_not);
}

namespace {
// Whether the CPU has the vector instructions LLVM's sapphirerapids CPU may emit beyond Cannon
// Lake's: AVX-VNNI (CPUID leaf 7 sub-leaf 1, EAX bit 4; the VEX-encoded vpdpwssd) and AVX512-FP16
// (leaf 7 sub-leaf 0, EDX bit 23; e.g. vmovsh for 16-bit element moves).
bool cpu_has_sapphire_rapids_vector_isa() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return false;
  bool avx_vnni = (eax >> 4) & 1;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  bool avx512_fp16 = (edx >> 23) & 1;
  return avx_vnni && avx512_fp16;
}
}  // namespace

Halide::Target halide_target() {
  Halide::Target t = Halide::get_jit_target_from_environment();
  // Halide 14 infers avx512_sapphirerapids from AVX512-BF16 + VNNI and then compiles for LLVM's
  // sapphirerapids CPU, whose instructions AMD's AVX-512 CPUs lack in part: Zen 4 has no AVX-VNNI
  // (vpdpwssd: SIGILL), Zen 5 no AVX512-FP16 (vmovsh in a MaxPool kernel: SIGILL). Without both,
  // kernels compile for Cannon Lake's AVX-512 (korch's kernels are fp32; BF16 and VNNI go unused).
  if (t.has_feature(Halide::Target::AVX512_SapphireRapids) && !cpu_has_sapphire_rapids_vector_isa())
    t = t.without_feature(Halide::Target::AVX512_SapphireRapids);
  return t;
}

}  // namespace korch::cpu
