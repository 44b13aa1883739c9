// The values the tensors of a graph take inside the model: the reference executor's run of the
// whole graph on seeded random graph inputs (random_graph_inputs), evaluated on demand, one
// primitive at a time, and kept within a byte budget (least recently used first out). The
// profiler verifies and times a kernel on these values: each primitive's reference output is
// computed once for every candidate kernel that reads or computes it (a kernel's own reference
// run computed its primitives again for each candidate, most of profiling's time on
// high-resolution models), and a kernel sees the values the model gives it (a variance is
// positive, a softmax denominator at least 1, a Gather index within its axis).
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "ir/prim_graph.h"

namespace korch {

class ModelValues {
 public:
  // `g` must outlive this object. `budget_bytes`: evaluated values kept at most (graph inputs
  // and constants are not counted).
  ModelValues(const PrimGraph& g, uint32_t seed, int64_t budget_bytes);

  // The value of tensor t (a constant's own value). Null when the reference cannot evaluate t
  // or something it depends on, and when t's value was dropped from the budget and getting it
  // back would evaluate more than kMaxReevaluated primitives again (the caller then uses
  // random inputs).
  std::shared_ptr<const TensorData> value(TensorId t);

  struct Stats {
    int evaluated = 0;    // primitives evaluated, first time
    int reevaluated = 0;  // primitives evaluated again after their value was dropped
    int refused = 0;      // value() calls answered null
  };
  const Stats& stats() const { return stats_; }
  int64_t kept_bytes() const { return kept_bytes_; }

  // Primitives a value() call evaluates again, at most (see value()).
  static constexpr int kMaxReevaluated = 16;
  // The default budget: an eighth of the machine's memory, at most 4 GiB.
  static int64_t default_budget_bytes();

 private:
  struct Kept {
    std::shared_ptr<const TensorData> value;
    std::list<TensorId>::iterator position;  // in recent_
  };
  void keep(TensorId t, std::shared_ptr<const TensorData> value);
  std::shared_ptr<const TensorData> known(TensorId t);

  const PrimGraph& g_;
  int64_t budget_bytes_;
  std::vector<std::shared_ptr<const TensorData>> graph_inputs_;  // by tensor id, null for other tensors
  std::unordered_map<TensorId, Kept> kept_;
  std::list<TensorId> recent_;  // kept_'s tensors, most recently used first
  int64_t kept_bytes_ = 0;
  std::vector<bool> evaluated_once_;  // by primitive
  Stats stats_;
};

}  // namespace korch
