// GPU schedules of the shared Halide algorithm (see gpu_pipeline.h).
//
// The output's axes beyond the innermost are fused into one row axis; blocks of (lanes x rows)
// threads tile (innermost axis, rows) with guards on ragged edges, the innermost axis across
// the lanes so that loads and stores of neighbouring threads are neighbouring addresses. A
// scalar output runs as one GPU thread. Reductions and windows (Generator::materialised,
// stencils) are computed
//  - per block (BlockTiles, WideRows): the part the block reads, into shared memory, by the
//    block's threads in the same (lanes x rows) shape, before the block's outputs; into a part of
//    a global scratch buffer per block instead when a launch would need more shared memory than
//    kMaxSharedBytesPerBlock (measured on the lowered pipeline);
//  - once (RootStages): each in its own launch over global memory, tiled like an output.
// Blocks of rows go on the grid's second dimension where they fit in CUDA's 65535, else (and for
// stages in their own launch, whose extents are not known when scheduled) both block loops are
// fused into the first dimension.
// Values read several times (Generator::shared) are recomputed where read. Every input and the
// output have constant dense bounds and strides, so addressing folds to constants.
#include "backend/cuda/gpu_pipeline.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

#include "backend/halide/lowering.h"
#include "util/error.h"

namespace korch::cuda {

using Halide::Func;
using Halide::TailStrategy;
using Halide::Var;
using halide_lowering::Generator;

namespace {

struct ThreadShape {
  int lanes = 32;  // threads along the innermost axis
  int rows = 8;    // threads along the fused outer axes
};

int pow2_at_least(int64_t n, int cap) {
  int p = 1;
  while (p < n && p < cap) p *= 2;
  return p;
}

// The block shape for an output whose innermost axis has `inner` elements: `lanes` (at most
// `max_lanes`) over it, the rest of kMaxThreadsPerBlock over rows.
ThreadShape thread_shape(int64_t inner, int max_lanes) {
  ThreadShape s;
  s.lanes = pow2_at_least(inner, max_lanes);
  s.rows = std::max(1, kMaxThreadsPerBlock / s.lanes);
  return s;
}

// Fixes the bounds and dense strides of a buffer of `shape` (ONNX order; Halide's dimension 0 is
// the innermost axis).
void set_dense_layout(Halide::OutputImageParam p, const Shape& shape) {
  int64_t stride = 1;
  int rank = static_cast<int>(shape.size());
  for (int d = 0; d < rank; ++d) {
    int64_t extent = shape[rank - 1 - d];
    p.dim(d).set_bounds(0, static_cast<int>(extent)).set_stride(static_cast<int>(stride));
    stride *= std::max<int64_t>(extent, 1);
  }
}

struct Tiling {
  Var block;  // the innermost block loop (compute_at level of per-block stages)
  bool single_thread = false;
};

// CUDA's limit on the grid's second and third dimensions (the first allows 2^31 - 1 blocks).
constexpr int64_t kMaxGridY = 65535;

// Tiles f's pure loops over blocks of `shape` threads: returns the innermost block loop. `rows`:
// the extent of f's outer axes fused (-1: not known here). Blocks of rows go on the grid's second
// dimension where they fit in it, else both block loops are fused into the first one.
Tiling tile_over_blocks(Func f, ThreadShape shape, const std::string& tag, int64_t rows) {
  Tiling t;
  std::vector<Var> v = f.args();
  if (v.empty()) {
    f.gpu_single_thread();
    t.single_thread = true;
    return t;
  }
  Var xo("xo_" + tag), xi("xi_" + tag);
  if (v.size() == 1) {
    int lanes = shape.lanes * shape.rows;
    f.gpu_tile(v[0], xo, xi, lanes, TailStrategy::GuardWithIf);
    t.block = xo;
    return t;
  }
  Var fused_rows = v[1];
  for (size_t i = 2; i < v.size(); ++i) {
    Var fused("rows" + std::to_string(i) + "_" + tag);
    f.fuse(fused_rows, v[i], fused);
    fused_rows = fused;
  }
  Var ro("ro_" + tag), ri("ri_" + tag);
  if (rows >= 0 && (rows + shape.rows - 1) / shape.rows <= kMaxGridY) {
    f.gpu_tile(v[0], fused_rows, xo, ro, xi, ri, shape.lanes, shape.rows, TailStrategy::GuardWithIf);
    t.block = xo;
    return t;
  }
  Var blocks("b_" + tag);
  f.split(v[0], xo, xi, shape.lanes, TailStrategy::GuardWithIf)
      .split(fused_rows, ro, ri, shape.rows, TailStrategy::GuardWithIf)
      .reorder(xi, ri, xo, ro)
      .fuse(xo, ro, blocks)
      .gpu_blocks(blocks)
      .gpu_threads(xi, ri);
  t.block = blocks;
  return t;
}

// A stage computed per block of `out` (at out's block loop) by threads in `shape`.
// in_global: the stage's values per block in global memory (a scratch buffer with a part per
// block) instead of shared memory.
void compute_per_block(Func f, Func out, const Tiling& tiling, ThreadShape shape, const std::string& tag,
                       bool in_global) {
  f.compute_at(out, tiling.block);
  if (in_global) f.store_in(Halide::MemoryType::Heap);
  std::vector<Var> v = f.args();
  if (v.empty()) return;  // one value per block: computed by one thread
  Var xo("sxo_" + tag), xi("sxi_" + tag);
  f.split(v[0], xo, xi, shape.lanes, TailStrategy::GuardWithIf);
  if (v.size() == 1) {
    f.gpu_threads(xi);
    return;
  }
  Var yo("syo_" + tag), yi("syi_" + tag);
  f.split(v[1], yo, yi, shape.rows, TailStrategy::GuardWithIf);
  f.reorder(xi, yi, xo, yo);
  f.gpu_threads(xi, yi);
}

std::string schedule(const PrimGraph& g, const Kernel& k, Generator& gen, Func out, GpuVariant variant,
                     bool stages_in_global) {
  const Shape& shape = g.tensor(k.output).shape;
  int64_t inner = shape.empty() ? 1 : shape.back();
  ThreadShape threads = thread_shape(inner, variant == GpuVariant::WideRows ? kMaxThreadsPerBlock : 32);
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  Tiling tiling = tile_over_blocks(out, threads, "out", rows);
  std::string text = str_cat(gpu_variant_name(variant), ": ", threads.lanes, "x", threads.rows, " threads");
  if (tiling.single_thread) text = "single thread";
  std::vector<Func> stages = gen.materialised();
  stages.insert(stages.end(), gen.stencils().begin(), gen.stencils().end());
  int n = 0;
  for (Func f : stages) {
    std::string tag = "s" + std::to_string(n++);
    if (variant == GpuVariant::RootStages || tiling.single_thread) {
      f.compute_root();
      tile_over_blocks(f, ThreadShape{}, tag, -1);  // extent not known: one grid dimension
    } else {
      compute_per_block(f, out, tiling, threads, tag, stages_in_global);
    }
  }
  if (!stages.empty())
    text += variant == GpuVariant::RootStages || tiling.single_thread ? str_cat(", ", n, " stages in own launches")
            : stages_in_global ? str_cat(", ", n, " stages per block in global memory")
                               : str_cat(", ", n, " stages per block");
  return text;
}

bool has_per_block_stages(Generator& gen, GpuVariant variant, const Shape& out) {
  bool stages = !gen.materialised().empty() || !gen.stencils().empty();
  return stages && variant != GpuVariant::RootStages && !out.empty();
}

namespace HI = Halide::Internal;

// Replaces loads of the host-side buffers in which Halide finds the size of a shared allocation
// that varies between blocks ("<stage>.shared_size": the largest over the blocks, computed before
// the launch) by the values known so far.
class SubstituteSizes : public HI::IRMutator {
 public:
  explicit SubstituteSizes(const std::map<std::string, int64_t>& sizes) : sizes_(sizes) {}

