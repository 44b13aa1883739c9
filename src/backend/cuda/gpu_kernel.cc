// A memory-bound kernel as a JIT-compiled Halide CUDA pipeline (build_gpu_pipeline). Halide's
// CUDA runtime is pointed at korch's context and stream (JIT handlers), so its launches are
// ordered with the cuBLASLt/cuDNN calls and can be recorded in the plan's CUDA graph; buffers
// wrap korch's device pointers (no host memory, no copies). Halide keeps the device memory of
// stages computed in their own launches for reuse, so that a run after the first allocates
// nothing (a requirement of graph recording).
#include "backend/cuda/gpu_kernel.h"

#include <mutex>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/gpu_pipeline.h"
#include "backend/halide/lowering.h"
#include "util/error.h"

namespace korch::cuda {

namespace {

int32_t acquire_context(Halide::JITUserContext*, void** context, bool) {
  *context = CudaContext::get().driver_context();
  return 0;
}
int32_t release_context(Halide::JITUserContext*) { return 0; }
int32_t get_stream(Halide::JITUserContext*, void*, void** stream) {
  *stream = CudaContext::get().stream();
  return 0;
}

void use_korch_context(Halide::Pipeline* pipeline) {
  static std::once_flag once;
  std::call_once(once, [] { Halide::Internal::JITSharedRuntime::reuse_device_allocations(true); });
  Halide::JITHandlers& h = pipeline->jit_handlers();
  h.custom_cuda_acquire_context = acquire_context;
  h.custom_cuda_release_context = release_context;
  h.custom_cuda_get_stream = get_stream;
}

// A Halide buffer without host memory over device memory of tensor `t` (dense).
Halide::Buffer<> device_buffer(const TensorInfo& t) { return halide_lowering::dense_buffer(t, nullptr); }

class GpuHalideKernel final : public CompiledKernel {
 public:
  GpuHalideKernel(const PrimGraph& g, const Kernel& k, GpuPipeline p) : p_(std::move(p)), target_(gpu_target()) {
    for (TensorId t : k.inputs) inputs_.push_back(device_buffer(g.tensor(t)));
    output_ = device_buffer(g.tensor(k.output));
  }
  ~GpuHalideKernel() override {
    for (auto& b : inputs_) detach(b);
    detach(output_);
  }
  void run(const std::vector<const void*>& inputs, void* output) override {
    try {
      for (size_t i = 0; i < inputs_.size(); ++i) {
        wrap(inputs_[i], inputs[i], target_);
        p_.params[i].set(inputs_[i]);
      }
      wrap(output_, output, target_);
      p_.pipeline.realize(Halide::Realization({output_}), target_);
    } catch (const Halide::Error& e) {
      fail("Halide CUDA kernel (", p_.description, "): ", e.what());
    }
  }
  std::string describe() const override { return p_.description; }

 private:
  static void detach(Halide::Buffer<>& b) {
    if (b.raw_buffer()->device) b.device_detach_native();
  }
  static void wrap(Halide::Buffer<>& b, const void* device, const Halide::Target& target) {
    auto handle = reinterpret_cast<uint64_t>(device);
    if (b.raw_buffer()->device == handle) return;
    detach(b);
    if (b.device_wrap_native(Halide::DeviceAPI::CUDA, handle, target) != 0)
      fail("Halide could not wrap a CUDA device pointer");
  }

  GpuPipeline p_;
  Halide::Target target_;
  std::vector<Halide::Buffer<>> inputs_;
  Halide::Buffer<> output_;
};

}  // namespace

std::unique_ptr<CompiledKernel> compile_gpu_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  GpuPipeline p;
  if (!build_gpu_pipeline(g, k, &p, why_not)) return nullptr;
  try {
    use_korch_context(&p.pipeline);
    p.pipeline.compile_jit(gpu_target());
    return std::make_unique<GpuHalideKernel>(g, k, std::move(p));
  } catch (const Halide::Error& e) {
    if (why_not) *why_not = str_cat("Halide: ", e.what());
  }
  return nullptr;
}

}  // namespace korch::cuda
