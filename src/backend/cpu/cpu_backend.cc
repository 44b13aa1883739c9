// The CPU backend: dispatch (oneDNN for linear kernels, the fused attention for the softmax-attention
// pattern's two, Halide for the rest), the OpenMP thread
// count, the cache key parts, and the Backend implementation with its layout-linking part and
// its ahead-of-time compiler for packages (package_kernels.cc).
#include "backend/cpu/cpu_backend.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>

#include "backend/cpu/cache_state.h"
#include "backend/cpu/compiled_kernel.h"
#include "backend/cpu/layout_link.h"
#include "backend/cpu/link_savings.h"
#include "backend/cpu/link_verification.h"
#include "backend/cpu/stream_store.h"
#include "util/error.h"

namespace korch::cpu {

const char* const kCodegenVersion = "korch-codegen-18";

namespace {

std::string cpu_features() {
  std::string f = "x86-64";
  if (__builtin_cpu_supports("avx2")) f += " avx2";
  if (__builtin_cpu_supports("fma")) f += " fma";
  if (__builtin_cpu_supports("avx512f")) f += " avx512f";
  if (__builtin_cpu_supports("avx512bw")) f += " avx512bw";
  return f;
}

// How idle OpenMP threads wait, where the environment sets it: a sleeping thread costs a wake-up
// (~70 us on a VM) at every parallel region a kernel starts, so costs measured under
// OMP_WAIT_POLICY=PASSIVE are not the default's and must not share cache entries with them.
std::string omp_wait_settings() {
  std::string s;
  for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"})
    if (const char* value = std::getenv(name); value && *value) s += str_cat(" ", name, "=", value);
  return s;
}

CompiledKernel& cpu_kernel(korch::CompiledKernel& k) {
  auto* c = dynamic_cast<CompiledKernel*>(&k);
  if (!c) fail("internal: a kernel of another backend in a CPU plan (", k.describe(), ")");
  return *c;
}

class CpuBackend;

// Layout links between the CPU's kernels (layout_link.h); a Halide kernel links only after its
// strided build matched its dense one (link_verification.h).
class CpuLayoutLinker : public LayoutLinker {
 public:
  explicit CpuLayoutLinker(CacheState& cache_state) : cache_state_(cache_state) {}
  LinkedPlan link(const PrimGraph& g, const std::vector<Kernel>& kernels,
                  const std::vector<std::unique_ptr<korch::CompiledKernel>>& compiled) override {
    std::vector<CompiledKernel*> cpu_kernels;
    for (const auto& c : compiled) cpu_kernels.push_back(&cpu_kernel(*c));
    LinkedPlan result;
    auto verify_strided = [&](int i) {
      std::string why;
      if (strided_layout_matches_dense(g, kernels[i], *cpu_kernels[i], &why)) return true;
      result.unlinked.push_back(why);
      std::fprintf(stderr, "korch: warning: kernel %d keeps its tensors dense: %s\n", i, why.c_str());
      return false;
    };
    LayoutLinks links = link_layouts(g, kernels, cpu_kernels, verify_strided);
    result.bytes = std::move(links.bytes);
    result.num_linked = links.num_linked;
    return result;
  }
  std::vector<double> measure_savings(const PrimGraph& g, const Kernel& k, korch::CompiledKernel& compiled,
                                      const std::vector<const void*>& inputs, double dense_seconds,
                                      TimingStats* stats) override {
    return measure_link_savings(g, k, cpu_kernel(compiled), inputs, dense_seconds, cache_state_, stats);
  }

