// The process-wide cache of JIT-compiled Halide pipelines (compiled_pipeline): kernels whose
// pipelines are the same program share one compilation. A dense kernel made only of elementwise,
// broadcast, transpose and slice primitives, in any schedule variant but the streamed ones, builds
// a pipeline that names no tensor extent: its Funcs index by output coordinates only (a size-1
// axis reads index 0), its buffers' extents are symbolic, and its schedule's choices (vector
// width, tiles, the parallel axis, the variant list) depend only on which extents are 0 or 1 and
// on whether they reach 8, 16 or a vector. Such kernels key on their structure with every extent
// replaced by that class, so kernels that differ only in extents within the classes run the same
// compiled code (what the kernel would have compiled itself). Every other kernel keys on its
// structure with exact extents. Compilations run outside the lock; a request for a key being
// compiled waits for it. The most recently requested kMaxCachedPipelines pipelines are kept.
#include <chrono>
#include <future>
#include <list>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "backend/cpu/halide_internal.h"
#include "util/error.h"

namespace korch::cpu {

namespace halide_detail {

namespace {

// A primitive whose Func names no extent of any tensor (see the header comment).
bool extent_free(const Primitive& prim) {
  PrimKind kind = prim_kind(prim.op);
  return kind == PrimKind::Elementwise || kind == PrimKind::Broadcast || prim.op == PrimOp::Transpose ||
         prim.op == PrimOp::Slice;
}

// The class of an extent that decides a symbolic-extent kernel's schedule: which of 1, 2, 8, 16
// and the vector width it reaches.
std::string extent_class(int64_t e, int vector) {
  std::string c = "<";
  for (int64_t bound : {int64_t{1}, int64_t{2}, int64_t{8}, int64_t{16}, static_cast<int64_t>(vector)})
    c += e >= bound ? '+' : '-';
  return c + ">";
}

// A tensor's dtype and shape for the key: exact extents or their classes.
std::string tensor_key(const TensorInfo& t, bool symbolic, int vector) {
  std::string s = str_cat(dtype_name(t.dtype), "[");
  for (int64_t e : t.shape) s += symbolic ? extent_class(e, vector) : str_cat(e, ",");
  s += "]";
  // The constant values the lowering reads, all small_integer_constants: a single 1 (softplus
  // recognises Log(Add(Exp(x), 1))) and Pow's small integer exponents.
  if (std::optional<int> v = small_integer_constant(t)) s += str_cat("=", *v);
  return s;
}

// The kernel's primitives, wiring (by local index), attributes and tensors, with exact extents
// or (symbolic) their classes; inputs in k.inputs order (the pipeline's parameter order).
std::string structure_key(const PrimGraph& g, const Kernel& k, bool symbolic, int vector) {
  std::unordered_map<TensorId, int> local;
  std::string s;
  for (TensorId t : k.inputs) {
    local.emplace(t, -static_cast<int>(local.size()) - 1);
    s += tensor_key(g.tensor(t), symbolic, vector) + ";";
  }
  for (PrimId p : k.prims) {
    const Primitive& prim = g.prim(p);
    s += str_cat(prim_op_name(prim.op), "(");
    for (TensorId t : prim.inputs) {
      auto it = local.find(t);
      s += it == local.end() ? "?" : std::to_string(it->second);
      s += ",";
    }
    int id = static_cast<int>(local.size());
    local.emplace(prim.output, id);
    s += str_cat(")->", tensor_key(g.tensor(prim.output), symbolic, vector), "{", prim.attrs.str(), "};");
  }
  auto out = local.find(k.output);
  return s + str_cat("out=", out == local.end() ? 0 : out->second);
}

// Whether kernel k's pipeline (dense, in schedule variant k.schedule) names no extent.
bool builds_extent_free(const PrimGraph& g, const Kernel& k, const HalideLayouts& layouts) {
  if (layouts.any()) return false;  // activation layouts fix bounds and strides
  for (PrimId p : k.prims)
    if (!extent_free(g.prim(p))) return false;
  bool streamed = true;
  try_building(k, nullptr, [&] {
    Generator gen(g, k);
    gen.build();
    std::vector<Variant> variants = variants_of(g, k, gen);
    if (k.schedule < 0 || k.schedule >= static_cast<int>(variants.size())) return;
    Variant v = variants[k.schedule];
    streamed = v == Variant::StreamedPanels || v == Variant::StreamedRows;
  });
  return !streamed;
}

// The cache key of kernel k's pipeline for `layouts`; *symbolic: whether it holds extent classes.
std::string pipeline_key(const PrimGraph& g, const Kernel& k, const HalideLayouts& layouts, int vector,
                         bool* symbolic) {
  *symbolic = builds_extent_free(g, k, layouts);
  std::string key = structure_key(g, k, *symbolic, vector) + str_cat("|schedule=", k.schedule, "|vector=", vector);
  if (layouts.any()) {
    key += "|layout=" + layouts.summary();
  }
  return key;
}

// A compilation, done or under way, and what it gave.
struct Entry {
  std::shared_future<void> done;
  CompiledPipeline compiled;
  std::string error;                          // set when Halide failed to compile it
  std::string first_extents;                  // a symbolic key's first kernel, with exact extents
  std::list<std::string>::iterator position;  // in Cache::recent
};

// Compiled pipelines kept (each holds its JIT code, ~0.3-1 MB): the least recently requested
// beyond this are dropped (kernels still holding one keep it alive).
constexpr size_t kMaxCachedPipelines = 128;

struct Cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<Entry>> entries;
  std::list<std::string> recent;               // the entries' keys, most recently requested first
  std::unordered_set<std::string> structures;  // every key with extent classes (hit-rate bound)
  CodegenStats stats;
};

// Drops the least recently requested compiled entries beyond kMaxCachedPipelines (c.mutex held).
void evict(Cache& c) {
  while (c.entries.size() > kMaxCachedPipelines) {
    auto last = c.entries.find(c.recent.back());
    if (last->second->done.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    c.entries.erase(last);
    c.recent.pop_back();
  }
}

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: compiled code may run during static destruction
  return *c;
}

}  // namespace

bool compiled_pipeline(const PrimGraph& g, const Kernel& k, const Halide::Target& target, const HalideLayouts& layouts,
                       CompiledPipeline* result, std::string* description, std::string* why_not) {
  CompiledPipeline built;
  if (!build_halide_pipeline(g, k, target, &built.pipeline, &built.params, description, why_not, layouts)) return false;
  int vector = std::max(4, target.natural_vector_size(storage_type(g.tensor(k.output).dtype)));
  bool symbolic = false;
  // The target too: HL_JIT_TARGET may change within a process (strict_float for bit-exact checks).
  std::string key = pipeline_key(g, k, layouts, vector, &symbolic) + "|target=" + target.to_string();
  std::string exact = symbolic ? structure_key(g, k, false, vector) : "";  // to count sharing across extents
  // The structure with extent classes whether or not the kernel shares by it: how often kernels
  // repeat up to extents (what sharing could reach).
  std::string classes = structure_key(g, k, true, vector) + str_cat("|schedule=", k.schedule) +
                        (layouts.any() ? "|layout=" + layouts.format : "");
  Cache& c = cache();
  std::shared_ptr<Entry> entry;
  std::promise<void> promise;
  bool compile_here = false;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    ++c.stats.requested;
    if (!c.structures.insert(classes).second) ++c.stats.same_structure;
    auto [it, inserted] = c.entries.emplace(key, nullptr);
    if (inserted) {
      it->second = std::make_shared<Entry>();
      it->second->done = promise.get_future().share();
      it->second->compiled = built;
      it->second->compiled.running = std::make_shared<std::mutex>();
      it->second->first_extents = exact;
      c.recent.push_front(key);
      compile_here = true;
    } else {
      ++c.stats.reused;
      if (symbolic && it->second->first_extents != exact) ++c.stats.reused_other_extents;
      c.recent.splice(c.recent.begin(), c.recent, it->second->position);
    }
    entry = it->second;
    entry->position = c.recent.begin();
    evict(c);
  }
  if (compile_here) {
    auto start = std::chrono::steady_clock::now();
    try {
      compile_jit(&entry->compiled.pipeline, target);
    } catch (const Halide::Error& e) {
      entry->error = str_cat("Halide: ", e.what());
    } catch (const std::exception& e) {
      entry->error = str_cat("code generation failed: ", e.what());
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      ++c.stats.compiled;
      c.stats.compile_seconds += seconds;
    }
    promise.set_value();
  }
  entry->done.wait();
  if (!entry->error.empty()) {
    if (why_not) *why_not = entry->error;
    return false;
  }
  *result = entry->compiled;
  return true;
}

}  // namespace halide_detail

CodegenStats halide_codegen_stats() {
  halide_detail::Cache& c = halide_detail::cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.stats;
}

}  // namespace korch::cpu
