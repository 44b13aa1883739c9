// Plan race (see plan_race.h): interleaved end-to-end medians of the BLP's plan and the greedy
// plan, cached, and the greedy plan's kernels kept only when they win by more than the margin.
#include "runtime/plan_race.h"

#include <chrono>
#include <sstream>

#include "backend/timing.h"
#include "ir/printer.h"
#include "plan/random_inputs.h"
#include "runtime/executor.h"
#include "util/error.h"

namespace korch {

namespace {

constexpr int kWarmupRuns = 2;
constexpr int kMinRounds = 7;
constexpr int kMaxRounds = 25;
constexpr double kBudgetSeconds = 4.0;  // timed rounds stop after this much once kMinRounds ran

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

bool same_kernels(const Plan& a, const Plan& b) {
  if (a.kernels.size() != b.kernels.size()) return false;
  for (size_t i = 0; i < a.kernels.size(); ++i)
    if (a.kernels[i].prims != b.kernels[i].prims || a.kernels[i].schedule != b.kernels[i].schedule) return false;
  return true;
}

std::string ms(double seconds) {
  std::ostringstream s;
  s.precision(3);
  s << std::fixed << seconds * 1e3 << " ms";
  return s.str();
}

// Compiles both plans, warms them up and times them in interleaved rounds (which plan goes first
// alternates); fills the medians and the round count.
void time_both(const PrimGraph& g, const Plan& korch, const Plan& greedy, const std::shared_ptr<Backend>& backend,
               PlanRace& race) {
  std::vector<TensorData> inputs = random_graph_inputs(g, 7);
  Executor korch_run(backend, g, korch), greedy_run(backend, g, greedy);
  for (int i = 0; i < kWarmupRuns; ++i) {
    korch_run.run(inputs);
    greedy_run.run(inputs);
  }
  std::vector<double> korch_times, greedy_times;
  using Clock = std::chrono::steady_clock;
  auto timed = [&](Executor& e) {
    auto t0 = Clock::now();
    e.run(inputs);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  double spent = 0;
  while (race.rounds < kMinRounds || (spent < kBudgetSeconds && race.rounds < kMaxRounds)) {
    // Alternate which plan goes first, so neither always runs right after the other.
    if (race.rounds % 2 == 0) {
      korch_times.push_back(timed(korch_run));
      greedy_times.push_back(timed(greedy_run));
    } else {
      greedy_times.push_back(timed(greedy_run));
      korch_times.push_back(timed(korch_run));
    }
    spent += korch_times.back() + greedy_times.back();
    ++race.rounds;
  }
  race.korch_seconds = median_of(korch_times);
  race.greedy_seconds = median_of(greedy_times);
}

}  // namespace

uint64_t plan_hash(const PrimGraph& g, const Plan& plan) {
  uint64_t h = structural_hash(g);
  for (const Kernel& k : plan.kernels) {
    h = mix(h, k.prims.size());
    for (PrimId p : k.prims) h = mix(h, static_cast<uint64_t>(p));
    h = mix(h, static_cast<uint64_t>(k.schedule));
  }
  return h;
}

PlanRace race_against_greedy(const PrimGraph& g, Plan& korch, const Plan& greedy,
                             const std::shared_ptr<Backend>& backend, ProfileCache* cache, double margin) {
  PlanRace race;
  race.blp_predicted_seconds = korch.predicted_seconds();
  race.blp_kernels = static_cast<int>(korch.kernels.size());
  if (same_kernels(korch, greedy)) return race;
  race.raced = true;
  std::string target = backend->target(), versions = backend->versions();
  PlanKey korch_key{plan_hash(g, korch), backend->name(), target, versions};
  PlanKey greedy_key{plan_hash(g, greedy), backend->name(), target, versions};
  std::optional<PlanTiming> korch_cached, greedy_cached;
  if (cache) {
    korch_cached = cache->lookup_plan_time(korch_key);
    greedy_cached = cache->lookup_plan_time(greedy_key);
  }
  if (korch_cached && greedy_cached) {
    race.korch_seconds = korch_cached->median_seconds;
    race.greedy_seconds = greedy_cached->median_seconds;
  } else {
    try {
      time_both(g, korch, greedy, backend, race);
    } catch (const std::exception& e) {  // a plan that cannot run here: the BLP's plan stays
      race.raced = false;
      korch.note = str_cat("BLP plan kept without a race (", e.what(), ")");
      return race;
    }
    if (cache) {
      cache->store_plan_time(korch_key, PlanTiming{race.korch_seconds, race.rounds});
      cache->store_plan_time(greedy_key, PlanTiming{race.greedy_seconds, race.rounds});
    }
  }
  race.greedy_kept = race.greedy_seconds < race.korch_seconds * (1 - margin);
  std::string measured = str_cat("measured end to end: BLP plan ", ms(race.korch_seconds), ", greedy plan ",
                                 ms(race.greedy_seconds), race.rounds == 0 ? " (cached)" : "");
  if (race.greedy_kept) {
    korch.kernels = greedy.kernels;
    korch.link_savings_seconds = greedy.link_savings_seconds;
    korch.note = str_cat("greedy plan's kernels kept: ", measured);
  } else {
    korch.note = str_cat("BLP plan kept: ", measured);
  }
  return race;
}

}  // namespace korch
