// Kernel variants for the micro-benchmarks (see bench_kernels.h).
#include "bench_kernels.h"

#include <chrono>

#include "backend/backend.h"
#include "plan/random_inputs.h"
#include "reference/compare.h"
#include "util/error.h"

namespace korch::bench {

double KernelVariants::run_seconds(size_t variant) {
  auto t0 = std::chrono::steady_clock::now();
  compiled.at(variant)->run(ptrs, output.raw());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

KernelVariants compile_variants(const PrimGraph& g, bool verify) {
  KernelVariants kv;
  std::vector<PrimId> all;
  for (PrimId p = 0; p < g.num_prims(); ++p) all.push_back(p);
  kv.kernel = make_kernel(g, all);
  kv.inputs = random_kernel_inputs(g, kv.kernel, 1);
  for (const TensorData& t : kv.inputs) kv.ptrs.push_back(t.raw());
  const TensorInfo& out = g.tensor(kv.kernel.output);
  kv.output = TensorData(out.dtype, out.shape);
  TensorData want;
  if (verify) {
    want = TensorData(out.dtype, out.shape);
    make_reference_kernel(g, kv.kernel)->run(kv.ptrs, want.raw());
  }
  Kernel k = kv.kernel;
  for (int v = 0; v < cpu::schedule_variants(g, k); ++v) {
    k.schedule = v;
    std::string why;
    std::unique_ptr<cpu::CompiledKernel> c = cpu::compile_kernel(g, k, &why);
    if (!c) {
      kv.left_out.push_back(str_cat("schedule ", v, ": not generated (", why, ")"));
      continue;
    }
    c->run(kv.ptrs, kv.output.raw());  // warm-up (and the output to verify)
    if (verify) {
      Comparison cmp = compare_tensors(kv.output, want, Tolerance{1e-4, 1e-3});
      if (!cmp.pass) {
        kv.left_out.push_back(str_cat("schedule ", v, ": mismatch vs reference (max abs ", cmp.max_abs_error, ", ",
                                      cmp.mismatches, " elements) in ", c->describe()));
        continue;
      }
    }
    kv.compiled.push_back(std::move(c));
  }
  return kv;
}

TensorData random_tensor(const Shape& shape, uint32_t seed) {
  PrimGraph g;
  g.add_input("x", DType::F32, shape);
  return std::move(random_graph_inputs(g, seed).front());
}

}  // namespace korch::bench
