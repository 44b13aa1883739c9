// partition_graph: single-live-tensor cuts, merge up to a bound, split oversize pieces.
#include "orchestrate/partition.h"

#include <algorithm>
#include <functional>
#include <tuple>

#include "ir/printer.h"

namespace korch {

namespace {

// live[i] = number of produced tensors alive across the boundary after primitive i.
std::vector<int> live_across(const PrimGraph& g) {
  int n = g.num_prims();
  std::vector<PrimId> last_use(g.num_tensors(), kNone);
  for (PrimId p = 0; p < n; ++p)
    for (TensorId t : g.prim(p).inputs) last_use[t] = std::max(last_use[t], p);
  for (TensorId t : g.outputs()) last_use[t] = n;  // outputs stay live to the end
  std::vector<int> delta(n + 1, 0);
  for (PrimId p = 0; p < n; ++p) {
    TensorId t = g.prim(p).output;
    if (last_use[t] > p) {
      delta[p] += 1;
      delta[std::min(last_use[t], n)] -= 1;
    }
  }
  std::vector<int> live(n, 0);
  int running = 0;
  for (PrimId p = 0; p < n; ++p) {
    running += delta[p];
    live[p] = running;
  }
  return live;
}

}  // namespace

std::vector<Partition> partition_graph(const PrimGraph& g, const PartitionOptions& options) {
  int n = g.num_prims();
  std::vector<Partition> parts;
  if (n == 0) return parts;
  std::vector<int> live = live_across(g);
  // Pieces between single-live-tensor cuts: [start, end).
  std::vector<std::pair<int, int>> pieces;
  int start = 0;
  auto is_protected = [&](int p) { return !options.protected_boundaries.empty() && options.protected_boundaries[p]; };
  for (int p = 0; p < n; ++p)
    if (p == n - 1 || (live[p] <= 1 && !is_protected(p))) {
      pieces.emplace_back(start, p + 1);
      start = p + 1;
    }
  // Split oversize pieces where the fewest tensors are live.
  std::vector<std::pair<int, int>> sized;
  std::function<void(int, int)> split = [&](int a, int b) {
    if (b - a <= options.max_prims) {
      sized.emplace_back(a, b);
      return;
    }
    // Cut before primitive `best`: fewest live tensors, unprotected first, near the middle.
    auto score = [&](int p) { return std::make_tuple(is_protected(p - 1), live[p - 1], std::abs(p - (a + b) / 2)); };
    int lo = std::max(a + 1, a + options.max_prims / 4), hi = std::min(b - 1, b - options.max_prims / 4);
    int best = a + (b - a) / 2;
    for (int p = lo; p <= hi; ++p)
      if (score(p) < score(best)) best = p;
    split(a, best);
    split(best, b);
  };
  for (auto [a, b] : pieces) split(a, b);
  // Merge consecutive pieces while they fit.
  std::vector<std::pair<int, int>> merged;
  for (auto piece : sized) {
    if (!merged.empty() && piece.second - merged.back().first <= options.max_prims)
      merged.back().second = piece.second;
    else
      merged.push_back(piece);
  }
  std::vector<int> part_of(n);
  for (size_t i = 0; i < merged.size(); ++i)
    for (int p = merged[i].first; p < merged[i].second; ++p) part_of[p] = static_cast<int>(i);
  auto consumers = g.consumers();
  std::vector<char> is_output(g.num_tensors(), 0);
  for (TensorId t : g.outputs()) is_output[t] = 1;
  for (size_t i = 0; i < merged.size(); ++i) {
    Partition part;
    for (int p = merged[i].first; p < merged[i].second; ++p) {
      part.prims.push_back(p);
      TensorId t = g.prim(p).output;
      bool used_later = is_output[t];
      for (PrimId c : consumers[t]) used_later = used_later || part_of[c] != static_cast<int>(i);
      if (used_later) part.required.push_back(t);
    }
    // Hash: structure plus which outputs are required (by position).
    uint64_t h = structural_hash(g, part.prims);
    for (TensorId t : part.required)
      h = h * 1099511628211ULL + static_cast<uint64_t>(g.tensor(t).producer - part.prims[0] + 1);
    part.hash = h;
    parts.push_back(std::move(part));
  }
  return parts;
}

}  // namespace korch
