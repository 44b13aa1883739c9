// What layout linking saves on a kernel that converts activations between the dense layout and
// an internal one (oneDNN convolutions): the kernel is timed again with every such input
// arriving, and its output left, in the internal layout, and the difference to its dense time is
// split over those tensors by their dense bytes (ProfileEntry::link_savings). A Halide kernel
// reads and writes a layout through strides at about its dense speed: it saves nothing itself
// (0), but its candidate tensors let the oneDNN kernels around it link.
#pragma once
#include <vector>

#include "backend/cpu/cache_state.h"
#include "backend/cpu/compiled_kernel.h"
#include "backend/timing.h"

namespace korch::cpu {

// Returns ProfileEntry::link_savings (empty when the kernel converts nothing). The kernel is left
// reading and writing internal layouts.
std::vector<double> measure_link_savings(const PrimGraph& g, const Kernel& k, CompiledKernel& compiled,
                                         const std::vector<const void*>& inputs, double dense_seconds,
                                         CacheState& cache_state, TimingStats* stats);

}  // namespace korch::cpu
