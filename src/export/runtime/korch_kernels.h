// The table of ahead-of-time Halide kernels a package's generated kernels/kernels.cc defines.
#pragma once
#include <cstdint>

struct halide_buffer_t;

namespace korch_pkg {

struct HalideKernelEntry {
  const char* name;
  // Buffers: the kernel's inputs (Kernel::inputs order), then its output.
  int (*entry)(halide_buffer_t** buffers);
};

extern const char* const kPackageId;
extern const int kNumHalideKernels;
extern const HalideKernelEntry kHalideKernels[];

}  // namespace korch_pkg
