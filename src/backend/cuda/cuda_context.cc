// CudaContext (see cuda_context.h). The CUDA runtime is linked statically; it loads the driver
// (libcuda.so.1) itself, so a machine without a driver gets cudaErrorInsufficientDriver from the
// first call, which becomes one error line. cuDNN is linked dynamically and cuBLASLt opened here
// (cublaslt_loader.h): on a GPU machine they may come from the nvidia-* pip packages (LD_LIBRARY_PATH).
#include "backend/cuda/cuda_context.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "backend/cuda/cublaslt_loader.h"
#include "util/error.h"

namespace korch::cuda {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear a sticky-free error so that later calls report their own
    fail(what, ": ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ")");
  }
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) fail(what, ": cuBLAS status ", static_cast<int>(status));
}

void check_cudnn(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS) fail(what, ": ", cudnnGetErrorString(status));
}

namespace {

std::string version_text(int v) {  // 13000 -> "13.0"
  return str_cat(v / 1000, ".", (v % 1000) / 10);
}

int device_ordinal() {
  const char* env = std::getenv("KORCH_CUDA_DEVICE");
  if (!env || !*env) return 0;
  char* end = nullptr;
  long v = std::strtol(env, &end, 10);
  if (*end || v < 0) fail("KORCH_CUDA_DEVICE must be a device ordinal, got '", env, "'");
  return static_cast<int>(v);
}

// The driver's cuCtxGetCurrent, for the primary context the runtime made current.
void* current_driver_context() {
  using GetCurrent = int (*)(void**);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  check_cuda(cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &found),
             "cudaGetDriverEntryPointByVersion(cuCtxGetCurrent)");
  if (found != cudaDriverEntryPointSuccess || !fn) fail("the CUDA driver has no cuCtxGetCurrent");
  void* ctx = nullptr;
  if (reinterpret_cast<GetCurrent>(fn)(&ctx) != 0 || !ctx) fail("cuCtxGetCurrent: no current CUDA context");
  return ctx;
}

}  // namespace

CudaContext::CudaContext() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    fail("no CUDA device: ", cudaGetErrorString(status));
  }
  if (count == 0) fail("no CUDA device: the driver reports none");
  device_.ordinal = device_ordinal();
  if (device_.ordinal >= count)
    fail("no CUDA device ", device_.ordinal, " (KORCH_CUDA_DEVICE): the driver reports ", count);
  check_cuda(cudaSetDevice(device_.ordinal), "cudaSetDevice");
  check_cuda(cudaFree(nullptr), "creating the CUDA context");
  cudaDeviceProp p{};
  check_cuda(cudaGetDeviceProperties(&p, device_.ordinal), "cudaGetDeviceProperties");
  device_.name = p.name;
  device_.major = p.major;
  device_.minor = p.minor;
  device_.sm_count = p.multiProcessorCount;
  device_.l2_bytes = p.l2CacheSize;
  device_.memory_bytes = static_cast<int64_t>(p.totalGlobalMem);
  device_.shared_memory_per_block = static_cast<int64_t>(p.sharedMemPerBlock);
  int memory_clock_khz = 0;
  if (cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, device_.ordinal) == cudaSuccess)
    device_.memory_bandwidth_gbs = 2.0 * memory_clock_khz * 1e3 * (p.memoryBusWidth / 8.0) / 1e9;
  cudaGetLastError();
  check_cuda(cudaDriverGetVersion(&device_.driver_version), "cudaDriverGetVersion");
  check_cuda(cudaRuntimeGetVersion(&device_.runtime_version), "cudaRuntimeGetVersion");
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  if (const std::string why = cublaslt_load_error(); !why.empty()) fail("cuBLASLt: ", why);
  check_cublas(cublasLtCreate(&cublaslt_), "cublasLtCreate");
  check_cudnn(cudnnCreate(&cudnn_), "cudnnCreate");
  check_cudnn(cudnnSetStream(cudnn_, stream_), "cudnnSetStream");
  driver_context_ = current_driver_context();
  // Halide's CUDA runtime looks the driver's symbols up in the process first: make libcuda's
  // symbols global (the runtime loaded it privately), so that it needs no unversioned libcuda.so.
  dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  l2_flush_bytes_ = std::max<int64_t>(2 * device_.l2_bytes, 1 << 20);
  check_cuda(cudaMalloc(&l2_flush_, static_cast<size_t>(l2_flush_bytes_)), "cudaMalloc (L2 flush buffer)");
}

