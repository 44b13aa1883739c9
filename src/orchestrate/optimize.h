// optimize(): the orchestration pipeline, from a primitive graph to the optimal plan and the
// baseline plans, all priced by the same cost model.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "cost/cost_model.h"
#include "orchestrate/blp.h"
#include "orchestrate/candidates.h"
#include "orchestrate/partition.h"
#include "plan/plan.h"

namespace korch {

// Where an optimisation stands, reported after the baselines and after each partition.
struct OptimizeProgress {
  int partitions_done = 0;
  int partitions = 0;
  // The best plan so far, predicted: the chosen kernels of the partitions done, the greedy plan's
  // kernels for the rest (never above the greedy plan's prediction).
  double best_plan_seconds = 0;
};

struct OptimizeOptions {
  PartitionOptions partition;
  CandidateOptions candidates;
  double solver_time_limit = 60;  // seconds per BLP solve
  // With lazy profiling, a round whose choice only tells what to measure next stops its solve
  // after this many seconds (the best selection found so far, never worse than the warm start);
  // the round that ends a partition is solved under solver_time_limit: when a short solve
  // chooses only measured kernels without proving it optimal, it is solved once more in full.
  double guide_solve_time_limit = 2;
  // ... and goes only through the root node (SolveDepth::RootOnly): on ConvNeXt-T's BLPs (every
  // 4th of 102) the roots took 2.0 s in all where proving optimality took 26 s, selections 0-4%
  // dearer; a round only needs a good selection to measure, and a lower bound for profiling_gap.
  bool guide_solves_root_only = true;
  // Lazy profiling stops once the cheapest selection of measured kernels seen costs at most this
  // fraction above the round's lower bound (the solver's bound, with unmeasured kernels priced at
  // their lower-bound estimates): that selection is then within the gap of the optimum, and the
  // partition's status says so. 0: stop only at an optimum made of measured kernels. On
  // ConvNeXt-T, rounds went on for 0.01-0.5% (5.2255 -> 5.2384 ms over 24 solves of one partition).
  double profiling_gap = 0.01;
  // Lazy profiling rounds per partition before the rest of its unmeasured candidates are
  // dropped (the partition's plan is then optimal over the kernels measured so far, and its
  // status says so). Bounds the optimisation time where each round brings in new kernels.
  int max_profiling_rounds = 40;
  // Lazy profiling of a partition also stops there (over the kernels measured so far) when
  // stall_rounds rounds in a row found no selection of measured kernels profiling_gap cheaper than
  // the cheapest before them: each round then measures a kernel whose estimate sat just below the
  // measured selections and moves the lower bound by tenths of a percent (SegFormer-B0's decode
  // head: 26.1 -> 27.1 ms over 23 rounds of one or two kernels each, 2-3 s a round). 0, or a
  // profiling_gap of 0: never.
  int stall_rounds = 8;
  // Per kernel a round measures, up to this many unmeasured rivals (candidates with the same
  // output) are measured with it, cheapest estimate first. Fewer rivals: more rounds, fewer
  // kernels measured. Since guide solves stop at 2 s a round costs less than a few
  // measurements: segformer_b0 tiny measured 840 kernels with 4 rivals, 722 with 1 and 648 with
  // none (53, 54 and 76 BLP solves); yolox_nano tiny 462 with 4, 351 with none (44, 66 solves).
  // One is kept against partitions that churn (each round is one of max_profiling_rounds).
  int rivals_per_round = 1;
  // Prices an unmeasured memory-bound kernel by the kernels measured with its set of primitive
  // ops (PricedCache::price). Off: by its class alone (linear or memory-bound).
  bool price_by_op_set = true;
  // The learned model (NeighbourRatioModel, cost/learned_cost.h): predicts what an unmeasured
  // kernel will measure from this many nearest measured kernels of its class; its error is
  // reported (OptimizeResult::price_errors). 0: no model.
  int learned_neighbours = 8;
  // The rivals measured with a newly measured kernel are the likeliest winners by the learned
  // model instead of the cheapest priced. Off by default: over twelve full-size models it measured
  // -6% to +8% kernels (within the run-to-run spread), on Swin-T (held aside) 913-1024 against
  // 855-877. The model never prices: as prices its predictions measured 2-15% fewer kernels but
  // left winners unmeasured (EfficientViT-B1's plan 23% slower).
  bool learned_rival_ranking = false;
  // Seconds from the start of optimize() after which no more kernels are measured (0: no
  // budget): partitions not finished then choose among the kernels measured so far (the baseline
  // plans' kernels always are, so no partition is priced above its greedy kernels), and their
  // status says so.
  double budget_seconds = 0;
  // When set, costs are measured lazily: solve with the cost model's (analytic lower-bound)
  // prices, measure the kernels the optimum uses, re-solve, until the optimum uses only
  // measured kernels; baseline plans are measured in full.
  KernelMeasurer* measurer = nullptr;
  // With analytic costs (no measurer): the target backend's structural check. Fused candidates it
  // rejects are left out, so that the plan's kernels are ones the backend generates rather than
  // reference fallbacks; single-primitive kernels always stay (every backend runs them, if need be
  // on the reference). Empty: every candidate is taken to be generated.
  std::function<bool(const PrimGraph&, const Kernel&)> supported;
  std::function<void(const OptimizeProgress&)> progress;  // optional
  // Optional: one line per BLP solve of a partition (lazy profiling's rounds: the solve's depth and
  // time, the selection's cost and lower bound, its kernels and how many of them were unmeasured).
  std::function<void(const std::string&)> log_round;
};

struct PartitionReport {
  int index = 0;
  int num_prims = 0;
  int num_candidates = 0;
  int same_as = -1;  // index of the identical partition whose solution was reused
  std::string status;
  double solver_seconds = 0;
  int solves = 0;  // BLP solves (lazy profiling's rounds)
  double cost = 0;
};

// How far the predictions for unmeasured kernels were from what measuring then found.
struct PriceErrors {
  int kernels = 0;                  // kernels predicted, then measured
  double learned_median_log2 = 0;   // median |log2(predicted / measured)|, the learned model
  double roofline_median_log2 = 0;  // ... of their prices (estimate x smallest measured ratio)
};

struct OptimizeResult {
  Plan korch, greedy, per_op, per_primitive;
  std::vector<PartitionReport> partitions;
  int num_candidates = 0;  // enumerated over unique partitions (after dedupe)
  int num_unique_partitions = 0;
  int num_priced = 0;    // distinct kernel structures priced
  int num_measured = 0;  // distinct kernel structures measured (lazy profiling)
  int num_dropped = 0;   // candidates the backend could not implement or verify
  PriceErrors price_errors;
  int solve_rounds = 0;          // BLP solves over all partitions
  int num_stored_solutions = 0;  // partitions that took an earlier run's solution (no solve)
  double solver_seconds = 0;
  double total_seconds = 0;
  bool all_optimal = true;
  bool budget_spent = false;  // the profiling budget ran out (OptimizeOptions::budget_seconds)
};

OptimizeResult optimize(const PrimGraph& g, CostModel& cost, const OptimizeOptions& options = {});

// The BLP of one partition over priced candidate kernels (local ids: primitives by position,
// tensors by their producer's position). link_savings (optional, parallel to candidates):
// each kernel's KernelMeasurer::link_savings (empty: none).
SelectionProblem selection_problem(const PrimGraph& g, const Partition& part, const std::vector<Kernel>& candidates,
                                   const std::vector<std::vector<double>>* link_savings = nullptr);

}  // namespace korch
