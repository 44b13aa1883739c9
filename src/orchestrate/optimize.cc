// The orchestration pipeline:
//   baselines (greedy, per-op, per-primitive) -> partition (never splitting a baseline kernel)
//   -> per unique partition: enumerate candidates + baseline kernels, price them, build the
//   BLP, solve it warm-started with greedy -> reuse solutions for identical partitions ->
//   assemble and validate every plan.
#include "orchestrate/optimize.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "cost/kernel_features.h"
#include "cost/learned_cost.h"
#include "orchestrate/baselines.h"
#include "orchestrate/blp.h"
#include "util/error.h"

namespace korch {

namespace {

using Clock = std::chrono::steady_clock;

// Prices kernels once per structural hash: with the cost model, or (when a measurer is
// given and the kernel was measured) with its measurement.
class PricedCache {
 public:
  PricedCache(const PrimGraph& g, CostModel& model, KernelMeasurer* measurer, bool price_by_op_set, int neighbours)
      : g_(g), model_(model), measurer_(measurer), learned_(neighbours), price_by_op_set_(price_by_op_set) {}
  void price(Kernel& k) {
    auto m = measured_.find(k.hash);
    if (m != measured_.end() && m->second) {
      k.cost = *m->second;
      k.schedule = schedules_[k.hash];
      return;
    }
    // Unmeasured: the model's estimate, scaled by the smallest measured/estimated ratio seen
    // so far for its class (linear or memory-bound), which keeps it a lower bound in practice
    // while making lazy profiling converge in few rounds. A memory-bound kernel whose set of
    // primitive ops has been measured takes that set's smallest ratio where it is higher: the
    // class minimum comes from the kernels the roofline prices best, and kinds it prices badly
    // (gathers: Resize; transposes) were otherwise chosen one by one, each found dearer, for tens
    // of rounds. Linear kernels keep the class minimum: their rate depends on the shape, not the
    // ops (priced by op set, YOLOX's Conv+bias+SiLU kernels were never measured again: 5% slower).
    k.cost = estimate(k) * price_ratio(k);
  }
  double estimate(const Kernel& k) {
    auto it = cache_.find(k.hash);
    if (it == cache_.end()) it = cache_.emplace(k.hash, model_.cost(g_, k)).first;
    return it->second;
  }
  // Structural check before any solve: false drops the candidate without compiling it.
  bool implementable(const Kernel& k) {
    auto it = implementable_.find(k.hash);
    if (it == implementable_.end()) it = implementable_.emplace(k.hash, measurer_->implementable(g_, k)).first;
    return it->second;
  }
  // Measured and built: a structure the measurer refused (another partition's candidate of the
  // same structure, measured before) is not, and has no price but its estimate.
  bool is_measured(const Kernel& k) const {
    auto it = measured_.find(k.hash);
    return it != measured_.end() && it->second.has_value();
  }
  bool is_refused(const Kernel& k) const {
    auto it = measured_.find(k.hash);
    return it != measured_.end() && !it->second.has_value();
  }
  // What measuring an unmeasured kernel is likely to find: by the learned model where it predicts
  // more than the price, otherwise the price. It may rank rivals; it never prices a candidate
  // (OptimizeOptions::learned_rival_ranking).
  double likely_seconds(const Kernel& k) { return learned_price(k); }
  // The measurer's link savings for a measured kernel (KernelMeasurer::link_savings); empty
  // for kernels not measured.
  std::vector<double> link_savings(const Kernel& k) const {
    auto it = link_savings_.find(k.hash);
    return it == link_savings_.end() ? std::vector<double>{} : it->second;
  }
  // Takes a measurement a previous run left in the profile cache (nothing is compiled), so
  // that a warm run starts from measured prices and needs few solves.
  void take_cached(Kernel& k) {
    if (!measurer_ || measured_.count(k.hash)) return;
    std::optional<double> m = measurer_->cached(g_, k);
    if (!m) return;
    record_measurement(k, m);
    price(k);
  }
  // Tells the measurer which of these kernels measure() will be asked for next (those not
  // measured yet), so that it can compile them ahead, on several cores.
  void prepare(const std::vector<Kernel>& kernels) {
    if (!measurer_) return;
    std::vector<Kernel> todo;
    for (const Kernel& k : kernels)
      if (!measured_.count(k.hash)) todo.push_back(k);
    if (!todo.empty()) measurer_->prepare(g_, todo);
  }
  // Measures (once per structure); single primitives no backend can generate fall back to
  // the reference kernel. Returns false when the kernel is dropped.
  bool measure(Kernel& k, bool allow_fallback) {
    requested_.insert(k.hash);
    estimate(k);  // every structure measured is also priced (num_priced counts it)
    auto it = measured_.find(k.hash);
    if (it == measured_.end()) {
      double learned = learned_price(k), roofline = estimate(k) * price_ratio(k);
      std::optional<double> m = measurer_->measure(g_, k);
      if (m) {
        learned_errors_.push_back(std::abs(std::log2(learned / *m)));
        roofline_errors_.push_back(std::abs(std::log2(roofline / *m)));
        record_measurement(k, m);
      } else {
        if (allow_fallback) m = measurer_->measure_fallback(g_, k);
        measured_.emplace(k.hash, m);
        schedules_[k.hash] = 0;
      }
      it = measured_.find(k.hash);
    }
    if (!it->second) return false;
    k.cost = *it->second;
    k.schedule = schedules_[k.hash];
    return true;
  }
  bool measuring() const { return measurer_ != nullptr; }
  // The profiling budget: no kernel is measured after `deadline` (none: never past it).
  void set_deadline(Clock::time_point deadline) { deadline_ = deadline; }
  bool past_budget() const { return deadline_ && Clock::now() >= *deadline_; }
  int size() const { return static_cast<int>(cache_.size()); }
  // Structures the lazy loop asked to measure (timed now or found in the profile cache);
  // cache entries taken up front but never chosen do not count.
  int num_measured() const { return static_cast<int>(requested_.size()); }
  // The kernels measured here (not taken from the cache), and the median |log2(x / measured)|
  // over them of x = the learned model's prediction (likely_seconds) and x = the price (estimate
  // x smallest measured ratio).
  PriceErrors price_errors() const {
    PriceErrors e;
    e.kernels = static_cast<int>(learned_errors_.size());
    e.learned_median_log2 = median(learned_errors_);
    e.roofline_median_log2 = median(roofline_errors_);
    return e;
  }
  int num_dropped() const {
    int n = 0;
    for (const auto& [h, m] : measured_) n += !m.has_value();
    return n;
  }

