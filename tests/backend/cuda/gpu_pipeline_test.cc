// GPU schedules of memory-bound kernels, checked without a GPU:
//  - every memory-bound case of the conformance table compiles to sm_80 PTX in each of its GPU
//    schedule variants;
//  - every memory-bound kernel of the tiny paper models' plans (korch, greedy and per-op under the
//    built-in H200 figures) that the shared Halide algorithm defines compiles to PTX.
// On a machine with a GPU, the conformance table (conformance_test.cc) runs every case on it.
#include "backend/cuda/gpu_pipeline.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/halide/lowering.h"
#include "backend/kernel_cases.h"
#include "cost/analytic.h"
#include "cost/machine.h"
#include "frontend/onnx_import.h"
#include "orchestrate/optimize.h"
#include "util/error.h"

namespace korch::cuda {
namespace {

const char* const kPaperModels[] = {"candy",  "segformer_b0", "efficientvit_b1", "yolox_nano",
                                    "yolov4", "bert_base",    "resnet50"};

void expect_ptx(const PrimGraph& g, const Kernel& k, const std::string& what) {
  std::string why;
  std::string ptx = gpu_kernel_ptx(g, k, &why);
  ASSERT_FALSE(ptx.empty()) << what << ": " << why;
  EXPECT_NE(ptx.find(".target sm_80"), std::string::npos) << what;
  EXPECT_NE(ptx.find(".entry"), std::string::npos) << what;
}

TEST(GpuPipeline, EveryMemoryBoundCaseCompilesToPtxInEveryVariant) {
  int kernels = 0;
  for (const KernelCase& c : memory_bound_kernel_cases()) {
    PrimGraph g = c.build();
    Kernel k = whole_graph_kernel(g);
    std::string why;
    ASSERT_TRUE(halide_lowering::defines_kernel(g, k, &why)) << c.name << ": " << why;
    int variants = static_cast<int>(gpu_variants(g, k).size());
    for (k.schedule = 0; k.schedule < variants; ++k.schedule, ++kernels)
      expect_ptx(g, k, c.name + " / " + gpu_variant_name(gpu_variants(g, k)[k.schedule]));
  }
  std::printf("%d GPU kernels compiled to PTX\n", kernels);
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

}  // namespace
}  // namespace korch::cuda
