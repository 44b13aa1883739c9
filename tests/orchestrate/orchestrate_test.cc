// Orchestration tests: partitioning, candidate enumeration, baselines, the BLP against brute
// force on random DAGs, plan validation and JSON, and optimize() properties on small models.
#include <coin/Cbc_C_Interface.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>

#include "backend/kernel_cases.h"
#include "cost/analytic.h"
#include "orchestrate/baselines.h"
#include "orchestrate/blp.h"
#include "orchestrate/candidates.h"
#include "orchestrate/optimize.h"
#include "orchestrate/partition.h"
#include "plan/plan.h"
#include "plan/run_plan.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch {
namespace {

Partition whole(const PrimGraph& g) {
  Partition p;
  for (PrimId i = 0; i < g.num_prims(); ++i) p.prims.push_back(i);
  p.required = g.outputs();
  return p;
}

Attrs conv_attrs() {
  Attrs a;
  a.set("strides", std::vector<int64_t>{1, 1}).set("pads", std::vector<int64_t>{1, 1, 1, 1});
  a.set("dilations", std::vector<int64_t>{1, 1}).set("group", int64_t{1});
  return a;
}

// x -> [conv -> add bias -> relu -> + x] repeated `blocks` times (residual blocks).
PrimGraph residual_net(int blocks) {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {1, 4, 8, 8});
  for (int b = 0; b < blocks; ++b) {
    TensorId w = g.add_constant("w", std::make_shared<const TensorData>(TensorData(DType::F32, {4, 4, 3, 3})));
    TensorId bias = g.add_constant("b", std::make_shared<const TensorData>(TensorData(DType::F32, {4, 1, 1})));
    TensorId y = g.add_primitive(PrimOp::Conv, {x, w}, conv_attrs());
    y = g.add_primitive(PrimOp::Add, {y, bias}, {});
    y = g.add_primitive(PrimOp::Relu, {y}, {});
    x = g.add_primitive(PrimOp::Add, {y, x}, {});
  }
  g.mark_output(x);
  return g;
}

TEST(Partition, CutsAtSingleLiveTensorsAndFindsRepeats) {
  PrimGraph g = residual_net(4);
  PartitionOptions o;
  o.max_prims = 4;
  auto parts = partition_graph(g, o);
  ASSERT_EQ(parts.size(), 4u);
  for (const auto& p : parts) {
    EXPECT_EQ(p.prims.size(), 4u);
    EXPECT_EQ(p.required.size(), 1u);
    EXPECT_EQ(p.hash, parts[0].hash);  // identical blocks
  }
  o.max_prims = 8;
  EXPECT_EQ(partition_graph(g, o).size(), 2u);
  // A protected boundary (after block 1) is never a cut.
  o.protected_boundaries.assign(g.num_prims(), 0);
  o.protected_boundaries[3] = 1;
  o.max_prims = 4;
  auto prot = partition_graph(g, o);
  for (size_t i = 0; i + 1 < prot.size(); ++i) EXPECT_NE(prot[i].prims.back(), 3);
}

TEST(Candidates, ChainCountsAndProperties) {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {16});
  TensorId a = g.add_primitive(PrimOp::Exp, {x}, {});
  TensorId b = g.add_primitive(PrimOp::Neg, {a}, {});
  g.mark_output(g.add_primitive(PrimOp::Abs, {b}, {}));
  EXPECT_EQ(enumerate_candidates(g, whole(g)).size(), 6u);  // {a},{b},{c},{ab},{bc},{abc}
  CandidateOptions two;
  two.max_prims = 2;
  EXPECT_EQ(enumerate_candidates(g, whole(g), two).size(), 5u);
}

TEST(Candidates, ConvexSingleSinkAtMostOneLinear) {
  PrimGraph g = residual_net(3);
  auto consumers = g.consumers();
  for (const Kernel& k : enumerate_candidates(g, whole(g))) {
    EXPECT_LE(k.num_linear, 1);
    EXPECT_LE(k.prims.size(), 8u);
    // Convex: no path from a member through a non-member back into the set.
    std::vector<char> in(g.num_prims(), 0), reach(g.num_prims(), 0);
    for (PrimId p : k.prims) in[p] = 1;
    for (PrimId p = 0; p < g.num_prims(); ++p) {
      if (in[p]) continue;
      for (TensorId t : g.prim(p).inputs) {
        PrimId q = g.tensor(t).producer;
        if (q != kNone && (in[q] || reach[q])) reach[p] = 1;
      }
    }
    for (PrimId p : k.prims)
      for (TensorId t : g.prim(p).inputs) {
        PrimId q = g.tensor(t).producer;
        EXPECT_FALSE(q != kNone && !in[q] && reach[q]) << "non-convex candidate";
      }
  }
}

TEST(Baselines, GreedyFusesConvEpilogueAndResidual) {
  PrimGraph g = residual_net(2);
  auto groups = greedy_groups(g);
  // conv + bias + relu + residual add per block: 2 groups.
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].size(), 4u);
  auto kernels = kernels_from_groups(g, groups);
  EXPECT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels_from_groups(g, per_primitive_groups(g)).size(), static_cast<size_t>(g.num_prims()));
}

// Random DAG of unary/binary elementwise primitives; every sink is an output.
PrimGraph random_dag(std::mt19937& rng, int n) {
  PrimGraph g;
  std::vector<TensorId> tensors = {g.add_input("x", DType::F32, {32})};
  for (int i = 0; i < n; ++i) {
    std::uniform_int_distribution<size_t> pick(0, tensors.size() - 1);
    // Bias toward recent tensors so the DAG is deep as well as wide.
    size_t a = std::max(pick(rng), pick(rng));
    if (rng() % 3 == 0)
      tensors.push_back(g.add_primitive(PrimOp::Exp, {tensors[a]}, {}));
    else
      tensors.push_back(g.add_primitive(PrimOp::Add, {tensors[a], tensors[pick(rng)]}, {}));
  }
  auto consumers = g.consumers();
  for (PrimId p = 0; p < g.num_prims(); ++p)
    if (consumers[g.prim(p).output].empty()) g.mark_output(g.prim(p).output);
  return g;
}

// The candidates of the largest kernel-size bound that yields at most `limit` of them (brute
// force stays feasible).
std::vector<Kernel> candidates_at_most(const PrimGraph& g, const Partition& part, size_t limit) {
  std::vector<Kernel> cands;
  for (int bound = g.num_prims(); bound >= 1; --bound) {
    CandidateOptions o;
    o.max_prims = bound;
    cands = enumerate_candidates(g, part, o);
    if (cands.size() <= limit) break;
  }
  return cands;
}