 private:
  const PrimGraph& g_;
  CostModel& model_;
  KernelMeasurer* measurer_;
  std::unordered_map<uint64_t, double> cache_;
  std::unordered_map<uint64_t, std::optional<double>> measured_;
  std::unordered_map<uint64_t, int> schedules_;  // the measured schedule variant
  std::unordered_map<uint64_t, std::vector<double>> link_savings_;
  std::unordered_set<uint64_t> requested_;

  NeighbourRatioModel learned_;
  std::unordered_map<uint64_t, std::vector<double>> features_;
  std::unordered_map<uint64_t, std::pair<int, double>> learned_ratio_;  // (model size, ratio)
  std::vector<double> learned_errors_, roofline_errors_;

  static double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  }
  const std::vector<double>& features(const Kernel& k) {
    auto it = features_.find(k.hash);
    if (it == features_.end()) it = features_.emplace(k.hash, kernel_features(g_, k, estimate(k))).first;
    return it->second;
  }
  // An unmeasured kernel's likely time: estimate x the larger of price_ratio and the learned
  // ratio (recomputed when the model has learned something since).
  double learned_price(const Kernel& k) {
    double ratio = price_ratio(k);
    if (learned_.size() == 0) return estimate(k) * ratio;
    auto it = learned_ratio_.find(k.hash);
    if (it == learned_ratio_.end() || it->second.first != learned_.size()) {
      std::optional<double> log2_ratio = learned_.predict(features(k), k.num_linear > 0);
      double predicted = log2_ratio ? std::exp2(*log2_ratio) : 0.0;
      it = learned_ratio_.insert_or_assign(k.hash, std::make_pair(learned_.size(), predicted)).first;
    }
    return estimate(k) * std::max(ratio, it->second.second);
  }

  // A generated kernel's measurement (and the variant it was measured with).
  void record_measurement(const Kernel& k, std::optional<double> m) {
    measured_.emplace(k.hash, m);
    schedules_[k.hash] = measurer_->schedule(k);
    link_savings_[k.hash] = measurer_->link_savings(k);
    double ratio = *m / std::max(estimate(k), 1e-12);
    learned_.add(features(k), std::log2(ratio), k.num_linear > 0);
    double& r = min_ratio_[k.num_linear > 0];
    r = r > 0 ? std::min(r, ratio) : ratio;
    if (k.num_linear == 0) {
      auto [it, inserted] = min_ratio_by_op_set_.emplace(op_set(k), ratio);
      if (!inserted) it->second = std::min(it->second, ratio);
    }
  }
  std::unordered_map<uint64_t, bool> implementable_;
  bool price_by_op_set_;
  double min_ratio_[2] = {0, 0};
  std::unordered_map<std::string, double> min_ratio_by_op_set_;  // memory-bound kernels
  std::unordered_map<uint64_t, std::string> op_sets_;

