// Baseline orchestrations, expressed as groups of primitives (each group becomes one or more
// single-sink kernels):
//   per-primitive: one kernel per primitive;
//   per-op:        one kernel per materialised output of each original ONNX operator;
//   greedy:        fusion in the style of TVM's FuseOps / ONNX Runtime: elementwise and layout
//                  consumers fuse into their single-use producer's group, a reduction absorbs
//                  its injective producers, a Linear primitive takes its elementwise epilogue.
#pragma once
#include <vector>

#include "plan/kernel.h"

namespace korch {

using PrimGroups = std::vector<std::vector<PrimId>>;

PrimGroups per_primitive_groups(const PrimGraph& g);
PrimGroups per_op_groups(const PrimGraph& g);
PrimGroups greedy_groups(const PrimGraph& g);

// Splits groups into single-sink kernels: a member whose output leaves the group (or is a
// graph output) is a sink; its kernel is the sink plus its ancestors inside the group,
// stopping at other sinks, whose outputs it reads.
std::vector<Kernel> kernels_from_groups(const PrimGraph& g, const PrimGroups& groups);

}  // namespace korch