// The BLP solved to optimality matches exhaustive search; a root-only solve stays between the
// optimum and its warm start.
TEST(Blp, MatchesBruteForceOnRandomDags) {
  std::mt19937 rng(12345);
  int checked = 0;
  for (int trial = 0; checked < 200 && trial < 5000; ++trial) {
    int n = 3 + static_cast<int>(rng() % 10);  // 3..12 primitives
    PrimGraph g = random_dag(rng, n);
    Partition part = whole(g);
    std::vector<Kernel> cands = candidates_at_most(g, part, 20);
    std::uniform_real_distribution<double> cost(1.0, 10.0);
    for (Kernel& k : cands) k.cost = cost(rng) * (1.0 + 0.2 * k.prims.size());
    SelectionProblem problem = selection_problem(g, part, cands);
    SelectionResult exact = solve_selection_brute_force(problem);
    SelectionResult blp = solve_selection_blp(problem, {}, 30);
    ASSERT_TRUE(blp.proven_optimal);
    ASSERT_TRUE(selection_is_feasible(problem, blp.chosen));
    ASSERT_NEAR(blp.cost, exact.cost, 1e-6)
        << "trial " << trial << " with " << n << " primitives, " << cands.size() << " candidates";
    // A root-only solve: a feasible selection, never dearer than its warm start (the single
    // primitives) nor cheaper than the optimum, and a lower bound; only a proof says optimal.
    std::vector<int> singles;
    for (size_t k = 0; k < cands.size(); ++k)
      if (cands[k].prims.size() == 1) singles.push_back(static_cast<int>(k));
    SelectionResult root = solve_selection_blp(problem, singles, 30, SolveDepth::RootOnly);
    ASSERT_TRUE(selection_is_feasible(problem, root.chosen));
    if (selection_is_feasible(problem, singles)) {
      EXPECT_LE(root.cost, selection_cost(problem, singles) * (1 + 1e-9));
    }
    EXPECT_GE(root.cost, exact.cost * (1 - 1e-9));
    EXPECT_LE(root.lower_bound, exact.cost * (1 + 1e-9));
    if (root.proven_optimal) {
      EXPECT_NEAR(root.cost, exact.cost, 1e-6);
    } else {
      EXPECT_EQ(root.status.rfind("root only", 0), 0u) << root.status;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 200);
}

// A relative gap ends the search within that fraction of the optimum; a selection the bound does not
// meet exactly is within_gap, not proven optimal, and says so. (Random DAGs of 30-40 primitives, all
// candidates of up to 4: too many for brute force, so the optimum is a solve without the gap.)
TEST(Blp, RelativeGapStopsWithinTheGapOfTheOptimum) {
  std::mt19937 rng(777);
  const double gap = 0.3;
  int stopped_at_gap = 0;
  for (int trial = 0; trial < 20; ++trial) {
    PrimGraph g = random_dag(rng, 30 + static_cast<int>(rng() % 11));
    Partition part = whole(g);
    CandidateOptions o;
    o.max_prims = 4;
    std::vector<Kernel> cands = enumerate_candidates(g, part, o);
    std::uniform_real_distribution<double> cost(1.0, 10.0);
    for (Kernel& k : cands) k.cost = cost(rng) * (1.0 + 0.2 * k.prims.size());
    SelectionProblem problem = selection_problem(g, part, cands);
    SelectionResult exact = solve_selection_blp(problem, {}, 60);
    ASSERT_TRUE(exact.proven_optimal);
    SelectionResult blp = solve_selection_blp(problem, {}, 60, SolveDepth::ToOptimality, gap);
    ASSERT_TRUE(selection_is_feasible(problem, blp.chosen));
    EXPECT_LE(blp.lower_bound, exact.cost * (1 + 1e-9));
    EXPECT_LE(blp.cost, exact.cost / (1 - gap) * (1 + 1e-9)) << "trial " << trial;
    EXPECT_NE(blp.proven_optimal, blp.within_gap);
    if (blp.proven_optimal) {
      EXPECT_NEAR(blp.cost, exact.cost, 1e-6 * exact.cost);
    } else {
      EXPECT_EQ(blp.status.rfind("optimal within 30%", 0), 0u) << blp.status;
      ++stopped_at_gap;
    }
  }
  EXPECT_GT(stopped_at_gap, 0);  // the gap ended some searches before a proof
}

// Lazy profiling's closing question on seconds-scale costs: a bound above the optimum yields a
// feasible selection below it; a bound at or below the optimum yields the proof that none exists
// and the fallback selection (here the single primitives).
TEST(Blp, FindsASelectionBelowABoundOrProvesThereIsNone) {
  std::mt19937 rng(2468);
  int checked = 0;
  for (int trial = 0; checked < 100 && trial < 5000; ++trial) {
    PrimGraph g = random_dag(rng, 4 + static_cast<int>(rng() % 9));
    Partition part = whole(g);
    std::vector<Kernel> cands = candidates_at_most(g, part, 20);
    std::uniform_real_distribution<double> cost(1e-6, 1e-4);
    for (Kernel& k : cands) k.cost = cost(rng) * (1.0 + 0.2 * k.prims.size());
    SelectionProblem problem = selection_problem(g, part, cands);
    std::vector<int> singles;
    for (size_t k = 0; k < cands.size(); ++k)
      if (cands[k].prims.size() == 1) singles.push_back(static_cast<int>(k));
    if (!selection_is_feasible(problem, singles)) continue;
    double optimum = solve_selection_brute_force(problem).cost;

    SelectionResult above = find_selection_below(problem, singles, optimum * 1.05, 30);
    EXPECT_FALSE(above.none_below);
    ASSERT_TRUE(selection_is_feasible(problem, above.chosen));
    EXPECT_LT(above.cost, optimum * 1.05);
    EXPECT_GE(above.cost, optimum * (1 - 1e-9));

    for (double below : {optimum * (1 - 1e-6), optimum * 0.9}) {
      SelectionResult none = find_selection_below(problem, singles, below, 30);
      ASSERT_TRUE(none.none_below) << "trial " << trial << ": " << none.status;
      EXPECT_EQ(none.lower_bound, below);
      EXPECT_NEAR(none.cost, selection_cost(problem, singles), 1e-12);
      EXPECT_EQ(none.status.rfind("no selection below", 0), 0u) << none.status;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 100);
}

// Measured costs are seconds, 1e-7 .. 1e-3 per kernel: as small as CBC's absolute tolerances.
// The optimum must still be exact (the BLP scales its objective).
TEST(Blp, SecondsScaleCostsMatchBruteForce) {
  std::mt19937 rng(4242);
  int checked = 0;
  for (int trial = 0; checked < 150 && trial < 5000; ++trial) {
    int n = 4 + static_cast<int>(rng() % 9);
    PrimGraph g = random_dag(rng, n);
    Partition part = whole(g);
    std::vector<Kernel> cands = candidates_at_most(g, part, 20);
    std::uniform_real_distribution<double> exponent(-7.0, -3.0);
    for (Kernel& k : cands) k.cost = std::pow(10.0, exponent(rng));
    SelectionProblem problem = selection_problem(g, part, cands);
    SelectionResult exact = solve_selection_brute_force(problem);
    SelectionResult blp = solve_selection_blp(problem, {}, 30);
    ASSERT_TRUE(blp.proven_optimal);
    ASSERT_TRUE(selection_is_feasible(problem, blp.chosen));
    ASSERT_NEAR(blp.cost, exact.cost, 1e-9 * exact.cost) << "trial " << trial << " with " << n << " primitives";
    EXPECT_LE(blp.lower_bound, blp.cost * (1 + 1e-9));
    EXPECT_GE(blp.lower_bound, blp.cost * (1 - 1e-6));
    ++checked;
  }
  EXPECT_EQ(checked, 150);
}

// Layout links: some candidates keep their output in an internal layout, some read inputs in
// it, some (memory-bound kernels) take all their links or none; the BLP's linearisation must
// find the same optimum as brute force over selection_cost.
TEST(Blp, LayoutLinksMatchBruteForceOnRandomDags) {
  std::mt19937 rng(777);
  int checked = 0, with_savings = 0, with_together = 0;
  for (int trial = 0; checked < 150 && trial < 5000; ++trial) {
    int n = 3 + static_cast<int>(rng() % 10);
    PrimGraph g = random_dag(rng, n);
    Partition part = whole(g);
    std::vector<Kernel> cands = candidates_at_most(g, part, 18);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::vector<std::vector<double>> links(cands.size());
    for (size_t i = 0; i < cands.size(); ++i) {
      Kernel& k = cands[i];
      k.cost = (1.0 + 9.0 * unit(rng)) * (1.0 + 0.2 * k.prims.size());
      // 70% stand for linear kernels (links per tensor), 30% for memory-bound ones (all or none).
      k.num_linear = unit(rng) < 0.7 ? 1 : 0;
      if (unit(rng) < 0.3) continue;
      // Savings stay below half the cost, so a duplicate producer never pays off.
      links[i].assign(k.inputs.size() + 1, -1.0);
      if (unit(rng) < 0.7) links[i][0] = 0.25 * k.cost * unit(rng);
      for (size_t j = 0; j < k.inputs.size(); ++j)
        if (unit(rng) < 0.7) links[i][1 + j] = 0.25 * k.cost * unit(rng) / k.inputs.size();
    }
    SelectionProblem problem = selection_problem(g, part, cands, &links);
    SelectionResult exact = solve_selection_brute_force(problem);
    SelectionResult blp = solve_selection_blp(problem, {}, 30);
    ASSERT_TRUE(blp.proven_optimal);
    ASSERT_TRUE(selection_is_feasible(problem, blp.chosen));
    ASSERT_NEAR(blp.cost, exact.cost, 1e-6) << "trial " << trial << " with " << n << " primitives";
    double plain = 0;
    for (int k : exact.chosen) plain += problem.candidates[k].cost;
    with_savings += exact.cost < plain - 1e-9;
    with_together += std::any_of(exact.chosen.begin(), exact.chosen.end(), [&](int k) {
      const SelectionProblem::Candidate& c = problem.candidates[k];
      return c.links_together && (c.output_link_saving >= 0 || !c.input_link_savings.empty());
    });
    ++checked;
  }
  EXPECT_EQ(checked, 150);
  EXPECT_GT(with_savings, 20);   // the links mattered in a good share of the problems
  EXPECT_GT(with_together, 10);  // and so did all-or-none kernels
}

TEST(Blp, AllOrNoneKernelLinksEveryTensorOrNone) {
  // t0 <- A; t1 <- H(t0); t2 <- B(t1); H takes its links together (saving nothing itself), A and
  // B save 4 and 3 when t0 and t1 stay in the internal layout.
  SelectionProblem p;
  p.num_tensors = p.num_prims = 4;
  p.required = {2};
  SelectionProblem::Candidate a{10, 0, {}, {0}, 4, {}};
  SelectionProblem::Candidate h{10, 1, {0}, {1}, 0, {{0, 0}}, true};
  SelectionProblem::Candidate b{10, 2, {1}, {2}, -1, {{1, 3}}};
  p.candidates = {a, h, b};
  EXPECT_DOUBLE_EQ(selection_cost(p, {0, 1, 2}), 30 - 4 - 3);
  EXPECT_DOUBLE_EQ(solve_selection_blp(p, {}, 10).cost, 23);
  // t1 also read by C, which takes it dense: t1 cannot link, so H links neither, and t0 stays
  // dense too although every reader of t0 could take it linked.
  SelectionProblem::Candidate c{10, 3, {1}, {3}, -1, {}};
  p.candidates.push_back(c);
  p.required = {2, 3};
  EXPECT_DOUBLE_EQ(selection_cost(p, {0, 1, 2, 3}), 40);
  EXPECT_DOUBLE_EQ(solve_selection_blp(p, {}, 10).cost, 40);
  // Taken one tensor at a time, t0 would have linked.
  p.candidates[1].links_together = false;
  EXPECT_DOUBLE_EQ(selection_cost(p, {0, 1, 2, 3}), 36);
  EXPECT_DOUBLE_EQ(solve_selection_blp(p, {}, 10).cost, 36);
}

TEST(Blp, LinkedTensorNeedsEveryReaderToTakeTheLayout) {
  // t0 <- A; t1 <- B(t0); t2 <- C(t0); t1 and t2 required. A's output saving counts only
  // when both B and C read t0 in the internal layout.
  SelectionProblem p;
  p.num_tensors = p.num_prims = 3;
  p.required = {1, 2};
  SelectionProblem::Candidate a{10, 0, {}, {0}, 4, {}};
  SelectionProblem::Candidate b{10, 1, {0}, {1}, -1, {{0, 3}}};
  SelectionProblem::Candidate c{10, 2, {0}, {2}, -1, {}};
  p.candidates = {a, b, c};
  EXPECT_DOUBLE_EQ(selection_cost(p, {0, 1, 2}), 30);  // C reads t0 densely: no link
  p.candidates[2].input_link_savings = {{0, 1}};
  EXPECT_DOUBLE_EQ(selection_cost(p, {0, 1, 2}), 30 - 4 - 3 - 1);
  p.required = {0, 1, 2};  // a required tensor stays dense
  EXPECT_DOUBLE_EQ(selection_cost(p, {0, 1, 2}), 30);
  EXPECT_DOUBLE_EQ(solve_selection_blp(p, {}, 10).cost, 30);
  p.required = {1, 2};
  EXPECT_DOUBLE_EQ(solve_selection_blp(p, {}, 10).cost, 22);
}

TEST(Plan, ValidationJsonAndForeignGraphs) {
  PrimGraph g = residual_net(2);
  AnalyticCostModel model{MachineFigures{}};
  OptimizeResult r = optimize(g, model);
  EXPECT_TRUE(validate_plan(g, r.korch).empty());
  EXPECT_LE(r.korch.predicted_seconds(), r.greedy.predicted_seconds() + 1e-12);
  EXPECT_LE(r.korch.predicted_seconds(), r.per_op.predicted_seconds() + 1e-12);
  // JSON round trip, schedule variants included.
  r.korch.kernels.back().schedule = 1;
  Plan back = plan_from_json(g, plan_to_json(g, r.korch), "test plan");
  ASSERT_EQ(back.kernels.size(), r.korch.kernels.size());
  EXPECT_EQ(r.korch.codegen, "");      // an analytic plan names no backend's code generator
  r.korch.codegen = "test-codegen-1";  // a measured one does, and it travels with the plan
  back = plan_from_json(g, plan_to_json(g, r.korch), "test plan");
  EXPECT_EQ(back.codegen, "test-codegen-1");
  EXPECT_EQ(codegen_mismatch(back, "test-codegen-1"), "");
  EXPECT_NE(codegen_mismatch(back, "test-codegen-2"), "");
  for (size_t i = 0; i < back.kernels.size(); ++i) {
    EXPECT_EQ(back.kernels[i].prims, r.korch.kernels[i].prims);
    EXPECT_EQ(back.kernels[i].schedule, r.korch.kernels[i].schedule);
  }
  r.korch.kernels.back().schedule = -3;
  EXPECT_THROW(plan_from_json(g, plan_to_json(g, r.korch), "p"), Error);
  r.korch.kernels.back().schedule = 0;
  // A plan for another graph, a corrupt file, a plan missing a kernel.
  EXPECT_THROW(plan_from_json(residual_net(3), plan_to_json(g, r.korch), "p"), Error);
  EXPECT_THROW(plan_from_json(g, "{\"format\": 3", "p"), Error);
  Plan broken = r.per_primitive;
  broken.kernels.erase(broken.kernels.begin());
  EXPECT_FALSE(validate_plan(g, broken).empty());
  EXPECT_THROW(reference::run_plan(g, broken, {TensorData(DType::F32, {1, 4, 8, 8})}), Error);
}

TEST(Plan, EveryPlanComputesTheGraph) {
  PrimGraph g = residual_net(3);
  TensorData x(DType::F32, {1, 4, 8, 8});
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = static_cast<float>(i % 13) * 0.1f - 0.6f;
  TensorData expect = reference::run_graph(g, {x})[0];
  AnalyticCostModel model{MachineFigures{}};
  OptimizeResult r = optimize(g, model);
  for (const Plan* plan : {&r.korch, &r.greedy, &r.per_op, &r.per_primitive}) {
    TensorData got = reference::run_plan(g, *plan, {x})[0];
    for (int64_t i = 0; i < got.size(); ++i) ASSERT_EQ(got.get_f64(i), expect.get_f64(i)) << plan->strategy;
  }
}

TEST(Optimize, FusedAttentionIsACandidateTheBlpCanChoose) {
  // At 1024 keys the fused kernel moves a fraction of the unfused kernels' bytes (the scores stay
  // inside it), so the analytic costs choose it; without the option it is never offered.
  PrimGraph g = attention_graph({4}, 128, 1024, 32, 32, true, true);
  AnalyticCostModel model{MachineFigures{}};
  auto has_attention = [](const Plan& p) {
    return std::any_of(p.kernels.begin(), p.kernels.end(), [](const Kernel& k) { return k.num_linear == 2; });
  };
  OptimizeResult fused = optimize(g, model);
  EXPECT_TRUE(has_attention(fused.korch));
  EXPECT_LE(fused.korch.predicted_seconds(), fused.greedy.predicted_seconds());
  OptimizeOptions off;
  off.candidates.fused_attention = false;
  OptimizeResult unfused = optimize(g, model, off);
  EXPECT_FALSE(has_attention(unfused.korch));
  EXPECT_LT(fused.korch.predicted_seconds(), unfused.korch.predicted_seconds());
}

TEST(Optimize, ProgressGoesFromTheGreedyPlanToTheChosenOne) {
  PrimGraph g = residual_net(4);
  AnalyticCostModel model{MachineFigures{}};
  std::vector<OptimizeProgress> seen;
  OptimizeOptions options;
  options.partition.max_prims = 8;
  options.progress = [&seen](const OptimizeProgress& p) { seen.push_back(p); };
  OptimizeResult r = optimize(g, model, options);
  auto cost_sum = [](const Plan& p) {
    double s = 0;
    for (const Kernel& k : p.kernels) s += k.cost;
    return s;
  };
  ASSERT_EQ(seen.size(), r.partitions.size() + 1);
  ASSERT_GT(r.partitions.size(), 1u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].partitions_done, static_cast<int>(i));
    EXPECT_EQ(seen[i].partitions, static_cast<int>(r.partitions.size()));
    EXPECT_LE(seen[i].best_plan_seconds, seen.front().best_plan_seconds * (1 + 1e-12));
  }
  EXPECT_DOUBLE_EQ(seen.front().best_plan_seconds, cost_sum(r.greedy));
  EXPECT_DOUBLE_EQ(seen.back().best_plan_seconds, cost_sum(r.korch));
}

