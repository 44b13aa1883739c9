// Compile -> verify -> time, with the persistent cache in front.
#include "cost/profiler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <dnnl.hpp>
#include <fstream>
#include <random>
#include <thread>

#include "backend/cpu/compiled_kernel.h"
#include "backend/cpu/stream_store.h"
#include "check/test_case.h"
#include "orchestrate/plan.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch {

namespace {

std::string cpu_features() {
  std::string f = "x86-64";
  if (__builtin_cpu_supports("avx2")) f += " avx2";
  if (__builtin_cpu_supports("fma")) f += " fma";
  if (__builtin_cpu_supports("avx512f")) f += " avx512f";
  if (__builtin_cpu_supports("avx512bw")) f += " avx512bw";
  return f;
}

std::string kernel_summary(const PrimGraph& g, const Kernel& k) {
  std::string s;
  for (PrimId p : k.prims) s += std::string(s.empty() ? "" : " ") + prim_op_name(g.prim(p).op);
  return s + " -> " + dtype_name(g.tensor(k.output).dtype) + shape_str(g.tensor(k.output).shape);
}

// Bytes of a tensor in the dense layout.
double dense_bytes(const PrimGraph& g, TensorId t) {
  return static_cast<double>(num_elements(g.tensor(t).shape)) * dtype_size(g.tensor(t).dtype);
}

// (pointer, dense bytes) of a kernel's inputs: what CacheState::prepare reads back.
std::vector<std::pair<const void*, int64_t>> input_spans(const PrimGraph& g, const Kernel& k,
                                                         const std::vector<const void*>& inputs) {
  std::vector<std::pair<const void*, int64_t>> spans;
  for (size_t i = 0; i < inputs.size(); ++i)
    spans.emplace_back(inputs[i], static_cast<int64_t>(dense_bytes(g, k.inputs[i])));
  return spans;
}

// What layout linking saves on a kernel that converts activations between the dense layout and
// an internal one (oneDNN convolutions): the kernel is timed again with every such input
// arriving, and its output left, in the internal layout, and the difference to `dense_seconds`
// is split over those tensors by their dense bytes. Returns ProfileEntry::link_savings (empty
// when the kernel converts nothing). The kernel is left reading and writing internal layouts.
std::vector<double> measure_link_savings(const PrimGraph& g, const Kernel& k, cpu::CompiledKernel& compiled,
                                         const std::vector<const void*>& inputs, double dense_seconds,
                                         CacheState& cache_state) {
  std::vector<int> linked_inputs;
  for (size_t i = 0; i < k.inputs.size(); ++i)
    if (!g.tensor(k.inputs[i]).is_constant() && !compiled.input_layout(static_cast<int>(i)).empty())
      linked_inputs.push_back(static_cast<int>(i));
  bool linked_output = !compiled.output_layout().empty();
  if (linked_inputs.empty() && !linked_output) return {};
  // A Halide kernel reads and writes a layout through strides at about its dense speed: it saves
  // nothing itself, but its candidate tensors (0) let the oneDNN kernels around it link. Its
  // links are all-or-nothing at run time (link_layouts); the BLP takes them together
  // (SelectionProblem::Candidate::links_together).
  if (compiled.layout_by_strides()) {
    std::vector<double> savings(1 + k.inputs.size(), -1.0);
    if (linked_output) savings[0] = 0.0;
    for (int i : linked_inputs) savings[1 + i] = 0.0;
    return savings;
  }
  // Buffers in the internal layouts (padded blocked layouts may be larger than the dense ones),
  // filled with a harmless value: only the time matters.
  std::vector<std::vector<float>> buffers;
  std::vector<const void*> ptrs = inputs;
  std::vector<std::pair<const void*, int64_t>> touched = input_spans(g, k, inputs);
  buffers.reserve(linked_inputs.size() + 1);
  auto buffer = [&](int64_t bytes) {
    buffers.emplace_back(static_cast<size_t>((bytes + 3) / 4 + 16), 0.25f);
    return buffers.back().data();
  };
  for (int i : linked_inputs) {
    int64_t bytes = compiled.input_layout_bytes(i);
    compiled.keep_input_layout(i);
    ptrs[i] = buffer(bytes);
    touched[i] = {ptrs[i], bytes};
  }
  int64_t out_bytes = linked_output ? compiled.output_layout_bytes() : 0;
  if (linked_output) compiled.keep_output_layout();
  void* out = buffer(std::max<int64_t>(out_bytes, static_cast<int64_t>(dense_bytes(g, k.output))));
  double linked_seconds =
      median_run_seconds([&] { compiled.run(ptrs, out); }, 5, 0.02, [&] { cache_state.prepare(touched); });
  double saved = std::max(0.0, dense_seconds - linked_seconds);
  double total_bytes = linked_output ? dense_bytes(g, k.output) : 0.0;
  for (int i : linked_inputs) total_bytes += dense_bytes(g, k.inputs[i]);
  std::vector<double> savings(1 + k.inputs.size(), -1.0);
  double share = total_bytes > 0 ? saved / total_bytes : 0.0;
  if (linked_output) savings[0] = share * dense_bytes(g, k.output);
  for (int i : linked_inputs) savings[1 + i] = share * dense_bytes(g, k.inputs[i]);
  return savings;
}

double sum_of_savings(const std::vector<double>& savings) {
  double s = 0;
  for (double x : savings) s += std::max(x, 0.0);
  return s;
}

// Which schedule variant to keep: the measured time with half of the layout conversions saved,
// a middle between running among dense-layout neighbours (nothing saved) and among linked ones
// (everything saved); the BLP then prices both cases of the kept variant.
double variant_score(const ProfileEntry& e) { return e.median_seconds - 0.5 * sum_of_savings(e.link_savings); }

}  // namespace

