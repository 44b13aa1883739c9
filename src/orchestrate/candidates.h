// Candidate enumeration: every connected, convex set of primitives of a partition with a
// single sink, at most `max_prims` primitives and at most one Linear primitive. Sets are
// grown upward from each sink (adding producers of members), which yields exactly the
// single-sink connected sets; convexity (no path leaves the set and re-enters) is checked
// with ancestor/descendant bitsets. A per-sink cap bounds pathological fan-in.
// The one exception to "at most one Linear primitive": attention_candidates offers each softmax
// attention (plan/attention_pattern.h: two MatMuls around a row softmax) as one kernel, so that a
// backend with a fused attention kernel can keep the scores out of memory. Such a kernel is still
// convex and single-sink, so the selection problem and the plans treat it like any other.
#pragma once
#include <vector>

#include "orchestrate/partition.h"
#include "plan/kernel.h"

namespace korch {

struct CandidateOptions {
  int max_prims = 8;            // primitives per candidate
  int max_per_sink = 400;       // candidates grown from one sink
  int max_linear = 1;           // Linear primitives per candidate
  bool fused_attention = true;  // offer attention_candidates
};

// Kernels of the partition (costs unset), deduplicated by primitive set.
std::vector<Kernel> enumerate_candidates(const PrimGraph& g, const Partition& part,
                                         const CandidateOptions& options = {});

// Per softmax attention of the whole graph, its core kernel and, where layout chains surround
// it, the kernel that takes them in too (costs unset).
std::vector<Kernel> attention_candidates(const PrimGraph& g);

constexpr int kMaxPartitionPrims = 128;

}  // namespace korch
