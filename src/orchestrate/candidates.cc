// enumerate_candidates: upward growth from every sink, bitset convexity check;
// attention_candidates: the attention patterns, one kernel each.
#include "orchestrate/candidates.h"

#include <algorithm>
#include <bitset>
#include <unordered_set>

#include "plan/attention_pattern.h"
#include "util/error.h"

namespace korch {

std::vector<Kernel> enumerate_candidates(const PrimGraph& g, const Partition& part, const CandidateOptions& options) {
  using Bits = std::bitset<kMaxPartitionPrims>;
  int n = static_cast<int>(part.prims.size());
  if (n > kMaxPartitionPrims) fail("partition of ", n, " primitives exceeds the limit of ", kMaxPartitionPrims);
  PrimId base = part.prims.front();
  auto local = [&](TensorId t) -> int {
    PrimId p = g.tensor(t).producer;
    if (p == kNone || p < base || p >= base + n) return -1;
    return p - base;
  };
  std::vector<std::vector<int>> producers(n), consumers(n);
  std::vector<char> linear(n);
  for (int i = 0; i < n; ++i) {
    const Primitive& prim = g.prim(base + i);
    linear[i] = prim_kind(prim.op) == PrimKind::Linear;
    for (TensorId t : prim.inputs) {
      int j = local(t);
      if (j >= 0 && std::find(producers[i].begin(), producers[i].end(), j) == producers[i].end()) {
        producers[i].push_back(j);
        consumers[j].push_back(i);
      }
    }
  }
  std::vector<Bits> anc(n), desc(n);
  for (int i = 0; i < n; ++i)
    for (int j : producers[i]) anc[i] |= anc[j] | Bits().set(j);
  for (int i = n - 1; i >= 0; --i)
    for (int j : consumers[i]) desc[i] |= desc[j] | Bits().set(j);

  std::vector<Kernel> result;
  for (int sink = 0; sink < n; ++sink) {
    std::unordered_set<Bits> seen;
    std::vector<Bits> stack = {Bits().set(sink)};
    seen.insert(stack.back());
    int emitted = 0;
    while (!stack.empty() && emitted < options.max_per_sink) {
      Bits s = stack.back();
      stack.pop_back();
      Bits up, down;
      int size = 0, num_linear = 0;
      for (int i = 0; i < n; ++i)
        if (s[i]) {
          up |= anc[i];
          down |= desc[i];
          ++size;
          num_linear += linear[i];
        }
      if ((up & down & ~s).none()) {
        std::vector<PrimId> prims;
        for (int i = 0; i < n; ++i)
          if (s[i]) prims.push_back(base + i);
        result.push_back(make_kernel(g, prims));
        ++emitted;
      }
      if (size >= options.max_prims) continue;
      for (int i = 0; i < n; ++i) {
        if (!s[i]) continue;
        for (int j : producers[i]) {
          if (s[j] || (linear[j] && num_linear >= options.max_linear)) continue;
          Bits next = s;
          next.set(j);
          if (seen.insert(next).second) stack.push_back(next);
        }
      }
    }
  }
  return result;
}

std::vector<Kernel> attention_candidates(const PrimGraph& g) {
  std::vector<Kernel> result;
  const std::vector<std::vector<PrimId>> consumers = g.consumers();
  for (const AttentionPattern& a : find_attention(g)) {
    result.push_back(make_kernel(g, a.prims));
    if (std::optional<AttentionPattern> extended = with_views(g, a, consumers))
      result.push_back(make_kernel(g, extended->prims));
  }
  return result;
}

}  // namespace korch
