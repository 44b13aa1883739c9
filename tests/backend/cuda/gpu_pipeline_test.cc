// GPU schedules of memory-bound kernels, checked without a GPU:
//  - every memory-bound case of the conformance table compiles to sm_80 PTX in each of its GPU
//    schedule variants, two compilations at a time (as the profiler compiles ahead);
//  - every memory-bound kernel of the tiny paper models' plans (korch, greedy and per-op under the
//    built-in H200 figures) that the shared Halide algorithm defines compiles to PTX;
//  - the scheduled pipelines compute what the reference does: the same Funcs and GPU schedules,
//    compiled for Halide's OpenCL target instead of CUDA and run by an OpenCL implementation on
//    the CPU (POCL, Debian's pocl-opencl-icd): blocks, threads, shared memory, barriers and edge
//    guards are executed, so coverage, bounds and synchronisation of the schedules are checked.
// On a machine with a GPU, the conformance table (conformance_test.cc) runs every case on it.
#include "backend/cuda/gpu_pipeline.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/halide/lowering.h"
#include "backend/kernel_cases.h"
#include "cost/analytic.h"
#include "cost/machine.h"
#include "frontend/onnx_import.h"
#include "orchestrate/optimize.h"
#include "plan/random_inputs.h"
#include "reference/compare.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch::cuda {
namespace {

const char* const kPaperModels[] = {"candy",  "segformer_b0", "efficientvit_b1", "yolox_nano",
                                    "yolov4", "bert_base",    "resnet50"};

// Compiles k to PTX; its launches must fit in the shared memory a block gets without opting in.
void expect_ptx(const PrimGraph& g, const Kernel& k, const std::string& what) {
  std::string why;
  int64_t shared_bytes = 0;
  std::string ptx = gpu_kernel_ptx(g, k, &why, &shared_bytes);
  ASSERT_FALSE(ptx.empty()) << what << ": " << why;
  EXPECT_NE(ptx.find(".target sm_80"), std::string::npos) << what;
  EXPECT_NE(ptx.find(".entry"), std::string::npos) << what;
  EXPECT_GE(shared_bytes, 0) << what << ": shared memory of a launch without a constant bound";
  EXPECT_LE(shared_bytes, kMaxSharedBytesPerBlock) << what;
}

// Compiled on two threads at once, as the profiler compiles kernels ahead (Backend::compiles_concurrently).
TEST(GpuPipeline, EveryMemoryBoundCaseCompilesToPtxInEveryVariant) {
  struct Task {
    PrimGraph g;
    Kernel k;
    std::string what;
  };
  std::vector<Task> tasks;
  for (const KernelCase& c : memory_bound_kernel_cases()) {
    PrimGraph g = c.build();
    Kernel k = whole_graph_kernel(g);
    std::string why;
    ASSERT_TRUE(halide_lowering::defines_kernel(g, k, &why)) << c.name << ": " << why;
    int variants = static_cast<int>(gpu_variants(g, k).size());
    for (k.schedule = 0; k.schedule < variants; ++k.schedule)
      tasks.push_back({g, k, c.name + " / " + gpu_variant_name(gpu_variants(g, k)[k.schedule])});
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < tasks.size(); i = next++) expect_ptx(tasks[i].g, tasks[i].k, tasks[i].what);
  };
  std::thread other(work);
  work();
  other.join();
  std::printf("%zu GPU kernels compiled to PTX on two threads\n", tasks.size());
}

TEST(GpuPipeline, TinyPaperModelKernelsCompileToPtx) {
  AnalyticCostModel h200{builtin_machine_figures("h200")};
  for (const char* model : kPaperModels) {
    SCOPED_TRACE(model);
    std::string path = std::string(KORCH_SOURCE_DIR) + "/models/paper/cases/" + model + "_tiny/model.onnx";
    ImportedModel m = import_onnx_file(path);
    OptimizeResult r = optimize(m.graph, h200);
    std::set<uint64_t> seen;
    int compiled = 0, refused = 0;
    for (const Plan* plan : {&r.korch, &r.greedy, &r.per_op})
      for (const Kernel& k : plan->kernels) {
        if (k.num_linear > 0 || !seen.insert(k.hash).second) continue;
        std::string why;
        if (!halide_lowering::defines_kernel(m.graph, k, &why)) {
          ++refused;
          continue;
        }
        expect_ptx(m.graph, k, str_cat(plan->strategy, " kernel of ", k.prims.size(), " primitives"));
        ++compiled;
      }
    std::printf("%s: %d memory-bound kernels compiled to PTX, %d not defined by the Halide algorithm\n", model,
                compiled, refused);
    EXPECT_GT(compiled, 0);
  }
}