  // The sorted names of the primitive ops kernel k holds ("Add,Resize,Transpose,").
  const std::string& op_set(const Kernel& k) {
    auto it = op_sets_.find(k.hash);
    if (it != op_sets_.end()) return it->second;
    std::set<std::string> ops;
    for (PrimId p : k.prims) ops.insert(prim_op_name(g_.prim(p).op));
    std::string key;
    for (const std::string& op : ops) key += op + ",";
    return op_sets_.emplace(k.hash, key).first->second;
  }
  double price_ratio(const Kernel& k) {
    bool linear = k.num_linear > 0;
    double r = min_ratio_[linear] > 0 ? min_ratio_[linear] : 1.0;
    if (price_by_op_set_ && !linear) {
      auto it = min_ratio_by_op_set_.find(op_set(k));
      if (it != min_ratio_by_op_set_.end()) r = std::max(r, it->second);
    }
    return r;
  }
  std::optional<Clock::time_point> deadline_;
};

// A baseline plan. With a measurer its kernels are measured: in full for the greedy plan (the plan
// korch must never lose to), and for the others while the profiling budget lasts (then a
// kernel takes a measurement an earlier run cached, or the estimate).
Plan make_plan(const PrimGraph& g, std::string strategy, std::vector<Kernel> kernels, PricedCache& prices,
               const std::string& cost_name, bool measure_in_full) {
  Plan plan;
  plan.strategy = std::move(strategy);
  plan.cost_model = cost_name;
  if (prices.measuring() && measure_in_full) prices.prepare(kernels);
  for (Kernel& k : kernels) {
    // A fused baseline kernel the backend cannot generate is split into single-primitive kernels
    // (those run on the reference fallback only when no backend generates them either), as a
    // compiler would fall back to unfused code.
    if (prices.measuring() && (measure_in_full || !prices.past_budget())) {
      if (k.prims.size() > 1 && !prices.measure(k, false)) {
        for (PrimId p : k.prims) {
          Kernel single = make_kernel(g, {p});
          prices.measure(single, true);
          plan.kernels.push_back(std::move(single));
        }
        continue;
      }
      prices.measure(k, true);
    } else {
      prices.take_cached(k);
      prices.price(k);
    }
    plan.kernels.push_back(k);
  }
  sort_plan(g, plan);
  validate_plan_or_throw(g, plan);
  return plan;
}

// Boundaries (after primitive i) that would split a baseline kernel.
std::vector<char> protected_boundaries(const PrimGraph& g, const std::vector<const std::vector<Kernel>*>& sets) {
  std::vector<int> delta(g.num_prims() + 1, 0);
  for (const auto* kernels : sets)
    for (const Kernel& k : *kernels) {
      delta[k.prims.front()] += 1;
      delta[k.prims.back()] -= 1;
    }
  std::vector<char> result(g.num_prims(), 0);
  int running = 0;
  for (int p = 0; p < g.num_prims(); ++p) {
    running += delta[p];
    result[p] = running > 0;
  }
  return result;
}

// What layout linking saves in a whole plan (the plan's kernels as one selection over the
// graph, so links across partition boundaries count too).
double plan_link_savings(const PrimGraph& g, const Plan& plan, const PricedCache& prices) {
  Partition whole;
  for (PrimId p = 0; p < g.num_prims(); ++p) whole.prims.push_back(p);
  whole.required = g.outputs();
  std::vector<std::vector<double>> links;
  bool any = false;
  for (const Kernel& k : plan.kernels) {
    links.push_back(prices.link_savings(k));
    any = any || !links.back().empty();
  }
  if (!any) return 0;
  SelectionProblem problem = selection_problem(g, whole, plan.kernels, &links);
  std::vector<int> all(plan.kernels.size());
  double cost = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    all[i] = static_cast<int>(i);
    cost += plan.kernels[i].cost;
  }
  return cost - selection_cost(problem, all);
}

// Key of a partition's solution across runs: its structure and required outputs (Partition::hash),
// and the candidate bound that shaped the candidates.
uint64_t solution_key(const Partition& part, const OptimizeOptions& options) {
  constexpr uint64_t kFormat = 1;
  return (part.hash ^ (static_cast<uint64_t>(options.candidates.max_prims) << 32 | kFormat)) * 1099511628211ULL;
}

// The primitive sets of a solution an earlier run stored for this partition, when it still
// forms a valid selection here (offsets in range, every set one kernel, every required tensor
// and every kernel's in-partition input produced by a chosen kernel) and every kernel of it is
// still priced by a measurement (a profile cache hit, or measured now). nullopt otherwise: the
// partition is then solved.
std::optional<std::vector<std::vector<PrimId>>> stored_sets(const PrimGraph& g, const Partition& part,
                                                            const KernelMeasurer::StoredSolution& stored,
                                                            PricedCache& prices) {
  std::vector<std::vector<PrimId>> sets;
  std::set<TensorId> produced;
  std::vector<Kernel> kernels;
  for (const std::vector<int>& offsets : stored.sets) {
    std::vector<PrimId> prims;
    for (int o : offsets) {
      if (o < 0 || o >= static_cast<int>(part.prims.size())) return std::nullopt;
      prims.push_back(part.prims[o]);
    }
    std::sort(prims.begin(), prims.end());
    if (prims.empty() || std::adjacent_find(prims.begin(), prims.end()) != prims.end()) return std::nullopt;
    try {
      kernels.push_back(make_kernel(g, prims));
    } catch (const Error&) {
      return std::nullopt;
    }
    produced.insert(kernels.back().output);
    sets.push_back(std::move(prims));
  }
  PrimId first = part.prims.front(), last = part.prims.back();
  for (TensorId t : part.required)
    if (!produced.count(t)) return std::nullopt;
  for (const Kernel& k : kernels)
    for (TensorId t : k.inputs) {
      PrimId p = g.tensor(t).producer;
      if (p >= first && p <= last && !produced.count(t)) return std::nullopt;
    }
  prices.prepare(kernels);
  for (Kernel& k : kernels)
    if (!prices.measure(k, k.prims.size() == 1)) return std::nullopt;
  return sets;
}

}  // namespace

