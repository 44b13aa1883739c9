// cuBLASLt, loaded when first used. korch does not link libcublasLt: loading it maps 540 MB and
// its start-up touches about 210 MB of that (resident memory of every korch process, CPU runs
// included, and ~60 ms). Each cuBLASLt function korch calls is defined here with the header's
// signature and forwards to the symbol of libcublasLt.so.<CUBLAS_VER_MAJOR>, opened with dlopen
// (LD_LIBRARY_PATH and the executable's run path apply, so a GPU machine's nvidia-cublas pip package
// serves as before) the first time the CUDA backend needs it.
#include "backend/cuda/cublaslt_loader.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <string>

namespace {

struct Library {
  void* handle = nullptr;
  std::string error;
};

// Never destroyed: the CUDA context's destructor may make the first call of a forwarder at exit,
// after function-local statics constructed later than it are gone.
const Library& library() {
  static const Library* lib = [] {
    auto* l = new Library;
    const std::string name = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
    l->handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!l->handle) {
      const char* why = dlerror();
      l->error = "cannot load " + name + ": " + (why ? why : "dlopen failed");
    }
    return l;
  }();
  return *lib;
}

// The library's own `name` (never these forwarders: the library is opened RTLD_LOCAL and searched
// alone), or nullptr.
void* library_symbol(const char* name) {
  const Library& lib = library();
  return lib.handle ? dlsym(lib.handle, name) : nullptr;
}

}  // namespace

namespace korch::cuda {

std::string cublaslt_load_error() { return library().error; }

}  // namespace korch::cuda

// The body of the forwarder of cuBLASLt's `name`: the library's function called with the
// arguments, or CUBLAS_STATUS_NOT_INITIALIZED when the library or the symbol is missing.
#define KORCH_FORWARD(name, ...)                                                           \
  static const auto library_fn = reinterpret_cast<decltype(&name)>(library_symbol(#name)); \
  return library_fn ? library_fn(__VA_ARGS__) : CUBLAS_STATUS_NOT_INITIALIZED

extern "C" {

size_t cublasLtGetVersion(void) {
  static const auto library_fn = reinterpret_cast<decltype(&cublasLtGetVersion)>(library_symbol("cublasLtGetVersion"));
  return library_fn ? library_fn() : 0;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) { KORCH_FORWARD(cublasLtCreate, handle); }

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) { KORCH_FORWARD(cublasLtDestroy, handle); }

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_desc, const void* b, cublasLtMatrixLayout_t b_desc,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_desc, void* d,
                              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  KORCH_FORWARD(cublasLtMatmul, handle, desc, alpha, a, a_desc, b, b_desc, beta, c, c_desc, d, d_desc, algo, workspace,
                workspace_bytes, stream);
}

cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                       cublasLtMatrixLayout_t a_desc, cublasLtMatrixLayout_t b_desc,
                                       cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                                       const cublasLtMatmulAlgo_t* algo, cublasLtMatmulHeuristicResult_t* result) {
  KORCH_FORWARD(cublasLtMatmulAlgoCheck, handle, desc, a_desc, b_desc, c_desc, d_desc, algo, result);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a_desc, cublasLtMatrixLayout_t b_desc,
                                              cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                                              cublasLtMatmulPreference_t preference, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  KORCH_FORWARD(cublasLtMatmulAlgoGetHeuristic, handle, desc, a_desc, b_desc, c_desc, d_desc, preference, requested,
                results, returned);
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  KORCH_FORWARD(cublasLtMatmulDescCreate, desc, compute, scale);
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) { KORCH_FORWARD(cublasLtMatmulDescDestroy, desc); }

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
  KORCH_FORWARD(cublasLtMatmulDescSetAttribute, desc, attr, buf, bytes);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  KORCH_FORWARD(cublasLtMatmulPreferenceCreate, pref);
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  KORCH_FORWARD(cublasLtMatmulPreferenceDestroy, pref);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t bytes) {
  KORCH_FORWARD(cublasLtMatmulPreferenceSetAttribute, pref, attr, buf, bytes);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  KORCH_FORWARD(cublasLtMatrixLayoutCreate, layout, type, rows, cols, ld);
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  KORCH_FORWARD(cublasLtMatrixLayoutDestroy, layout);
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t bytes) {
  KORCH_FORWARD(cublasLtMatrixLayoutSetAttribute, layout, attr, buf, bytes);
}

}  // extern "C"
