// cuBLASLt is loaded on first use, not linked: see cublaslt_loader.cc.
#pragma once
#include <string>

namespace korch::cuda {

// Loads libcublasLt.so.<CUBLAS_VER_MAJOR> (once; later calls return the first answer): empty when it
// is loaded, else why not (dlopen's message). Every cuBLASLt function korch calls returns
// CUBLAS_STATUS_NOT_INITIALIZED (cublasLtGetVersion: 0) while this is not empty.
std::string cublaslt_load_error();

}  // namespace korch::cuda