TEST(Optimize, AnalyticPlanKeepsToWhatTheTargetSupports) {
  // A target that generates no fused kernel with a linear primitive: the analytic plan then fuses
  // only memory-bound primitives, and still computes the graph.
  PrimGraph g = residual_net(3);
  AnalyticCostModel model{MachineFigures{}};
  OptimizeResult unrestricted = optimize(g, model);
  auto fuses_linear = [](const Plan& p) {
    return std::any_of(p.kernels.begin(), p.kernels.end(),
                       [](const Kernel& k) { return k.num_linear > 0 && k.prims.size() > 1; });
  };
  ASSERT_TRUE(fuses_linear(unrestricted.korch));
  OptimizeOptions options;
  int asked = 0;
  options.supported = [&asked](const PrimGraph&, const Kernel& k) {
    ++asked;
    return k.num_linear == 0;
  };
  OptimizeResult restricted = optimize(g, model, options);
  EXPECT_GT(asked, 0);
  EXPECT_FALSE(fuses_linear(restricted.korch));
  EXPECT_GE(restricted.korch.predicted_seconds(), unrestricted.korch.predicted_seconds());
  TensorData x(DType::F32, {1, 4, 8, 8});
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = static_cast<float>(i % 7) * 0.2f - 0.5f;
  TensorData expect = reference::run_graph(g, {x})[0];
  TensorData got = reference::run_plan(g, restricted.korch, {x})[0];
  for (int64_t i = 0; i < got.size(); ++i) ASSERT_EQ(got.get_f64(i), expect.get_f64(i));
}

