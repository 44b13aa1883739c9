// The CUDA device korch runs on: one device (ordinal 0, or $KORCH_CUDA_DEVICE), its primary
// context, one stream every kernel, copy and library call is issued on, the cuBLASLt and cuDNN
// handles bound to that stream, a growable workspace, an L2 flush buffer and CUDA-event timing.
//
// Guarantees:
//  - CudaContext::get() either returns a usable context or throws korch::Error with one line
//    that says why (no driver, no device, a library that failed to initialise). It never
//    aborts, so `--backend cuda` on a machine without a GPU is a clear error.
//  - Everything is stream-ordered on stream(); synchronize() waits for it. Nothing here
//    synchronises implicitly except the copies between host and device (upload/download).
//  - check_cuda/check_cublas/check_cudnn turn a failed call into korch::Error naming the call.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace korch::cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;          // "NVIDIA H200"
  int major = 0, minor = 0;  // compute capability
  int driver_version = 0;    // cudaDriverGetVersion: 13000 for CUDA 13.0
  int runtime_version = 0;   // cudaRuntimeGetVersion
  int sm_count = 0;
  int64_t l2_bytes = 0;
  int64_t memory_bytes = 0;
  int64_t shared_memory_per_block = 0;
  double memory_bandwidth_gbs = 0;  // from the memory clock and bus width (theoretical)
};

// Throw korch::Error("<what>: <CUDA's error name and string>") when the call failed.
void check_cuda(cudaError_t status, const char* what);
void check_cublas(cublasStatus_t status, const char* what);
void check_cudnn(cudnnStatus_t status, const char* what);

class CudaContext {
 public:
  // The process's context, created on first use. Throws korch::Error (one line) where no CUDA
  // device can be used.
  static CudaContext& get();
  // Whether a CUDA device can be used, without throwing; *why_not says why not.
  static bool available(std::string* why_not = nullptr);

  const DeviceInfo& device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasLtHandle_t cublaslt() const { return cublaslt_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  // The primary context (a CUcontext), for code generators that use the driver API (Halide's
  // CUDA runtime).
  void* driver_context() const { return driver_context_; }

  // Device scratch memory of at least `bytes`, valid until the next call with a larger size.
  // Grows outside of graph capture only: call it while compiling a kernel, not in run().
  void* workspace(int64_t bytes);
  int64_t workspace_bytes() const { return workspace_bytes_; }

  // Device memory (cudaMalloc), freed with the returned block.
  std::shared_ptr<void> allocate(int64_t bytes);
  void upload(void* device, const void* host, int64_t bytes);    // waits until copied
  void download(void* host, const void* device, int64_t bytes);  // waits until copied
  void synchronize();

  // Evicts the L2 cache (writes a buffer of twice its size), stream-ordered.
  void flush_l2();
  // Median GPU time in seconds of `run` over `repeats` runs after `warmup` runs, measured with
  // CUDA events around each run; `prepare` is issued before each run, outside the timed span.
  double median_seconds(const std::function<void()>& run, const std::function<void()>& prepare, int warmup = 3,
                        int repeats = 15);

  // Whether linear kernels may use TF32 tensor cores (--tf32); off by default, so that results
  // match fp32 references.
  bool tf32() const { return tf32_; }
  void set_tf32(bool on) { tf32_ = on; }

  // "cuda-13.0 cublasLt-13.1.0 cudnn-9.19.0 driver-13.0": what cached timings depend on.
  std::string versions() const;
  // "NVIDIA H200 sm_90 132 SMs": the device as cache keys and reports name it.
  std::string target() const;

  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;
  ~CudaContext();

 private:
  CudaContext();
  DeviceInfo device_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t cublaslt_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  void* driver_context_ = nullptr;
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
  void* l2_flush_ = nullptr;
  int64_t l2_flush_bytes_ = 0;
  bool tf32_ = false;
};

// A sequence of stream-ordered launches recorded once as a CUDA graph and replayed.
class CudaGraph {
 public:
  // Records what `launches` issues on the context's stream. Throws korch::Error when something
  // in it cannot be captured (the stream is left usable).
  CudaGraph(CudaContext& ctx, const std::function<void()>& launches);
  ~CudaGraph();
  void replay();  // stream-ordered
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

 private:
  CudaContext& ctx_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace korch::cuda
