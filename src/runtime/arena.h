// Arena planning: one block of memory holds every tensor a plan's kernels write, and two tensors
// share bytes only when their lifetimes (producing kernel .. last reading kernel; the model's
// outputs live to the end) do not overlap. Placement is largest first, first fit, 64-byte
// aligned. korch's Executor and the exported package's runtime both place tensors with it.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/prim_graph.h"
#include "plan/kernel.h"

namespace korch {

struct ArenaPlan {
  std::vector<int64_t> offset;  // per tensor id: byte offset in the arena, -1 if not in it
  int64_t arena_bytes = 0;      // peak
  int64_t total_bytes = 0;      // sum of all arena tensors' sizes (no reuse)
};

// kernels: in execution order. bytes: per tensor id, the bytes its buffer needs (e.g. a blocked
// internal layout with padded channels); nullptr: every tensor's dense size.
ArenaPlan plan_arena(const PrimGraph& g, const std::vector<Kernel>& kernels,
                     const std::vector<int64_t>* bytes = nullptr);

}  // namespace korch