std::vector<TensorData> random_graph_inputs(const PrimGraph& g, uint32_t seed) {
  Kernel whole_graph;
  whole_graph.inputs = g.inputs();
  return random_kernel_inputs(g, whole_graph, seed);
}

std::vector<TensorData> random_kernel_inputs(const PrimGraph& g, const Kernel& k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::vector<TensorData> values;
  for (TensorId t : k.inputs) {
    const TensorInfo& info = g.tensor(t);
    if (info.is_constant()) {
      values.push_back(*info.constant);
      continue;
    }
    TensorData v(info.dtype, info.shape);
    // Integer tensors used as Gather indices stay within the gathered axis.
    int64_t limit = 3;
    for (PrimId p : k.prims) {
      const Primitive& prim = g.prim(p);
      if (prim.op == PrimOp::Gather && prim.inputs[1] == t)
        limit = std::min<int64_t>(limit == 3 ? INT64_MAX : limit, g.tensor(prim.inputs[0]).shape[prim.attrs.i("axis")]);
    }
    for (int64_t i = 0; i < v.size(); ++i) {
      if (is_floating(info.dtype))
        v.set_f64(i, real(rng));
      else if (info.dtype == DType::Bool)
        v.set_i64(i, rng() & 1);
      else
        v.set_i64(i, static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(limit, 1))));
    }
    values.push_back(std::move(v));
  }
  return values;
}

double median_run_seconds(const std::function<void()>& run, int min_runs, double budget_seconds,
                          const std::function<void()>& prepare) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < 2; ++i) {  // warm-up (first-touch, JIT)
    if (prepare) prepare();
    run();
  }
  std::vector<double> times;
  auto start = Clock::now();
  while (static_cast<int>(times.size()) < min_runs ||
         (std::chrono::duration<double>(Clock::now() - start).count() < budget_seconds && times.size() < 200)) {
    if (prepare) prepare();
    auto t0 = Clock::now();
    run();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return median_of(std::move(times));
}

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

CacheState::CacheState() {
  int64_t bytes = 3 * cpu::last_level_cache_bytes() / 2;
  evict_.assign(static_cast<size_t>(bytes / 8), 1);
}

void CacheState::prepare(const std::vector<std::pair<const void*, int64_t>>& inputs) {
  uint64_t sum = 0;
  int64_t n = static_cast<int64_t>(evict_.size());
  uint64_t* e = evict_.data();
#pragma omp parallel for schedule(static) reduction(+ : sum)
  for (int64_t i = 0; i < n; i += 8) sum += e[i];  // one read per 64-byte line (clean: no write-back later)
  for (const auto& [data, bytes] : inputs) {
    const auto* p = static_cast<const unsigned char*>(data);
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (int64_t i = 0; i < bytes; i += 64) sum += p[i];
  }
  volatile uint64_t sink = sum;
  (void)sink;
}

