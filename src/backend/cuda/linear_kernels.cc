// Linear kernels on the GPU are not generated yet: every kernel with a Linear primitive is
// refused with that reason, so plans on the CUDA backend run such kernels through the host
// fallback (correct, slow) until the cuBLASLt / cuDNN planner lands in this file.
#include "backend/cuda/linear_kernels.h"

namespace korch::cuda {

namespace {
constexpr const char* kNotBuilt = "linear kernels (cuBLASLt / cuDNN) are not generated on the CUDA backend yet";
}

bool plan_linear_call(const PrimGraph&, const Kernel&, LinearCall*, std::string* why_not) {
  if (why_not) *why_not = kNotBuilt;
  return false;
}

int linear_schedule_variants(const PrimGraph&, const Kernel&) { return 1; }

std::unique_ptr<CompiledKernel> compile_linear_kernel(CudaContext&, const PrimGraph&, const Kernel&,
                                                      std::string* why_not) {
  if (why_not) *why_not = kNotBuilt;
  return nullptr;
}

}  // namespace korch::cuda