SelectionProblem selection_problem(const PrimGraph& g, const Partition& part, const std::vector<Kernel>& candidates,
                                   const std::vector<std::vector<double>>* link_savings) {
  SelectionProblem problem;
  PrimId base = part.prims.front();
  problem.num_prims = static_cast<int>(part.prims.size());
  problem.num_tensors = problem.num_prims;
  auto local = [&](TensorId t) -> int {
    PrimId p = g.tensor(t).producer;
    return (p == kNone || p < base || p >= base + problem.num_prims) ? -1 : p - base;
  };
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Kernel& k = candidates[i];
    SelectionProblem::Candidate c;
    c.cost = k.cost;
    c.output = local(k.output);
    KORCH_CHECK(c.output >= 0, "candidate output outside its partition");
    for (TensorId t : k.inputs)
      if (local(t) >= 0) c.needs.push_back(local(t));
    if (link_savings && !(*link_savings)[i].empty()) {
      const std::vector<double>& s = (*link_savings)[i];
      KORCH_CHECK(s.size() == k.inputs.size() + 1, "link savings of a candidate do not match its inputs");
      // Memory-bound kernels (the CPU backend's Halide kernels) link all their candidate tensors
      // or none; one whose candidate input comes from outside the partition is offered no links.
      bool together = k.num_linear == 0;
      bool outside = false;
      for (size_t j = 0; j < k.inputs.size(); ++j)
        if (s[1 + j] >= 0 && local(k.inputs[j]) < 0) outside = true;
      if (!(together && outside)) {
        c.links_together = together;
        c.output_link_saving = s[0];
        for (size_t j = 0; j < k.inputs.size(); ++j)
          if (s[1 + j] >= 0 && local(k.inputs[j]) >= 0) c.input_link_savings.emplace_back(local(k.inputs[j]), s[1 + j]);
      }
    }
    for (PrimId p : k.prims) c.covers.push_back(p - base);
    problem.candidates.push_back(std::move(c));
  }
  for (TensorId t : part.required) problem.required.push_back(local(t));
  return problem;
}

namespace {

// The baseline kernels of every partition (a kernel spanning partitions is left out).
// The baseline kernels of a partition, and the fused attention candidates inside it.
struct PartitionBaselines {
  std::vector<Kernel> greedy, per_op, per_primitive, attention;
};

std::vector<PartitionBaselines> baselines_by_partition(const PrimGraph& g, const std::vector<Partition>& parts,
                                                       const OptimizeResult& result,
                                                       const std::vector<Kernel>& attention) {
  std::vector<int> part_of(g.num_prims(), -1);
  for (size_t i = 0; i < parts.size(); ++i)
    for (PrimId p : parts[i].prims) part_of[p] = static_cast<int>(i);
  std::vector<PartitionBaselines> out(parts.size());
  auto split = [&](const std::vector<Kernel>& kernels, std::vector<Kernel> PartitionBaselines::*field) {
    for (const Kernel& k : kernels) {
      int pi = part_of[k.prims.front()];
      if (part_of[k.prims.back()] == pi) (out[pi].*field).push_back(k);
    }
  };
  split(result.greedy.kernels, &PartitionBaselines::greedy);
  split(result.per_op.kernels, &PartitionBaselines::per_op);
  split(result.per_primitive.kernels, &PartitionBaselines::per_primitive);
  split(attention, &PartitionBaselines::attention);
  return out;
}

// The greedy plan's predicted seconds for the partitions from a given one on (by where each greedy
// kernel starts), for progress reports: the best plan so far takes the greedy kernels there.
class GreedyRemainder {
 public:
  GreedyRemainder(const PrimGraph& g, const std::vector<Partition>& parts, const Plan& greedy)
      : from_(parts.size() + 1, 0.0) {
    std::vector<size_t> part_of(g.num_prims(), 0);
    for (size_t i = 0; i < parts.size(); ++i)
      for (PrimId p : parts[i].prims) part_of[p] = i;
    for (const Kernel& k : greedy.kernels) from_[part_of[k.prims.front()]] += k.cost;
    for (size_t i = parts.size(); i-- > 0;) from_[i] += from_[i + 1];
  }
  double seconds_after(size_t done) const { return from_[std::min(done, from_.size() - 1)]; }

