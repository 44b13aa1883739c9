// Private to the Halide backend (the halide_*.cc files): how a memory-bound kernel becomes a Halide
// pipeline. halide_lowering.cc defines every primitive as a Func (the algorithm: Generator);
// halide_layout.cc the activation layouts (nhwc, nChw8c, nChw16c) a kernel's tensors can be stored
// in; halide_schedule.cc the schedules and their variants; halide_streaming.cc the outputs written
// with streaming stores; halide_pipeline.cc puts these together (build_halide_pipeline), and
// halide_kernel.cc JIT-compiles the result as a CompiledKernel.
#pragma once
#include <Halide.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/compiled_kernel.h"

namespace korch::cpu::halide_detail {

using Halide::Expr;
using Halide::Func;
using Halide::ImageParam;
using Halide::RDom;
using Halide::Var;

// Thrown while a kernel's Funcs or schedule are built; becomes *why_not.
struct Unsupported {
  std::string why;
};

// The Halide type a tensor of dtype `t` is stored as (Bool as UInt(8)).
Halide::Type storage_type(DType t);

// Runs `build`, which builds (part of) kernel k's pipeline. false, with the reason in *why_not
// (when not null), when k has a Linear primitive or `build` throws Unsupported or a Halide error.
bool try_building(const Kernel& k, std::string* why_not, const std::function<void()>& build);

// ---------------------------------------------------------------------------------------
// The algorithm (halide_lowering.cc)

// Builds the Funcs of one kernel.
class Generator {
 public:
  // channels_last: some tensors are stored nhwc or channel-blocked; spatial reductions then
  // become explicit Funcs (explicit_reductions()) that the channels-last schedule loops
  // channels-innermost. input_blocks: the inputs stored channel-blocked, with their block; their
  // ImageParams are 5-D (block, w, h, channel blocks, n) and read at (c % block, w, h, c / block, n).
  Generator(const PrimGraph& g, const Kernel& k, bool channels_last = false, std::map<TensorId, int> input_blocks = {})
      : g_(g), k_(k), channels_last_(channels_last), input_blocks_(std::move(input_blocks)) {}

  // Defines the kernel's Funcs (throws Unsupported); returns its output's.
  Func build();
  const std::map<TensorId, ImageParam>& params() const { return params_; }
  const std::vector<Func>& materialised() const { return materialised_; }
  const std::vector<Func>& shared() const { return shared_; }
  const std::vector<Func>& stencils() const { return stencils_; }
  struct ExplicitReduction {
    Func func;
    RDom domain;
    int channel_arg;  // index in func.args() of the channel axis
    bool sum;         // a sum (or mean): accumulated per row first (schedule_channel_reductions)
  };
  const std::vector<ExplicitReduction>& explicit_reductions() const { return explicit_reductions_; }
  // Value of tensor t (a kernel input or a primitive's output) at ONNX index `idx`.
  Expr value_at(TensorId t, const std::vector<Expr>& idx) { return at(t, idx); }

 private:
  static std::vector<Var> vars(size_t rank);
  static std::vector<Expr> onnx_index(const std::vector<Var>& v);
  Expr at(TensorId t, const std::vector<Expr>& idx);
  Expr broadcast_at(TensorId t, const std::vector<Expr>& idx);
  bool constant_along_rows(TensorId t, const Shape& out) const;
  Expr as_bool(Expr e);
  Expr store(Expr e, DType t);
  int consumers_inside(TensorId t) const;

  void define(PrimId p);
  Expr elementwise(const Primitive& prim, const std::vector<Expr>& idx, DType out_dtype);
  std::optional<TensorId> softplus_argument(const Primitive& log_prim) const;
  static Expr softplus(Expr x);
  Expr reduce(const Primitive& prim, const std::vector<Expr>& idx, const TensorInfo& out);
  Expr reduced_value(TensorId x, const std::vector<int64_t>& reduced, const RDom& r, bool keep,
                     const std::vector<Expr>& idx);
  Expr reduced_value_at(TensorId x, const std::vector<int64_t>& reduced, const std::vector<Expr>& pos, bool keep,
                        const std::vector<Expr>& idx);
  Expr explicit_reduction(const Primitive& prim, TensorId x, const std::vector<int64_t>& reduced, const RDom& r,
                          bool keep, const std::vector<Expr>& idx, double count);
  Expr layout(const Primitive& prim, const std::vector<Expr>& idx);
  Expr resize(const Primitive& prim, const std::vector<Expr>& idx);
  Expr window(const Primitive& prim, const std::vector<Expr>& idx);
  Expr separable_max_pool(TensorId x, const std::vector<int64_t>& k, const std::vector<int64_t>& st,
                          const std::vector<int64_t>& pd, const std::vector<Expr>& idx);

  const PrimGraph& g_;
  const Kernel& k_;
  std::map<TensorId, ImageParam> params_;
  std::map<TensorId, Func> funcs_;
  std::vector<Func> materialised_;
  std::vector<Func> shared_;
  std::vector<Func> stencils_;
  bool channels_last_ = false;
  std::map<TensorId, int> input_blocks_;
  std::vector<ExplicitReduction> explicit_reductions_;
};

// ---------------------------------------------------------------------------------------
// Activation layouts (halide_layout.cc)

// Halide's dimensions (innermost first) of a 4-D tensor [n, c, h, w] stored in `format`: nhwc
// keeps the 4 dimensions (w, h, c, n) with permuted strides; a channel-blocked format has 5
// (c % block, w, h, c / block, n).
std::vector<halide_dimension_t> layout_dimensions(const Shape& s, const std::string& format);
// Declares that the buffer of `p`, a tensor of `shape`, is stored in `format` (its bounds and
// strides become constants: Halide folds them into the addressing).
void store_in_layout(Halide::OutputImageParam p, const Shape& shape, const std::string& format);
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
// The output of a kernel ending in the channel Concat `concat`, written channel-blocked in `format`
// piece by piece, scheduled.
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

}  // namespace korch::cpu::halide_detail