 private:
  CacheState& cache_state_;
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& options)
      : threads_(options.threads),
        // The streaming-store threshold decides which schedule variants a kernel has (cached
        // results name a variant by index).
        target_(str_cat(cpu_features(), " threads=", threads_, omp_wait_settings(),
                        " stream-stores-from=", streaming_output_bytes())),
        linker_(cache_state_),
        package_compiler_(make_package_compiler()) {}
  std::string name() const override { return "cpu"; }
  std::string target() const override { return target_; }
  // flushed-cache: kernels are timed after their own memory is flushed from the caches; linked-variants: the
  // variant a cache entry keeps is the fastest with its layout conversions saved (profiler.cc); tail-read-back:
  // inputs are read back up to half the last-level cache before a timed run (cache_state.h); grouped-reshape: a
  // Reshape reads its input through per-group index maps (halide_lowering::reshape_source_index), so kernels
  // with a reduction behind a reshape no longer compute it over the whole tensor per parallel slice;
  // matmul-row-blocks: a MatMul with constant B and 256 rows or more has a third variant, its rows in blocks;
  // matmul-gemv: one of at most 4 rows has a third variant, korch's GEMV;
  // sliding-stencils: the separable max pools of an nhwc output slide down chunks of its rows where they overlap
  // little.
  std::string versions() const override {
    const dnnl_version_t* v = dnnl_version();
    return str_cat(
        "halide14 onednn", v->major, ".", v->minor, ".", v->patch, " ", kCodegenVersion,
        " flushed-cache linked-variants tail-read-back grouped-reshape matmul-row-blocks matmul-gemv sliding-stencils");
  }
  std::string codegen() const override { return kCodegenVersion; }
  int threads() const override { return threads_; }
  void bind_calling_thread() override { set_num_threads(threads_); }
  bool supports(const PrimGraph& g, const Kernel& k, std::string* why_not) const override {
    return can_compile(g, k, why_not);
  }
  int schedule_variants(const PrimGraph& g, const Kernel& k) const override { return cpu::schedule_variants(g, k); }
  std::unique_ptr<korch::CompiledKernel> compile(const PrimGraph& g, const Kernel& k, std::string* why_not) override {
    return compile_kernel(g, k, why_not);
  }
  // Halide JIT compilations (the slow ones: 0.2-1 s each) touch no shared state; oneDNN
  // primitives reorder constant weights on the shared stream while compiling, so they stay serial.
  bool compiles_concurrently(const PrimGraph& /*g*/, const Kernel& k) const override { return k.num_linear == 0; }
  std::unique_ptr<korch::CompiledKernel> compile_fallback(const PrimGraph& g, const Kernel& k) override {
    return compile_reference_kernel(g, k);
  }
  CodegenStats codegen_stats() const override { return halide_codegen_stats(); }
  std::unique_ptr<BackendBuffer> allocate(int64_t bytes) override { return allocate_host_buffer(bytes); }
  void prepare_cache_state(const std::vector<std::pair<const void*, int64_t>>& inputs,
                           const std::vector<std::pair<const void*, int64_t>>& touched) override {
    cache_state_.prepare(inputs, touched);
  }
  LayoutLinker* layout_linker() override { return &linker_; }
  AheadOfTimeCompiler* ahead_of_time() override { return package_compiler_.get(); }

 private:
  int threads_;
  std::string target_;
  CacheState cache_state_;
  CpuLayoutLinker linker_;
  std::unique_ptr<AheadOfTimeCompiler> package_compiler_;
};

const BackendRegistration kRegistration("cpu", make_cpu_backend);

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

std::unique_ptr<CompiledKernel> compile_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  if (!has_kernel_dtypes(g, k, why_not)) return nullptr;
  if (k.num_linear >= 1) return compile_library_kernel(g, k, why_not);
  return compile_halide_kernel(g, k, why_not);
}

int schedule_variants(const PrimGraph& g, const Kernel& k) {
  if (k.num_linear == 2) return attention_schedule_variants(g, k);
  if (k.num_linear > 2) return 1;
  return k.num_linear == 0 ? halide_schedule_variants(g, k) : onednn_schedule_variants(g, k);
}

bool can_compile(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  if (!has_kernel_dtypes(g, k, why_not)) return false;
  if (k.num_linear >= 2) return attention_supports(g, k, why_not);
  return k.num_linear == 1 ? onednn_supports(g, k, why_not) : halide_supports(g, k, why_not);
}

void set_num_threads(int threads) {
  if (threads < 1) fail("thread count must be positive, got ", threads);
  omp_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace korch::cpu
