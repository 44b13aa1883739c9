// The algorithm of a memory-bound kernel as Halide Funcs, shared by the backends that generate
// kernels with Halide (CPU, CUDA): Generator defines every primitive of a kernel as a Func over
// its output coordinates; a backend adds its own schedules. The definitions are the same for
// every target, so a schedule can change where and in which order values are computed but never
// what they are.
#pragma once
#include <Halide.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/prim_graph.h"
#include "plan/kernel.h"

namespace korch::halide_lowering {

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

// The coordinates of `in` that a Reshape to `out` reads at output coordinates `idx` (out's dims,
// outermost first), grouped so that bounds inference stays exact on dims the reshape keeps.
std::vector<Expr> reshape_source_index(const Shape& out, const Shape& in, const std::vector<Expr>& idx);

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
  // The row window of each separable max pool among the stencils (its two stages), in input rows:
  // kernel height and stride.
  struct PoolRows {
    int64_t window, stride;
  };
  const std::vector<PoolRows>& pool_rows() const { return pool_rows_; }
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
  static Expr tanh_f32(Expr x);
  // a << b or a >> b as the reference computes integer shifts (out-of-range amounts included).
  static Expr shift(PrimOp op, Expr a, Expr b);
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
  std::vector<PoolRows> pool_rows_;
  bool channels_last_ = false;
  std::map<TensorId, int> input_blocks_;
  std::vector<ExplicitReduction> explicit_reductions_;
};

// A dense Halide buffer of tensor `t` over `data` (nullptr: no host memory, e.g. to wrap device
// memory); Halide's dimension 0 is the innermost axis.
Halide::Buffer<> dense_buffer(const TensorInfo& t, const void* data);

// Whether the Generator defines every primitive of k (definitions only: nothing is compiled).
bool defines_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not);

}  // namespace korch::halide_lowering
