// Runtime tests: liveness-based arena reuse and end-to-end execution of plans on the CPU
// backend against the reference executor, on the example model shipped in the repo.
#include "runtime/executor.h"

#include <gtest/gtest.h>

#include "check/test_case.h"
#include "cost/analytic.h"
#include "frontend/onnx_import.h"
#include "orchestrate/optimize.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch {
namespace {

const std::string kExample = std::string(KORCH_SOURCE_DIR) + "/examples/tiny_cnn";

TEST(Arena, ReusesMemoryOnARealModel) {
  ImportedModel m = import_onnx_file(kExample + "/model.onnx");
  AnalyticCostModel model{MachineFigures{}};
  OptimizeResult r = optimize(m.graph, model);
  for (const Plan* plan : {&r.per_primitive, &r.per_op, &r.greedy, &r.korch}) {
    ArenaPlan a = plan_arena(m.graph, plan->kernels);
    EXPECT_LT(a.arena_bytes, a.total_bytes) << plan->strategy;
    // No two tensors that are alive at once overlap.
    std::vector<int> first(m.graph.num_tensors(), -1), last(m.graph.num_tensors(), -1);
    int n = static_cast<int>(plan->kernels.size());
    for (int i = 0; i < n; ++i) {
      first[plan->kernels[i].output] = i;
      last[plan->kernels[i].output] = std::max(last[plan->kernels[i].output], i);
      for (TensorId t : plan->kernels[i].inputs) last[t] = std::max(last[t], i);
    }
    for (TensorId t : m.graph.outputs()) last[t] = n;
    for (TensorId a1 = 0; a1 < m.graph.num_tensors(); ++a1)
      for (TensorId b1 = a1 + 1; b1 < m.graph.num_tensors(); ++b1) {
        if (a.offset[a1] < 0 || a.offset[b1] < 0) continue;
        bool live_together = !(last[a1] < first[b1] || last[b1] < first[a1]);
        int64_t sa = num_elements(m.graph.tensor(a1).shape) * dtype_size(m.graph.tensor(a1).dtype);
        int64_t sb = num_elements(m.graph.tensor(b1).shape) * dtype_size(m.graph.tensor(b1).dtype);
        bool overlap = a.offset[a1] < a.offset[b1] + sb && a.offset[b1] < a.offset[a1] + sa;
        EXPECT_FALSE(live_together && overlap) << "tensors " << a1 << " and " << b1;
      }
  }
}

TEST(Executor, EveryPlanMatchesTheReference) {
  ImportedModel m = import_onnx_file(kExample + "/model.onnx");
  std::vector<DataSet> sets = load_data_sets(kExample);
  std::vector<TensorData> expected = reference::run_graph(m.graph, sets[0].inputs);
  AnalyticCostModel model{MachineFigures{}};
  OptimizeResult r = optimize(m.graph, model);
  for (const Plan* plan : {&r.per_primitive, &r.per_op, &r.greedy, &r.korch}) {
    Executor exec(make_backend("cpu", BackendOptions{2}), m.graph, *plan);
    exec.set_profiling(true);
    for (int repeat = 0; repeat < 2; ++repeat) {  // the arena is reused across runs
      std::vector<TensorData> got = exec.run(sets[0].inputs);
      ASSERT_EQ(got.size(), expected.size());
      Comparison c = compare_tensors(got[0], expected[0], Tolerance{});
      EXPECT_TRUE(c.pass) << plan->strategy << ": max abs " << c.max_abs_error;
    }
    EXPECT_EQ(exec.last_timings().size(), plan->kernels.size());
  }
}

TEST(Executor, WrongInputsAreClearErrors) {
  ImportedModel m = import_onnx_file(kExample + "/model.onnx");
  AnalyticCostModel model{MachineFigures{}};
  Executor exec(make_backend("cpu", BackendOptions{2}), m.graph, optimize(m.graph, model).korch);
  EXPECT_THROW(exec.run({}), Error);
  EXPECT_THROW(exec.run({TensorData(DType::F32, {1, 3, 8, 8})}), Error);
}

}  // namespace
}  // namespace korch
