// The CPU backend's kernels: cpu::CompiledKernel is a korch::CompiledKernel (run + describe,
// backend/backend.h) that can also keep activations in an internal layout and hand them to its
// neighbours (the layout-linking part only CPU kernels have). Code generators return nullptr
// (and say why) when a candidate cannot be implemented as ONE kernel; such candidates are
// dropped.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "ir/tensor_data.h"
#include "plan/kernel.h"

namespace Halide {
class ImageParam;
class Pipeline;
struct Target;
}  // namespace Halide

namespace korch::cpu {

class CompiledKernel : public korch::CompiledKernel {
 public:
  // Layout linking (see layout_link.h). A kernel that keeps an internal layout (oneDNN's
  // nhwc / nChw8c / nChw16c activations) can hand it to the next kernel instead of reordering
  // to the dense buffer and back. Keys are opaque; equal keys mean byte-identical layouts. Halide
  // kernels offer their channels-last candidates in one format, nhwc until use_format picks
  // nChw8c / nChw16c (read and written through strides, nothing reordered); kernels that only
  // read and write dense buffers (reference) keep the defaults.
  //
  // The output's internal layout when it differs from the dense one ("" otherwise), and its
  // size in bytes (may exceed the dense size: blocked layouts pad channels).
  virtual std::string output_layout() const { return ""; }
  virtual int64_t output_layout_bytes() const { return 0; }
  // The layout input `input` (Kernel::inputs index) is reordered into before use, when it
  // differs from the dense one ("" otherwise, or when the kernel reads it in several layouts).
  virtual std::string input_layout(int /*input*/) const { return ""; }
  // Bytes input `input` occupies in input_layout(input) (0 when that is empty).
  virtual int64_t input_layout_bytes(int /*input*/) const { return 0; }
  // From now on input `input` arrives already in input_layout(input) (its reorder is skipped),
  // and the output is written in output_layout() (no reorder to the dense buffer).
  virtual void keep_input_layout(int /*input*/) {}
  virtual void keep_output_layout() {}
  // Names of those layouts ("nhwc", "nChw16c", ...; "" as above), and whether the kernel can be
  // rebuilt with every activation in `format` (tensors already linked keep their layouts). With
  // apply, it is rebuilt; false leaves it unchanged.
  virtual std::string output_format() const { return ""; }
  virtual std::string input_format(int /*input*/) const { return ""; }
  virtual bool use_format(const std::string& /*format*/, bool /*apply*/) { return false; }
  // Whether one tensor (input `input`, or the output for -1) can be switched to `format` alone,
  // the kernel's other tensors keeping theirs; with apply, it is. Halide kernels can where
  // formats_mix allows (a mix of nhwc and this CPU's blocked format).
  virtual bool use_tensor_format(int /*input*/, const std::string& /*format*/, bool /*apply*/) { return false; }
  // Whether the kernel takes its layouts through strides (Halide's channels-last candidates):
  // link_layouts switches such a kernel to its oneDNN neighbours' format (use_format) and links
  // its tensors where the layouts then match, but never rebuilds oneDNN kernels for it (nChw16c
  // convolutions rebuilt for nhwc ran up to 2x slower).
  virtual bool layout_by_strides() const { return false; }
  // Forgets every kept layout (the kernel reads and writes dense buffers again, and may then
  // use_format another format). false when the kernel cannot (oneDNN kernels: their reorders
  // are gone once skipped).
  virtual bool reset_to_dense() { return false; }
};

// Memory-bound kernels (no Linear primitive) as Halide 14 JIT pipelines.
std::unique_ptr<CompiledKernel> compile_halide_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not);
// The Halide pipelines this process requested and JIT-compiled (halide_pipeline_cache.cc).
CodegenStats halide_codegen_stats();
// The Halide pipeline of a memory-bound kernel with its schedule for `target` (what
// compile_halide_kernel JIT-compiles; `korch export` compiles it ahead of time). params: one
// ImageParam per k.inputs, in order. false (and why_not) when Halide cannot implement it.
// The Halide target korch compiles for: HL_JIT_TARGET (default: host), minus features
// Halide 14 wrongly infers for this CPU (AVX-VNNI on AVX512-VNNI CPUs without it).
Halide::Target halide_target();
// The target of the JIT kernels: halide_target() without Halide's runtime checks of the buffers
// a kernel is called with (no_asserts), unless KORCH_HALIDE_ASSERTS=1. A JIT kernel makes every
// buffer it passes from the shapes and layouts its pipeline was built for, so the checks can
// only fail on a bug that verification against the reference catches; dropping them cuts a
// quarter of each compilation. Exported (ahead-of-time) kernels keep them. No bounds-query mode
// either (no_bounds_query): korch never asks a pipeline for the bounds it needs.
Halide::Target halide_jit_target();
// Which of a Halide kernel's tensors are stored in an activation layout of oneDNN's instead of
// dense (nchw): one flag per k.inputs entry and one for the output, in `format`: "nhwc"
// (channels last) or "nChw8c" / "nChw16c" (channels blocked by 8 / 16, the block innermost;
// only for tensors whose channel count the block divides, so nothing is padded). An input may
// name another format in input_formats, where the kernel mixes nhwc and this CPU's blocked format
// (mixes_formats: a channel vector of the block's width is contiguous in both, so the mix costs
// no gather). Empty flags: all dense.
struct HalideLayouts {
  std::vector<char> inputs;
  bool output = false;
  std::string format = "nhwc";  // the output's, and each input's that input_formats leaves empty
  std::vector<std::string> input_formats;
  // A kernel ending in a channel Concat: its output is written one piece at a time, each piece
  // whole vectors of channels (output_concat_takes_format), in nhwc or this CPU's blocked format.
  bool concat_output = false;
  bool any() const;
  // The format input i is stored in when its flag is set.
  const std::string& input_format(size_t i) const;
  // Whether some input is stored in another format than `format` (each then nhwc or blocked).
  bool mixes_formats() const;
  // A short text of the flags and formats (cache keys and descriptions).
  std::string summary() const;
};
// Whether a Halide kernel may hold tensors in both `a` and `b`: equal formats, or nhwc and this
// CPU's blocked format (whose block is the channel vector the channels-last schedules load).
bool formats_mix(const std::string& a, const std::string& b);
bool build_halide_pipeline(const PrimGraph& g, const Kernel& k, const Halide::Target& target,
                           Halide::Pipeline* pipeline, std::vector<Halide::ImageParam>* params,
                           std::string* description, std::string* why_not, const HalideLayouts& layouts = {});
