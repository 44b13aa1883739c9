// Streaming stores in Halide kernels: the StreamedRows and StreamedPanels schedule variants, for
// outputs larger than the last-level cache, compute their output a tile or row at a time and
// write it out with korch_stream_rows (see stream_store.h): no read for ownership of the
// output's lines. Halide 14 has no streaming store, so a custom lowering pass replaces the loops
// that copy a computed tile or row into the output with calls of korch_stream_rows, and fails
// the compilation unless it replaces every store of the output.
#include <algorithm>
#include <optional>

#include "backend/cpu/halide_internal.h"
#include "backend/cpu/stream_store.h"
#include "util/error.h"

namespace korch::cpu::halide_detail {

namespace {

// Replaces the loop of dense vector stores that copies a computed tile or row into the output
// (StreamedPanels, StreamedRows) with one korch_stream_rows call: per tile, its rows; per row,
// its vectors (as rows one vector long, consecutive). Every output store must be replaced, else
// compilation fails (the variant would be the plain one).
class StreamOutputRows : public Halide::Internal::IRMutator {
 public:
  explicit StreamOutputRows(std::string output) : output_(std::move(output)) {}
  using IRMutator::mutate;
  Halide::Internal::Stmt mutate(const Halide::Internal::Stmt& s) override {
    ++depth_;
    Halide::Internal::Stmt result = IRMutator::mutate(s);
    if (--depth_ == 0 && (replaced_ == 0 || kept_stores_ > 0))
      throw Halide::CompileError(
          str_cat("streaming stores: ", replaced_, " copy loops replaced, ", kept_stores_, " output stores left"));
    return result;
  }

 private:
  using IRMutator::visit;
  // A store of the output that copies a dense vector from a buffer (the computed tile or row).
  struct DenseCopy {
    const Halide::Internal::Store* store = nullptr;
    const Halide::Internal::Load* load = nullptr;
    const Halide::Internal::Ramp* to = nullptr;    // the store's index
    const Halide::Internal::Ramp* from = nullptr;  // the load's index
  };
  std::optional<DenseCopy> dense_copy(const Halide::Internal::Store* store) const {
    namespace HI = Halide::Internal;
    if (!store || store->name != output_) return std::nullopt;
    DenseCopy c{store, copied_load(store->value), store->index.as<HI::Ramp>(), nullptr};
    c.from = c.load ? c.load->index.as<HI::Ramp>() : nullptr;
    if (!(c.to && c.from && HI::is_const_one(c.to->stride) && HI::is_const_one(c.from->stride) &&
          HI::is_const_one(store->predicate) && HI::is_const_one(c.load->predicate)))
      return std::nullopt;
    return c;
  }
  Halide::Internal::Stmt visit(const Halide::Internal::For* loop) override {
    namespace HI = Halide::Internal;
    if (std::optional<DenseCopy> c = dense_copy(loop->body.as<HI::Store>())) {
      auto at = [&](const Expr& e, const Expr& row) { return HI::simplify(HI::substitute(loop->name, row, e)); };
      Expr to_first = at(c->to->base, loop->min), from_first = at(c->from->base, loop->min);
      Expr to_stride = HI::simplify(at(c->to->base, loop->min + 1) - to_first);
      Expr from_stride = HI::simplify(at(c->from->base, loop->min + 1) - from_first);
      if (!HI::expr_uses_var(to_stride, loop->name) && !HI::expr_uses_var(from_stride, loop->name)) {
        ++replaced_;
        return stream_call(*c, to_first, from_first, loop->extent, to_stride, from_stride);
      }
    }
    return IRMutator::visit(loop);
  }
  // A row that is one vector has no loop of its own: its store becomes a call for one row.
  Halide::Internal::Stmt visit(const Halide::Internal::Store* store) override {
    if (store->name != output_) return IRMutator::visit(store);
    std::optional<DenseCopy> c = dense_copy(store);
    if (!c) {
      ++kept_stores_;
      return IRMutator::visit(store);
    }
    ++replaced_;
    return stream_call(*c, c->to->base, c->from->base, 1, 0, 0);
  }
  Halide::Internal::Stmt stream_call(const DenseCopy& c, Expr to, Expr from, Expr rows, Expr to_stride,
                                     Expr from_stride) {
    namespace HI = Halide::Internal;
    const HI::Store* store = c.store;
    const HI::Load* load = c.load;
    return HI::Evaluate::make(HI::Call::make(
        Halide::Int(32), "korch_stream_rows",
        {HI::Variable::make(Halide::Handle(), store->name), std::move(to),
         HI::Variable::make(Halide::Handle(), load->name), std::move(from), std::move(rows),
         store->value.type().lanes(), store->value.type().bytes(), std::move(to_stride), std::move(from_stride)},
        HI::Call::Extern));
  }