TEST(Blp, TimeLimitReturnsBestPlanWithGap) {
  // A tiny limit still yields a feasible plan (the warm start at worst) and says so.
  PrimGraph g = residual_net(4);
  AnalyticCostModel model{MachineFigures{}};
  OptimizeOptions o;
  o.solver_time_limit = 1e-6;
  OptimizeResult r = optimize(g, model, o);
  EXPECT_TRUE(validate_plan(g, r.korch).empty());
  EXPECT_LE(r.korch.predicted_seconds(), r.greedy.predicted_seconds() + 1e-12);
}

// The BLP of a two-block residual net's candidates at analytic prices, and its one-primitive
// kernels (a feasible warm start).
SelectionProblem residual_problem(std::vector<int>* singles, size_t* num_candidates) {
  PrimGraph g = residual_net(2);
  Partition part = whole(g);
  std::vector<Kernel> cands = enumerate_candidates(g, part, CandidateOptions{});
  AnalyticCostModel model{MachineFigures{}};
  for (Kernel& k : cands) k.cost = model.cost(g, k);
  for (size_t k = 0; k < cands.size(); ++k)
    if (cands[k].prims.size() == 1) singles->push_back(static_cast<int>(k));
  *num_candidates = cands.size();
  return selection_problem(g, part, cands);
}