 private:
  std::vector<double> from_;  // from_[i]: the greedy kernels starting in partitions i, i+1, ...
};

// The primitive sets chosen for an identical earlier partition, moved to this one's position.
std::vector<std::vector<PrimId>> moved_sets(const std::vector<std::vector<PrimId>>& sets, PrimId offset) {
  std::vector<std::vector<PrimId>> out;
  for (const auto& s : sets) {
    std::vector<PrimId> moved;
    for (PrimId p : s) moved.push_back(p + offset);
    out.push_back(std::move(moved));
  }
  return out;
}

// A partition's candidates: the enumerated kernels, then the baseline kernels and fused attention
// candidates not among them (so that the warm start is expressible and the optimum is never worse
// than a baseline), all priced. warm: the greedy kernels' indices.
std::vector<Kernel> partition_candidates(const PrimGraph& g, const Partition& part, const OptimizeOptions& options,
                                         const PartitionBaselines& baselines, PricedCache& prices,
                                         std::vector<int>* warm, int* num_enumerated) {
  std::vector<Kernel> cands = enumerate_candidates(g, part, options.candidates);
  *num_enumerated = static_cast<int>(cands.size());
  std::set<std::vector<PrimId>> have;
  for (const Kernel& k : cands) have.insert(k.prims);
  auto add = [&](const Kernel& k, bool is_warm) {
    if (have.insert(k.prims).second) cands.push_back(k);
    if (is_warm)
      for (size_t i = 0; i < cands.size(); ++i)
        if (cands[i].prims == k.prims) warm->push_back(static_cast<int>(i));
  };
  for (const Kernel& k : baselines.greedy) add(k, true);
  for (const Kernel& k : baselines.per_op) add(k, false);
  for (const Kernel& k : baselines.per_primitive) add(k, false);
  for (const Kernel& k : baselines.attention) add(k, false);
  for (Kernel& k : cands) prices.price(k);
  return cands;
}

// The candidates still in play, as one BLP, with the warm start: the cheaper of last round's
// choice and the greedy kernels. active_index maps the problem's candidates back to cands.
SelectionProblem active_problem(const PrimGraph& g, const Partition& part, std::vector<Kernel>& cands,
                                const std::vector<char>& dropped, const std::vector<int>& warm,
                                const std::vector<int>& previous, PricedCache& prices, std::vector<int>* active_index,
                                std::vector<int>* start) {
  std::vector<Kernel> active;
  std::vector<std::vector<double>> active_links;
  std::vector<int> active_warm, active_previous;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (dropped[i]) continue;
    prices.price(cands[i]);
    if (std::find(warm.begin(), warm.end(), static_cast<int>(i)) != warm.end())
      active_warm.push_back(static_cast<int>(active.size()));
    if (std::find(previous.begin(), previous.end(), static_cast<int>(i)) != previous.end())
      active_previous.push_back(static_cast<int>(active.size()));
    active_index->push_back(static_cast<int>(i));
    active.push_back(cands[i]);
    active_links.push_back(prices.link_savings(cands[i]));
  }
  SelectionProblem problem = selection_problem(g, part, active, &active_links);
  auto cost_of = [&](const std::vector<int>& ks) { return selection_cost(problem, ks); };
  *start = active_warm;
  if (!active_previous.empty() && selection_is_feasible(problem, active_previous) &&
      (!selection_is_feasible(problem, active_warm) || cost_of(active_previous) < cost_of(active_warm)))
    *start = active_previous;
  return problem;
}

// Measures the chosen kernels not measured yet and, per new output, the cheapest-looking few of
// its rivals (the kernels that would replace one found dearer than its estimate are mostly its
// rivals for the same output: fewer rounds, each of which is a BLP solve); a kernel that cannot
// be built or verified is dropped. Returns whether every chosen kernel was measured already.
bool measure_choice(const std::vector<int>& chosen, std::vector<Kernel>& cands, std::vector<char>& dropped,
                    PricedCache& prices, const OptimizeOptions& options) {
  bool all_measured = true;
  std::vector<TensorId> new_outputs;
  // The kernels measured below (the chosen ones not measured yet, then their outputs' rivals),
  // compiled ahead by the measurer where it can.
  auto rivals_of = [&](TensorId out) {
    std::vector<int> rivals;
    for (size_t i = 0; i < cands.size(); ++i)
      if (!dropped[i] && cands[i].output == out && !prices.is_measured(cands[i])) rivals.push_back(static_cast<int>(i));
    std::vector<double> likely(cands.size(), 0.0);
    for (int r : rivals) likely[r] = options.learned_rival_ranking ? prices.likely_seconds(cands[r]) : cands[r].cost;
    std::sort(rivals.begin(), rivals.end(), [&](int a, int b) { return likely[a] < likely[b]; });
    if (rivals.size() > static_cast<size_t>(options.rivals_per_round)) rivals.resize(options.rivals_per_round);
    return rivals;
  };
  std::vector<Kernel> ahead;
  std::unordered_set<int> chosen_set(chosen.begin(), chosen.end());
  for (int k : chosen)
    if (!prices.is_measured(cands[k])) ahead.push_back(cands[k]);
  for (int k : chosen)
    if (!prices.is_measured(cands[k]))
      for (int r : rivals_of(cands[k].output))
        if (!chosen_set.count(r)) ahead.push_back(cands[r]);
  prices.prepare(ahead);
  for (int k : chosen) {
    if (prices.is_measured(cands[k])) continue;
    all_measured = false;
    new_outputs.push_back(cands[k].output);
    if (!prices.measure(cands[k], cands[k].prims.size() == 1)) dropped[k] = 1;
  }
  for (TensorId out : new_outputs) {
    for (int k : rivals_of(out))
      if (!prices.measure(cands[k], cands[k].prims.size() == 1)) dropped[k] = 1;
  }
  for (size_t i = 0; i < cands.size(); ++i)  // candidates of a structure refused just now
    if (!dropped[i] && prices.is_refused(cands[i])) dropped[i] = 1;
  return all_measured;
}

struct PartitionChoice {
  SelectionResult selection;  // chosen: indices into the candidates
  bool capped = false;        // profiling stopped at max_profiling_rounds, a stall or the budget
  bool stalled = false;       // ... because measured selections stopped improving (options.stall_rounds)
  bool within_gap = false;    // profiling stopped within options.profiling_gap of the optimum
  bool budget_spent = false;  // ... at the budget
};