 private:
  using HI::IRMutator::visit;
  Halide::Expr visit(const HI::Load* op) override {
    auto it = sizes_.find(op->name);
    return it == sizes_.end() ? HI::IRMutator::visit(op) : HI::make_const(op->type, it->second);
  }
  const std::map<std::string, int64_t>& sizes_;
};

// The most dynamic shared memory one launch of a lowered host function asks for, in bytes, by
// evaluating the host code that computes it (the bounds are constants): largest, or -1 when a size
// has no constant bound.
class SharedMemoryOfLaunches : public HI::IRVisitor {
 public:
  int64_t largest = 0;

 private:
  static constexpr int64_t kMaxEvaluated = 1 << 14;  // loop iterations evaluated one by one
  struct Loop {
    std::string var;
    HI::Interval range;
  };
  using HI::IRVisitor::visit;

  Halide::Expr resolve(Halide::Expr e) const {
    for (int i = 0; i < 64; ++i) {
      Halide::Expr next = HI::substitute(lets_, e);
      if (HI::equal(next, e)) break;
      e = next;
    }
    return HI::simplify(SubstituteSizes(sizes_).mutate(e));
  }
  // The largest value of e over the enclosing loops' iterations; nullopt when unbounded.
  std::optional<int64_t> max_over_loops(const Halide::Expr& e) const {
    std::vector<const Loop*> used;
    int64_t iterations = 1;
    HI::Scope<HI::Interval> scope;
    for (const Loop& l : loops_) {
      if (!HI::expr_uses_var(e, l.var)) continue;
      scope.push(l.var, l.range);
      const int64_t* lo = HI::as_const_int(l.range.min);
      const int64_t* hi = HI::as_const_int(l.range.max);
      iterations = lo && hi && iterations <= kMaxEvaluated ? iterations * (*hi - *lo + 1) : kMaxEvaluated + 1;
      used.push_back(&l);
    }
    if (iterations > kMaxEvaluated) {
      const int64_t* c = HI::as_const_int(HI::simplify(HI::find_constant_bounds(e, scope).max));
      return c ? std::optional<int64_t>(*c) : std::nullopt;
    }
    std::optional<int64_t> best;
    std::map<std::string, Halide::Expr> at;
    std::function<bool(size_t)> each = [&](size_t i) {
      if (i == used.size()) {
        const int64_t* c = HI::as_const_int(HI::simplify(HI::substitute(at, e)));
        if (c) best = std::max(best.value_or(*c), *c);
        return c != nullptr;
      }
      int64_t lo = *HI::as_const_int(used[i]->range.min), hi = *HI::as_const_int(used[i]->range.max);
      for (int64_t v = lo; v <= hi; ++v) {
        at[used[i]->var] = HI::make_const(Halide::Int(32), v);
        if (!each(i + 1)) return false;
      }
      return true;
    };
    return each(0) ? best : std::nullopt;
  }

