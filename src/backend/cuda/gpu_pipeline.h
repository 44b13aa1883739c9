// Memory-bound kernels on the GPU: the Halide algorithm every backend shares
// (backend/halide/lowering.h) with GPU schedules, compiled by Halide's PTX code generator for
// gpu_target() (sm_80 PTX, which the driver compiles for the device it runs on).
//
// Guarantees: the Funcs are the CPU-tested ones (halide_lowering::Generator), so a schedule
// changes where values are computed, never what they are; every schedule covers the whole
// output with at most kMaxThreadsPerBlock threads and kMaxSharedBytesPerBlock bytes of shared
// memory per block; building and compiling to PTX needs no GPU (tests compile every kernel of the
// test models this way).
#pragma once
#include <Halide.h>

#include <string>
#include <vector>

#include "ir/prim_graph.h"
#include "plan/kernel.h"

namespace korch::cuda {

constexpr int kMaxThreadsPerBlock = 256;
// Dynamic shared memory a block may use without opting in (Halide's CUDA runtime never does).
constexpr int64_t kMaxSharedBytesPerBlock = 48 * 1024;

// Schedule variants of a memory-bound kernel (Kernel::schedule indexes them).
enum class GpuVariant {
  BlockTiles,  // 32x8 thread tiles over the output (innermost axis across lanes, coalesced); the
               // reductions and windows it reads computed per block, in shared memory
  WideRows,    // the same with 256 lanes along the innermost axis (long rows)
  RootStages,  // reductions and windows computed once each, in their own launches over global memory
};

// The variants that make sense for kernel k (index 0 always BlockTiles).
std::vector<GpuVariant> gpu_variants(const PrimGraph& g, const Kernel& k);
const char* gpu_variant_name(GpuVariant v);

// "host-cuda-cuda_capability_80" on the host's ISA.
Halide::Target gpu_target();

struct GpuPipeline {
  Halide::Pipeline pipeline;
  std::vector<Halide::ImageParam> params;  // per kernel input (Kernel::inputs order)
  std::string description;
};

// The scheduled pipeline of kernel k in schedule variant k.schedule; false with the reason when
// the Halide algorithm does not define the kernel or the variant does not exist.
bool build_gpu_pipeline(const PrimGraph& g, const Kernel& k, GpuPipeline* out, std::string* why_not);

// The PTX Halide generates for kernel k (its variant k.schedule), without a GPU; empty with the
// reason when it cannot. *shared_bytes (when not null): the most dynamic shared memory one of its
// launches asks for (-1: not a constant).
std::string gpu_kernel_ptx(const PrimGraph& g, const Kernel& k, std::string* why_not, int64_t* shared_bytes = nullptr);

}  // namespace korch::cuda
