// Plan race: the BLP's plan against the greedy plan, end to end on a backend's runtime.
//
// The BLP is optimal for the kernel costs it is given, but those are measured one kernel at a
// time (cold caches, inputs read back), and inside a plan a kernel runs among its neighbours:
// the two differ by tens of percent in either direction (ResNet-50: the greedy plan's kernels
// were predicted at 1.25x their in-plan time, korch's at 0.93x), enough to turn a predicted
// 1.3x win into a measured loss. race_against_greedy() runs both plans end to end, interleaved,
// and puts the greedy plan's kernels in place of the BLP's only when they are measured faster by
// more than `margin`.
//
// Guarantees: the korch plan that comes out is the BLP's or the greedy plan's kernels (its
// `note` says which and why); both plans ran on the same seeded random inputs with the same
// thread count, warm-up excluded; the medians are stored in the profile cache's plan medians
// (keyed by the graph and the plan's kernels and schedules, and the backend's name, target and
// versions), so an optimise with a warm cache compiles neither plan again.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"
#include "cost/profile_cache.h"
#include "plan/plan.h"

namespace korch {

struct PlanRace {
  double korch_seconds = 0;          // medians, end to end
  double greedy_seconds = 0;         //
  int rounds = 0;                    // interleaved timed rounds (0: both medians came from the cache)
  bool raced = false;                // false: the plans were the same kernels, nothing ran
  bool greedy_kept = false;          // the greedy plan's kernels replaced the BLP's
  double blp_predicted_seconds = 0;  // the BLP plan's predicted time, before any replacement
  int blp_kernels = 0;               // and its kernel count
};

PlanRace race_against_greedy(const PrimGraph& g, Plan& korch, const Plan& greedy,
                             const std::shared_ptr<Backend>& backend, ProfileCache* cache, double margin = 0.02);

// A hash of the plan's kernels (primitive sets and schedule variants) on graph g.
uint64_t plan_hash(const PrimGraph& g, const Plan& plan);

}  // namespace korch
