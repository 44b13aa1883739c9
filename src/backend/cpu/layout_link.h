// Layout linking: lets consecutive kernels hand each other activations in
// oneDNN's internal layout (nhwc, nChw8c, nChw16c, ...) instead of reordering to
// a dense buffer and back. Producers and readers are oneDNN kernels, and Halide
// kernels for their channels-last candidates (4-D activations they read and
// write nhwc or channel-blocked through strides; channels_last_candidates).
// Guarantees: a tensor is linked only when its producer writes an internal
// layout, it is not a graph output, it has at least one consumer, and every
// consumer reads it (in every role, binary post-op operands included) through
// exactly that layout. Everything else (graph inputs and outputs, constants,
// tensors read by a kernel that cannot take the layout, reference kernels)
// stays dense. Where the producer and a reader pick different layouts (brgconv
// nhwc vs jit nChw16c, plain nchw GEMM 1x1 convs), the oneDNN readers are
// rebuilt for the producer's layout, or the producer for the readers', but only
// where oneDNN still has a non-reference implementation. A Halide kernel takes
// its oneDNN neighbours' formats instead: per tensor where it can mix nhwc and
// this CPU's blocked format (a kernel between an nhwc convolution and a blocked
// one reads one and writes the other), else one format for the whole kernel,
// fixed by the first tensor that needs one; oneDNN kernels are never rebuilt
// for a Halide kernel's sake, and a Halide kernel links only when all its
// candidate tensors link. Korch's Executor and the exported package's runtime both call
// this; the package's ahead-of-time Halide kernels are dense only, so there
// tensors next to them stay dense.
// KORCH_LAYOUT_LINK=0 in the environment turns linking off, =exact links only
// tensors whose layouts already match (no rebuilding, Halide kernels stay nhwc),
// =onednn links only between oneDNN kernels (Halide kernels stay dense); all
// are for A/B timing.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/cpu/compiled_kernel.h"

namespace korch::cpu {

struct LayoutLinks {
  std::vector<int64_t> bytes;  // per tensor: bytes its buffer needs (its dense
                               // size unless linked)
  std::vector<char> linked;    // per tensor: 1 when it stays in its producer's internal layout
  int num_linked = 0;
};

// Decides the links of a plan (kernels in execution order, compiled[i] built
// for kernels[i]) and switches the compiled kernels to read/write the linked
// tensors in internal layout.
// Whether Halide kernels offer their channels-last candidates (KORCH_LAYOUT_LINK
// is not 0 or onednn).
bool halide_layout_links_enabled();

// verify_strided(i) is asked once per Halide kernel i before it links every one of its candidate
// tensors in its format (the kernel keeps nothing yet); false keeps all its tensors dense. Empty:
// every such link is taken.
LayoutLinks link_layouts(const PrimGraph& g, const std::vector<Kernel>& kernels,
                         const std::vector<CompiledKernel*>& compiled,
                         const std::function<bool(int)>& verify_strided = {});

}  // namespace korch::cpu
