// GPU schedules of the shared Halide algorithm (see gpu_pipeline.h).
//
// The output's axes beyond the innermost are fused into one row axis; blocks of (lanes x rows)
// threads tile (innermost axis, rows) with guards on ragged edges, the innermost axis across
// the lanes so that loads and stores of neighbouring threads are neighbouring addresses. A
// scalar output runs as one GPU thread. Reductions and windows (Generator::materialised,
// stencils) are computed
//  - per block (BlockTiles, WideRows): the part the block reads, into shared memory, by the
//    block's threads in the same (lanes x rows) shape, before the block's outputs;
//  - once (RootStages): each in its own launch over global memory, tiled like an output.
// Values read several times (Generator::shared) are recomputed where read. Every input and the
// output have constant dense bounds and strides, so addressing folds to constants.
#include "backend/cuda/gpu_pipeline.h"

#include <algorithm>

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

// Tiles f's pure loops over blocks of `shape` threads: returns the innermost block loop.
Tiling tile_over_blocks(Func f, ThreadShape shape, const std::string& tag) {
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
  Var rows = v[1];
  for (size_t i = 2; i < v.size(); ++i) {
    Var fused("rows" + std::to_string(i) + "_" + tag);
    f.fuse(rows, v[i], fused);
    rows = fused;
  }
  Var ro("ro_" + tag), ri("ri_" + tag);
  f.gpu_tile(v[0], rows, xo, ro, xi, ri, shape.lanes, shape.rows, TailStrategy::GuardWithIf);
  t.block = xo;
  return t;
}

// A stage computed per block of `out` (at out's block loop) by threads in `shape`.
void compute_per_block(Func f, Func out, const Tiling& tiling, ThreadShape shape, const std::string& tag) {
  f.compute_at(out, tiling.block);
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

std::string schedule(const PrimGraph& g, const Kernel& k, Generator& gen, Func out, GpuVariant variant) {
  const Shape& shape = g.tensor(k.output).shape;
  int64_t inner = shape.empty() ? 1 : shape.back();
  ThreadShape threads = thread_shape(inner, variant == GpuVariant::WideRows ? kMaxThreadsPerBlock : 32);
  Tiling tiling = tile_over_blocks(out, threads, "out");
  std::string text = str_cat(gpu_variant_name(variant), ": ", threads.lanes, "x", threads.rows, " threads");
  if (tiling.single_thread) text = "single thread";
  std::vector<Func> stages = gen.materialised();
  stages.insert(stages.end(), gen.stencils().begin(), gen.stencils().end());
  int n = 0;
  for (Func f : stages) {
    std::string tag = "s" + std::to_string(n++);
    if (variant == GpuVariant::RootStages || tiling.single_thread) {
      f.compute_root();
      tile_over_blocks(f, ThreadShape{}, tag);
    } else {
      compute_per_block(f, out, tiling, threads, tag);
    }
  }
  if (!stages.empty())
    text += variant == GpuVariant::RootStages || tiling.single_thread ? str_cat(", ", n, " stages in own launches")
                                                                      : str_cat(", ", n, " stages per block");
  return text;
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
  return halide_lowering::try_building(k, why_not, [&] {
    Generator gen(g, k);
    Func values = gen.build();
    Func result = values;
    out->description = "halide-cuda: " + schedule(g, k, gen, result, variants[k.schedule]);
    set_dense_layout(result.output_buffer(), g.tensor(k.output).shape);
    out->params.clear();
    for (TensorId t : k.inputs) {
      Halide::ImageParam p = gen.params().at(t);
      set_dense_layout(p, g.tensor(t).shape);
      out->params.push_back(p);
    }
    out->pipeline = Halide::Pipeline(result);
  });
}

std::string gpu_kernel_ptx(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  GpuPipeline p;
  if (!build_gpu_pipeline(g, k, &p, why_not)) return "";
  std::string ptx;
  halide_lowering::try_building(k, why_not, [&] {
    std::vector<Halide::Argument> args(p.params.begin(), p.params.end());
    Halide::Module m = p.pipeline.compile_to_module(args, "korch_gpu_kernel", gpu_target());
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
