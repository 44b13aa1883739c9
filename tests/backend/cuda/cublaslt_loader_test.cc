// cuBLASLt is opened on first use, not linked (backend/cuda/cublaslt_loader.h): once asked for, the
// forwarders reach the library's own functions.
#include "backend/cuda/cublaslt_loader.h"

#include <cublasLt.h>
#include <gtest/gtest.h>
#include <link.h>

#include <string>

namespace korch::cuda {
namespace {

// Whether a shared object whose path contains `name` is loaded in this process.
bool loaded(const std::string& name) {
  bool found = false;
  struct Query {
    const std::string* name;
    bool* found;
  } query{&name, &found};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* q = static_cast<Query*>(data);
        if (info->dlpi_name && std::string(info->dlpi_name).find(*q->name) != std::string::npos) *q->found = true;
        return 0;
      },
      &query);
  return found;
}

TEST(CublasLtLoader, ForwardsToTheLibraryOnceAskedFor) {
  // That korch does not link it is the CTest cli_korch_links_no_cublaslt (ldd of the binary).
  const std::string error = cublaslt_load_error();  // opens it (or says why not)
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_TRUE(loaded("libcublasLt.so"));
  EXPECT_EQ(cublasLtGetVersion() / 10000, static_cast<size_t>(CUBLAS_VER_MAJOR));
  cublasLtMatmulDesc_t desc = nullptr;  // a host-side object: no GPU needed
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescDestroy(desc), CUBLAS_STATUS_SUCCESS);
}

}  // namespace
}  // namespace korch::cuda
