// Partitioning: splits a primitive graph into independent sub-problems. Cuts are placed
// automatically where a single produced tensor is live (all paths pass through it, e.g.
// residual-block boundaries); consecutive pieces are merged up to a size bound, and pieces
// still above it are split where the fewest tensors are live. Every tensor that crosses a
// cut is materialised. Structurally identical partitions share a hash and are solved once.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/prim_graph.h"

namespace korch {

struct Partition {
  std::vector<PrimId> prims;       // a contiguous range of the graph's topological order
  std::vector<TensorId> required;  // produced here and used later or a graph output
  uint64_t hash = 0;               // structural hash (same => same solution, by position)
};

struct PartitionOptions {
  int max_prims = 64;  // merge pieces up to this size; split larger pieces
  // protected_boundaries[i]: never cut after primitive i unless a piece cannot be split
  // otherwise (keeps baseline kernels inside one partition). Empty: none protected.
  std::vector<char> protected_boundaries;
};

std::vector<Partition> partition_graph(const PrimGraph& g, const PartitionOptions& options = {});

}  // namespace korch