CudaContext::~CudaContext() {
  // The process is ending: release what the driver would release anyway, ignoring errors.
  if (workspace_) cudaFree(workspace_);
  if (l2_flush_) cudaFree(l2_flush_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (cublaslt_) cublasLtDestroy(cublaslt_);
  if (stream_) cudaStreamDestroy(stream_);
}

CudaContext& CudaContext::get() {
  static std::once_flag once;
  static std::unique_ptr<CudaContext> context;
  static std::string error;
  std::call_once(once, [] {
    try {
      context.reset(new CudaContext());
    } catch (const Error& e) {
      error = e.what();
    }
  });
  if (!context) fail(error);
  return *context;
}

bool CudaContext::available(std::string* why_not) {
  try {
    get();
    return true;
  } catch (const Error& e) {
    if (why_not) *why_not = e.what();
    return false;
  }
}

void* CudaContext::workspace(int64_t bytes) {
  if (bytes > workspace_bytes_) {
    synchronize();
    if (workspace_) check_cuda(cudaFree(workspace_), "cudaFree (workspace)");
    workspace_ = nullptr;
    workspace_bytes_ = 0;
    check_cuda(cudaMalloc(&workspace_, static_cast<size_t>(bytes)), "cudaMalloc (workspace)");
    workspace_bytes_ = bytes;
  }
  return workspace_;
}

std::shared_ptr<void> CudaContext::allocate(int64_t bytes) {
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1))),
             str_cat("cudaMalloc(", bytes, " bytes)").c_str());
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

void CudaContext::upload(void* device, const void* host, int64_t bytes) {
  check_cuda(cudaMemcpyAsync(device, host, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_),
             "cudaMemcpy (host to device)");
  synchronize();
}

void CudaContext::download(void* host, const void* device, int64_t bytes) {
  check_cuda(cudaMemcpyAsync(host, device, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_),
             "cudaMemcpy (device to host)");
  synchronize();
}

void CudaContext::synchronize() { check_cuda(cudaStreamSynchronize(stream_), "running CUDA kernels"); }

void CudaContext::flush_l2() {
  check_cuda(cudaMemsetAsync(l2_flush_, 0, static_cast<size_t>(l2_flush_bytes_), stream_), "flushing L2");
}

double CudaContext::median_seconds(const std::function<void()>& run, const std::function<void()>& prepare, int warmup,
                                   int repeats) {
  for (int i = 0; i < warmup; ++i) {
    prepare();
    run();
  }
  synchronize();
  std::vector<cudaEvent_t> events(2 * static_cast<size_t>(repeats));
  for (auto& e : events) check_cuda(cudaEventCreate(&e), "cudaEventCreate");
  for (int i = 0; i < repeats; ++i) {
    prepare();
    check_cuda(cudaEventRecord(events[2 * i], stream_), "cudaEventRecord");
    run();
    check_cuda(cudaEventRecord(events[2 * i + 1], stream_), "cudaEventRecord");
  }
  synchronize();
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]), "cudaEventElapsedTime");
    seconds.push_back(ms * 1e-3);
  }
  for (auto& e : events) cudaEventDestroy(e);
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2];
}

std::string CudaContext::versions() const {
  size_t lt = cublasLtGetVersion();
  size_t dnn = cudnnGetVersion();
  return str_cat("cuda-", version_text(device_.runtime_version), " driver-", version_text(device_.driver_version),
                 " cublasLt-", lt / 10000, ".", (lt / 100) % 100, ".", lt % 100, " cudnn-", dnn / 10000, ".",
                 (dnn / 100) % 100, ".", dnn % 100);
}

std::string CudaContext::target() const {
  return str_cat(device_.name, " sm_", device_.major, device_.minor, " ", device_.sm_count, " SMs");
}

CudaGraph::CudaGraph(CudaContext& ctx, const std::function<void()>& launches) : ctx_(ctx) {
  check_cuda(cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  try {
    launches();
  } catch (...) {
    cudaGraph_t partial = nullptr;
    cudaStreamEndCapture(ctx.stream(), &partial);
    if (partial) cudaGraphDestroy(partial);
    cudaGetLastError();
    throw;
  }
  check_cuda(cudaStreamEndCapture(ctx.stream(), &graph_), "recording the plan as a CUDA graph");
  check_cuda(cudaGraphInstantiate(&exec_, graph_, 0), "cudaGraphInstantiate");
}

CudaGraph::~CudaGraph() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
}

void CudaGraph::replay() { check_cuda(cudaGraphLaunch(exec_, ctx_.stream()), "cudaGraphLaunch"); }

}  // namespace korch::cuda
