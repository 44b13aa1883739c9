// Baseline groupings and their conversion to single-sink kernels.
#include "orchestrate/baselines.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>

namespace korch {

PrimGroups per_primitive_groups(const PrimGraph& g) {
  PrimGroups groups;
  for (PrimId p = 0; p < g.num_prims(); ++p) groups.push_back({p});
  return groups;
}

PrimGroups per_op_groups(const PrimGraph& g) {
  std::map<int32_t, std::vector<PrimId>> by_origin;
  PrimGroups groups;
  for (PrimId p = 0; p < g.num_prims(); ++p) {
    if (g.prim(p).origin == kNone)
      groups.push_back({p});
    else
      by_origin[g.prim(p).origin].push_back(p);
  }
  for (auto& [origin, prims] : by_origin) groups.push_back(prims);
  return groups;
}

PrimGroups greedy_groups(const PrimGraph& g) {
  int n = g.num_prims();
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  std::function<int(int)> find = [&](int x) { return parent[x] == x ? x : parent[x] = find(parent[x]); };
  std::vector<int> linear(n, 0), reduce(n, 0), injective_only(n, 1);
  auto consumers = g.consumers();
  std::vector<char> is_output(g.num_tensors(), 0);
  for (TensorId t : g.outputs()) is_output[t] = 1;
  for (PrimId p = 0; p < n; ++p) {
    PrimKind kind = prim_kind(g.prim(p).op);
    linear[p] = kind == PrimKind::Linear;
    reduce[p] = kind == PrimKind::Reduce || kind == PrimKind::Window;
    injective_only[p] = !linear[p] && !reduce[p];
    for (TensorId t : g.prim(p).inputs) {
      PrimId q = g.tensor(t).producer;
      if (q == kNone || is_output[t] || consumers[t].size() != 1) continue;
      int gp = find(p), gq = find(q);
      if (gp == gq) continue;
      bool fuse = false;
      if (kind == PrimKind::Elementwise || kind == PrimKind::Broadcast) {
        // Elementwise epilogue of anything (at most one reduction and one linear per group).
        fuse = linear[gp] + linear[gq] <= 1 && reduce[gp] + reduce[gq] <= 1;
      } else if (kind == PrimKind::Layout) {
        // Layout ops fuse with injective producers only (no epilogue of a linear/reduction).
        fuse = injective_only[gq] != 0;
      } else if (kind == PrimKind::Reduce) {
        // A reduction absorbs its injective producers.
        fuse = injective_only[gq] && reduce[gp] == 1 && linear[gp] == 0;
      }
      if (!fuse) continue;
      parent[gq] = gp;
      linear[gp] += linear[gq];
      reduce[gp] += reduce[gq];
      injective_only[gp] = injective_only[gp] && injective_only[gq];
    }
  }
  std::map<int, std::vector<PrimId>> groups;
  for (PrimId p = 0; p < n; ++p) groups[find(p)].push_back(p);
  PrimGroups result;
  for (auto& [root, prims] : groups) result.push_back(prims);
  return result;
}

std::vector<Kernel> kernels_from_groups(const PrimGraph& g, const PrimGroups& groups) {
  auto consumers = g.consumers();
  std::vector<char> is_output(g.num_tensors(), 0);
  for (TensorId t : g.outputs()) is_output[t] = 1;
  std::vector<int> group_of(g.num_prims(), -1);
  for (size_t i = 0; i < groups.size(); ++i)
    for (PrimId p : groups[i]) group_of[p] = static_cast<int>(i);
  std::vector<char> leaves(g.num_prims(), 0);
  for (size_t i = 0; i < groups.size(); ++i)
    for (PrimId p : groups[i]) {
      TensorId t = g.prim(p).output;
      leaves[p] = is_output[t];
      for (PrimId c : consumers[t]) leaves[p] = leaves[p] || group_of[c] != static_cast<int>(i);
    }
  std::vector<Kernel> kernels;
  for (size_t i = 0; i < groups.size(); ++i) {
    for (PrimId sink : groups[i]) {
      if (!leaves[sink]) continue;
      std::vector<PrimId> members = {sink}, stack = {sink};
      while (!stack.empty()) {
        PrimId p = stack.back();
        stack.pop_back();
        for (TensorId u : g.prim(p).inputs) {
          PrimId q = g.tensor(u).producer;
          // Other sinks of the group are read, not recomputed.
          if (q == kNone || group_of[q] != static_cast<int>(i) || leaves[q]) continue;
          if (std::find(members.begin(), members.end(), q) != members.end()) continue;
          members.push_back(q);
          stack.push_back(q);
        }
      }
      kernels.push_back(make_kernel(g, members));
    }
  }
  return kernels;
}

}  // namespace korch
