// The CPU profiler: compiles a candidate kernel with the CPU backend, checks it against the
// reference executor on random inputs (a mismatch drops the candidate and is logged with its
// structure), then times it (warm-up, then the median of repeated runs at the model's thread
// count). Results, refusals included, persist in the profile cache keyed by structural hash,
// backend, target (CPU features + threads) and library versions.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cost/cost_model.h"
#include "cost/profile_cache.h"

namespace korch {

struct ProfilerStats {
  int measured = 0;  // compiled, verified and timed in this run
  int cache_hits = 0;
  int dropped = 0;  // backend refused or result mismatched
  int mismatches = 0;
  int variants = 0;    // schedule variants compiled, verified and timed (a kernel's default one included)
  double seconds = 0;  // time spent compiling, verifying and timing
};

// Puts the caches in the state a kernel finds inside a model run: everything evicted (the rest
// of the model's weights and activations went through since the kernel last ran), then the
// kernel's inputs read back (their producer just wrote them), on every thread. Profiling a
// kernel over and over with its weights and inputs hot in L2 underprices weight-heavy kernels
// (a 2048x1000 MatMul: 0.05 ms alone, 0.4 ms in ResNet-50) and every extra kernel boundary.
class CacheState {
 public:
  CacheState();
  // Evicts the caches, then reads `inputs` (pointer, bytes).
  void prepare(const std::vector<std::pair<const void*, int64_t>>& inputs);

 private:
  std::vector<uint64_t> evict_;  // 1.5 times the last-level cache
};

class CpuProfiler : public KernelMeasurer {
 public:
  // `cache` may be null (no persistence). `log` receives one line per dropped kernel and
  // progress updates (may be empty).
  CpuProfiler(int threads, ProfileCache* cache, std::function<void(const std::string&)> log = {});
  std::optional<double> measure(const PrimGraph& g, const Kernel& kernel) override;
  double measure_fallback(const PrimGraph& g, const Kernel& kernel) override;
  bool implementable(const PrimGraph& g, const Kernel& kernel) override;
  std::string name() const override { return "measured-cpu"; }
  int schedule(const Kernel& kernel) const override;
  std::optional<double> cached(const PrimGraph& g, const Kernel& kernel) override;
  std::vector<double> link_savings(const Kernel& kernel) const override;
  std::optional<StoredSolution> stored_solution(uint64_t key) override;
  void store_solution(uint64_t key, const StoredSolution& solution) override;
  const ProfilerStats& stats() const { return stats_; }
  // Called after every measure() with the running totals (e.g. a progress line).
  void set_progress(std::function<void(const ProfilerStats&)> progress) { progress_ = std::move(progress); }
  // A memory-bound kernel's other schedule variants are compiled and timed only when its default
  // schedule takes at least this long (20 us: below it they change a few microseconds, for a JIT
  // compilation of 0.2-0.5 s each). 0: always.
  void set_variants_from_seconds(double seconds) { variants_from_seconds_ = seconds; }
  // Target and version strings that key the cache.
  std::string target() const { return target_; }
  int threads() const { return threads_; }
  static std::string versions();

 private:
  int threads_;
  ProfileCache* cache_;
  std::function<void(const std::string&)> log_;
  std::function<void(const ProfilerStats&)> progress_;
  std::string target_;
  ProfilerStats stats_;
  double variants_from_seconds_ = 20e-6;
  CacheState cache_state_;
  std::unordered_map<uint64_t, int> schedules_;                     // structural hash -> fastest schedule variant
  std::unordered_map<uint64_t, std::vector<double>> link_savings_;  // structural hash -> its ProfileEntry's

  ProfileEntry profile_variant(const PrimGraph& g, const Kernel& k, const std::vector<const void*>& inputs,
                               std::optional<TensorData>& want);
  // Keeps what schedule() and link_savings() report for the kernel's structure.
  void remember(const Kernel& k, const ProfileEntry& entry);
  // One log line for a dropped kernel: its primitives and output, and why.
  void log_dropped(const PrimGraph& g, const Kernel& k, const std::string& why) const;
  ProfileKey cache_key(const Kernel& k) const { return ProfileKey{k.hash, "cpu", target_, versions()}; }
};

// Random inputs for a kernel (constants keep their values; indices stay in range).
std::vector<TensorData> random_kernel_inputs(const PrimGraph& g, const Kernel& k, uint32_t seed);
// Random values for the graph's inputs, in g.inputs() order (the same rules as a kernel's).
std::vector<TensorData> random_graph_inputs(const PrimGraph& g, uint32_t seed);
// The median of `values` (the upper one of an even count); values must not be empty.
double median_of(std::vector<double> values);
// Median seconds of `run` (warm-up, then at least `min_runs` and ~`budget_seconds` of wall
// time). `prepare` (optional) runs untimed before every run.
double median_run_seconds(const std::function<void()>& run, int min_runs = 5, double budget_seconds = 0.02,
                          const std::function<void()>& prepare = {});

}  // namespace korch