// Stops profiling a partition: its unmeasured candidates are dropped, so that the rounds left
// choose among measured kernels. At the budget, single primitives stay (measured only if chosen):
// the greedy kernels, measured in full, need not cover a partition on their own where one of
// them spans two partitions.
void stop_profiling(std::vector<Kernel>& cands, std::vector<char>& dropped, PricedCache& prices,
                    PartitionChoice& choice, bool budget) {
  choice.capped = true;
  choice.budget_spent = choice.budget_spent || budget;
  for (size_t i = 0; i < cands.size(); ++i)
    if (!prices.is_measured(cands[i]) && !(budget && cands[i].prims.size() == 1)) dropped[i] = 1;
}

// Whether ks (active indices) is a feasible selection of measured kernels only.
bool measured_selection(const SelectionProblem& problem, const std::vector<int>& ks,
                        const std::vector<int>& active_index, const std::vector<Kernel>& cands,
                        const PricedCache& prices) {
  return !ks.empty() && selection_is_feasible(problem, ks) &&
         std::all_of(ks.begin(), ks.end(), [&](int k) { return prices.is_measured(cands[active_index[k]]); });
}

// The cheapest selection made of measured kernels among the round's warm start and its solution
// (active indices; empty when neither is), with its cost.
std::vector<int> cheapest_measured(const SelectionProblem& problem, const std::vector<int>& start,
                                   const std::vector<int>& solution, const std::vector<int>& active_index,
                                   const std::vector<Kernel>& cands, const PricedCache& prices, double* cost) {
  std::vector<int> best;
  *cost = std::numeric_limits<double>::infinity();
  for (const std::vector<int>* ks : {&start, &solution}) {
    if (!measured_selection(problem, *ks, active_index, cands, prices)) continue;
    double c = selection_cost(problem, *ks);
    if (c < *cost) {
      best = *ks;
      *cost = c;
    }
  }
  return best;
}

// Solves a partition's BLP. Without a measurer, once. With one (lazy profiling): solve, measure
// what the optimum uses, drop what cannot be built, re-solve, until the optimum is made of
// measured kernels only, or a selection of measured kernels is within options.profiling_gap of
// the round's lower bound; rounds that only guide what to measure stop their solve early, and the
// last one is solved in full: once a selection of measured kernels is at hand, as the question
// whether any selection beats it by more than the gap (find_selection_below), whose answer is
// either that proof or a cheaper selection to measure.
PartitionChoice choose_kernels(const PrimGraph& g, const Partition& part, std::vector<Kernel>& cands,
                               const std::vector<int>& warm, PricedCache& prices, const OptimizeOptions& options,
                               OptimizeResult& result, PartitionReport& report) {
  std::vector<char> dropped(cands.size(), 0);
  if (prices.measuring())
    for (size_t i = 0; i < cands.size(); ++i)
      if ((cands[i].prims.size() > 1 && !prices.implementable(cands[i])) || prices.is_refused(cands[i])) dropped[i] = 1;
  if (!prices.measuring() && options.supported)
    for (size_t i = 0; i < cands.size(); ++i)
      if (cands[i].prims.size() > 1 && !options.supported(g, cands[i])) dropped[i] = 1;
  if (prices.measuring())
    for (size_t i = 0; i < cands.size(); ++i)
      if (!dropped[i]) prices.take_cached(cands[i]);
  PartitionChoice choice;
  SelectionResult& sel = choice.selection;
  if (prices.measuring() && prices.past_budget()) stop_profiling(cands, dropped, prices, choice, true);
  int profiling_rounds = 0;
  // The cheapest selection of measured kernels seen, after each profiling round.
  double best_measured = std::numeric_limits<double>::infinity();
  std::vector<double> best_measured_after;
  std::vector<int> previous;  // last round's choice (candidate indices)
  bool full_solve = !prices.measuring();
  while (true) {
    std::vector<int> active_index, start;
    SelectionProblem problem = active_problem(g, part, cands, dropped, warm, previous, prices, &active_index, &start);
    // A full solve under lazy profiling with a selection of measured kernels at hand (the start)
    // only asks whether some selection beats it by more than the profiling gap: the partition's
    // answer is only claimed within that gap anyway. Otherwise a full solve may stop within the
    // gap of its bound.
    bool closing = full_solve && prices.measuring() && !choice.capped && options.profiling_gap > 0 &&
                   measured_selection(problem, start, active_index, cands, prices);
    double start_cost = closing ? selection_cost(problem, start) : 0;
    closing = closing && start_cost > 0;
    if (closing)
      sel = find_selection_below(problem, start, start_cost / (1 + options.profiling_gap), options.solver_time_limit);
    else
      sel = full_solve ? solve_selection_blp(problem, start, options.solver_time_limit, SolveDepth::ToOptimality,
                                             prices.measuring() ? options.profiling_gap : 0)
                       : solve_selection_blp(
                             problem, start, std::min(options.solver_time_limit, options.guide_solve_time_limit),
                             options.guide_solves_root_only ? SolveDepth::RootOnly : SolveDepth::ToOptimality);
    ++result.solve_rounds;
    ++report.solves;
    if (options.log_round) {
      int unmeasured = 0;
      for (int k : sel.chosen) unmeasured += prices.measuring() && !prices.is_measured(cands[active_index[k]]);
      options.log_round(str_cat(
          "partition ", report.index, " (", part.prims.size(), " primitives) solve ", report.solves,
          closing      ? " closing"
          : full_solve ? " full"
                       : " guide",
          ": ", sel.seconds, " s, ", active_index.size(), " candidates, cost ", sel.cost * 1e3, " ms, lower bound ",
          sel.lower_bound * 1e3, " ms, ", sel.chosen.size(), " kernels (", unmeasured, " unmeasured), ", sel.status));
    }
    report.solver_seconds += sel.seconds;
    result.solver_seconds += sel.seconds;
    if (closing && sel.none_below) {
      sel.status =
          str_cat("optimal within ", options.profiling_gap * 100, "% (lazy profiling stopped: ", start_cost * 1e3,
                  " ms measured, no selection below ", sel.lower_bound * 1e3, " ms)");
      choice.within_gap = true;
    } else if (prices.measuring() && !choice.capped && options.profiling_gap > 0) {
      double best_cost = 0;
      std::vector<int> best = cheapest_measured(problem, start, sel.chosen, active_index, cands, prices, &best_cost);
      if (!best.empty()) best_measured = std::min(best_measured, best_cost);
      bool exact = best == sel.chosen && (full_solve || sel.proven_optimal);  // ends below as an optimum
      if (!best.empty() && !exact && best_cost <= sel.lower_bound + options.profiling_gap * std::abs(sel.lower_bound)) {
        sel.chosen = best;
        sel.cost = best_cost;
        sel.proven_optimal = false;
        sel.status =
            str_cat("optimal within ", options.profiling_gap * 100, "% (lazy profiling stopped: ", best_cost * 1e3,
                    " ms measured, ", sel.lower_bound * 1e3, " ms lower bound)");
        choice.within_gap = true;
      }
    }
    for (int& k : sel.chosen) k = active_index[k];
    previous = sel.chosen;
    if (!prices.measuring() || choice.within_gap) break;
    if (measure_choice(sel.chosen, cands, dropped, prices, options)) {
      // A closing solve found a cheaper selection of measured kernels: ask again below it.
      if (closing && !sel.proven_optimal && sel.cost < start_cost) continue;
      choice.within_gap = choice.within_gap || (full_solve && sel.within_gap);
      if (full_solve || sel.proven_optimal) break;
      full_solve = true;  // stopped early on measured kernels only: solve this round in full
      continue;
    }
    full_solve = false;
    if (choice.capped) continue;
    best_measured_after.push_back(best_measured);
    const size_t stall = options.profiling_gap > 0 ? static_cast<size_t>(std::max(options.stall_rounds, 0)) : 0;
    const size_t rounds = best_measured_after.size();
    if (prices.past_budget()) {
      stop_profiling(cands, dropped, prices, choice, true);
    } else if (++profiling_rounds >= options.max_profiling_rounds) {
      stop_profiling(cands, dropped, prices, choice, false);
    } else if (stall > 0 && rounds > stall && std::isfinite(best_measured_after[rounds - 1 - stall]) &&
               best_measured > best_measured_after[rounds - 1 - stall] * (1 - options.profiling_gap)) {
      stop_profiling(cands, dropped, prices, choice, false);
      choice.stalled = true;
    }
  }
  return choice;
}

