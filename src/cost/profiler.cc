// Compile -> verify -> time, with the persistent cache in front (see profiler.h); batches of
// kernels compiled ahead on all cores (prepare), timed one by one.
#include "cost/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "reference/compare.h"
#include "util/error.h"

namespace korch {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string kernel_summary(const PrimGraph& g, const Kernel& k) {
  std::string s;
  for (PrimId p : k.prims) s += std::string(s.empty() ? "" : " ") + prim_op_name(g.prim(p).op);
  return s + " -> " + dtype_name(g.tensor(k.output).dtype) + shape_str(g.tensor(k.output).shape);
}

double sum_of_savings(const std::vector<double>& savings) {
  double s = 0;
  for (double x : savings) s += std::max(x, 0.0);
  return s;
}

// Which schedule variant to keep: the measured time with its layout conversions saved, as it runs
// among linked neighbours. Halide kernels link per tensor in nhwc or the blocked format, concats
// included (layout_link.h), so a convolution's neighbours usually take its layout; a plain-layout
// variant that is faster only while its neighbours stay dense would keep them dense. The BLP then
// prices both cases (linked, dense) of the kept variant.
double variant_score(const ProfileEntry& e) { return e.median_seconds - sum_of_savings(e.link_savings); }

// The graph inputs ModelValues evaluates the model on (random_graph_inputs' seed).
constexpr uint32_t kModelValuesSeed = 0x6b6f7263;

// Whether a float tensor holds no NaN and no infinity (other types: always).
bool all_finite(const TensorData& t) {
  if (t.dtype() == DType::F32) {
    const float* v = t.data<float>();
    for (int64_t i = 0; i < t.size(); ++i)
      if (!std::isfinite(v[i])) return false;
  } else if (is_floating(t.dtype())) {
    for (int64_t i = 0; i < t.size(); ++i)
      if (!std::isfinite(t.get_f64(i))) return false;
  }
  return true;
}

}  // namespace