  // The value a store copies: a load, possibly wrapped in strict_float (targets with strict_float,
  // such as the export test's, wrap every float value).
  static const Halide::Internal::Load* copied_load(const Expr& value) {
    namespace HI = Halide::Internal;
    if (const HI::Call* c = value.as<HI::Call>(); c && c->is_intrinsic(HI::Call::strict_float) && c->args.size() == 1)
      return c->args[0].as<HI::Load>();
    return value.as<HI::Load>();
  }

  std::string output_;
  int depth_ = 0, replaced_ = 0, kept_stores_ = 0;
};

}  // namespace

void add_streaming_pass(Func out, Halide::Pipeline* pipeline) {
  pipeline->add_custom_lowering_pass(new StreamOutputRows(out.name()));
  pipeline->set_jit_externs({{"korch_stream_rows", Halide::JITExtern(korch_stream_rows)}});
}

// The StreamedRows output: a copy of `values` (the kernel's output Func), which is computed one
// output row at a time (vectorised; a row stays in L1), over constant bounds (every row is whole
// vectors, so the copy loop is one dense store per vector, which the pass replaces). The caller
// schedules the returned Func like any output (rows or slices in parallel, reductions per slice).
Func streamed_rows_output(const PrimGraph& g, const Kernel& k, Func values, int vector) {
  const Shape& shape = g.tensor(k.output).shape;
  std::vector<Var> v = values.args();
  Func out("streamed_output");
  out(v) = values(v);
  set_output_bounds(out, shape);
  values.compute_at(out, v[1]).vectorize(v[0], vector);
  return out;
}

// The StreamedPanels output: `values` (the kernel's output Func) computed one tile at a time in
// blocks of vector x 8 with the transposed inputs staged in registers, copied out by
// korch_stream_rows. Tiles at the far edges shift inwards (they overlap the one before; every
// axis is at least a tile long). Panels, and the outer axes, in parallel.
Func streamed_panels_output(const PrimGraph& g, const Kernel& k, Generator& gen, Func values, int vector,
                            std::string* description) {
  const Shape& shape = g.tensor(k.output).shape;
  int rank = static_cast<int>(shape.size());
  std::vector<Var> v = values.args();
  Func out("streamed_output");
  out(v) = values(v);
  int rows = static_cast<int>(std::min<int64_t>(kStreamRows, shape[rank - 2] / 8 * 8));
  int block = std::min(vector, 16);
  Var xo("xo"), xi("xi"), yo("yo"), yi("yi");
  out.split(v[0], xo, xi, kStreamColumns, Halide::TailStrategy::ShiftInwards)
      .split(v[1], yo, yi, rows, Halide::TailStrategy::ShiftInwards);
  std::vector<Halide::VarOrRVar> order = {xi, yi, yo, xo};
  for (int a = 2; a < rank; ++a) order.push_back(v[a]);
  out.reorder(order).vectorize(xi);
  Var task = xo;
  for (int a = 2; a < rank; ++a) {
    Var next("task" + std::to_string(a));
    out.fuse(task, v[a], next);
    task = next;
  }
  out.parallel(task);
  values.compute_at(out, yo);
  Var bxo("bxo"), byo("byo"), bxi("bxi"), byi("byi");
  values.tile(v[0], v[1], bxo, byo, bxi, byi, block, 8, Halide::TailStrategy::ShiftInwards).vectorize(bxi).unroll(byi);
  stage_transposed_inputs(g, k, gen, values, bxo);
  *description = str_cat("panels of ", kStreamColumns, " columns, tiles of ", rows, " rows, ", block,
                         "x8 block transpose in registers, streaming stores, parallel panels");
  return out;
}

}  // namespace korch::cpu::halide_detail
