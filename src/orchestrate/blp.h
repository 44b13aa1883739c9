// The kernel-selection binary linear program (DESIGN.md, "The binary linear program"):
//   minimise sum_k c_k x_k over x_k in {0,1}
//   s.t. every required tensor is the output of a selected kernel,
//        every selected kernel's materialised inputs are outputs of selected kernels,
//        every primitive lies in a selected kernel (valid strengthening: all primitives reach
//        a required tensor, so every feasible selection covers them).
// Solved with COIN-OR CBC (C API, CbcMain1 defaults), warm-started, within a time limit.
#pragma once
#include <string>
#include <vector>

namespace korch {

struct SelectionProblem {
  struct Candidate {
    double cost = 0;
    int output = -1;          // local tensor id it materialises
    std::vector<int> needs;   // local tensor ids that must be materialised by others
    std::vector<int> covers;  // local primitive ids it computes
  };
  int num_tensors = 0;
  int num_prims = 0;
  std::vector<Candidate> candidates;
  std::vector<int> required;  // local tensor ids
};

struct SelectionResult {
  std::vector<int> chosen;  // candidate indices
  double cost = 0;
  double lower_bound = 0;  // best bound proven by the solver
  bool proven_optimal = false;
  double seconds = 0;
  std::string status;  // "optimal", "time limit (gap x%)", ...
};

SelectionResult solve_selection_blp(const SelectionProblem& problem, const std::vector<int>& warm_start,
                                    double time_limit_seconds);
// Exhaustive search over all candidate subsets (for tests; at most ~24 candidates).
SelectionResult solve_selection_brute_force(const SelectionProblem& problem);
// Whether a set of candidates satisfies every constraint (coverage rows excluded).
bool selection_is_feasible(const SelectionProblem& problem, const std::vector<int>& chosen);

}  // namespace korch
