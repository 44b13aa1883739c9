// Plan race tests: the plan that comes out is the BLP's or the greedy plan's kernels, the
// decision follows the margin, medians are cached so a second race runs nothing, and identical
// plans are not raced. (Timings are never compared with fixed numbers.)
#include "runtime/plan_race.h"

#include <gtest/gtest.h>

#include "cost/analytic.h"
#include "frontend/onnx_import.h"
#include "orchestrate/optimize.h"
#include "runtime/executor.h"

namespace korch {
namespace {

const std::string kExample = std::string(KORCH_SOURCE_DIR) + "/examples/tiny_cnn";

bool same_prims(const Plan& a, const Plan& b) {
  if (a.kernels.size() != b.kernels.size()) return false;
  for (size_t i = 0; i < a.kernels.size(); ++i)
    if (a.kernels[i].prims != b.kernels[i].prims) return false;
  return true;
}

TEST(PlanRace, KeepsOneOfTheTwoPlansAndCachesTheMedians) {
  ImportedModel m = import_onnx_file(kExample + "/model.onnx");
  AnalyticCostModel model{MachineFigures{}};
  OptimizeResult r = optimize(m.graph, model);
  // The per-op plan stands in for the BLP's (it differs from greedy on this model).
  Plan blp = r.per_op;
  ASSERT_FALSE(same_prims(blp, r.greedy));
  ProfileCache cache(":memory:");
  std::shared_ptr<Backend> cpu = make_backend("cpu", BackendOptions{2});

  // A margin no plan can beat: the BLP's kernels stay, and the note says what was measured.
  Plan kept = blp;
  PlanRace first = race_against_greedy(m.graph, kept, r.greedy, cpu, &cache, 0.99);
  EXPECT_TRUE(first.raced);
  EXPECT_GE(first.rounds, 7);
  EXPECT_GT(first.korch_seconds, 0);
  EXPECT_GT(first.greedy_seconds, 0);
  EXPECT_FALSE(first.greedy_kept);
  EXPECT_TRUE(same_prims(kept, blp));
  EXPECT_NE(kept.note.find("BLP plan kept"), std::string::npos) << kept.note;

  // Same plans again: both medians come from the cache, nothing runs, same numbers. A margin
  // below -1 makes greedy win whatever the timings: its kernels replace the BLP's.
  Plan replaced = blp;
  PlanRace second = race_against_greedy(m.graph, replaced, r.greedy, cpu, &cache, -100);
  EXPECT_EQ(second.rounds, 0);
  EXPECT_EQ(second.korch_seconds, first.korch_seconds);
  EXPECT_EQ(second.greedy_seconds, first.greedy_seconds);
  EXPECT_TRUE(second.greedy_kept);
  EXPECT_TRUE(same_prims(replaced, r.greedy));
  EXPECT_EQ(replaced.strategy, blp.strategy);
  EXPECT_NE(replaced.note.find("greedy plan's kernels kept"), std::string::npos) << replaced.note;
  EXPECT_NE(replaced.note.find("(cached)"), std::string::npos) << replaced.note;
  // The replaced plan is a valid plan of the graph and runs.
  Executor exec(cpu, m.graph, replaced);
  EXPECT_EQ(exec.num_fallback_kernels(), 0);

  // Another target (another thread count) is another cache key: it races again.
  Plan other = blp;
  std::shared_ptr<Backend> cpu1 = make_backend("cpu", BackendOptions{1});
  EXPECT_GT(race_against_greedy(m.graph, other, r.greedy, cpu1, &cache, 0.99).rounds, 0);
}

TEST(PlanRace, IdenticalPlansAreNotRaced) {
  ImportedModel m = import_onnx_file(kExample + "/model.onnx");
  AnalyticCostModel model{MachineFigures{}};
  OptimizeResult r = optimize(m.graph, model);
  Plan same = r.greedy;
  PlanRace race = race_against_greedy(m.graph, same, r.greedy, make_backend("cpu", BackendOptions{2}), nullptr);
  EXPECT_FALSE(race.raced);
  EXPECT_EQ(race.rounds, 0);
  EXPECT_TRUE(same.note.empty());
}

TEST(PlanRace, HashSeesSchedulesAndKernels) {
  ImportedModel m = import_onnx_file(kExample + "/model.onnx");
  AnalyticCostModel model{MachineFigures{}};
  OptimizeResult r = optimize(m.graph, model);
  Plan a = r.greedy, b = r.greedy;
  EXPECT_EQ(plan_hash(m.graph, a), plan_hash(m.graph, b));
  b.kernels[0].schedule = 1;
  EXPECT_NE(plan_hash(m.graph, a), plan_hash(m.graph, b));
  EXPECT_NE(plan_hash(m.graph, r.greedy), plan_hash(m.graph, r.per_op));
}

}  // namespace
}  // namespace korch
