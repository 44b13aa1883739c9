// The CUDA backend ("cuda"): memory-bound kernels as Halide CUDA pipelines (gpu_kernel.h),
// linear kernels as cuBLASLt / cuDNN calls (linear_kernels.h), device memory, CUDA-event timing
// with the L2 cache flushed before each timed run, and a plan's launches recorded once as a CUDA
// graph. Constructing it needs a CUDA device (CudaContext::get() says why not in one line);
// nothing else in korch does.
#include <chrono>
#include <memory>

#include "backend/backend.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/gpu_kernel.h"
#include "backend/cuda/gpu_pipeline.h"
#include "backend/cuda/linear_kernels.h"
#include "backend/halide/lowering.h"
#include "util/error.h"

namespace korch::cuda {

namespace {

// The version of korch's GPU code generation: what schedule-variant indices mean (2: linear
// kernels are cuBLASLt / cuDNN calls, their variants the libraries' heuristic results).
constexpr const char* kCudaCodegenVersion = "korch-cuda-codegen-2";

class DeviceBuffer final : public BackendBuffer {
 public:
  DeviceBuffer(CudaContext& ctx, int64_t bytes) : memory_(ctx.allocate(bytes)), bytes_(bytes) {}
  void* data() override { return memory_.get(); }
  int64_t bytes() const override { return bytes_; }

 private:
  std::shared_ptr<void> memory_;
  int64_t bytes_;
};

// The reference interpreter on device buffers: inputs copied to the host, the kernel computed
// there, its output copied back. Correct and slow; used only where no code generator takes a
// single primitive, and it keeps the plan's launches from being recorded.
class HostFallbackKernel final : public CompiledKernel {
 public:
  HostFallbackKernel(CudaContext& ctx, const PrimGraph& g, const Kernel& k)
      : ctx_(ctx),
        reference_(make_reference_kernel(g, k)),
        output_(g.tensor(k.output).dtype, g.tensor(k.output).shape) {
    for (TensorId t : k.inputs) inputs_.emplace_back(g.tensor(t).dtype, g.tensor(t).shape);
  }
  void run(const std::vector<const void*>& inputs, void* output) override {
    std::vector<const void*> host;
    for (size_t i = 0; i < inputs.size(); ++i) {
      ctx_.download(inputs_[i].raw(), inputs[i], static_cast<int64_t>(inputs_[i].byte_size()));
      host.push_back(inputs_[i].raw());
    }
    reference_->run(host, output_.raw());
    ctx_.upload(output, output_.raw(), static_cast<int64_t>(output_.byte_size()));
  }
  std::string describe() const override { return "reference (host, through copies)"; }

 private:
  CudaContext& ctx_;
  std::unique_ptr<CompiledKernel> reference_;
  std::vector<TensorData> inputs_;
  TensorData output_;
};

class GraphLaunches final : public RecordedLaunches {
 public:
  GraphLaunches(CudaContext& ctx, const std::function<void()>& launches) : graph_(ctx, launches) {}
  void replay() override { graph_.replay(); }

 private:
  CudaGraph graph_;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const BackendOptions& options) : ctx_(CudaContext::get()) { ctx_.set_tf32(options.tf32); }

  std::string name() const override { return "cuda"; }
  std::string target() const override { return ctx_.target() + (ctx_.tf32() ? " tf32" : " fp32"); }
  std::string versions() const override { return str_cat(ctx_.versions(), " halide-14 ", kCudaCodegenVersion); }
  std::string codegen() const override { return kCudaCodegenVersion; }

  bool supports(const PrimGraph& g, const Kernel& k, std::string* why_not) const override {
    if (k.num_linear > 1) {
      if (why_not) *why_not = "more than one Linear primitive";
      return false;
    }
    if (!has_kernel_dtypes(g, k, why_not)) return false;
    if (k.num_linear == 1) {
      LinearCall call;
      return plan_linear_call(g, k, &call, why_not);
    }
    return halide_lowering::defines_kernel(g, k, why_not);
  }
  int schedule_variants(const PrimGraph& g, const Kernel& k) const override {
    if (k.num_linear == 1) return linear_schedule_variants(g, k);
    return static_cast<int>(gpu_variants(g, k).size());
  }
  std::unique_ptr<CompiledKernel> compile(const PrimGraph& g, const Kernel& k, std::string* why_not) override {
    if (k.num_linear > 1) {
      if (why_not) *why_not = "more than one Linear primitive";
      return nullptr;
    }
    if (!has_kernel_dtypes(g, k, why_not)) return nullptr;
    if (k.num_linear == 1) return compile_linear_kernel(ctx_, g, k, why_not);
    return compile_gpu_kernel(g, k, why_not);
  }
  // Halide's PTX and host-code compilation makes no CUDA call (the module is loaded at the first
  // run); linear kernels query the libraries on the context, so they stay on the calling thread.
  bool compiles_concurrently(const PrimGraph& /*g*/, const Kernel& k) const override { return k.num_linear == 0; }
  std::unique_ptr<CompiledKernel> compile_fallback(const PrimGraph& g, const Kernel& k) override {
    return std::make_unique<HostFallbackKernel>(ctx_, g, k);
  }

  bool host_memory() const override { return false; }
  std::unique_ptr<BackendBuffer> allocate(int64_t bytes) override {
    return std::make_unique<DeviceBuffer>(ctx_, bytes);
  }
  void upload(void* device, const void* host, int64_t bytes) override { ctx_.upload(device, host, bytes); }
  void download(void* host, const void* device, int64_t bytes) override { ctx_.download(host, device, bytes); }
  void synchronize() override { ctx_.synchronize(); }

  void prepare_cache_state(const std::vector<std::pair<const void*, int64_t>>& /*inputs*/,
                           const std::vector<std::pair<const void*, int64_t>>& /*touched*/) override {
    ctx_.flush_l2();
  }
  // The runs are timed on the device (events); stats gets their counts and the wall time of the
  // whole timing as timed seconds.
  double median_seconds(const std::function<void()>& run, const std::function<void()>& prepare,
                        TimingStats* stats) override {
    constexpr int kWarmup = 3, kRepeats = 15;
    auto start = std::chrono::steady_clock::now();
    double median = ctx_.median_seconds(run, prepare, kWarmup, kRepeats);
    if (stats) {
      stats->warmup_runs += kWarmup;
      stats->timed_runs += kRepeats;
      stats->prepares += kWarmup + kRepeats;
      stats->timed_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    return median;
  }

  std::unique_ptr<RecordedLaunches> record(const std::function<void()>& launches, std::string* why_not) override {
    try {
      return std::make_unique<GraphLaunches>(ctx_, launches);
    } catch (const std::exception& e) {
      if (why_not) *why_not = e.what();
    }
    return nullptr;
  }

 private:
  CudaContext& ctx_;
};

BackendRegistration register_cuda("cuda", [](const BackendOptions& options) -> std::unique_ptr<Backend> {
  return std::make_unique<CudaBackend>(options);
});

}  // namespace

}  // namespace korch::cuda