// The GPU target with OpenCL in place of CUDA: the same GPU loops, run by an OpenCL device.
Halide::Target opencl_target() {
  return Halide::get_host_target().with_feature(Halide::Target::OpenCL).with_feature(Halide::Target::CLDoubles);
}

// Realizes the GPU-scheduled pipeline on the OpenCL device and compares with the reference.
void expect_opencl_run_matches(const PrimGraph& g, const Kernel& k, const std::string& what) {
  GpuPipeline p;
  std::string why;
  ASSERT_TRUE(build_gpu_pipeline(g, k, &p, &why)) << what << ": " << why;
  if (p.description.find("global memory") != std::string::npos)
    std::printf("%s: %s\n", what.c_str(), p.description.c_str());
  std::vector<TensorData> inputs = random_kernel_inputs(g, k, 7);
  std::vector<const void*> host;
  for (const TensorData& t : inputs) host.push_back(t.raw());
  const TensorInfo& out = g.tensor(k.output);
  TensorData want(out.dtype, out.shape), got(out.dtype, out.shape);
  make_reference_kernel(g, k)->run(host, want.raw());
  ASSERT_TRUE(halide_lowering::try_building(
      k, &why,
      [&] {
        for (size_t i = 0; i < inputs.size(); ++i) {
          // Host memory only: marked dirty, so that Halide copies it to the device before the launch
          // (halide_copy_to_device copies nothing from a buffer whose host side is not dirty).
          Halide::Buffer<> b = halide_lowering::dense_buffer(g.tensor(k.inputs[i]), inputs[i].raw());
          b.set_host_dirty();
          p.params[i].set(b);
        }
        // The output's device memory starts as a pattern no kernel computes (0x7b7b... is 1.3e36 as
        // f32), so that an element the schedule leaves unwritten cannot pass by holding the right
        // value from an earlier run.
        std::memset(got.raw(), 0x7b, got.byte_size());
        Halide::Buffer<> result = halide_lowering::dense_buffer(out, got.raw());
        result.set_host_dirty();
        ASSERT_EQ(result.copy_to_device(Halide::DeviceAPI::OpenCL, opencl_target()), 0);
        p.pipeline.realize(Halide::Realization(result), opencl_target());
        result.copy_to_host();
      }))
      << what << ": " << why;
  Comparison c = compare_tensors(got, want, Tolerance{1e-4, 1e-3});
  EXPECT_TRUE(c.pass) << what << ": max abs " << c.max_abs_error << ", " << c.mismatches << " mismatches " << c.problem;
}

TEST(GpuPipeline, ScheduledPipelinesComputeTheReferenceOnAnOpenClDevice) {
  // POCL compiles kernels with its own LLVM (15), Halide's JIT lives in LLVM 14: POCL is loaded
  // with its own symbols first so that the two stay apart in one process.
  dlopen("libpocl.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!Halide::host_supports_target_device(opencl_target()))
    GTEST_SKIP() << "no OpenCL device (install pocl-opencl-icd to run the GPU schedules on the CPU)";
  int kernels = 0;
  for (const KernelCase& c : memory_bound_kernel_cases()) {
    PrimGraph g = c.build();
    Kernel k = whole_graph_kernel(g);
    int variants = static_cast<int>(gpu_variants(g, k).size());
    for (k.schedule = 0; k.schedule < variants; ++k.schedule, ++kernels)
      expect_opencl_run_matches(g, k, c.name + " / " + gpu_variant_name(gpu_variants(g, k)[k.schedule]));
  }
  std::printf("%d GPU-scheduled kernels run on the OpenCL device\n", kernels);

  // More rows of blocks (8 rows of 32 lanes each) than the grid's second dimension takes (65535):
  // the block loops go on its first dimension.
  PrimGraph tall;
  TensorId x = tall.add_input("x", DType::F32, {530000, 32});
  tall.mark_output(tall.add_primitive(PrimOp::Neg, {x}, {}));
  Kernel k = whole_graph_kernel(tall);
  expect_ptx(tall, k, "Neg of [530000, 32]");
  expect_opencl_run_matches(tall, k, "Neg of [530000, 32]");
}

}  // namespace
}  // namespace korch::cuda