  void visit(const HI::LetStmt* op) override {
    op->value.accept(this);
    lets_[op->name] = op->value;
    op->body.accept(this);
  }
  void visit(const HI::Let* op) override {
    op->value.accept(this);
    lets_[op->name] = op->value;
    op->body.accept(this);
  }
  void visit(const HI::For* op) override {
    Halide::Expr min = resolve(op->min), extent = resolve(op->extent);
    HI::Interval range = HI::Interval::everything();
    if (HI::as_const_int(min) && HI::as_const_int(extent)) range = HI::Interval(min, HI::simplify(min + extent - 1));
    loops_.push_back({op->name, range});
    op->body.accept(this);
    loops_.pop_back();
  }
  void visit(const HI::Store* op) override {
    HI::IRVisitor::visit(op);
    const std::string suffix = ".shared_size";
    if (op->name.size() < suffix.size() || op->name.compare(op->name.size() - suffix.size(), suffix.size(), suffix))
      return;
    std::optional<int64_t> v = max_over_loops(resolve(op->value));
    if (v)
      sizes_[op->name] = *v;
    else
      sizes_.erase(op->name);
  }
  void visit(const HI::Call* op) override {
    HI::IRVisitor::visit(op);
    // halide_cuda_run(state, entry, blocks x y z, threads x y z, shared_mem_bytes, ...)
    if (op->name != "halide_cuda_run" || op->args.size() < 9 || largest < 0) return;
    std::optional<int64_t> bytes = max_over_loops(resolve(op->args[8]));
    largest = bytes ? std::max(largest, *bytes) : -1;
  }

