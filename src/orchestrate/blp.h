// The kernel-selection binary linear program (DESIGN.md, "The binary linear program"):
//   minimise sum_k c_k x_k - sum_k o_k z_k - sum_(k,t) i_kt w_kt over x_k in {0,1}
//   s.t. every required tensor is the output of a selected kernel,
//        every selected kernel's materialised inputs are outputs of selected kernels,
//        every primitive lies in a selected kernel (valid strengthening: all primitives reach
//        a required tensor, so every feasible selection covers them).
// Layout links (README, "Layout links in the BLP"): c_k is the kernel's time among dense-layout
// neighbours. z_k = 1 means k's output stays in the backend's internal layout, saving o_k:
//   z_k <= x_k, z_k = 0 for required outputs, z_k + x_h <= 1 for every kernel h that reads
//   the output but cannot take it in that layout.
// w_kt = 1 means k reads t in the internal layout, saving i_kt:
//   w_kt <= x_k, w_kt <= sum of z_p over the linkable producers p of t.
// A links_together kernel k has y_k in [0, 1], y_k <= x_k: its output's z_k = y_k, and for
// each input t it reads linked, y_k <= L_t and L_t - y_k + x_k <= 1 (L_t = sum of z_p over t's
// linkable producers: selected, it links all or none), and w_kt <= y_k.
// z, w and y are continuous in [0, 1]; with x integral an optimum has them 0 or 1.
// Solved with COIN-OR CBC (C API, CbcMain1 defaults), warm-started, within a time limit.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace korch {

struct SelectionProblem {
  struct Candidate {
    double cost = 0;
    int output = -1;          // local tensor id it materialises
    std::vector<int> needs;   // local tensor ids that must be materialised by others
    std::vector<int> covers;  // local primitive ids it computes
    // Seconds saved when the output stays in the backend's internal layout (negative: it
    // cannot stay).
    double output_link_saving = -1;
    // (local tensor, seconds saved) for the inputs it can read in the internal layout.
    std::vector<std::pair<int, double>> input_link_savings;
    // The kernel's links are all or none: its output (when output_link_saving >= 0) and every
    // input of input_link_savings stay in the internal layout together, or all are dense. (The
    // CPU backend's Halide kernels read and write a layout through strides only when every one
    // of their candidate tensors links; savings are then 0, the oneDNN neighbours' are not.)
    bool links_together = false;
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
  bool within_gap = false;  // the solve stopped within its relative_gap of the bound (not proven optimal)
  bool none_below = false;  // find_selection_below proved that no selection costs less than its bound
  double seconds = 0;
  std::string status;  // "optimal", "time limit (gap x%)", ...
};

// How far a solve goes: to a proven optimum (or time_limit_seconds), or only through the root
// node (its LP, a few rounds of cuts and the heuristics), which returns a good selection and a
// lower bound quickly but rarely a proof.
enum class SolveDepth { ToOptimality, RootOnly };

// The best selection found (never worse than the warm start) and the best lower bound. A
// relative_gap > 0 ends the search once the best selection is within that fraction of the lower
// bound (the result is then within_gap unless the bound met it exactly).
SelectionResult solve_selection_blp(const SelectionProblem& problem, const std::vector<int>& warm_start,
                                    double time_limit_seconds, SolveDepth depth = SolveDepth::ToOptimality,
                                    double relative_gap = 0);
// A selection costing less than `below` seconds (the first CBC finds, not the cheapest), or the
// proof that none exists: none_below, lower_bound = below, and the fallback selection (pruned)
// chosen. Lazy profiling's closing question, once its cheapest selection of measured kernels is
// known: proving no selection beats a bound is cheaper than proving an optimum (no incumbent to
// improve, every node whose bound reaches the cutoff pruned), and a selection that does beat it
// is what to measure next. At the time limit, or when the solver fails, the fallback is chosen
// with the solver's bound.
SelectionResult find_selection_below(const SelectionProblem& problem, const std::vector<int>& fallback, double below,
                                     double time_limit_seconds);
// The cost of a selection: its kernels' costs less the link savings it realises (a selected
// kernel's output is linked when it can be, is not required, and every selected reader takes
// it in the internal layout; readers of a linked tensor save their input saving).
double selection_cost(const SelectionProblem& problem, const std::vector<int>& chosen);
// Exhaustive search over all candidate subsets (for tests; at most ~24 candidates).
SelectionResult solve_selection_brute_force(const SelectionProblem& problem);
// Whether a set of candidates satisfies every constraint (coverage rows excluded).
bool selection_is_feasible(const SelectionProblem& problem, const std::vector<int>& chosen);

}  // namespace korch
