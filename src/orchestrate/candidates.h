// Candidate enumeration: every connected, convex set of primitives of a partition with a
// single sink, at most `max_prims` primitives and at most one Linear primitive. Sets are
// grown upward from each sink (adding producers of members), which yields exactly the
// single-sink connected sets; convexity (no path leaves the set and re-enters) is checked
// with ancestor/descendant bitsets. A per-sink cap bounds pathological fan-in.
#pragma once
#include <vector>

#include "orchestrate/partition.h"
#include "plan/kernel.h"

namespace korch {

struct CandidateOptions {
  int max_prims = 8;       // primitives per candidate
  int max_per_sink = 400;  // candidates grown from one sink
  int max_linear = 1;      // Linear primitives per candidate
};

// Kernels of the partition (costs unset), deduplicated by primitive set.
std::vector<Kernel> enumerate_candidates(const PrimGraph& g, const Partition& part,
                                         const CandidateOptions& options = {});

constexpr int kMaxPartitionPrims = 128;

}  // namespace korch
