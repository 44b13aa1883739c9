// The table of kernel cases every backend is checked on, in the spirit of ggml's test-backend-ops:
// each case builds a small graph whose primitives form ONE kernel (every primitive kind alone, and
// fused shapes: epilogues, reductions with broadcasts, layouts, windows, concats; linear
// primitives with their epilogues). tests/backend/conformance_test.cc runs the whole table on
// every registered backend against the reference executor; backend-specific tests add what only
// their code generator has.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ir/prim_graph.h"
#include "plan/kernel.h"

namespace korch {

struct KernelCase {
  std::string name;
  std::function<PrimGraph()> build;  // the whole graph is one kernel
};

// Kernels without a Linear primitive (a name tagged "(... variant)" says which schedule variant
// the CPU backend must offer for it).
std::vector<KernelCase> memory_bound_kernel_cases();
// Kernels with one Linear primitive (MatMul, Conv, ConvTranspose) and an elementwise epilogue.
std::vector<KernelCase> linear_kernel_cases();
// Softmax attention (plan/attention_pattern.h): two MatMuls around a row softmax, one kernel.
std::vector<KernelCase> attention_kernel_cases();
// The attention graph of those cases: Q [batch.., m, dk], Kt [batch.., dk, n], V [batch.., n, dv];
// scores divided by 8 (or, scale_first, scale_by * S) and plus a [1, n] mask where asked.
PrimGraph attention_graph(const Shape& batch, int64_t m, int64_t n, int64_t dk, int64_t dv, bool scale, bool mask,
                          bool scale_first = false, float scale_by = 0.125f);

// The kernel of all of a case graph's primitives.
Kernel whole_graph_kernel(const PrimGraph& g);

}  // namespace korch