namespace {

// How idle OpenMP threads wait, where the environment sets it: a sleeping thread costs a wake-up
// (~70 us on a VM) at every parallel region a kernel starts, so costs measured under
// OMP_WAIT_POLICY=PASSIVE are not the default's and must not share cache entries with them.
std::string omp_wait_settings() {
  std::string s;
  for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"})
    if (const char* value = std::getenv(name); value && *value) s += str_cat(" ", name, "=", value);
  return s;
}

}  // namespace

CpuProfiler::CpuProfiler(int threads, ProfileCache* cache, std::function<void(const std::string&)> log)
    : threads_(threads), cache_(cache), log_(std::move(log)) {
  // The streaming-store threshold decides which schedule variants a kernel has (cached results
  // name a variant by index).
  target_ = str_cat(cpu_features(), " threads=", threads_, omp_wait_settings(),
                    " stream-stores-from=", cpu::streaming_output_bytes());
}

std::string CpuProfiler::versions() {
  const dnnl_version_t* v = dnnl_version();
  return str_cat("halide14 onednn", v->major, ".", v->minor, ".", v->patch, " ", kCodegenVersion, " cold-cache");
}

// Compiles, verifies (against `want`, the reference output for `inputs`, computed on first
// need so that a kernel no backend compiles costs no reference run) and times one schedule
// variant of a kernel.
ProfileEntry CpuProfiler::profile_variant(const PrimGraph& g, const Kernel& k, const std::vector<const void*>& inputs,
                                          std::optional<TensorData>& want) {
  ProfileEntry entry;
  entry.schedule = k.schedule;
  std::string why;
  std::unique_ptr<cpu::CompiledKernel> compiled;
  try {
    compiled = cpu::compile_kernel(g, k, &why);
  } catch (const std::exception& e) {  // a backend failing on one candidate drops only that candidate
    why = str_cat("code generation failed: ", e.what());
  }
  if (!compiled) {
    entry.description = why;
    // The default schedule failing drops the kernel (another variant failing drops nothing).
    if (k.schedule == 0) log_dropped(g, k, why);
    return entry;
  }
  try {
    entry.implementable = true;
    entry.description = compiled->describe();
    const TensorInfo& out = g.tensor(k.output);
    if (!want) {
      want.emplace(out.dtype, out.shape);
      cpu::compile_reference_kernel(g, k)->run(inputs, want->raw());
    }
    TensorData got(out.dtype, out.shape);
    compiled->run(inputs, got.raw());
    Comparison c = compare_tensors(got, *want, Tolerance{1e-4, 1e-3});
    entry.verified = c.pass;
    if (!c.pass) {
      ++stats_.mismatches;
      entry.description = str_cat("mismatch vs reference (max abs ", c.max_abs_error, ", ", c.mismatches,
                                  " elements) in ", compiled->describe());
      log_dropped(g, k, entry.description);
    } else {
      TensorData scratch(out.dtype, out.shape);
      std::vector<std::pair<const void*, int64_t>> touched = input_spans(g, k, inputs);
      entry.median_seconds = median_run_seconds([&] { compiled->run(inputs, scratch.raw()); }, 5, 0.02,
                                                [&] { cache_state_.prepare(touched); });
      entry.samples = 1;
      entry.link_savings = measure_link_savings(g, k, *compiled, inputs, entry.median_seconds, cache_state_);
    }
  } catch (const std::exception& e) {
    entry.implementable = false;
    entry.verified = false;
    entry.description = str_cat("failed while verifying or timing: ", e.what(), " in ", compiled->describe());
    log_dropped(g, k, entry.description);
  }
  return entry;
}