// Enumerates, prices and solves one partition; stores the solution with the measurer.
std::vector<std::vector<PrimId>> solve_partition(const PrimGraph& g, const Partition& part,
                                                 const PartitionBaselines& baselines, PricedCache& prices,
                                                 const OptimizeOptions& options, OptimizeResult& result,
                                                 PartitionReport& report) {
  std::vector<int> warm;
  std::vector<Kernel> cands = partition_candidates(g, part, options, baselines, prices, &warm, &report.num_candidates);
  result.num_candidates += report.num_candidates;
  ++result.num_unique_partitions;
  PartitionChoice choice = choose_kernels(g, part, cands, warm, prices, options, result, report);
  const SelectionResult& sel = choice.selection;
  report.status = sel.status;
  if (choice.budget_spent)
    report.status =
        str_cat(sel.status, " over the measured kernels (profiling budget of ", options.budget_seconds, " s spent)");
  else if (choice.stalled)
    report.status = str_cat(sel.status, " over the measured kernels (profiling stalled: ", options.stall_rounds,
                            " rounds without a measured selection ", options.profiling_gap * 100, "% cheaper)");
  else if (choice.capped)
    report.status = str_cat(sel.status, " over the measured kernels (profiling capped after ",
                            options.max_profiling_rounds, " rounds)");
  result.budget_spent = result.budget_spent || choice.budget_spent;
  // Optimal over the measured kernels only is not proven optimal.
  result.all_optimal = result.all_optimal && (sel.proven_optimal || choice.within_gap) && !choice.capped;
  std::vector<std::vector<PrimId>> sets;
  for (int k : sel.chosen) sets.push_back(cands[k].prims);
  // A choice cut short by the budget is not stored: a later run with time to spare solves again.
  if (prices.measuring() && !choice.budget_spent) {
    KernelMeasurer::StoredSolution solution;
    solution.proven_optimal = (sel.proven_optimal || choice.within_gap) && !choice.capped;
    for (const auto& set : sets) {
      solution.sets.emplace_back();
      for (PrimId p : set) solution.sets.back().push_back(p - part.prims.front());
    }
    options.measurer->store_solution(solution_key(part, options), solution);
  }
  return sets;
}

