// Private to the Halide backend (the halide_*.cc files): how a memory-bound kernel becomes a Halide
// pipeline. backend/halide/lowering.cc defines every primitive as a Func (the algorithm: Generator);
// halide_layout.cc the activation layouts (nhwc, nChw8c, nChw16c) a kernel's tensors can be stored
// in; halide_schedule.cc the schedules and their variants; halide_streaming.cc the outputs written
// with streaming stores; halide_pipeline.cc puts these together (build_halide_pipeline);
// halide_pipeline_cache.cc JIT-compiles the result once per process for all kernels it serves, and
// halide_kernel.cc runs it as a CompiledKernel.
#pragma once
#include <Halide.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/compiled_kernel.h"
#include "backend/halide/lowering.h"

namespace korch::cpu::halide_detail {

using Halide::Expr;
using Halide::Func;
using Halide::ImageParam;
using Halide::RDom;
using Halide::Var;
using halide_lowering::Generator;
using halide_lowering::storage_type;
using halide_lowering::try_building;
using halide_lowering::Unsupported;

// ---------------------------------------------------------------------------------------
// Activation layouts (halide_layout.cc)

// Halide's dimensions (innermost first) of a 4-D tensor [n, c, h, w] stored in `format`: nhwc
// keeps the 4 dimensions (w, h, c, n) with permuted strides; a channel-blocked format has 5
// (c % block, w, h, c / block, n).
std::vector<halide_dimension_t> layout_dimensions(const Shape& s, const std::string& format);
// Declares that the buffer of `p` has the dimensions `d` (its bounds and strides become
// constants: Halide folds them into the addressing).
void store_with_dimensions(Halide::OutputImageParam p, const std::vector<halide_dimension_t>& d);
// The same for a tensor of `shape` stored in `format` (layout_dimensions).
void store_in_layout(Halide::OutputImageParam p, const Shape& shape, const std::string& format);
// The channel vector a channel Concat's pieces are written in, for an output in `format`: the
// block of this CPU's blocked format, for it and for nhwc; -1 for other formats.
int concat_piece_block(const std::string& format);
// The 5-D view (c % block, w, h, c / block, n) a channel Concat's output is written through: the
// blocked layout itself, or nhwc with its channels split into concat_piece_block vectors.
std::vector<halide_dimension_t> concat_output_dimensions(const Shape& s, const std::string& format);
// The kernel's last primitive when it is a Concat of 4-D tensors over channels.
std::optional<PrimId> output_channel_concat(const PrimGraph& g, const Kernel& k);

// ---------------------------------------------------------------------------------------
// Schedules (halide_schedule.cc)

// Schedule variants (profiling times each one a kernel has and keeps the fastest).
enum class Variant {
  Default,             // vectorised rows (16x16 tiles for transposes), described at schedule_output
  FusedParallel,       // parallel over all outer axes fused: more, smaller tasks (short outermost axis)
  BlockTranspose,      // 8x8 tiles; inputs read transposed are loaded as 8 row vectors and transposed in registers
  BlockTransposeTall,  // the same, in tiles 8 wide and 16 tall (two blocks): whole input lines per tile
  PiecewiseConcat,     // an innermost-axis Concat output: one update per piece (no per-lane select between pieces)
  StreamedPanels,      // transposes with outputs past the last-level cache: panels written with streaming stores
  StreamedRows,        // other outputs past the last-level cache: the default schedule, rows written the same way
};

// StreamedPanels: each parallel task computes a panel of kStreamColumns output columns, all rows,
// kStreamRows rows at a time (a tile computed in blocks of vector x 8 transposed in registers,
// kept in L1), and each tile goes out through korch_stream_rows. The panel's input is a few whole input
// rows read front to back (prefetchable streams); its output is one or two 64-byte lines per
// output row, which streaming stores write without reading them first.
constexpr int kStreamColumns = 32;
constexpr int kStreamRows = 256;

// Both block transpose variants stage the transposed inputs in 8x8 register blocks.
inline bool is_block_transpose(Variant v) { return v == Variant::BlockTranspose || v == Variant::BlockTransposeTall; }

// The variants that make sense for a kernel; index 0 is always the default.
std::vector<Variant> variants_of(const PrimGraph& g, const Kernel& k, const Generator& gen);
// Whether a Transpose of the kernel moves its innermost axis.
bool transposes_innermost(const PrimGraph& g, const Kernel& k);
// The vector width for a loop of `extent` iterations: a whole vector, or half of a 16-lane one
// for extents of 8 to 15, or 0 (not vectorised).
int vector_width(int64_t extent, int vector);
// Fixes the bounds of f's output buffer to the whole of `shape` (every run realises the whole output).
void set_output_bounds(Func f, const Shape& shape);

// How schedule_output scheduled the output.
struct OutputSchedule {
  std::string text;
  bool has_parallel = false;
  Var parallel_var;
  Var block_var;  // BlockTranspose: the loop over 8x8 output blocks (within a tile)
};
OutputSchedule schedule_output(Func& f, const Shape& shape, int vector, bool tile, Variant variant);
// The reductions, windows and shared values feeding a dense kernel's output `out` (scheduled as
// `schedule`). Returns the description's suffix.
std::string schedule_intermediates(const PrimGraph& g, const Kernel& k, const Generator& gen, Func out,
                                   const OutputSchedule& schedule, int vector);
// Each input read transposed, staged per block of `consumer` (the loop `block`) and transposed in
// registers.
void stage_transposed_inputs(const PrimGraph& g, const Kernel& k, Generator& gen, Func consumer, const Var& block);
// The PiecewiseConcat variant's output.
Func piecewise_concat_output(const PrimGraph& g, const Kernel& k, Generator& gen, const std::vector<Var>& v, int vector,
                             std::string* description);

// A channels-last kernel's output (some tensors stored nhwc or channel-blocked), scheduled;
// returns the description.
std::string schedule_channels_last(Func& out, const Shape& shape, int vector, int width, bool output_nhwc,
                                   const Generator& gen);
// The output of `values` written channel-blocked in `format`, scheduled.
Func blocked_output(Func values, const std::string& format, const Generator& gen, int64_t channels,
                    std::string* description);
// The output of a kernel ending in the channel Concat `concat`, written piece by piece in `format`
// (blocked, or nhwc through concat_output_dimensions' view), scheduled.
Func blocked_concat_output(const PrimGraph& g, const Kernel& k, Generator& gen, PrimId concat,
                           const std::string& format, int64_t channels, std::string* description);

// ---------------------------------------------------------------------------------------
// Streaming stores (halide_streaming.cc)

// Makes `pipeline` (whose output is `out`) write its output through korch_stream_rows.
void add_streaming_pass(Func out, Halide::Pipeline* pipeline);
// The StreamedRows output of `values` (the kernel's output Func).
Func streamed_rows_output(const PrimGraph& g, const Kernel& k, Func values, int vector);
// The StreamedPanels output of `values`, scheduled; its pipeline needs add_streaming_pass.
Func streamed_panels_output(const PrimGraph& g, const Kernel& k, Generator& gen, Func values, int vector,
                            std::string* description);

// ---------------------------------------------------------------------------------------
// Compiled pipelines (halide_pipeline_cache.cc)

// A JIT-compiled pipeline and its input parameters (one per k.inputs entry, in order), shared by
// every kernel whose pipeline is the same program: a run sets the parameters and realizes while
// holding `running` (a ParamMap per run would cost 2-3 us more than the run's own overhead).
struct CompiledPipeline {
  Halide::Pipeline pipeline;
  std::vector<ImageParam> params;
  std::shared_ptr<std::mutex> running;
};
// JIT-compiles `pipeline` for `target`, with its parallel loops on OpenMP's threads
// (halide_kernel.cc).
void compile_jit(Halide::Pipeline* pipeline, const Halide::Target& target);
// Kernel k's pipeline for `layouts` (build_halide_pipeline), compiled for `target`, or the one an
// earlier kernel with the same program compiled. *description: k's schedule. false (and why_not)
// when Halide cannot build or compile it.
bool compiled_pipeline(const PrimGraph& g, const Kernel& k, const Halide::Target& target, const HalideLayouts& layouts,
                       CompiledPipeline* result, std::string* description, std::string* why_not);

}  // namespace korch::cpu::halide_detail