  std::map<std::string, Halide::Expr> lets_;
  std::map<std::string, int64_t> sizes_;
  std::vector<Loop> loops_;
};

// The most dynamic shared memory one launch of m (compiled for gpu_target()) asks for, in bytes;
// -1 when a launch's size has no constant bound.
int64_t largest_shared_memory(const Halide::Module& m) {
  SharedMemoryOfLaunches launches;
  for (const HI::LoweredFunc& f : m.functions()) f.body.accept(&launches);
  return launches.largest;
}

}  // namespace

const char* gpu_variant_name(GpuVariant v) {
  switch (v) {
    case GpuVariant::BlockTiles: return "tiles";
    case GpuVariant::WideRows: return "wide rows";
    case GpuVariant::RootStages: return "root stages";
  }
  return "?";
}

std::vector<GpuVariant> gpu_variants(const PrimGraph& g, const Kernel& k) {
  std::vector<GpuVariant> v = {GpuVariant::BlockTiles};
  const Shape& shape = g.tensor(k.output).shape;
  if (!shape.empty() && shape.back() > 32) v.push_back(GpuVariant::WideRows);
  bool has_stages = false;
  for (PrimId p : k.prims) {
    PrimKind kind = prim_kind(g.prim(p).op);
    if ((kind == PrimKind::Reduce || kind == PrimKind::Window) && g.prim(p).output != k.output) has_stages = true;
  }
  if (has_stages) v.push_back(GpuVariant::RootStages);
  return v;
}

Halide::Target gpu_target() {
  Halide::Target t = Halide::get_host_target();
  return t.with_feature(Halide::Target::CUDA).with_feature(Halide::Target::CUDACapability80);
}

bool build_gpu_pipeline(const PrimGraph& g, const Kernel& k, GpuPipeline* out, std::string* why_not) {
  std::vector<GpuVariant> variants = gpu_variants(g, k);
  if (k.schedule < 0 || k.schedule >= static_cast<int>(variants.size())) {
    if (why_not) *why_not = str_cat("no GPU schedule variant ", k.schedule, " (", variants.size(), " exist)");
    return false;
  }
  GpuVariant variant = variants[k.schedule];
  const Shape& out_shape = g.tensor(k.output).shape;
  auto build = [&](bool stages_in_global) {
    Generator gen(g, k);
    Func values = gen.build();
    Func result = values;
    out->description = "halide-cuda: " + schedule(g, k, gen, result, variant, stages_in_global);
    set_dense_layout(result.output_buffer(), out_shape);
    out->params.clear();
    for (TensorId t : k.inputs) {
      Halide::ImageParam p = gen.params().at(t);
      set_dense_layout(p, g.tensor(t).shape);
      out->params.push_back(p);
    }
    out->pipeline = Halide::Pipeline(result);
    return has_per_block_stages(gen, variant, out_shape);
  };
  return halide_lowering::try_building(k, why_not, [&] {
    if (!build(false)) return;
    // Halide's CUDA runtime (14) launches with dynamic shared memory and never opts a kernel in to
    // more than the default kMaxSharedBytesPerBlock: a launch asking for more fails on the GPU
    // (CUDA_ERROR_INVALID_VALUE). Per-block stages that need more (wide windows over rows that
    // cross a channel, several stages) keep their values in global memory instead.
    std::vector<Halide::Argument> args(out->params.begin(), out->params.end());
    int64_t bytes = largest_shared_memory(out->pipeline.compile_to_module(args, "korch_gpu_kernel", gpu_target()));
    if (bytes >= 0 && bytes <= kMaxSharedBytesPerBlock) return;
    build(true);
  });
}

std::string gpu_kernel_ptx(const PrimGraph& g, const Kernel& k, std::string* why_not, int64_t* shared_bytes) {
  GpuPipeline p;
  if (!build_gpu_pipeline(g, k, &p, why_not)) return "";
  std::string ptx;
  halide_lowering::try_building(k, why_not, [&] {
    std::vector<Halide::Argument> args(p.params.begin(), p.params.end());
    Halide::Module m = p.pipeline.compile_to_module(args, "korch_gpu_kernel", gpu_target());
    if (shared_bytes) *shared_bytes = largest_shared_memory(m);
    for (const Halide::Buffer<>& b : m.buffers()) {
      const char* data = reinterpret_cast<const char*>(b.data());
      std::string text(data, data + b.size_in_bytes());
      if (text.find(".target") != std::string::npos) ptx += text;
    }
    if (ptx.empty()) throw halide_lowering::Unsupported{"Halide produced no PTX (the kernel runs on the host)"};
  });
  return ptx;
}

}  // namespace korch::cuda
