// CBC model construction and solution extraction for the selection BLP, plus brute force.
// CBC runs in a forked child process: Debian's libcbc keeps its internal assertions, and some
// inputs trip them (seen: CbcCutGenerator.cpp "Assertion `nB' failed", which aborted korch).
// A child that dies costs that solve its optimality proof, not the optimisation: the warm start
// is kept and the status says why.
#include "orchestrate/blp.h"

#include <coin/Cbc_C_Interface.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>

#include "util/error.h"

namespace korch {

bool selection_is_feasible(const SelectionProblem& problem, const std::vector<int>& chosen) {
  std::vector<char> made(problem.num_tensors, 0);
  for (int k : chosen) made[problem.candidates[k].output] = 1;
  for (int t : problem.required)
    if (!made[t]) return false;
  for (int k : chosen)
    for (int t : problem.candidates[k].needs)
      if (!made[t]) return false;
  return true;
}

namespace {

// Removes selected kernels nobody needs and duplicate producers of one tensor (keeps the cheapest).
std::vector<int> prune(const SelectionProblem& problem, std::vector<int> chosen) {
  std::sort(chosen.begin(), chosen.end(),
            [&](int a, int b) { return problem.candidates[a].cost < problem.candidates[b].cost; });
  std::vector<int> by_output(problem.num_tensors, -1);
  for (int k : chosen)
    if (by_output[problem.candidates[k].output] < 0) by_output[problem.candidates[k].output] = k;
  std::vector<char> needed(problem.num_tensors, 0);
  std::vector<int> stack(problem.required.begin(), problem.required.end());
  while (!stack.empty()) {
    int t = stack.back();
    stack.pop_back();
    if (needed[t]) continue;
    needed[t] = 1;
    if (by_output[t] >= 0)
      for (int u : problem.candidates[by_output[t]].needs) stack.push_back(u);
  }
  std::vector<int> kept;
  for (int t = 0; t < problem.num_tensors; ++t)
    if (needed[t] && by_output[t] >= 0) kept.push_back(by_output[t]);
  std::sort(kept.begin(), kept.end());
  return kept;
}

// What the solver process reports back.
struct CbcOutcome {
  bool has_solution = false;
  bool proven_optimal = false;
  double lower_bound = 0;
  std::vector<int> chosen;  // columns at 1 among the first n
};

// A problem the solver died on, written as an MPS file in the temp folder so that it can be
// reported and replayed (`cbc FILE`; the warm start and limits are not in it); returns
// "; problem written to FILE" or "". At most 4 files per process (a model whose problems crash
// CBC could otherwise leave one file per solve).
std::string keep_problem_for_report(Cbc_Model* model) {
  static std::atomic<int> written{0};
  int index = written++;
  if (index >= 4) return "";
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) return "";
  std::string base = (dir / str_cat("korch-blp-crash-", getpid(), "-", index)).string();
  Cbc_writeMps(model, base.c_str());  // Debian's CBC appends ".mps.gz" (".mps" without zlib)
  for (const std::string& file : {base + ".mps.gz", base + ".mps", base})
    if (std::filesystem::exists(file, ec)) return str_cat("; problem written to ", file);
  return "";
}

// Runs Cbc_solve in a forked child and reads its outcome through a pipe; nullopt (with `why`)
// when the child did not finish normally (*died: it was killed by a signal). KORCH_TEST_SOLVER_ABORT=1 makes the child
// abort (the tests' stand-in for a CBC assertion).
std::optional<CbcOutcome> solve_in_child(Cbc_Model* model, int n, std::string* why, bool* died) {
  int fds[2];
  if (pipe(fds) != 0) {
    *why = str_cat("pipe: ", std::strerror(errno));
    return std::nullopt;
  }
  pid_t pid = fork();
  if (pid < 0) {
    *why = str_cat("fork: ", std::strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {  // child: solve, write the outcome, leave without running any destructors
    close(fds[0]);
    if (const char* a = std::getenv("KORCH_TEST_SOLVER_ABORT"); a && std::strcmp(a, "1") == 0) std::abort();
    Cbc_solve(model);
    const double* x = Cbc_getColSolution(model);
    std::vector<int> words = {x != nullptr && Cbc_numberSavedSolutions(model) > 0, Cbc_isProvenOptimal(model) != 0};
    double bound = Cbc_getBestPossibleObjValue(model);
    int bound_words[2];
    std::memcpy(bound_words, &bound, sizeof bound);
    words.insert(words.end(), bound_words, bound_words + 2);
    if (x)
      for (int k = 0; k < n; ++k)
        if (x[k] > 0.5) words.push_back(k);
    const char* p = reinterpret_cast<const char*>(words.data());
    size_t left = words.size() * sizeof(int);
    while (left > 0) {
      ssize_t w = write(fds[1], p, left);
      if (w <= 0) _exit(3);
      p += w;
      left -= static_cast<size_t>(w);
    }
    _exit(0);
  }
  close(fds[1]);
  std::vector<char> bytes;
  char buf[65536];
  for (ssize_t r; (r = read(fds[0], buf, sizeof buf)) != 0;) {
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    bytes.insert(bytes.end(), buf, buf + r);
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *died = WIFSIGNALED(status);
    *why = WIFSIGNALED(status)
               ? str_cat("the solver process died of signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")")
               : str_cat("the solver process exited with status ", WEXITSTATUS(status));
    return std::nullopt;
  }
  if (bytes.size() < 4 * sizeof(int) || bytes.size() % sizeof(int) != 0) {
    *why = "the solver process returned a truncated result";
    return std::nullopt;
  }
  std::vector<int> words(bytes.size() / sizeof(int));
  std::memcpy(words.data(), bytes.data(), bytes.size());
  CbcOutcome out;
  out.has_solution = words[0] != 0;
  out.proven_optimal = words[1] != 0;
  std::memcpy(&out.lower_bound, &words[2], sizeof out.lower_bound);
  for (size_t i = 4; i < words.size(); ++i) {
    if (words[i] < 0 || words[i] >= n) {
      *why = "the solver process returned a column out of range";
      return std::nullopt;
    }
    out.chosen.push_back(words[i]);
  }
  return out;
}

bool reads_linked(const SelectionProblem::Candidate& c, int t) {
  return std::any_of(c.input_link_savings.begin(), c.input_link_savings.end(),
                     [t](const std::pair<int, double>& in) { return in.first == t; });
}

}  // namespace

double selection_cost(const SelectionProblem& problem, const std::vector<int>& chosen) {
  std::vector<int> producer(problem.num_tensors, -1);
  double cost = 0;
  for (int k : chosen) {
    cost += problem.candidates[k].cost;
    int& p = producer[problem.candidates[k].output];
    if (p < 0) p = k;
  }
  std::vector<char> linked(problem.num_tensors, 0);
  for (int t = 0; t < problem.num_tensors; ++t)
    linked[t] = producer[t] >= 0 && problem.candidates[producer[t]].output_link_saving >= 0;
  for (int t : problem.required) linked[t] = 0;
  for (int k : chosen)
    for (int t : problem.candidates[k].needs)
      if (!reads_linked(problem.candidates[k], t)) linked[t] = 0;
  // A links_together kernel with some of its tensors unlinked links none of them (which may
  // unlink another such kernel's tensor: repeated until nothing changes).
  for (bool changed = true; changed;) {
    changed = false;
    for (int k : chosen) {
      const auto& c = problem.candidates[k];
      if (!c.links_together) continue;
      std::vector<int> ts;
      for (auto [t, saving] : c.input_link_savings) ts.push_back(t);
      if (c.output_link_saving >= 0) ts.push_back(c.output);
      bool all = std::all_of(ts.begin(), ts.end(), [&](int t) { return linked[t] != 0; });
      bool any = std::any_of(ts.begin(), ts.end(), [&](int t) { return linked[t] != 0; });
      if (all || !any) continue;
      for (int t : ts) linked[t] = 0;
      changed = true;
    }
  }
  for (int t = 0; t < problem.num_tensors; ++t)
    if (linked[t]) cost -= problem.candidates[producer[t]].output_link_saving;
  for (int k : chosen)
    for (auto [t, saving] : problem.candidates[k].input_link_savings)
      if (linked[t]) cost -= saving;
  return cost;
}

SelectionResult solve_selection_blp(const SelectionProblem& problem, const std::vector<int>& warm_start,
                                    double time_limit_seconds) {
  auto start = std::chrono::steady_clock::now();
  int n = static_cast<int>(problem.candidates.size());
  std::vector<std::vector<int>> producers(problem.num_tensors), coverers(problem.num_prims);
  for (int k = 0; k < n; ++k) {
    producers[problem.candidates[k].output].push_back(k);
    for (int p : problem.candidates[k].covers) coverers[p].push_back(k);
  }
  for (int t : problem.required)
    if (producers[t].empty()) fail("BLP: required tensor ", t, " has no candidate producing it");

  Cbc_Model* model = Cbc_newModel();
  Cbc_setLogLevel(model, 0);
  Cbc_setParameter(model, "threads", "1");
  Cbc_setMaximumSeconds(model, time_limit_seconds);
  Cbc_setAllowableGap(model, 0.0);
  Cbc_setParameter(model, "ratioGap", "0");
  // Zero-half cuts at every node took most of the time on YOLOX-nano's 478-candidate partitions
  // (15.7 s -> 3.4 s without them, same optimum).
  Cbc_setParameter(model, "zeroHalfCuts", "off");
  // Costs are seconds (1e-7 .. 1e-2 for one kernel): CBC's absolute tolerances (1e-7 on reduced
  // costs) are as large as the smallest ones, and a solve reported optimal came out 1.2% above
  // the true optimum. The objective is scaled so that the dearest candidate costs 1000.
  double largest = 0;
  for (const auto& c : problem.candidates) largest = std::max(largest, std::abs(c.cost));
  const double scale = largest > 0 ? 1000.0 / largest : 1.0;
  for (int k = 0; k < n; ++k)
    Cbc_addCol(model, "", 0.0, 1.0, problem.candidates[k].cost * scale, 1, 0, nullptr, nullptr);
  std::vector<int> idx;
  std::vector<double> val;
  for (int t : problem.required) {
    idx = producers[t];
    val.assign(idx.size(), 1.0);
    Cbc_addRow(model, "", static_cast<int>(idx.size()), idx.data(), val.data(), 'G', 1.0);
  }
  for (int k = 0; k < n; ++k) {
    const auto& c = problem.candidates[k];
    std::vector<int> needs = c.needs;
    std::sort(needs.begin(), needs.end());
    needs.erase(std::unique(needs.begin(), needs.end()), needs.end());
    for (int t : needs) {
      idx = producers[t];
      val.assign(idx.size(), 1.0);
      idx.push_back(k);
      val.push_back(-1.0);
      if (producers[t].empty()) {  // an input nobody can produce: the candidate is unusable
        idx = {k};
        val = {1.0};
        Cbc_addRow(model, "", 1, idx.data(), val.data(), 'L', 0.0);
        continue;
      }
      Cbc_addRow(model, "", static_cast<int>(idx.size()), idx.data(), val.data(), 'G', 0.0);
    }
  }
  for (int p = 0; p < problem.num_prims; ++p) {
    if (coverers[p].empty()) continue;
    idx = coverers[p];
    val.assign(idx.size(), 1.0);
    Cbc_addRow(model, "", static_cast<int>(idx.size()), idx.data(), val.data(), 'G', 1.0);
  }
  // Layout links: z_k (output kept in the internal layout) and w_kt (input t read in it).
  int num_cols = n;
  std::vector<char> is_required(problem.num_tensors, 0);
  for (int t : problem.required) is_required[t] = 1;
  std::vector<std::vector<int>> readers(problem.num_tensors);
  for (int k = 0; k < n; ++k)
    for (int t : problem.candidates[k].needs) readers[t].push_back(k);
  std::vector<std::vector<int>> link_columns(problem.num_tensors);  // z columns of t's producers
  std::vector<int> z_of(n, -1);
  for (int k = 0; k < n; ++k) {
    const auto& c = problem.candidates[k];
    if (c.output_link_saving < 0 || is_required[c.output]) continue;
    int z = num_cols++;
    z_of[k] = z;
    Cbc_addCol(model, "", 0.0, 1.0, -c.output_link_saving * scale, 0, 0, nullptr, nullptr);
    link_columns[c.output].push_back(z);
    idx = {z, k};
    val = {1.0, -1.0};
    Cbc_addRow(model, "", 2, idx.data(), val.data(), 'L', 0.0);
    for (int h : readers[c.output]) {
      if (reads_linked(problem.candidates[h], c.output)) continue;
      idx = {z, h};
      val = {1.0, 1.0};
      Cbc_addRow(model, "", 2, idx.data(), val.data(), 'L', 1.0);
    }
  }
  // y_k of the links_together kernels: all of k's links or none.
  std::vector<int> y_of(n, -1);
  for (int k = 0; k < n; ++k) {
    const auto& c = problem.candidates[k];
    if (!c.links_together || (c.output_link_saving < 0 && c.input_link_savings.empty())) continue;
    int y = num_cols++;
    y_of[k] = y;
    Cbc_addCol(model, "", 0.0, 1.0, 0.0, 0, 0, nullptr, nullptr);
    idx = {y, k};
    val = {1.0, -1.0};
    Cbc_addRow(model, "", 2, idx.data(), val.data(), 'L', 0.0);  // y_k <= x_k
    if (c.output_link_saving >= 0) {
      idx = {y};
      val = {1.0};
      if (z_of[k] >= 0) {  // z_k = y_k
        idx.push_back(z_of[k]);
        val.push_back(-1.0);
        Cbc_addRow(model, "", 2, idx.data(), val.data(), 'E', 0.0);
      } else {  // a required output stays dense, and so do k's inputs
        Cbc_addRow(model, "", 1, idx.data(), val.data(), 'L', 0.0);
      }
    }
    for (auto [t, saving] : c.input_link_savings) {
      idx = {y};
      val = {1.0};
      for (int z : link_columns[t]) {
        idx.push_back(z);
        val.push_back(-1.0);
      }
      Cbc_addRow(model, "", static_cast<int>(idx.size()), idx.data(), val.data(), 'L', 0.0);  // y_k <= L_t
      if (link_columns[t].empty()) continue;
      for (double& v : val) v = -v;
      idx.push_back(k);
      val.push_back(1.0);
      Cbc_addRow(model, "", static_cast<int>(idx.size()), idx.data(), val.data(), 'L', 1.0);  // L_t - y_k + x_k <= 1
    }
  }
  for (int k = 0; k < n; ++k)
    for (auto [t, saving] : problem.candidates[k].input_link_savings) {
      if (link_columns[t].empty() || saving <= 0) continue;
      int w = num_cols++;
      Cbc_addCol(model, "", 0.0, 1.0, -saving * scale, 0, 0, nullptr, nullptr);
      idx = {w, k};
      val = {1.0, -1.0};
      Cbc_addRow(model, "", 2, idx.data(), val.data(), 'L', 0.0);
      if (y_of[k] >= 0) {  // w_kt <= y_k
        idx = {w, y_of[k]};
        Cbc_addRow(model, "", 2, idx.data(), val.data(), 'L', 0.0);
      }
      idx = {w};
      val = {1.0};
      for (int z : link_columns[t]) {
        idx.push_back(z);
        val.push_back(-1.0);
      }
      Cbc_addRow(model, "", static_cast<int>(idx.size()), idx.data(), val.data(), 'L', 0.0);
    }
  if (!warm_start.empty() && selection_is_feasible(problem, warm_start)) {
    std::vector<int> cols(n);
    std::vector<double> values(n, 0.0);
    for (int k = 0; k < n; ++k) cols[k] = k;
    for (int k : warm_start) values[k] = 1.0;
    Cbc_setMIPStartI(model, n, cols.data(), values.data());
  }
  std::string crash;
  bool died = false;
  std::optional<CbcOutcome> outcome = solve_in_child(model, n, &crash, &died);
  if (died) crash += keep_problem_for_report(model);
  Cbc_deleteModel(model);
  SelectionResult result;
  std::vector<int> chosen;
  if (outcome && outcome->has_solution) chosen = outcome->chosen;
  if (!outcome || !outcome->has_solution || !selection_is_feasible(problem, chosen)) {
    // No incumbent from CBC: fall back to the warm start (always feasible when given).
    chosen = warm_start;
    if (chosen.empty() || !selection_is_feasible(problem, chosen))
      fail("BLP: CBC found no feasible kernel selection within ", time_limit_seconds, " s",
           outcome ? "" : str_cat(" (", crash, ")"));
  }
  result.proven_optimal = outcome && outcome->proven_optimal;
  result.lower_bound = outcome ? outcome->lower_bound / scale : -std::numeric_limits<double>::infinity();
  result.chosen = prune(problem, chosen);
  result.cost = selection_cost(problem, result.chosen);
  // Stopped early, CBC may hold an incumbent worse than the start it was given: never return
  // a selection worse than the warm start.
  if (!warm_start.empty() && selection_is_feasible(problem, warm_start)) {
    std::vector<int> start = prune(problem, warm_start);
    double start_cost = selection_cost(problem, start);
    if (start_cost < result.cost) {
      result.chosen = std::move(start);
      result.cost = start_cost;
    }
  }
  if (!outcome) {
    result.status = str_cat("solver failed (", crash, "): warm start kept");
  } else if (result.proven_optimal) {
    result.status = "optimal";
    result.lower_bound = result.cost;
  } else {
    double gap = result.cost > 0 ? std::max(0.0, (result.cost - result.lower_bound) / result.cost) : 0;
    result.status = str_cat("time limit, gap ", std::round(gap * 10000) / 100, "%");
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

SelectionResult solve_selection_brute_force(const SelectionProblem& problem) {
  int n = static_cast<int>(problem.candidates.size());
  if (n > 26) fail("brute force limited to 26 candidates, got ", n);
  SelectionResult best;
  best.cost = std::numeric_limits<double>::infinity();
  std::vector<int> chosen;
  for (uint64_t mask = 0; mask < (uint64_t{1} << n); ++mask) {
    chosen.clear();
    for (int k = 0; k < n; ++k)
      if (mask >> k & 1) chosen.push_back(k);
    if (!selection_is_feasible(problem, chosen)) continue;
    double c = selection_cost(problem, chosen);
    if (c >= best.cost) continue;
    best.cost = c;
    best.chosen = chosen;
  }
  if (!std::isfinite(best.cost)) fail("brute force: no feasible selection");
  best.proven_optimal = true;
  best.lower_bound = best.cost;
  best.status = "optimal (brute force)";
  return best;
}

}  // namespace korch