// CBC's C interface passes a warm start to the solver by column name, so every column of the BLP
// has its own: read back from the problem a solve dumps (KORCH_BLP_DUMP_DIR), the columns carry
// korch's names c0, c1, ... (a model built with empty names gets the writer's C0000000, ... in the
// file, and lost its warm start in the solve).
TEST(Blp, ColumnsAreNamedSoThatTheWarmStartReachesCbc) {
  std::vector<int> singles;
  size_t num_candidates = 0;
  SelectionProblem problem = residual_problem(&singles, &num_candidates);
  std::filesystem::path dir =
      std::filesystem::path(testing::TempDir()) / ("korch_blp_names_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ASSERT_EQ(setenv("KORCH_BLP_DUMP_DIR", dir.c_str(), 1), 0);
  SelectionResult r = solve_selection_blp(problem, singles, 60);
  unsetenv("KORCH_BLP_DUMP_DIR");
  EXPECT_TRUE(r.proven_optimal);
  std::filesystem::path mps;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().string().find(".mps") != std::string::npos) mps = e.path();
  ASSERT_FALSE(mps.empty()) << "no problem dumped in " << dir;
  Cbc_Model* read = Cbc_newModel();
  Cbc_setLogLevel(read, 0);
  ASSERT_EQ(Cbc_readMps(read, mps.c_str()), 0);
  int columns = Cbc_getNumCols(read);
  EXPECT_GE(columns, static_cast<int>(num_candidates));  // kernel columns, then any link columns
  for (int c = 0; c < columns; ++c) {
    char name[64] = {};
    Cbc_getColName(read, c, name, sizeof name - 1);
    ASSERT_EQ(std::string(name), "c" + std::to_string(c));
  }
  Cbc_deleteModel(read);
  std::filesystem::remove_all(dir);
}

// A solver that dies (CBC aborts on some inputs: its assertions are compiled in) costs the solve
// its proof, not the process: the warm start comes back, feasible and said to be unproven; with
// no warm start the error is a korch::Error, not a crash.
TEST(Blp, SolverCrashKeepsTheWarmStart) {
  std::vector<int> singles;
  size_t num_candidates = 0;
  SelectionProblem problem = residual_problem(&singles, &num_candidates);
  ASSERT_TRUE(selection_is_feasible(problem, singles));
  SelectionResult normal = solve_selection_blp(problem, singles, 60);
  EXPECT_TRUE(normal.proven_optimal);
  // The problem the solver died on is kept as an MPS file in the temp folder for a report.
  std::filesystem::path tmp =
      std::filesystem::path(testing::TempDir()) / ("korch_blp_crash_" + std::to_string(getpid()));
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);
  const char* old_tmpdir = std::getenv("TMPDIR");
  std::string saved_tmpdir = old_tmpdir ? old_tmpdir : "";
  ASSERT_EQ(setenv("TMPDIR", tmp.c_str(), 1), 0);
  ASSERT_EQ(setenv("KORCH_TEST_SOLVER_ABORT", "1", 1), 0);
  SelectionResult crashed = solve_selection_blp(problem, singles, 60);
  EXPECT_THROW(solve_selection_blp(problem, {}, 60), Error);
  unsetenv("KORCH_TEST_SOLVER_ABORT");
  if (old_tmpdir)
    setenv("TMPDIR", saved_tmpdir.c_str(), 1);
  else
    unsetenv("TMPDIR");
  EXPECT_FALSE(crashed.proven_optimal);
  EXPECT_TRUE(selection_is_feasible(problem, crashed.chosen));
  EXPECT_NEAR(crashed.cost, selection_cost(problem, crashed.chosen), 1e-15);
  EXPECT_GE(crashed.cost, normal.cost);
  EXPECT_NE(crashed.status.find("signal 6"), std::string::npos) << crashed.status;
  size_t at = crashed.status.find("problem written to ");
  ASSERT_NE(at, std::string::npos) << crashed.status;
  std::string file = crashed.status.substr(at + 19);
  file = file.substr(0, file.find(')'));
  EXPECT_EQ(std::filesystem::path(file).parent_path(), tmp);
  std::error_code ec;
  EXPECT_GT(std::filesystem::file_size(file, ec), 100u) << ec.message();
  std::filesystem::remove_all(tmp, ec);
}

// A deterministic measurer: "measured" cost = 1.5x the analytic estimate + 5 us per kernel,
// counting measurements; partition solutions are kept in memory like the profile cache keeps them.
class FakeMeasurer : public KernelMeasurer {
 public:
  // fusion_penalty > 0 makes kernels of many primitives dearer than their estimates, so that
  // lazy profiling needs several rounds.
  explicit FakeMeasurer(CostModel& model, double fusion_penalty = 0) : model_(model), penalty_(fusion_penalty) {}
  std::optional<double> measure(const PrimGraph& g, const Kernel& k) override {
    ++measured;
    return (1.5 + penalty_ * static_cast<double>(k.prims.size() - 1)) * model_.cost(g, k) + 5e-6;
  }
  double measure_fallback(const PrimGraph& g, const Kernel& k) override { return *measure(g, k); }
  bool implementable(const PrimGraph&, const Kernel&) override { return true; }
  std::string name() const override { return "fake"; }
  std::optional<StoredSolution> stored_solution(uint64_t key) override {
    auto it = solutions.find(key);
    if (it == solutions.end()) return std::nullopt;
    return it->second;
  }
  void store_solution(uint64_t key, const StoredSolution& s) override { solutions[key] = s; }
  std::map<uint64_t, StoredSolution> solutions;
  int measured = 0;

 protected:
  CostModel& model_;
  double penalty_;
};