std::optional<double> CpuProfiler::measure(const PrimGraph& g, const Kernel& k) {
  auto start = std::chrono::steady_clock::now();
  ProfileKey key = cache_key(k);
  if (cache_) {
    if (auto hit = cache_->lookup(key)) {
      ++stats_.cache_hits;
      remember(k, *hit);
      if (progress_) progress_(stats_);
      if (hit->implementable && hit->verified) return hit->median_seconds;
      return std::nullopt;
    }
  }
  cpu::set_num_threads(threads_);
  ProfileEntry best;
  try {
    // One set of random inputs and one reference output serve every schedule variant.
    std::vector<TensorData> inputs = random_kernel_inputs(g, k, static_cast<uint32_t>(k.hash));
    std::vector<const void*> ptrs;
    for (const TensorData& t : inputs) ptrs.push_back(t.raw());
    std::optional<TensorData> want;
    int variants = cpu::schedule_variants(g, k);
    for (int v = 0; v < variants; ++v) {
      Kernel variant = k;
      variant.schedule = v;
      ProfileEntry e = profile_variant(g, variant, ptrs, want);
      ++stats_.variants;
      bool ok = e.implementable && e.verified;
      if (v == 0) {
        best = e;
        if (!ok) break;  // the default schedule failed: the kernel is dropped
        // Halide's other schedules (fused parallel loops, register transposes) cost a JIT
        // compilation each (~0.2-0.5 s here) and change a kernel's time by a few microseconds
        // where its default schedule runs in under variants_from_seconds_: not tried there.
        if (k.num_linear == 0 && e.median_seconds < variants_from_seconds_) break;
      } else if (ok && variant_score(e) < variant_score(best)) {
        best = e;
      }
    }
  } catch (const std::exception& e) {  // e.g. the inputs cannot be generated
    best = ProfileEntry{};
    best.description = str_cat("profiling failed: ", e.what());
    log_dropped(g, k, best.description);
  }
  if (best.implementable && best.verified)
    ++stats_.measured;
  else
    ++stats_.dropped;
  remember(k, best);
  if (cache_) cache_->store(key, best);
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (progress_) progress_(stats_);
  if (best.implementable && best.verified) return best.median_seconds;
  return std::nullopt;
}

void CpuProfiler::log_dropped(const PrimGraph& g, const Kernel& k, const std::string& why) const {
  if (log_) log_(str_cat("dropped kernel [", kernel_summary(g, k), "]: ", why));
}

std::optional<KernelMeasurer::StoredSolution> CpuProfiler::stored_solution(uint64_t key) {
  if (!cache_) return std::nullopt;
  return cache_->lookup_solution(SolutionKey{key, "cpu", target_, versions()});
}

void CpuProfiler::store_solution(uint64_t key, const StoredSolution& solution) {
  if (!cache_ || solution.sets.empty()) return;
  cache_->store_solution(SolutionKey{key, "cpu", target_, versions()}, solution);
}

std::optional<double> CpuProfiler::cached(const PrimGraph& /*g*/, const Kernel& k) {
  if (!cache_) return std::nullopt;
  auto hit = cache_->lookup(cache_key(k));
  if (!hit || !hit->implementable || !hit->verified) return std::nullopt;
  ++stats_.cache_hits;
  remember(k, *hit);
  return hit->median_seconds;
}

void CpuProfiler::remember(const Kernel& k, const ProfileEntry& entry) {
  schedules_[k.hash] = entry.schedule;
  link_savings_[k.hash] = entry.link_savings;
}

std::vector<double> CpuProfiler::link_savings(const Kernel& k) const {
  auto it = link_savings_.find(k.hash);
  return it == link_savings_.end() ? std::vector<double>{} : it->second;
}

int CpuProfiler::schedule(const Kernel& k) const {
  auto it = schedules_.find(k.hash);
  return it == schedules_.end() ? 0 : it->second;
}

bool CpuProfiler::implementable(const PrimGraph& g, const Kernel& k) {
  ProfileKey key = cache_key(k);
  if (cache_)
    if (auto hit = cache_->lookup(key)) return hit->implementable && hit->verified;
  std::string why;
  return cpu::can_compile(g, k, &why);
}

double CpuProfiler::measure_fallback(const PrimGraph& g, const Kernel& k) {
  ProfileKey key{k.hash, "cpu-reference", target_, versions()};
  if (cache_)
    if (auto hit = cache_->lookup(key)) return hit->median_seconds;
  auto compiled = cpu::compile_reference_kernel(g, k);
  std::vector<TensorData> inputs = random_kernel_inputs(g, k, 7);
  std::vector<const void*> ptrs;
  for (const TensorData& t : inputs) ptrs.push_back(t.raw());
  const TensorInfo& out = g.tensor(k.output);
  TensorData scratch(out.dtype, out.shape);
  ProfileEntry entry;
  entry.implementable = entry.verified = true;
  entry.description = "reference fallback";
  entry.median_seconds = median_run_seconds([&] { compiled->run(ptrs, scratch.raw()); }, 3, 0.0);
  entry.samples = 1;
  if (cache_) cache_->store(key, entry);
  return entry.median_seconds;
}

}  // namespace korch
