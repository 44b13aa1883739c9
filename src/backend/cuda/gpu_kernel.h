// Memory-bound kernels run on the GPU (gpu_kernel.cc): build_gpu_pipeline's pipeline,
// JIT-compiled and launched on korch's CUDA context and stream.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"
#include "ir/prim_graph.h"
#include "plan/kernel.h"

namespace korch::cuda {

// The compiled kernel in schedule variant k.schedule, or nullptr with the reason. Needs a CUDA
// device only when run.
std::unique_ptr<CompiledKernel> compile_gpu_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not);

}  // namespace korch::cuda