TEST(Optimize, WarmRunReplaysStoredPartitionSolutions) {
  PrimGraph g = residual_net(3);
  AnalyticCostModel model{MachineFigures{}};
  FakeMeasurer measurer(model);
  OptimizeOptions options;
  options.measurer = &measurer;
  OptimizeResult cold = optimize(g, model, options);
  EXPECT_EQ(cold.num_stored_solutions, 0);
  EXPECT_GT(cold.solve_rounds, 0);
  ASSERT_FALSE(measurer.solutions.empty());

  OptimizeResult warm = optimize(g, model, options);
  EXPECT_EQ(warm.num_stored_solutions, warm.num_unique_partitions);
  EXPECT_EQ(warm.solve_rounds, 0);
  EXPECT_EQ(warm.all_optimal, cold.all_optimal);
  ASSERT_EQ(warm.korch.kernels.size(), cold.korch.kernels.size());
  for (size_t i = 0; i < cold.korch.kernels.size(); ++i)
    EXPECT_EQ(warm.korch.kernels[i].prims, cold.korch.kernels[i].prims);
  EXPECT_DOUBLE_EQ(warm.korch.predicted_seconds(), cold.korch.predicted_seconds());

  // A stored solution that no longer fits (offsets out of range, a primitive left out, sets
  // that are not single kernels) is ignored: the partition is solved again, to the same plan.
  for (auto& [key, s] : measurer.solutions) s.sets.back().push_back(100000);
  OptimizeResult bad_offsets = optimize(g, model, options);
  EXPECT_EQ(bad_offsets.num_stored_solutions, 0);
  EXPECT_EQ(bad_offsets.korch.kernels.size(), cold.korch.kernels.size());
  for (auto& [key, s] : measurer.solutions) s.sets.pop_back();
  for (auto& [key, s] : measurer.solutions) {
    std::vector<int> all;
    for (const auto& set : s.sets) all.insert(all.end(), set.begin(), set.end());
    s.sets = {{all.front(), all.back()}};  // two primitives apart: not one kernel, nothing required
  }
  OptimizeResult not_kernels = optimize(g, model, options);
  EXPECT_EQ(not_kernels.num_stored_solutions, 0);
  EXPECT_EQ(not_kernels.korch.kernels.size(), cold.korch.kernels.size());
}

// The learned model at most ranks the rivals lazy profiling measures: the plan is the same optimum of
// the measured costs with or without it, and its predictions are closer to the measurements than
// the prices (here fused kernels run slower than their estimates by a factor that grows with
// their size, which the nearest kernels of the same size tell and the class minimum does not).
TEST(Optimize, LearnedRankingKeepsTheOptimumAndPredictsBetterThanThePrices) {
  PrimGraph g = residual_net(4);
  AnalyticCostModel model{MachineFigures{}};
  std::vector<OptimizeResult> results;
  for (int neighbours : {0, 2}) {
    FakeMeasurer measurer(model, 4.0);
    OptimizeOptions options;
    options.measurer = &measurer;
    options.profiling_gap = 0;
    options.learned_neighbours = neighbours;
    options.learned_rival_ranking = true;
    results.push_back(optimize(g, model, options));
  }
  const OptimizeResult &without = results[0], &with = results[1];
  EXPECT_TRUE(without.all_optimal);
  EXPECT_TRUE(with.all_optimal);
  EXPECT_NEAR(with.korch.predicted_seconds(), without.korch.predicted_seconds(),
              1e-9 * without.korch.predicted_seconds());
  ASSERT_GT(with.price_errors.kernels, 0);
  EXPECT_LT(with.price_errors.learned_median_log2, with.price_errors.roofline_median_log2);
  // Without neighbours the model predicts nothing: its "predictions" are the prices.
  EXPECT_EQ(without.price_errors.learned_median_log2, without.price_errors.roofline_median_log2);
}

// Rounds that only pick what to measure next may stop their solve early (at a time or node
// limit); the round that ends a partition is solved in full, so the plan is the same optimum as
// with full solves throughout.
TEST(Optimize, ShortGuideSolvesEndInTheSameOptimum) {
  PrimGraph g = residual_net(3);
  AnalyticCostModel model{MachineFigures{}};
  std::vector<OptimizeResult> results;
  for (auto [guide_limit, root_only] : {std::pair{60.0, false}, std::pair{1e-3, false}, std::pair{60.0, true}}) {
    FakeMeasurer measurer(model, 4.0);  // fused kernels dearer than estimated: several rounds
    OptimizeOptions options;
    options.measurer = &measurer;
    options.guide_solve_time_limit = guide_limit;
    options.guide_solves_root_only = root_only;
    options.profiling_gap = 0;
    results.push_back(optimize(g, model, options));
  }
  for (const OptimizeResult& r : results) {
    EXPECT_TRUE(r.all_optimal);
    EXPECT_GT(r.solve_rounds, static_cast<int>(r.partitions.size()));
    EXPECT_NEAR(r.korch.predicted_seconds(), results[0].korch.predicted_seconds(),
                1e-9 * results[0].korch.predicted_seconds());
  }
}

// Stopping within a profiling gap ends the same path of rounds early: no more solves or
// measurements than running to the optimum, a plan within the gap of it, said in the status.
TEST(Optimize, ProfilingGapStopsWithinTheGapOfTheOptimum) {
  PrimGraph g = residual_net(3);
  AnalyticCostModel model{MachineFigures{}};
  std::vector<OptimizeResult> results;
  std::vector<int> measured;
  for (double gap : {0.0, 0.2}) {
    FakeMeasurer measurer(model, 4.0);  // fused kernels dearer than estimated: several rounds
    OptimizeOptions options;
    options.measurer = &measurer;
    options.profiling_gap = gap;
    results.push_back(optimize(g, model, options));
    measured.push_back(measurer.measured);
  }
  const OptimizeResult &exact = results[0], &within = results[1];
  EXPECT_TRUE(exact.all_optimal);
  EXPECT_TRUE(within.all_optimal);
  EXPECT_TRUE(validate_plan(g, within.korch).empty());
  EXPECT_LE(within.korch.predicted_seconds(), exact.korch.predicted_seconds() * 1.2 * (1 + 1e-9));
  EXPECT_LT(within.solve_rounds, exact.solve_rounds);
  EXPECT_LE(measured[1], measured[0]);
  bool said = false;
  for (const PartitionReport& p : within.partitions) said = said || p.status.rfind("optimal within 20%", 0) == 0;
  EXPECT_TRUE(said);
}

