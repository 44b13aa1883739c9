// Schedules of Halide kernels: where and in which loops each Func of a kernel is computed, never
// what it computes. A dense output is vectorised along its innermost dimension and parallelised
// over its outermost non-unit dimension, with schedule variants (tiles and block transposes for
// transposing kernels, fused parallel axes, piecewise concats, streaming stores) that profiling
// times; a kernel with tensors stored channels-last or channel-blocked loops channels innermost.
#include <omp.h>

#include <algorithm>
#include <map>
#include <optional>

#include "backend/cpu/halide_internal.h"
#include "backend/cpu/stream_store.h"
#include "util/error.h"

namespace korch::cpu {

namespace halide_detail {

namespace {

// A tiled output runs its tile rows in parallel when the tiled axes are the only non-unit ones,
// else its outermost non-unit axis.
void parallelise_tiles(Func& f, const std::vector<Var>& v, const Var& tile_rows, int par_axis, OutputSchedule* s) {
  int rank = static_cast<int>(v.size());
  if (par_axis == rank - 2) {
    f.parallel(tile_rows);
    s->text += ", parallel tile rows";
  } else if (par_axis >= 0) {
    s->parallel_var = v[rank - 1 - par_axis];
    s->has_parallel = true;
    f.parallel(s->parallel_var);
    s->text += ", parallel axis " + std::to_string(par_axis);
  }
}

// Spatial reductions and windows of a channels-last kernel, computed up front: channels
// innermost (vectors of `width` channels, 0: none) inside their pixel loops, chunks of channels
// in parallel. Returns the description's suffix.
// Where stencil stages are stored and computed, when not once up front: a chunk of the output's rows
// (store) and each row inside it (compute).
struct RowChunks {
  Halide::LoopLevel chunk, row;
};

std::string schedule_channel_reductions(const Generator& gen, int64_t channels, int width,
                                        const std::optional<RowChunks>& chunks = std::nullopt) {
  for (Func f : gen.materialised()) {
    f.compute_root();
    std::vector<Var> a = f.args();
    if (a.size() >= 2 && width) f.vectorize(a[a.size() - 2], width, Halide::TailStrategy::GuardWithIf);
  }
  // Each reduction is stored once (a wrapper computed root, chunks of channels in parallel) and
  // accumulated per chunk in a one-vector buffer that LLVM keeps in registers: accumulating
  // straight into the root buffer was 6x slower (a load, add and store per pixel through memory).
  for (const Generator::ExplicitReduction& r : gen.explicit_reductions()) {
    Func f = r.func;
    Func root = f.in();
    root.compute_root();
    std::vector<Var> ra = root.args();
    std::vector<Halide::VarOrRVar> root_order = {ra[r.channel_arg]};
    for (size_t i = 0; i < ra.size(); ++i)
      if (static_cast<int>(i) != r.channel_arg) root_order.push_back(ra[i]);
    root.reorder(root_order);
    std::vector<Var> a = f.args();
    Var c = a[r.channel_arg];
    Halide::LoopLevel level = Halide::LoopLevel(root, ra.back());  // where f is computed
    if (width) {
      Var co("co"), ci("ci");
      root.split(ra[r.channel_arg], co, ci, width, Halide::TailStrategy::GuardWithIf).vectorize(ci);
      if (channels >= 2 * width) root.parallel(co);
      level = Halide::LoopLevel(root, co);
      f.compute_at(level).vectorize(c, width, Halide::TailStrategy::GuardWithIf);
    } else {
      f.compute_at(level);
    }
    std::vector<Halide::VarOrRVar> others;  // f's other arguments, innermost first
    for (size_t i = 0; i < a.size(); ++i)
      if (static_cast<int>(i) != r.channel_arg) others.push_back(a[i]);
    std::vector<Halide::VarOrRVar> order = {c};
    if (r.sum && r.domain.dimensions() == 2) {
      // A plane's sum in two steps: each row's sum (one vector of channels, computed per row of
      // f's update, so it stays in a register), then the sum of the rows. One running sum over a
      // 224x224 plane adds 50176 terms into the same float; rows of 224 and 224 row sums keep
      // every partial short: 14x closer to the exact mean, same time (CpuKernels test). Candy's
      // output was 6x further from a float64 evaluation than ONNX Runtime's with one running sum.
      Var row("row");
      Func rows = f.update().rfactor(r.domain[1], row);
      rows.compute_at(f, r.domain[1]);
      std::vector<Halide::VarOrRVar> row_order = {c, r.domain[0], row};
      row_order.insert(row_order.end(), others.begin(), others.end());
      rows.update().reorder(row_order);
      if (width) {
        rows.vectorize(c, width, Halide::TailStrategy::GuardWithIf);
        rows.update().vectorize(c, width, Halide::TailStrategy::GuardWithIf);
      }
      order.push_back(r.domain[1]);
    } else {
      for (int d = 0; d < r.domain.dimensions(); ++d) order.push_back(r.domain[d]);
    }
    order.insert(order.end(), others.begin(), others.end());
    Halide::Stage update = f.update();
    update.reorder(order);
    if (width) update.vectorize(c, width, Halide::TailStrategy::GuardWithIf);
  }
  // Separable pooling and Resize row stages (w, h, c, n), channels innermost in storage and loops
  // (vectors of channels). Left inlined, the output would evaluate each window's kh * kw taps again
  // (a 13x13 max pool on 13x13x128 nChw8c: 0.146 ms). With `chunks`, each chunk of output rows
  // slides its window down the stages' rows (computed per output row, each stage row once per chunk,
  // a few rows of storage); else they are computed up front, rows in parallel, into whole-tensor
  // buffers that every run allocates, writes and reads back (ResNet-50's 3x3/2 max pool over
  // 64x112x112 nhwc: 0.49-0.60 ms in-run that way, 0.20-0.21 sliding).
  for (Func f : gen.stencils()) {
    std::vector<Var> a = f.args();
    if (a.size() != 4) {  // a Resize of another rank among 4-D tensors
      f.compute_root();
      continue;
    }
    f.reorder_storage(a[2], a[0], a[1], a[3]).reorder(a[2], a[0], a[1], a[3]);
    if (chunks)
      f.store_at(chunks->chunk).compute_at(chunks->row);
    else
      f.compute_root().parallel(a[1]);
    if (width) f.vectorize(a[2], width, Halide::TailStrategy::GuardWithIf);
  }
  std::string text;
  if (!gen.explicit_reductions().empty()) text += ", reductions compute_root channels innermost";
  if (!gen.stencils().empty()) text += ", separable stages channels innermost";
  return text;
}

constexpr size_t kMaxBlockInputs = 2;  // inputs a BlockTranspose kernel may wrap (compile time)

// For a kernel of elementwise, broadcast and transpose primitives only, the inputs whose last two
// axes are the output's last two axes swapped (what a register block transpose serves). Empty
// when the kernel has other primitives or reads an input through two different axis maps.
std::vector<TensorId> inputs_read_transposed(const PrimGraph& g, const Kernel& k) {
  const Shape& out = g.tensor(k.output).shape;
  int rank = static_cast<int>(out.size());
  if (rank < 2) return {};
  // For every tensor of the kernel: which output axis indexes each of its axes (-1: broadcast).
  std::map<TensorId, std::vector<int>> axis_map;
  std::vector<int> identity(rank);
  for (int a = 0; a < rank; ++a) identity[a] = out[a] == 1 ? -1 : a;  // size-1 axes index nothing
  axis_map[k.output] = identity;
  auto assign = [&](TensorId t, std::vector<int> m) {
    auto [it, inserted] = axis_map.emplace(t, m);
    return inserted || it->second == m;
  };
  for (auto p = k.prims.rbegin(); p != k.prims.rend(); ++p) {
    const Primitive& prim = g.prim(*p);
    auto found = axis_map.find(prim.output);
    if (found == axis_map.end()) return {};
    std::vector<int> m = found->second;
    PrimKind kind = prim_kind(prim.op);
    for (TensorId in : prim.inputs) {
      const Shape& s = g.tensor(in).shape;
      std::vector<int> mi(s.size(), -1);
      if (kind == PrimKind::Elementwise || kind == PrimKind::Broadcast) {
        if (s.size() > m.size()) return {};
        size_t shift = m.size() - s.size();
        for (size_t j = 0; j < s.size(); ++j) mi[j] = s[j] == 1 ? -1 : m[shift + j];
      } else if (prim.op == PrimOp::Transpose) {
        const auto& perm = prim.attrs.ints("perm");
        for (size_t j = 0; j < perm.size(); ++j) mi[perm[j]] = s[perm[j]] == 1 ? -1 : m[j];
      } else {
        return {};
      }
      if (!assign(in, mi)) return {};
    }
  }
  std::vector<TensorId> transposed;
  for (TensorId in : k.inputs) {
    auto m = axis_map.find(in);
    if (m == axis_map.end()) continue;
    const std::vector<int>& mi = m->second;
    size_t r = mi.size();
    if (r >= 2 && mi[r - 1] == rank - 2 && mi[r - 2] == rank - 1) transposed.push_back(in);
  }
  return transposed;
}

// The kernel's output primitive when it is a Concat over the innermost axis (YOLOX's box decode
// writes [.., 85] rows as pieces of 2, 2 and 81): vectorised as one expression, every lane
// evaluates every piece and selects; written piece by piece, each piece is its own loop.
std::optional<PrimId> output_innermost_concat(const PrimGraph& g, const Kernel& k) {
  for (PrimId p : k.prims) {
    const Primitive& prim = g.prim(p);
    int64_t rank = static_cast<int64_t>(g.tensor(prim.output).shape.size());
    if (prim.output == k.output && prim.op == PrimOp::Concat && rank >= 2 && prim.attrs.i("axis") == rank - 1) return p;
  }
  return std::nullopt;
}

}  // namespace

bool transposes_innermost(const PrimGraph& g, const Kernel& k) {
  for (PrimId p : k.prims) {
    const Primitive& prim = g.prim(p);
    if (prim.op != PrimOp::Transpose) continue;
    const auto& perm = prim.attrs.ints("perm");
    if (!perm.empty() && perm.back() != static_cast<int64_t>(perm.size()) - 1) return true;
  }
  return false;
}

std::vector<Variant> variants_of(const PrimGraph& g, const Kernel& k, const Generator& gen) {
  // Plans store variant indices: a new variant is appended after the existing ones, so that an
  // index keeps its meaning for every kernel that had it.
  std::vector<Variant> v = {Variant::Default};
  const Shape& out = g.tensor(k.output).shape;
  int rank = static_cast<int>(out.size());
  bool tiled = transposes_innermost(g, k) && rank >= 2 && out[rank - 1] >= 16 && out[rank - 2] >= 16;
  if (!tiled && rank >= 3 && gen.materialised().empty() && gen.stencils().empty()) {
    int64_t outer = 1;
    for (int a = 0; a < rank - 1; ++a) outer *= out[a];
    int64_t first = 1;
    for (int a = 0; a < rank - 1; ++a)
      if (out[a] > 1) {
        first = out[a];
        break;
      }
    if (outer > first) v.push_back(Variant::FusedParallel);
  }
  // The block transpose: two unrolled 8x8 stages per wrapped input (at most kMaxBlockInputs), which
  // LLVM compiles in ~0.1 s. (Vectorising the output Func itself in both tile dimensions, tried
  // before, gave 64-lane shuffles that took LLVM minutes on some kernels.)
  size_t transposed = inputs_read_transposed(g, k).size();
  if (rank >= 2 && out[rank - 1] >= 8 && out[rank - 2] >= 8 && transposed > 0 && transposed <= kMaxBlockInputs) {
    v.push_back(Variant::BlockTranspose);
    if (out[rank - 2] >= 16) v.push_back(Variant::BlockTransposeTall);
  }
  if (output_innermost_concat(g, k) && gen.materialised().empty() && gen.stencils().empty())
    v.push_back(Variant::PiecewiseConcat);
  int64_t output_bytes = num_elements(out) * static_cast<int64_t>(dtype_size(g.tensor(k.output).dtype));
  if (rank < 2 || output_bytes < streaming_output_bytes()) return v;
  if (out[rank - 1] >= kStreamColumns && out[rank - 2] >= 8 && transposed > 0 && transposed <= kMaxBlockInputs &&
      gen.materialised().empty() && gen.stencils().empty())
    v.push_back(Variant::StreamedPanels);
  // Rows of whole vectors (of at most 16 lanes, which divide 16), so that no row has a tail.
  if (!transposes_innermost(g, k) && out[rank - 1] % 16 == 0 && !output_innermost_concat(g, k))
    v.push_back(Variant::StreamedRows);
  return v;
}

// Vectorise the innermost dimension and parallelise the outermost non-unit one;
// kernels that transpose their innermost axis are tiled 16x16 so that reads and
// writes both stay local, or (variant BlockTranspose) 8x8 with the transposed inputs
// loaded as row vectors and transposed in registers.
OutputSchedule schedule_output(Func& f, const Shape& shape, int vector, bool tile, Variant variant) {
  OutputSchedule s;
  int rank = static_cast<int>(shape.size());
  if (rank == 0) {
    s.text = "scalar";
    return s;
  }
  std::vector<Var> v = f.args();
  int par_axis = -1;
  for (int a = 0; a < rank - 1; ++a)
    if (shape[a] > 1) {
      par_axis = a;
      break;
    }
  if (is_block_transpose(variant)) {
    // The output side; the inputs' blocks are scheduled by the caller.
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    // ShiftInwards: every tile, the last ones too, is a full 8x8 block (axes are >= 8 long), so
    // the wrapped inputs' footprints are constant. The last tile row or column overlaps the one
    // before; with parallel tile rows two threads may store the same elements, with the same
    // values (outputs never share memory with the kernel's inputs: the arena keeps a kernel's
    // inputs live while it runs).
    // Tall tiles: the 16 transposed input elements per input row are a whole 64-byte line.
    // Standalone 16x1024x1024 transposes, same rounds: 59-69% of the triad against 55-59% for 8x8
    // tiles; but with a SiLU fused in, 33% against 44% (so both are variants).
    if (variant == Variant::BlockTransposeTall) {
      Var yio("yio"), yii("yii");
      f.tile(v[0], v[1], xo, yo, xi, yi, 8, 16, Halide::TailStrategy::ShiftInwards)
          .split(yi, yio, yii, 8, Halide::TailStrategy::ShiftInwards)
          .vectorize(xi)
          .unroll(yii);
      s.text = "tile 8x16 of 8x8 blocks, block transpose in registers";
      s.block_var = yio;
    } else {
      f.tile(v[0], v[1], xo, yo, xi, yi, 8, 8, Halide::TailStrategy::ShiftInwards).vectorize(xi).unroll(yi);
      s.text = "tile 8x8, block transpose in registers";
      s.block_var = xo;
    }
    parallelise_tiles(f, v, yo, par_axis, &s);
    return s;
  }
  bool tiled = tile && rank >= 2 && shape[rank - 1] >= 16 && shape[rank - 2] >= 16;
  if (tiled) {
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    f.tile(v[0], v[1], xo, yo, xi, yi, 16, 16, Halide::TailStrategy::GuardWithIf).vectorize(xi, std::min(vector, 16));
    s.text = "tile 16x16, vectorize " + std::to_string(std::min(vector, 16));
    parallelise_tiles(f, v, yo, par_axis, &s);
    return s;
  }
  // Rows narrower than a vector (7x7 or 13x13 feature maps) still take a half vector.
  int width = shape.back() >= vector ? vector : shape.back() >= 8 && vector > 8 ? 8 : 0;
  if (width > 0) {
    f.vectorize(v[0], width, Halide::TailStrategy::GuardWithIf);
    s.text = "vectorize " + std::to_string(width);
  }
  if (variant == Variant::FusedParallel && rank >= 3) {
    Var fused = v[rank - 1];
    for (int a = rank - 2; a >= 1; --a) {
      Var next("fused" + std::to_string(a));
      f.fuse(fused, v[a], next);
      fused = next;
    }
    f.parallel(fused);
    s.text += std::string(s.text.empty() ? "" : ", ") + "parallel over the fused outer axes";
    return s;  // nothing is computed per slice in this variant
  }
  if (par_axis >= 0) {
    s.parallel_var = v[rank - 1 - par_axis];
    s.has_parallel = true;
    f.parallel(s.parallel_var);
    s.text += std::string(s.text.empty() ? "" : ", ") + "parallel axis " + std::to_string(par_axis);
  }
  if (s.text.empty()) s.text = "serial";
  return s;
}

// Each input read transposed, staged per block of `consumer` (the loop `block`): its block loaded
// as row vectors into one buffer, then stored transposed into a second one (a register transpose
// after LLVM), so that the consumer reads rows too. Wrappers of all calls: the kernel's other
// Funcs are inlined into the consumer.
void stage_transposed_inputs(const PrimGraph& g, const Kernel& k, Generator& gen, Func consumer, const Var& block) {
  for (TensorId t : inputs_read_transposed(g, k)) {
    ImageParam input = gen.params().at(t);  // a handle: wraps the pipeline's parameter
    Func rows = input.in();
    std::vector<Var> a = rows.args();
    rows.compute_at(consumer, block).vectorize(a[0]).unroll(a[1]);
    Func staged = rows.in();
    std::vector<Var> b = staged.args();
    std::vector<Var> storage = b;
    std::swap(storage[0], storage[1]);
    staged.reorder_storage(storage).compute_at(consumer, block).vectorize(b[0]).unroll(b[1]);
  }
}

// Reductions and windows feeding the output are computed per parallel slice of it (so a row's
// statistics are made right before the row is written), or once up front.
std::string schedule_intermediates(const PrimGraph& g, const Kernel& k, const Generator& gen, Func out,
                                   const OutputSchedule& schedule, int vector) {
  std::string reductions;
  for (Func f : gen.materialised()) {
    if (schedule.has_parallel) {
      f.compute_at(out, schedule.parallel_var);
      reductions = ", reductions per parallel slice";
    } else {
      f.compute_root();
      std::vector<Var> v = f.args();
      if (!v.empty()) f.parallel(v.back());
      reductions = ", reductions compute_root";
    }
  }
  // Stencil stages (separable pooling, an interpolating Resize's row stage) likewise, vectorised along their rows.
  for (Func f : gen.stencils()) {
    std::vector<Var> v = f.args();
    if (schedule.has_parallel) {
      f.compute_at(out, schedule.parallel_var);
    } else {
      f.compute_root();
      f.parallel(v.back());
    }
    f.vectorize(v[0], std::min(vector, 8), Halide::TailStrategy::GuardWithIf);
  }
  if (!gen.stencils().empty()) reductions += ", separable stages";
  // In row-wise reduction kernels (softmax, normalisation), values read
  // several times (e.g. exp(x - max)) are stored per slice; elsewhere
  // recomputing them is cheaper.
  if (schedule.has_parallel && !gen.materialised().empty() && !transposes_innermost(g, k))
    for (Func f : gen.shared()) {
      f.compute_at(out, schedule.parallel_var);
      std::vector<Var> v = f.args();
      f.vectorize(v[0], vector, Halide::TailStrategy::GuardWithIf);
      reductions += ", shared values per slice";
    }
  return reductions;
}

// The PiecewiseConcat variant's output: undefined, then one update per piece of the innermost
// Concat over that piece's columns (vectorised when it spans a vector), rows in parallel over
// the outermost axis longer than 1. The pieces cover the output exactly once.
Func piecewise_concat_output(const PrimGraph& g, const Kernel& k, Generator& gen, const std::vector<Var>& v, int vector,
                             std::string* description) {
  const Primitive& concat = g.prim(*output_innermost_concat(g, k));
  const Shape& shape = g.tensor(k.output).shape;
  int rank = static_cast<int>(shape.size());
  int par = -1;  // Func argument index (innermost first) of the parallel axis
  for (int a = 0; a < rank - 1; ++a)
    if (shape[a] > 1) {
      par = rank - 1 - a;
      break;
    }
  Func f("concat_output");
  f(v) = Halide::undef(storage_type(g.tensor(k.output).dtype));
  int offset = 0, piece = 0;
  for (TensorId t : concat.inputs) {
    int len = static_cast<int>(g.tensor(t).shape.back());
    if (len == 0) continue;
    RDom r(0, len, "piece" + std::to_string(piece));
    std::vector<Expr> lhs(v.begin(), v.end()), idx(rank);
    lhs[0] = r.x + offset;
    for (int a = 0; a < rank - 1; ++a) idx[a] = v[rank - 1 - a];
    idx[rank - 1] = r.x;
    f(lhs) = gen.value_at(t, idx);
    Halide::Stage update = f.update(piece);
    if (len >= vector) update.vectorize(r.x, vector, Halide::TailStrategy::GuardWithIf);
    if (par > 0) update.parallel(v[par]);
    offset += len;
    ++piece;
  }
  *description = str_cat("innermost concat, one update per piece (", piece, "), vectorize ", vector,
                         par > 0 ? ", parallel axis " + std::to_string(rank - 1 - par) : std::string());
  return f;
}

int vector_width(int64_t extent, int vector) { return extent >= vector ? vector : extent >= 8 && vector > 8 ? 8 : 0; }

void set_output_bounds(Func f, const Shape& shape) {
  for (size_t d = 0; d < shape.size(); ++d)
    f.output_buffer().dim(static_cast<int>(d)).set_bounds(0, static_cast<int>(shape[shape.size() - 1 - d]));
}

// The schedule when some tensors are stored nhwc or channel-blocked, except a blocked output
// (channels_last_candidates' kernels): a 4-D output written nhwc, or with one pixel per channel,
// loops channels innermost (vectorised) and runs its rows in parallel; a dense 4-D output keeps
// vectorised rows (its nhwc inputs are then read with a stride: a transpose). Spatial reductions
// as schedule_channel_reductions. `width`: the channel vector (0: channels not vectorised).
// Returns the description.
std::string schedule_channels_last(Func& out, const Shape& shape, int vector, int width, bool output_nhwc,
                                   const Generator& gen) {
  auto width_for = [&](int64_t extent) { return vector_width(extent, vector); };
  std::string text = "channels-last";
  std::vector<Var> v = out.args();
  if (shape.size() == 4) {
    bool channels_inner = output_nhwc || shape[2] * shape[3] == 1;
    Var w = v[0], h = v[1], c = v[2], n = v[3];
    if (channels_inner) {
      out.reorder(c, w, h, n);
      if (width) {
        out.vectorize(c, width, Halide::TailStrategy::GuardWithIf);
        text += ", channels vectorized " + std::to_string(width);
      }
      // One chunk of rows per thread, the stencil stages sliding down each chunk, where the stages
      // are max pools' read by the output's own loops (nothing computed up front between them) and
      // the chunks overlap in few rows: a chunk recomputes window - stride rows of each stage, and a
      // 13x13 stride-1 pool of 13x13 rows in two chunks recomputed more than it saved (YOLOv4's SPP
      // pools 0.68 -> 0.89 ms in-run).
      const int threads = std::max(1, omp_get_max_threads());
      const int64_t rows = (shape[2] + threads - 1) / threads;
      bool slide = shape[2] > 1 && !gen.stencils().empty() && gen.materialised().empty() &&
                   gen.explicit_reductions().empty() && gen.stencils().size() == 2 * gen.pool_rows().size();
      for (const Generator::PoolRows& p : gen.pool_rows())
        if (2 * (p.window - p.stride) > rows * p.stride) slide = false;
      if (slide) {
        Var chunk("row_chunk"), row("chunk_row");
        out.split(h, chunk, row, static_cast<int>(rows), Halide::TailStrategy::GuardWithIf).parallel(chunk);
        text += str_cat(", parallel chunks of ", rows, " rows");
        return text + schedule_channel_reductions(
                          gen, shape[1], width, RowChunks{Halide::LoopLevel(out, chunk), Halide::LoopLevel(out, row)});
      }
      if (shape[2] > 1) {
        out.parallel(h);
        text += ", parallel rows";
      }
    } else {
      if (int w_width = width_for(shape[3])) out.vectorize(w, w_width, Halide::TailStrategy::GuardWithIf);
      out.parallel(c);
      text += ", dense output rows, parallel channels";
    }
  } else if (!v.empty()) {
    if (int w_width = width_for(shape.back())) out.vectorize(v[0], w_width, Halide::TailStrategy::GuardWithIf);
  }
  return text + schedule_channel_reductions(gen, shape.size() >= 2 ? shape[1] : 1, width);
}

// The output written channel-blocked (5-D, block innermost): one vector per block of channels,
// the rows of every channel block in parallel.
Func blocked_output(Func values, const std::string& format, const Generator& gen, int64_t channels,
                    std::string* description) {
  int block = channel_block(format);
  Var ci("ci"), w("w"), h("h"), cb("cb"), n("n");
  Func out("blocked_output");
  out(ci, w, h, cb, n) = values(w, h, cb * block + ci, n);
  std::vector<Var> v = out.args();  // (c % block, w, h, c / block, n)
  Var rows("block_rows");
  out.vectorize(v[0], block).fuse(v[2], v[3], rows).parallel(rows);
  std::string text = format + ", one vector per channel block, parallel rows";
  *description = text + schedule_channel_reductions(gen, channels, block);
  return out;
}

// A channel Concat written in blocks of channels: each piece is written by its own update over its
// channel blocks (whole-vector loads and stores, no select between pieces). The Func's dimensions
// are concat_output_dimensions' view, so the same definition writes nhwc or the blocked layout.
Func blocked_concat_output(const PrimGraph& g, const Kernel& k, Generator& gen, PrimId concat,
                           const std::string& format, int64_t channels, std::string* description) {
  int block = concat_piece_block(format);
  Var ci("ci"), w("w"), h("h"), cb("cb"), n("n");
  Func out("blocked_output");
  out(ci, w, h, cb, n) = Halide::undef(storage_type(g.tensor(k.output).dtype));
  int first_block = 0, piece = 0;
  for (TensorId t : g.prim(concat).inputs) {
    int blocks = static_cast<int>(g.tensor(t).shape[1] / block);
    RDom r(0, blocks, "piece" + std::to_string(piece));
    out(ci, w, h, r.x + first_block, n) = gen.value_at(t, {n, r.x * block + ci, h, w});
    // A piece of several blocks: its blocks in parallel (one parallel loop per piece; rows
    // in parallel per block cost a fork and join per block: +25% on 52x52 pieces).
    Halide::Stage update = out.update(piece);
    update.reorder(ci, w, h, r.x, n).vectorize(ci, block);
    if (blocks >= 2)
      update.parallel(r.x);
    else
      update.parallel(h);
    first_block += blocks;
    ++piece;
  }
  *description = format + ", channel concat: one update per piece, one vector per channel block, blocks in parallel" +
                 schedule_channel_reductions(gen, channels, block);
  return out;
}

}  // namespace halide_detail

int halide_schedule_variants(const PrimGraph& g, const Kernel& k) {
  int variants = 1;  // when the kernel cannot be built
  halide_detail::try_building(k, nullptr, [&] {
    halide_detail::Generator gen(g, k);
    gen.build();
    variants = static_cast<int>(halide_detail::variants_of(g, k, gen).size());
  });
  return variants;
}

}  // namespace korch::cpu