// A warm run: the cold run's choice for this partition when it is still valid and still priced
// by measurements (stored_sets); nullopt otherwise.
std::optional<std::vector<std::vector<PrimId>>> take_stored_solution(const PrimGraph& g, const Partition& part,
                                                                     PricedCache& prices,
                                                                     const OptimizeOptions& options,
                                                                     OptimizeResult& result, PartitionReport& report) {
  if (!options.measurer) return std::nullopt;
  std::optional<KernelMeasurer::StoredSolution> stored = options.measurer->stored_solution(solution_key(part, options));
  if (!stored) return std::nullopt;
  std::optional<std::vector<std::vector<PrimId>>> sets = stored_sets(g, part, *stored, prices);
  if (!sets) return std::nullopt;
  ++result.num_unique_partitions;
  ++result.num_stored_solutions;
  report.status =
      stored->proven_optimal ? "optimal (stored solution)" : "stored solution (not proven optimal when it was solved)";
  result.all_optimal = result.all_optimal && stored->proven_optimal;
  return sets;
}

}  // namespace

OptimizeResult optimize(const PrimGraph& g, CostModel& cost, const OptimizeOptions& options) {
  auto start = Clock::now();
  OptimizeResult result;
  PricedCache prices(g, cost, options.measurer, options.price_by_op_set, options.learned_neighbours);
  if (options.budget_seconds > 0)
    prices.set_deadline(
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.budget_seconds)));
  std::string cost_name = options.measurer ? options.measurer->name() : cost.name();

  // 1. Baselines under the same prices.
  result.greedy = make_plan(g, "greedy", kernels_from_groups(g, greedy_groups(g)), prices, cost_name, true);
  result.per_op = make_plan(g, "per-op", kernels_from_groups(g, per_op_groups(g)), prices, cost_name, false);
  result.per_primitive =
      make_plan(g, "per-primitive", kernels_from_groups(g, per_primitive_groups(g)), prices, cost_name, false);

  // 2. Partitions that never split a baseline kernel or a fused attention candidate.
  std::vector<Kernel> attention;
  if (options.candidates.fused_attention) attention = attention_candidates(g);
  PartitionOptions popts = options.partition;
  popts.max_prims = std::min(popts.max_prims, kMaxPartitionPrims);
  popts.protected_boundaries = protected_boundaries(g, {&result.greedy.kernels, &result.per_op.kernels, &attention});
  std::vector<Partition> parts = partition_graph(g, popts);
  std::vector<PartitionBaselines> baselines = baselines_by_partition(g, parts, result, attention);

  // 3. Each partition: an identical one's solution, a stored one, or a solve.
  std::map<uint64_t, int> solved;                                           // partition hash -> partition index solved
  std::vector<std::vector<std::vector<PrimId>>> chosen_sets(parts.size());  // prim sets per partition
  Plan korch;
  korch.strategy = "korch";
  korch.cost_model = cost_name;
  GreedyRemainder greedy_left(g, parts, result.greedy);
  auto report_progress = [&](size_t done) {
    if (!options.progress) return;
    OptimizeProgress p;
    p.partitions_done = static_cast<int>(done);
    p.partitions = static_cast<int>(parts.size());
    for (const Kernel& k : korch.kernels) p.best_plan_seconds += k.cost;
    p.best_plan_seconds += greedy_left.seconds_after(done);
    options.progress(p);
  };
  report_progress(0);
  for (size_t pi = 0; pi < parts.size(); ++pi) {
    const Partition& part = parts[pi];
    PartitionReport report;
    report.index = static_cast<int>(pi);
    report.num_prims = static_cast<int>(part.prims.size());
    auto same = solved.find(part.hash);
    std::vector<std::vector<PrimId>> sets;
    if (same != solved.end() && parts[same->second].prims.size() == part.prims.size()) {
      report.same_as = same->second;
      sets = moved_sets(chosen_sets[same->second], part.prims.front() - parts[same->second].prims.front());
      report.status = "reused";
    } else if (auto stored = take_stored_solution(g, part, prices, options, result, report)) {
      sets = std::move(*stored);
      solved.emplace(part.hash, static_cast<int>(pi));
    } else {
      sets = solve_partition(g, part, baselines[pi], prices, options, result, report);
      solved.emplace(part.hash, static_cast<int>(pi));
    }
    for (const auto& s : sets) {
      Kernel k = make_kernel(g, s);
      prices.price(k);
      report.cost += k.cost;
      korch.kernels.push_back(std::move(k));
    }
    chosen_sets[pi] = std::move(sets);
    result.partitions.push_back(report);
    report_progress(pi + 1);
  }

  // 4. The korch plan, validated; every plan's layout-link savings and code generator.
  sort_plan(g, korch);
  validate_plan_or_throw(g, korch);
  result.korch = std::move(korch);
  for (Plan* plan : {&result.korch, &result.greedy, &result.per_op, &result.per_primitive}) {
    plan->link_savings_seconds = plan_link_savings(g, *plan, prices);
    plan->codegen = options.measurer ? options.measurer->codegen() : "";
  }
  result.num_priced = prices.size();
  result.num_measured = prices.num_measured();
  result.num_dropped = prices.num_dropped();
  result.price_errors = prices.price_errors();
  result.total_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace korch
