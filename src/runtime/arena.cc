// Liveness-based first-fit arena placement (see arena.h).
#include "runtime/arena.h"

#include <algorithm>

namespace korch {

namespace {
constexpr int64_t kAlign = 64;
int64_t align_up(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }
int64_t tensor_bytes(const TensorInfo& t) { return num_elements(t.shape) * static_cast<int64_t>(dtype_size(t.dtype)); }
}  // namespace

ArenaPlan plan_arena(const PrimGraph& g, const std::vector<Kernel>& kernels, const std::vector<int64_t>* bytes) {
  ArenaPlan a;
  a.offset.assign(g.num_tensors(), -1);
  int n = static_cast<int>(kernels.size());
  std::vector<int> first(g.num_tensors(), -1), last(g.num_tensors(), -1);
  for (int i = 0; i < n; ++i) {
    first[kernels[i].output] = i;
    last[kernels[i].output] = std::max(last[kernels[i].output], i);
    for (TensorId t : kernels[i].inputs) last[t] = std::max(last[t], i);
  }
  for (TensorId t : g.outputs())
    if (first[t] >= 0) last[t] = n;  // outputs live to the end
  struct Item {
    TensorId t;
    int64_t size;
  };
  std::vector<Item> items;
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (first[t] >= 0) {
      items.push_back({t, align_up(std::max<int64_t>(bytes ? bytes->at(t) : tensor_bytes(g.tensor(t)), 1))});
      a.total_bytes += items.back().size;
    }
  // Largest first, first fit among tensors whose lifetimes overlap.
  std::sort(items.begin(), items.end(),
            [](const Item& x, const Item& y) { return x.size > y.size || (x.size == y.size && x.t < y.t); });
  std::vector<Item> placed;
  for (const Item& it : items) {
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Item& p : placed)
      if (!(last[p.t] < first[it.t] || last[it.t] < first[p.t]))
        busy.emplace_back(a.offset[p.t], a.offset[p.t] + p.size);
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (auto [lo, hi] : busy) {
      if (off + it.size <= lo) break;
      off = std::max(off, hi);
    }
    a.offset[it.t] = off;
    a.arena_bytes = std::max(a.arena_bytes, off + it.size);
    placed.push_back(it);
  }
  return a;
}

}  // namespace korch