// The tensors of a memory-bound kernel that can be linked in an activation layout: 4-D float
// activations (not constants) with more than one channel and pixel, in a kernel made only of
// primitives whose loops stay contiguous over channels (elementwise, broadcast, spatial
// reductions, 2-D pooling windows, spatial pads and resizes). Flags as in HalideLayouts (format
// nhwc, or blocked for a concat below); nothing set when the kernel has other primitives. Correctness never depends on
// it (Halide indexes through strides). A kernel whose last primitive is a Concat over channels is a candidate too
// (concat_output; format this CPU's blocked one until use_format picks nhwc), when every piece is whole channel
// blocks.
HalideLayouts channels_last_candidates(const PrimGraph& g, const Kernel& k);
// Whether `format` can hold a kernel's output written piece by piece: true unless the kernel ends
// in a channel Concat, which then needs nhwc or this CPU's blocked format, its block dividing
// every piece (nhwc: pieces of whole channel vectors).
bool output_concat_takes_format(const PrimGraph& g, const Kernel& k, const std::string& format);
// The channel block of an activation format: 8 for nChw8c, 16 for nChw16c, 0 for nhwc, -1 for
// formats Halide kernels do not take.
int channel_block(const std::string& format);
// Whether a 4-D tensor of `shape` can be stored in `format` without padding (nhwc always; a
// blocked format when its block divides the channel count).
bool takes_format(const Shape& shape, const std::string& format);
// The blocked activation format oneDNN picks for convolutions on this CPU (nChw16c with
// AVX-512, else nChw8c).
std::string native_blocked_format();
// oneDNN's layout key (CompiledKernel::output_layout) of a dense f32 tensor of `shape` stored in
// `format` (nhwc, nChw8c, nChw16c).
std::string activation_layout_key(const Shape& shape, const std::string& format);
// A 4-D tensor's values in `format`'s order (to_layout) or back in nchw order (its shape stays
// [n, c, h, w]); blocked formats need the channel count to be a multiple of the block.
TensorData permute_activation(const TensorData& t, const std::string& format, bool to_layout);
// Number of schedule variants the backend can generate for a kernel (Kernel::schedule picks
// one; 0 is the default). Profiling times every variant and keeps the fastest.
int halide_schedule_variants(const PrimGraph& g, const Kernel& k);
// oneDNN: convolutions oneDNN's activation layout / plain; MatMuls with a constant B: B in
// oneDNN's layout / stored transposed.
int onednn_schedule_variants(const PrimGraph& g, const Kernel& k);
int schedule_variants(const PrimGraph& g, const Kernel& k);
// Kernels with one Linear primitive (MatMul / Conv / ConvTranspose) plus an elementwise
// epilogue as oneDNN 2.6 primitives with post-ops.
std::unique_ptr<CompiledKernel> compile_onednn_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not);
// Kernels with two Linear primitives: the fused softmax attention of plan/attention_pattern.h
// (scores kept per block of query rows); any other such kernel is refused. Variants: the GEMMs
// by oneDNN's sgemm (0-1) or, on AVX-512 CPUs, korch's register tiles (2-3), each with two sizes
// of the per-thread score buffer.
bool attention_supports(const PrimGraph& g, const Kernel& k, std::string* why_not);
int attention_schedule_variants(const PrimGraph& g, const Kernel& k);
std::unique_ptr<CompiledKernel> compile_attention_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not);
// The library-built kernel of a kernel with Linear primitives (oneDNN for one, the fused
// attention for two), as korch and exported packages build it when they load a plan.
std::unique_ptr<CompiledKernel> compile_library_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not);
// Any kernel, executed by the reference interpreter (correct, slow), as a CPU kernel that keeps
// no layouts. Used only where no code generator can implement a primitive on its own (so that
// every model still runs).
std::unique_ptr<CompiledKernel> compile_reference_kernel(const PrimGraph& g, const Kernel& k);

// The backend's choice for a kernel: compile_library_kernel for linear kernels, Halide otherwise; nullptr
// when neither can implement it.
std::unique_ptr<CompiledKernel> compile_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not);

// Cheap structural checks (no code generation): whether a backend can take the kernel at all.
// A kernel that passes may still be refused by compile_kernel (e.g. oneDNN has no fast
// implementation for it); one that fails is never compiled.
bool halide_supports(const PrimGraph& g, const Kernel& k, std::string* why_not);
bool onednn_supports(const PrimGraph& g, const Kernel& k, std::string* why_not);
bool can_compile(const PrimGraph& g, const Kernel& k, std::string* why_not);

// Threads used by every CPU kernel (OpenMP, shared by oneDNN and Halide) that the calling
// thread runs: OpenMP's own setting, which is per thread (no copy of it to race on).
void set_num_threads(int threads);
int num_threads();

}  // namespace korch::cpu
