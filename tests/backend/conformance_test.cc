// Backend conformance, in the style of ggml's test-backend-ops: the whole kernel table
// (kernel_cases.h) on every registered backend, each case compiled as one kernel with every
// schedule variant the backend offers, run from the backend's own buffers (allocate / upload /
// download) on two random input sets, and compared with the reference executor; then the case as
// a one-kernel plan through the Executor on that backend. A backend may refuse a kernel (its
// supports() or compile() says why); the backends listed in kComplete must implement every case.
// A backend whose construction fails (the CUDA backend on a machine without a GPU) is skipped
// with its reason printed, unless it is in kComplete. A new backend gets the whole table by
// registering itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/kernel_cases.h"
#include "plan/plan.h"
#include "plan/random_inputs.h"
#include "reference/compare.h"
#include "reference/reference.h"
#include "runtime/executor.h"
#include "util/error.h"

namespace korch {
namespace {

const std::vector<std::string> kComplete = {"cpu", "reference"};

std::vector<KernelCase> all_cases() {
  std::vector<KernelCase> cs = memory_bound_kernel_cases();
  for (KernelCase& c : linear_kernel_cases()) cs.push_back(std::move(c));
  for (KernelCase& c : attention_kernel_cases()) cs.push_back(std::move(c));
  return cs;
}

// Runs `compiled` from the backend's buffers and compares its output with the reference's.
void expect_matches_reference(Backend& backend, const PrimGraph& g, const Kernel& k, CompiledKernel& compiled) {
  for (uint32_t seed : {1u, 2u}) {
    std::vector<TensorData> inputs = random_kernel_inputs(g, k, seed);
    std::vector<const void*> host, ptrs;
    std::vector<std::unique_ptr<BackendBuffer>> buffers;
    for (const TensorData& t : inputs) {
      host.push_back(t.raw());
      buffers.push_back(backend.allocate(static_cast<int64_t>(t.byte_size())));
      backend.upload(buffers.back()->data(), t.raw(), static_cast<int64_t>(t.byte_size()));
      ptrs.push_back(buffers.back()->data());
    }
    const TensorInfo& out = g.tensor(k.output);
    TensorData got(out.dtype, out.shape), want(out.dtype, out.shape);
    std::unique_ptr<BackendBuffer> output = backend.allocate(static_cast<int64_t>(got.byte_size()));
    compiled.run(ptrs, output->data());
    backend.synchronize();
    backend.download(got.raw(), output->data(), static_cast<int64_t>(got.byte_size()));
    make_reference_kernel(g, k)->run(host, want.raw());
    Comparison c = compare_tensors(got, want, Tolerance{1e-4, 1e-3});
    EXPECT_TRUE(c.pass) << compiled.describe() << " (seed " << seed << "): max abs " << c.max_abs_error << ", "
                        << c.mismatches << " mismatches " << c.problem;
  }
}

void check_case_on(Backend& backend, const KernelCase& c, int* refused) {
  SCOPED_TRACE(backend.name() + ": " + c.name);
  PrimGraph g = c.build();
  Kernel k = whole_graph_kernel(g);
  std::string why;
  if (!backend.supports(g, k, &why)) {
    EXPECT_FALSE(why.empty()) << "a refusal must say why";
    ++*refused;
    return;
  }
  int variants = backend.schedule_variants(g, k);
  ASSERT_GE(variants, 1);
  for (int v = 0; v < variants; ++v) {
    SCOPED_TRACE("schedule variant " + std::to_string(v));
    k.schedule = v;
    why.clear();
    std::unique_ptr<CompiledKernel> compiled = backend.compile(g, k, &why);
    if (!compiled) {
      EXPECT_FALSE(why.empty()) << "a refusal must say why";
      if (v == 0) ++*refused;
      if (v == 0) return;
      continue;
    }
    expect_matches_reference(backend, g, k, *compiled);
  }
}

// The case as a plan of one kernel, through the runtime on the backend (arena, layout links,
// uploads and downloads).
void check_executor_on(const std::shared_ptr<Backend>& backend, const KernelCase& c) {
  SCOPED_TRACE(backend->name() + " executor: " + c.name);
  PrimGraph g = c.build();
  Plan plan;
  plan.strategy = "one kernel";
  plan.kernels.push_back(whole_graph_kernel(g));
  std::vector<TensorData> inputs = random_graph_inputs(g, 3);
  std::vector<TensorData> want = reference::run_graph(g, inputs);
  Executor exec(backend, g, plan);
  for (int repeat = 0; repeat < 2; ++repeat) {  // the arena is reused across runs
    std::vector<TensorData> got = exec.run(inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < got.size(); ++o) {
      Comparison cmp = compare_tensors(got[o], want[o], Tolerance{1e-4, 1e-3});
      EXPECT_TRUE(cmp.pass) << "output " << o << ": max abs " << cmp.max_abs_error;
    }
  }
}

TEST(BackendConformance, EveryRegisteredBackendMatchesTheReferenceOnTheKernelTable) {
  std::vector<std::string> names = backend_names();
  for (const std::string& name : kComplete)
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name << " is not registered";
  std::vector<KernelCase> cases = all_cases();
  for (const std::string& name : names) {
    bool required = std::find(kComplete.begin(), kComplete.end(), name) != kComplete.end();
    std::shared_ptr<Backend> backend;
    try {
      backend = make_backend(name, BackendOptions{2});
    } catch (const Error& e) {
      EXPECT_FALSE(required) << name << ": " << e.what();
      std::printf("backend %s: not checked here (%s)\n", name.c_str(), e.what());
      continue;
    }
    backend->bind_calling_thread();
    int refused = 0;
    for (const KernelCase& c : cases) check_case_on(*backend, c, &refused);
    for (const KernelCase& c : cases) check_executor_on(backend, c);
    std::printf("backend %s: %zu kernel cases, %d refused\n", name.c_str(), cases.size(), refused);
    if (required) {
      EXPECT_EQ(refused, 0) << name << " must implement every case";
    }
  }
}

TEST(BackendRegistry, UnknownNamesAreClearErrors) {
  try {
    make_backend("no-such-backend");
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("unknown backend 'no-such-backend'"), std::string::npos) << what;
    EXPECT_NE(what.find("cpu"), std::string::npos) << what;  // names the registered ones
  }
  EXPECT_THROW(make_backend("cpu", BackendOptions{0}), Error);
  EXPECT_TRUE(has_backend("reference"));
  EXPECT_FALSE(has_backend("no-such-backend"));
}

// Cache keys are the backend's own: two backends, or one at two thread counts, never share one.
TEST(BackendRegistry, IdentitiesKeyTheCacheApart) {
  auto cpu2 = make_backend("cpu", BackendOptions{2});
  auto cpu1 = make_backend("cpu", BackendOptions{1});
  auto ref = make_backend("reference");
  EXPECT_NE(cpu2->target(), cpu1->target());
  EXPECT_NE(cpu2->name(), ref->name());
  EXPECT_FALSE(cpu2->versions().empty());
  EXPECT_FALSE(cpu2->codegen().empty());  // the CPU's kernels have schedule variants
  EXPECT_EQ(ref->codegen(), "");
  EXPECT_NE(cpu2->layout_linker(), nullptr);
  EXPECT_EQ(ref->layout_linker(), nullptr);
}

}  // namespace
}  // namespace korch
