// The profiler: compiles a candidate kernel with a backend, checks it against the reference
// executor on random inputs (a mismatch drops the candidate and is logged with its structure),
// then times it (warm-up, then the median of repeated runs, caches prepared as inside a model
// run by the backend). Every schedule variant the backend offers is measured and the fastest
// kept. Results, refusals included, persist in the profile cache keyed by structural hash and the
// backend's own name, target and versions, so that no two backends or machines share a row.
// The kernels the orchestrator is about to measure are compiled ahead on all cores (prepare(),
// where the backend allows it), never while anything is timed; timing stays one kernel at a time.
#pragma once
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/timing.h"
#include "cost/cost_model.h"
#include "cost/model_values.h"
#include "cost/profile_cache.h"
#include "plan/random_inputs.h"

namespace korch {

// Threads that compile kernels concurrently: $KORCH_COMPILE_THREADS, else the machine's cores.
int default_compile_threads();
// Calls work(0) .. work(count - 1), each once, on up to `threads` threads (the calling one among
// them); the first exception a call throws is rethrown after all threads have stopped.
void run_on_threads(size_t count, int threads, const std::function<void(size_t)>& work);

struct ProfilerStats {
  int measured = 0;  // compiled, verified and timed in this run
  int cache_hits = 0;
  int dropped = 0;  // backend refused or result mismatched
  int mismatches = 0;
  int variants = 0;            // schedule variants compiled, verified and timed (a kernel's default one included)
  int precompiled = 0;         // default schedules compiled ahead by prepare(), on compile_threads threads
  double prepare_seconds = 0;  // wall time of prepare() (not in `seconds`)
  int compile_threads = 1;
  double seconds = 0;  // time spent compiling, verifying and timing
  // Where `seconds` went: random inputs, compilations not done ahead, verification (reference
  // output, one run, comparison), the timed medians and the layout-link savings timings.
  double inputs_seconds = 0;
  double compile_seconds = 0;
  double verify_seconds = 0;
  // Kernels verified and timed on the model's values (set_model_graph), and how many primitives
  // the reference evaluated for them (once, and again after their values were dropped).
  int model_value_kernels = 0;
  int model_values_evaluated = 0;
  int model_values_reevaluated = 0;
  int model_value_retries = 0;  // kernels that failed on the model's values and were checked on random ones
  TimingStats timing;
  TimingStats link_timing;
  int link_timed = 0;  // schedule variants whose link savings were timed
};

class Profiler : public KernelMeasurer {
 public:
  // `cache` may be null (no persistence). `log` receives one line per dropped kernel (may be
  // empty). The backend must outlive the profiler.
  Profiler(Backend& backend, ProfileCache* cache, std::function<void(const std::string&)> log = {});
  std::optional<double> measure(const PrimGraph& g, const Kernel& kernel) override;
  double measure_fallback(const PrimGraph& g, const Kernel& kernel) override;
  bool implementable(const PrimGraph& g, const Kernel& kernel) override;
  std::string name() const override { return "measured-" + backend_.name(); }
  std::string codegen() const override { return backend_.codegen(); }
  int schedule(const Kernel& kernel) const override;
  std::optional<double> cached(const PrimGraph& g, const Kernel& kernel) override;
  // Compiles the default schedule of the kernels that are neither in the profile cache nor
  // compiled yet and that the backend compiles concurrently, on compile_threads() threads, and
  // keeps them for measure(). Nothing is run or timed here.
  void prepare(const PrimGraph& g, const std::vector<Kernel>& kernels) override;
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
  Backend& backend() const { return backend_; }
  // Threads prepare() compiles on (default: $KORCH_COMPILE_THREADS, else the machine's cores);
  // 1 compiles every kernel when measure() needs it.
  void set_compile_threads(int threads) { stats_.compile_threads = compile_threads_ = std::max(1, threads); }
  int compile_threads() const { return compile_threads_; }
  // Kernels of graph `g` (which must outlive this profiler or a later call; null: none) are
  // verified and timed on the values the model's tensors take (cost/model_values.h) rather than
  // on random inputs of their own; kernels of other graphs, or whose values the reference cannot
  // give or hold a NaN or an infinity, keep random inputs.
  void set_model_graph(const PrimGraph* g);

 private:
  Backend& backend_;
  ProfileCache* cache_;
  std::function<void(const std::string&)> log_;
  std::function<void(const ProfilerStats&)> progress_;
  std::string target_, versions_;  // the backend's, read once
  ProfilerStats stats_;
  double variants_from_seconds_ = 20e-6;
  std::unordered_map<uint64_t, int> schedules_;                     // structural hash -> fastest schedule variant
  std::unordered_map<uint64_t, std::vector<double>> link_savings_;  // structural hash -> its ProfileEntry's
  int compile_threads_;
  // Default schedules compiled by prepare(), by structural hash, until measure() takes them.
  struct Precompiled {
    std::unique_ptr<CompiledKernel> kernel;  // null: compile() refused (why) or threw (why)
    std::string why;
  };
  std::unordered_map<uint64_t, Precompiled> precompiled_;
  const PrimGraph* model_graph_ = nullptr;
  std::unique_ptr<ModelValues> model_values_;  // of *model_graph_, made on first use
  ModelValues* model_values_for(const PrimGraph& g);

  // The kernel's inputs in the backend's memory (host buffers are used as they are).
  struct KernelInputs;
  ProfileEntry profile_variant(const PrimGraph& g, const Kernel& k, KernelInputs& inputs);
  // Keeps what schedule() and link_savings() report for the kernel's structure.
  void remember(const Kernel& k, const ProfileEntry& entry);
  // One log line for a dropped kernel: its primitives and output, and why.
  void log_dropped(const PrimGraph& g, const Kernel& k, const std::string& why) const;
  ProfileKey cache_key(const Kernel& k) const { return ProfileKey{k.hash, backend_.name(), target_, versions_}; }
};

}  // namespace korch
