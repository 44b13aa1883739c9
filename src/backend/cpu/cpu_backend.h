// The CPU backend (registered as "cpu"): oneDNN for kernels with one Linear primitive, Halide 14
// JIT pipelines for memory-bound kernels, the reference interpreter only where neither can
// implement a single primitive. Kernels run in host memory on OpenMP threads shared by oneDNN and
// Halide; tensors between kernels may stay in oneDNN's internal layouts (layout_link.h).
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"

namespace korch::cpu {

// This build's kernel code generation. Schedule variant indices (and measured costs, through the
// profile cache key) belong to one version; a plan made by another may run slower kernels.
extern const char* const kCodegenVersion;

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options);
// The CPU backend's ahead-of-time compiler for packages (package_kernels.cc): Halide kernels as
// AOT objects, oneDNN kernels built when the package loads, the reference interpreter elsewhere.
std::unique_ptr<AheadOfTimeCompiler> make_package_compiler();

}  // namespace korch::cpu