// Once a selection of measured kernels is at hand, a partition's last solve only asks whether
// any selection beats it by more than the profiling gap: the plan stays within the gap of the
// optimum that full solves reach, and a partition whose question was answered "none" says so.
TEST(Optimize, ClosingSolvesEndWithinTheGapOfTheOptimum) {
  AnalyticCostModel model{MachineFigures{}};
  const double gap = 0.01;
  int closing = 0, none_below = 0;
  for (int blocks : {3, 4}) {
    PrimGraph g = residual_net(blocks);
    std::vector<OptimizeResult> results;
    for (double profiling_gap : {0.0, gap}) {
      FakeMeasurer measurer(model, 4.0);  // fused kernels dearer than estimated: several rounds
      OptimizeOptions options;
      options.measurer = &measurer;
      options.profiling_gap = profiling_gap;
      options.log_round = [&](const std::string& line) { closing += line.find(" closing: ") != std::string::npos; };
      results.push_back(optimize(g, model, options));
    }
    const OptimizeResult &exact = results[0], &within = results[1];
    EXPECT_TRUE(exact.all_optimal);
    EXPECT_TRUE(within.all_optimal);
    EXPECT_TRUE(validate_plan(g, within.korch).empty());
    EXPECT_LE(within.korch.predicted_seconds(), exact.korch.predicted_seconds() * (1 + gap) * (1 + 1e-9));
    for (const PartitionReport& p : within.partitions)
      none_below += p.status.find("no selection below") != std::string::npos;
  }
  EXPECT_GT(closing, 0);
  EXPECT_GT(none_below, 0);
}

// Every BLP solve is logged (korch optimize --verbose) and counted per partition; without a gap
// or a cap, a partition's last solve chose measured kernels only (that is what ends profiling).
TEST(Optimize, EverySolveIsLoggedAndTheLastChoosesMeasuredKernelsOnly) {
  PrimGraph g = residual_net(3);
  AnalyticCostModel model{MachineFigures{}};
  FakeMeasurer measurer(model, 4.0);  // fused kernels dearer than estimated: several rounds
  OptimizeOptions options;
  options.measurer = &measurer;
  options.profiling_gap = 0;
  std::vector<std::string> lines;
  options.log_round = [&](const std::string& line) { lines.push_back(line); };
  OptimizeResult r = optimize(g, model, options);
  ASSERT_TRUE(r.all_optimal);
  EXPECT_EQ(static_cast<int>(lines.size()), r.solve_rounds);
  // Counted without a log too.
  FakeMeasurer quiet_measurer(model, 4.0);
  options.measurer = &quiet_measurer;
  options.log_round = nullptr;
  OptimizeResult quiet = optimize(g, model, options);
  int quiet_solves = 0;
  for (const PartitionReport& p : quiet.partitions) quiet_solves += p.solves;
  EXPECT_EQ(quiet_solves, quiet.solve_rounds);
  int solves = 0;
  for (const PartitionReport& p : r.partitions) {
    solves += p.solves;
    if (p.solves == 0) continue;
    std::string prefix = "partition " + std::to_string(p.index) + " ";
    std::string last;
    for (const std::string& line : lines)
      if (line.rfind(prefix, 0) == 0) last = line;
    EXPECT_NE(last.find(" solve " + std::to_string(p.solves) + " "), std::string::npos) << last;
    EXPECT_NE(last.find("(0 unmeasured)"), std::string::npos) << last;
  }
  EXPECT_EQ(solves, r.solve_rounds);
  EXPECT_GT(r.solve_rounds, static_cast<int>(r.partitions.size()));
}

// A measurer under which memory-bound kernels with a Relu cost 20x their estimate, the others
// 1.5x: kernels of a kind the estimate prices badly.
class OpDependentMeasurer : public FakeMeasurer {
 public:
  using FakeMeasurer::FakeMeasurer;
  std::optional<double> measure(const PrimGraph& g, const Kernel& k) override {
    ++measured;
    bool relu = false;
    for (PrimId p : k.prims) relu = relu || g.prim(p).op == PrimOp::Relu;
    return (relu && k.num_linear == 0 ? 20.0 : 1.5) * model_.cost(g, k);
  }
};

// A chain of `triples` x (Add, Relu, Mul) with per-channel constants.
PrimGraph elementwise_chain(int triples) {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {1, 16, 32, 32});
  for (int i = 0; i < triples; ++i) {
    TensorId c = g.add_constant("c", std::make_shared<const TensorData>(TensorData(DType::F32, {1, 16, 1, 1})));
    x = g.add_primitive(PrimOp::Add, {x, c}, {});
    x = g.add_primitive(PrimOp::Relu, {x}, {});
    x = g.add_primitive(PrimOp::Mul, {x, c}, {});
  }
  g.mark_output(x);
  return g;
}

// Priced by the kernels measured with the same set of primitive ops, kernels of a kind the
// estimate prices badly are measured once or twice, not one by one: fewer measurements, the same
// optimum (here the op set's ratio is exact).
TEST(Optimize, OpSetPricesMeasureFewerKernelsOfAKindTheEstimateMisprices) {
  PrimGraph g = elementwise_chain(4);  // 12 primitives: many fused candidates, one partition
  AnalyticCostModel model{MachineFigures{}};
  std::vector<OptimizeResult> results;
  std::vector<int> measured;
  for (bool by_op_set : {false, true}) {
    OpDependentMeasurer measurer(model);
    OptimizeOptions options;
    options.measurer = &measurer;
    options.profiling_gap = 0;
    options.price_by_op_set = by_op_set;
    results.push_back(optimize(g, model, options));
    measured.push_back(measurer.measured);
  }
  for (const OptimizeResult& r : results) {
    EXPECT_TRUE(r.all_optimal);
    EXPECT_TRUE(validate_plan(g, r.korch).empty());
  }
  EXPECT_LT(measured[1], measured[0]) << measured[1] << " vs " << measured[0];
  EXPECT_NEAR(results[1].korch.predicted_seconds(), results[0].korch.predicted_seconds(),
              1e-9 * results[0].korch.predicted_seconds());
}

// A measurer under which a kernel costs its estimate times FakeMeasurer's factor (fusion_penalty
// per primitive beyond the first) and a factor between 1 and 1.3 that depends on its primitives:
// unmeasured kernels, priced by the smallest factor measured, keep looking cheaper than they
// measure.
class ScatteredMeasurer : public FakeMeasurer {
 public:
  using FakeMeasurer::FakeMeasurer;
  std::optional<double> measure(const PrimGraph& g, const Kernel& k) override {
    ++measured;
    uint64_t h = 1469598103934665603ull;
    for (PrimId p : k.prims) h = (h ^ static_cast<uint64_t>(p)) * 1099511628211ull;
    return (1.5 + penalty_ * static_cast<double>(k.prims.size() - 1)) *
           (1 + 0.3 * static_cast<double>(h % 1000) / 1000.0) * model_.cost(g, k);
  }
};