void run_on_threads(size_t count, int threads, const std::function<void(size_t)>& work) {
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto loop = [&] {
    try {
      for (size_t i = next++; i < count; i = next++) work(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
      next = count;
    }
  };
  std::vector<std::thread> pool;
  size_t n = std::min(count, static_cast<size_t>(std::max(threads, 1)));
  for (size_t t = 1; t < n; ++t) pool.emplace_back(loop);
  loop();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

int default_compile_threads() {
  if (const char* env = std::getenv("KORCH_COMPILE_THREADS")) {
    int n = std::atoi(env);
    if (n >= 1) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// One set of inputs serves every schedule variant of a kernel: the model's values of the kernel's
// inputs where `model` gives them all (finite), else random ones; host values (for the reference
// output: the model's value of the kernel's output, or computed on first need so that a kernel
// no backend compiles costs no reference run) and their copies in the backend's memory.
struct Profiler::KernelInputs {
  std::vector<std::shared_ptr<const TensorData>> host;
  std::vector<const void*> host_ptrs;
  std::vector<std::unique_ptr<BackendBuffer>> buffers;  // only where the backend has its own memory
  std::vector<const void*> ptrs;                        // what the kernel reads
  std::vector<std::pair<const void*, int64_t>> spans;   // (ptrs[i], bytes): what prepare_cache_state reads back
  std::shared_ptr<const TensorData> want;
  ModelValues* model = nullptr;  // set when host holds the model's values

  KernelInputs(Backend& backend, const PrimGraph& g, const Kernel& k, ModelValues* values) {
    if (values) {
      for (TensorId t : k.inputs) {
        std::shared_ptr<const TensorData> v = values->value(t);
        if (!v || !all_finite(*v)) break;
        host.push_back(std::move(v));
      }
      if (host.size() == k.inputs.size())
        model = values;
      else
        host.clear();
    }
    if (model)
      place(backend);
    else
      use_random_values(backend, g, k);
  }
  // Random inputs from here on (the kernel's own reference output with them).
  void use_random_values(Backend& backend, const PrimGraph& g, const Kernel& k) {
    model = nullptr;
    want.reset();
    host.clear();
    for (TensorData& t : random_kernel_inputs(g, k, static_cast<uint32_t>(k.hash)))
      host.push_back(std::make_shared<const TensorData>(std::move(t)));
    place(backend);
  }
  // host_ptrs, ptrs and spans for `host` (copies in the backend's memory where it has its own).
  void place(Backend& backend) {
    host_ptrs.clear();
    buffers.clear();
    ptrs.clear();
    spans.clear();
    for (const auto& t : host) {
      host_ptrs.push_back(t->raw());
      if (backend.host_memory()) {
        ptrs.push_back(t->raw());
      } else {
        buffers.push_back(backend.allocate(static_cast<int64_t>(t->byte_size())));
        backend.upload(buffers.back()->data(), t->raw(), static_cast<int64_t>(t->byte_size()));
        ptrs.push_back(buffers.back()->data());
      }
      spans.emplace_back(ptrs.back(), static_cast<int64_t>(t->byte_size()));
    }
  }
  const TensorData& reference_output(const PrimGraph& g, const Kernel& k) {
    if (!want && model) want = model->value(k.output);
    if (!want) {
      const TensorInfo& out = g.tensor(k.output);
      auto computed = std::make_shared<TensorData>(out.dtype, out.shape);
      make_reference_kernel(g, k)->run(host_ptrs, computed->raw());
      want = std::move(computed);
    }
    return *want;
  }
};

Profiler::Profiler(Backend& backend, ProfileCache* cache, std::function<void(const std::string&)> log)
    : backend_(backend),
      cache_(cache),
      log_(std::move(log)),
      target_(backend.target()),
      versions_(backend.versions()),
      compile_threads_(default_compile_threads()) {
  stats_.compile_threads = compile_threads_;
}

void Profiler::set_model_graph(const PrimGraph* g) {
  model_graph_ = g;
  model_values_.reset();
}

ModelValues* Profiler::model_values_for(const PrimGraph& g) {
  if (&g != model_graph_) return nullptr;
  if (!model_values_)
    model_values_ = std::make_unique<ModelValues>(g, kModelValuesSeed, ModelValues::default_budget_bytes());
  return model_values_.get();
}

void Profiler::prepare(const PrimGraph& g, const std::vector<Kernel>& kernels) {
  if (compile_threads_ < 2) return;
  std::vector<Kernel> todo;
  std::unordered_set<uint64_t> seen;
  for (const Kernel& k : kernels) {
    if (!seen.insert(k.hash).second || precompiled_.count(k.hash) || !backend_.compiles_concurrently(g, k)) continue;
    if (cache_ && cache_->lookup(cache_key(k))) continue;  // measure() takes the cached entry
    Kernel first = k;
    first.schedule = 0;
    todo.push_back(first);
  }
  if (todo.size() < 2) return;  // nothing to overlap
  auto start = Clock::now();
  std::vector<Precompiled> built(todo.size());
  run_on_threads(todo.size(), compile_threads_, [&](size_t i) {
    try {
      built[i].kernel = backend_.compile(g, todo[i], &built[i].why);
    } catch (const std::exception& e) {
      built[i].why = str_cat("code generation failed: ", e.what());
    }
  });
  for (size_t i = 0; i < todo.size(); ++i) precompiled_.emplace(todo[i].hash, std::move(built[i]));
  stats_.precompiled += static_cast<int>(todo.size());
  stats_.prepare_seconds += seconds_since(start);
}

// Compiles, verifies against the reference output and times one schedule variant of a kernel.
ProfileEntry Profiler::profile_variant(const PrimGraph& g, const Kernel& k, KernelInputs& inputs) {
  ProfileEntry entry;
  entry.schedule = k.schedule;
  std::string why;
  std::unique_ptr<CompiledKernel> compiled;
  auto ahead = k.schedule == 0 ? precompiled_.find(k.hash) : precompiled_.end();
  if (ahead != precompiled_.end()) {  // compiled by prepare()
    compiled = std::move(ahead->second.kernel);
    why = std::move(ahead->second.why);
    precompiled_.erase(ahead);
  } else {
    auto compile_start = Clock::now();
    try {
      compiled = backend_.compile(g, k, &why);
    } catch (const std::exception& e) {  // a backend failing on one candidate drops only that candidate
      why = str_cat("code generation failed: ", e.what());
    }
    stats_.compile_seconds += seconds_since(compile_start);
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
    auto verify_start = Clock::now();
    const TensorInfo& out = g.tensor(k.output);
    TensorData got(out.dtype, out.shape);
    std::unique_ptr<BackendBuffer> output = backend_.allocate(static_cast<int64_t>(got.byte_size()));
    auto run_and_compare = [&] {
      compiled->run(inputs.ptrs, output->data());
      backend_.synchronize();
      backend_.download(got.raw(), output->data(), static_cast<int64_t>(got.byte_size()));
      return compare_tensors(got, inputs.reference_output(g, k), Tolerance{1e-4, 1e-3});
    };
    Comparison c = run_and_compare();
    if (!c.pass && inputs.model) {
      // The model's values can be far larger than 1 (random weights, deep stacks), where float
      // rounding exceeds the absolute tolerance that random inputs in [-1, 1) are checked with:
      // such a kernel is checked as before, on random inputs of its own, and timed on them.
      inputs.use_random_values(backend_, g, k);
      ++stats_.model_value_retries;
      c = run_and_compare();
    }
    stats_.verify_seconds += seconds_since(verify_start);
    entry.verified = c.pass;
    if (!c.pass) {
      ++stats_.mismatches;
      entry.description = str_cat("mismatch vs reference (max abs ", c.max_abs_error, ", ", c.mismatches,
                                  " elements) in ", compiled->describe());
      log_dropped(g, k, entry.description);
    } else {
      std::vector<std::pair<const void*, int64_t>> touched = compiled->held_memory();
      touched.emplace_back(output->data(), output->bytes());
      entry.median_seconds =
          backend_.median_seconds([&] { compiled->run(inputs.ptrs, output->data()); },
                                  [&] { backend_.prepare_cache_state(inputs.spans, touched); }, &stats_.timing);
      entry.samples = 1;
      if (LayoutLinker* linker = backend_.layout_linker()) {
        int link_runs = stats_.link_timing.timed_runs;
        entry.link_savings =
            linker->measure_savings(g, k, *compiled, inputs.ptrs, entry.median_seconds, &stats_.link_timing);
        stats_.link_timed += stats_.link_timing.timed_runs > link_runs;
      }
    }
  } catch (const std::exception& e) {
    entry.implementable = false;
    entry.verified = false;
    entry.description = str_cat("failed while verifying or timing: ", e.what(), " in ", compiled->describe());
    log_dropped(g, k, entry.description);
  }
  return entry;
}

std::optional<double> Profiler::measure(const PrimGraph& g, const Kernel& k) {
  auto start = Clock::now();
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
  backend_.bind_calling_thread();
  ProfileEntry best;
  bool on_model_values = false;  // verified and timed on the model's values
  try {
    auto inputs_start = Clock::now();
    KernelInputs inputs(backend_, g, k, model_values_for(g));
    stats_.inputs_seconds += seconds_since(inputs_start);
    int variants = backend_.schedule_variants(g, k);
    for (int v = 0; v < variants; ++v) {
      Kernel variant = k;
      variant.schedule = v;
      ProfileEntry e = profile_variant(g, variant, inputs);
      ++stats_.variants;
      bool ok = e.implementable && e.verified;
      if (v == 0) {
        best = e;
        if (!ok) break;  // the default schedule failed: the kernel is dropped
        // Other schedules of a memory-bound kernel (fused parallel loops, register transposes)
        // cost a compilation each and change a kernel's time by a few microseconds where its
        // default schedule runs in under variants_from_seconds_: not tried there.
        if (k.num_linear == 0 && e.median_seconds < variants_from_seconds_) break;
      } else if (ok && variant_score(e) < variant_score(best)) {
        best = e;
      }
    }
    on_model_values = inputs.model != nullptr;
  } catch (const std::exception& e) {  // e.g. the inputs cannot be generated
    best = ProfileEntry{};
    best.description = str_cat("profiling failed: ", e.what());
    log_dropped(g, k, best.description);
  }
  if (on_model_values) ++stats_.model_value_kernels;
  if (best.implementable && best.verified)
    ++stats_.measured;
  else
    ++stats_.dropped;
  remember(k, best);
  if (model_values_) {
    stats_.model_values_evaluated = model_values_->stats().evaluated;
    stats_.model_values_reevaluated = model_values_->stats().reevaluated;
  }
  if (cache_) cache_->store(key, best);
  stats_.seconds += seconds_since(start);
  if (progress_) progress_(stats_);
  if (best.implementable && best.verified) return best.median_seconds;
  return std::nullopt;
}

void Profiler::log_dropped(const PrimGraph& g, const Kernel& k, const std::string& why) const {
  if (log_) log_(str_cat("dropped kernel [", kernel_summary(g, k), "]: ", why));
}

std::optional<KernelMeasurer::StoredSolution> Profiler::stored_solution(uint64_t key) {
  if (!cache_) return std::nullopt;
  return cache_->lookup_solution(SolutionKey{key, backend_.name(), target_, versions_});
}

void Profiler::store_solution(uint64_t key, const StoredSolution& solution) {
  if (!cache_ || solution.sets.empty()) return;
  cache_->store_solution(SolutionKey{key, backend_.name(), target_, versions_}, solution);
}

std::optional<double> Profiler::cached(const PrimGraph& /*g*/, const Kernel& k) {
  if (!cache_) return std::nullopt;
  auto hit = cache_->lookup(cache_key(k));
  if (!hit || !hit->implementable || !hit->verified) return std::nullopt;
  ++stats_.cache_hits;
  remember(k, *hit);
  return hit->median_seconds;
}

void Profiler::remember(const Kernel& k, const ProfileEntry& entry) {
  schedules_[k.hash] = entry.schedule;
  link_savings_[k.hash] = entry.link_savings;
}

std::vector<double> Profiler::link_savings(const Kernel& k) const {
  auto it = link_savings_.find(k.hash);
  return it == link_savings_.end() ? std::vector<double>{} : it->second;
}

int Profiler::schedule(const Kernel& k) const {
  auto it = schedules_.find(k.hash);
  return it == schedules_.end() ? 0 : it->second;
}

bool Profiler::implementable(const PrimGraph& g, const Kernel& k) {
  ProfileKey key = cache_key(k);
  if (cache_)
    if (auto hit = cache_->lookup(key)) return hit->implementable && hit->verified;
  std::string why;
  return backend_.supports(g, k, &why);
}

double Profiler::measure_fallback(const PrimGraph& g, const Kernel& k) {
  ProfileKey key{k.hash, backend_.name() + "-reference", target_, versions_};
  if (cache_)
    if (auto hit = cache_->lookup(key)) return hit->median_seconds;
  backend_.bind_calling_thread();
  auto compiled = backend_.compile_fallback(g, k);
  KernelInputs inputs(backend_, g, k, model_values_for(g));
  const TensorInfo& out = g.tensor(k.output);
  std::unique_ptr<BackendBuffer> output =
      backend_.allocate(num_elements(out.shape) * static_cast<int64_t>(dtype_size(out.dtype)));
  ProfileEntry entry;
  entry.implementable = entry.verified = true;
  entry.description = "reference fallback";
  entry.median_seconds = median_run_seconds(
      [&] {
        compiled->run(inputs.ptrs, output->data());
        backend_.synchronize();
      },
      3, 0.0);
  entry.samples = 1;
  if (cache_) cache_->store(key, entry);
  return entry.median_seconds;
}

}  // namespace korch