// Where stall_rounds profiling rounds in a row find no cheaper selection of measured kernels,
// profiling stops and says so: fewer rounds and measurements than without the rule, a valid plan
// no dearer than the greedy one under the same measurements.
TEST(Optimize, ProfilingStopsWhenMeasuredSelectionsStallAndSaysSo) {
  PrimGraph g = elementwise_chain(6);  // 18 primitives: many fused candidates, one partition
  AnalyticCostModel model{MachineFigures{}};
  std::vector<OptimizeResult> results;
  std::vector<int> measured;
  for (int stall_rounds : {0, 2}) {  // 8 rounds, 25 kernels measured without the rule (7 and 18 with it)
    ScatteredMeasurer measurer(model, 0.6);
    OptimizeOptions options;
    options.measurer = &measurer;
    options.stall_rounds = stall_rounds;
    options.price_by_op_set = false;
    options.rivals_per_round = 0;
    results.push_back(optimize(g, model, options));
    measured.push_back(measurer.measured);
    EXPECT_TRUE(validate_plan(g, results.back().korch).empty());
    EXPECT_LE(results.back().korch.predicted_seconds(), results.back().greedy.predicted_seconds() * (1 + 1e-9));
  }
  bool stalled = false;
  for (const PartitionReport& p : results[1].partitions)
    stalled = stalled || p.status.find("profiling stalled") != std::string::npos;
  ASSERT_TRUE(stalled) << "the scattered measurements should make profiling stall";
  EXPECT_FALSE(results[1].all_optimal);
  EXPECT_LT(results[1].solve_rounds, results[0].solve_rounds);
  EXPECT_LT(measured[1], measured[0]);
}

TEST(Optimize, CappedProfilingIsStoredAsNotProvenOptimal) {
  PrimGraph g = residual_net(3);
  AnalyticCostModel model{MachineFigures{}};
  FakeMeasurer measurer(model, 4.0);
  OptimizeOptions options;
  options.measurer = &measurer;
  options.max_profiling_rounds = 1;
  options.rivals_per_round = 0;
  OptimizeResult cold = optimize(g, model, options);
  bool capped = false;
  for (const PartitionReport& p : cold.partitions) capped = capped || p.status.find("capped") != std::string::npos;
  ASSERT_TRUE(capped) << "the fusion penalty should need more than one profiling round";
  EXPECT_FALSE(cold.all_optimal);
  OptimizeResult warm = optimize(g, model, options);
  EXPECT_EQ(warm.num_stored_solutions, warm.num_unique_partitions);
  EXPECT_FALSE(warm.all_optimal);
  ASSERT_EQ(warm.korch.kernels.size(), cold.korch.kernels.size());
  for (size_t i = 0; i < cold.korch.kernels.size(); ++i)
    EXPECT_EQ(warm.korch.kernels[i].prims, cold.korch.kernels[i].prims);
}

// A spent profiling budget measures nothing more than the baselines and still returns a valid
// plan no dearer than the greedy plan under the same measured prices, saying so.
// A measurer that cannot build any fused kernel with a Relu (as oneDNN refuses some epilogues).
class ReluFusionRefusingMeasurer : public FakeMeasurer {
 public:
  using FakeMeasurer::FakeMeasurer;
  std::optional<double> measure(const PrimGraph& g, const Kernel& k) override {
    bool relu = false;
    for (PrimId p : k.prims) relu = relu || g.prim(p).op == PrimOp::Relu;
    if (relu && k.prims.size() > 1) {
      ++refused;
      return std::nullopt;
    }
    return FakeMeasurer::measure(g, k);
  }
  int refused = 0;
};

// A structure refused while one partition is profiled is no candidate of the next one (here two
// blocks that differ after their Conv+bias+Relu, so neither partition reuses the other's
// solution): it is never priced at its estimate as if measured and chosen.
TEST(Optimize, AStructureRefusedInOnePartitionIsNoCandidateInTheNext) {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {1, 4, 8, 8});
  for (PrimOp join : {PrimOp::Add, PrimOp::Mul}) {
    TensorId w = g.add_constant("w", std::make_shared<const TensorData>(TensorData(DType::F32, {4, 4, 3, 3})));
    TensorId bias = g.add_constant("b", std::make_shared<const TensorData>(TensorData(DType::F32, {4, 1, 1})));
    TensorId y = g.add_primitive(PrimOp::Conv, {x, w}, conv_attrs());
    y = g.add_primitive(PrimOp::Add, {y, bias}, {});
    y = g.add_primitive(PrimOp::Relu, {y}, {});
    x = g.add_primitive(join, {y, x}, {});
  }
  g.mark_output(x);
  AnalyticCostModel model{MachineFigures{}};
  ReluFusionRefusingMeasurer measurer(model);
  OptimizeOptions options;
  options.measurer = &measurer;
  options.partition.max_prims = 4;
  OptimizeResult r = optimize(g, model, options);
  ASSERT_EQ(r.partitions.size(), 2u);
  EXPECT_GT(measurer.refused, 0);
  EXPECT_TRUE(validate_plan(g, r.korch).empty());
  for (const Kernel& k : r.korch.kernels) {
    bool relu = false;
    for (PrimId p : k.prims) relu = relu || g.prim(p).op == PrimOp::Relu;
    EXPECT_FALSE(relu && k.prims.size() > 1) << "a refused kernel is in the plan (" << k.prims.size() << " primitives)";
  }
}

TEST(Optimize, SpentBudgetChoosesAmongMeasuredKernels) {
  PrimGraph g = residual_net(3);
  AnalyticCostModel model{MachineFigures{}};
  FakeMeasurer unlimited_measurer(model, 4.0);
  OptimizeOptions options;
  options.measurer = &unlimited_measurer;
  options.rivals_per_round = 0;
  OptimizeResult unlimited = optimize(g, model, options);
  EXPECT_FALSE(unlimited.budget_spent);

  FakeMeasurer measurer(model, 4.0);
  options.measurer = &measurer;
  options.budget_seconds = 1e-9;  // spent before the first partition
  OptimizeResult r = optimize(g, model, options);
  EXPECT_TRUE(r.budget_spent);
  EXPECT_FALSE(r.all_optimal);
  EXPECT_TRUE(validate_plan(g, r.korch).empty());
  EXPECT_LE(r.korch.predicted_seconds(), r.greedy.predicted_seconds() * (1 + 1e-9));
  EXPECT_LT(measurer.measured, unlimited_measurer.measured);
  bool said = false;
  for (const PartitionReport& p : r.partitions) said = said || p.status.find("budget") != std::string::npos;
  EXPECT_TRUE(said);
  // Every kernel of the plan was measured: the baselines are, and nothing else was.
  EXPECT_TRUE(measurer.solutions.empty()) << "a choice cut short by the budget was stored";
  for (const Kernel& k : r.korch.kernels) {
    bool in_baseline = false;
    for (const Plan* b : {&r.greedy, &r.per_op, &r.per_primitive})
      for (const Kernel& bk : b->kernels) in_baseline = in_baseline || bk.prims == k.prims;
    EXPECT_TRUE(in_baseline);
  }
}

}  // namespace
}  // namespace korch
