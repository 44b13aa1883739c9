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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <utility>

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
// CBC's settings, by its command-line names (write_problem records them with a dumped BLP).
constexpr std::pair<const char*, const char*> kCbcParameters[] = {
    {"threads", "1"},
    {"ratioGap", "0"},
    // Zero-half cuts at every node took most of the time on YOLOX-nano's 478-candidate partitions
    // (15.7 s -> 3.4 s without them, same optimum).
    {"zeroHalfCuts", "off"},
    // At most 20 rounds of cuts at the root (CBC's default, up to 100, kept cutting while the
    // bound crept up): on the BLPs of 6 models' cold runs, solved to optimality, 37-57% less time
    // on ConvNeXt-T, MobileNetV3, EfficientViT, 17-24% on SegFormer, YOLOX, EfficientNet, same optima.
    {"passCuts", "20"},
};
// ... and then these for a SolveDepth::RootOnly solve. Replayed on ConvNeXt-T's BLPs (every 4th of
// 102): the root with 20 passes of cuts took 3.2 s against 26 s to optimality, selections 0-4%
// dearer (1.3% in sum); with 5 passes 2.0 s at the same quality (without cuts 0.7 s, 17% dearer).
constexpr std::pair<const char*, const char*> kRootOnlyCbcParameters[] = {
    {"maxNodes", "0"},
    {"passCuts", "5"},
};

struct CbcOutcome {
  bool has_solution = false;
  bool proven_optimal = false;
  bool proven_infeasible = false;  // no selection at all, or (under a cutoff) none below it
  double lower_bound = 0;
  std::vector<int> chosen;  // columns at 1 among the first n
};

// Every column's name ("c" and its index). CBC 2.10's C interface hands a warm start to the solver
// by column name (Cbc_setMIPStartI looks each index's name up), so columns without names lose it:
// all of them are called "". Replayed from their MPS files (which name every column), YOLOX-nano
// tiny's 530-candidate root solves took 0.44 s with the warm start, 1.2 s without one, and 1.7-2.1 s
// built with empty names as korch built them before.
std::string column_name(int index) { return str_cat("c", index); }

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
    std::vector<int> words = {x != nullptr && Cbc_numberSavedSolutions(model) > 0, Cbc_isProvenOptimal(model) != 0,
                              Cbc_isProvenInfeasible(model) != 0};
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
  constexpr size_t kHeaderWords = 5;  // has_solution, proven_optimal, proven_infeasible, the bound's two words
  if (bytes.size() < kHeaderWords * sizeof(int) || bytes.size() % sizeof(int) != 0) {
    *why = "the solver process returned a truncated result";
    return std::nullopt;
  }
  std::vector<int> words(bytes.size() / sizeof(int));
  std::memcpy(words.data(), bytes.data(), bytes.size());
  CbcOutcome out;
  out.has_solution = words[0] != 0;
  out.proven_optimal = words[1] != 0;
  out.proven_infeasible = words[2] != 0;
  std::memcpy(&out.lower_bound, &words[3], sizeof out.lower_bound);
  for (size_t i = kHeaderWords; i < words.size(); ++i) {
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

namespace {

// The BLP of a SelectionProblem as a CBC model, built one family of columns and rows at a time
// (in this order: x_k, required outputs, inputs, covering, z_k, y_k, w_kt; CBC's path depends on it).
class BlpModel {
 public:
  BlpModel(const SelectionProblem& problem, double time_limit_seconds, SolveDepth depth, double relative_gap)
      : problem_(problem),
        depth_(depth),
        time_limit_seconds_(time_limit_seconds),
        n_(static_cast<int>(problem.candidates.size())),
        producers_(problem.num_tensors),
        coverers_(problem.num_prims),
        model_(Cbc_newModel()) {
    for (int k = 0; k < n_; ++k) {
      producers_[problem.candidates[k].output].push_back(k);
      for (int p : problem.candidates[k].covers) coverers_[p].push_back(k);
    }
    for (int t : problem.required)
      if (producers_[t].empty()) {
        Cbc_deleteModel(model_);
        fail("BLP: required tensor ", t, " has no candidate producing it");
      }
    Cbc_setLogLevel(model_, 0);
    Cbc_setMaximumSeconds(model_, time_limit_seconds);
    Cbc_setAllowableGap(model_, 0.0);
    for (const auto& [name, value] : parameters()) Cbc_setParameter(model_, name.c_str(), value.c_str());
    // (Cbc_setAllowableFractionGap does not reach the search Cbc_solve runs; its parameter does.)
    if (relative_gap > 0) set_parameter("ratioGap", str_cat(relative_gap));
    // Costs are seconds (1e-7 .. 1e-2 for one kernel): CBC's absolute tolerances (1e-7 on reduced
    // costs) are as large as the smallest ones, and a solve reported optimal came out 1.2% above
    // the true optimum. The objective is scaled so that the dearest candidate costs 1000.
    double largest = 0;
    for (const auto& c : problem.candidates) largest = std::max(largest, std::abs(c.cost));
    scale_ = largest > 0 ? 1000.0 / largest : 1.0;
  }
  ~BlpModel() {
    if (model_) Cbc_deleteModel(model_);
  }
  BlpModel(const BlpModel&) = delete;
  BlpModel& operator=(const BlpModel&) = delete;

  double scale() const { return scale_; }

  // x_k: candidate k is chosen.
  void add_kernel_columns() {
    for (int k = 0; k < n_; ++k)
      Cbc_addCol(model_, column_name(k).c_str(), 0.0, 1.0, problem_.candidates[k].cost * scale_, 1, 0, nullptr,
                 nullptr);
    num_cols_ = n_;
  }
  // Every required tensor has a producer: sum of its producers' x >= 1.
  void add_required_rows() {
    for (int t : problem_.required) row_at_least(producers_[t], 1.0);
  }
  // A chosen kernel's inputs are produced: sum of producers' x - x_k >= 0 (x_k = 0 when nobody can).
  void add_input_rows() {
    for (int k = 0; k < n_; ++k) {
      std::vector<int> needs = problem_.candidates[k].needs;
      std::sort(needs.begin(), needs.end());
      needs.erase(std::unique(needs.begin(), needs.end()), needs.end());
      for (int t : needs) {
        if (producers_[t].empty()) {  // an input nobody can produce: the candidate is unusable
          row({k}, {1.0}, 'L', 0.0);
          continue;
        }
        std::vector<int> idx = producers_[t];
        std::vector<double> val(idx.size(), 1.0);
        idx.push_back(k);
        val.push_back(-1.0);
        row(idx, val, 'G', 0.0);
      }
    }
  }
  // Every primitive is computed by some chosen kernel (recomputation allowed).
  void add_cover_rows() {
    for (int p = 0; p < problem_.num_prims; ++p)
      if (!coverers_[p].empty()) row_at_least(coverers_[p], 1.0);
  }
  // z_k: k's output kept in the internal layout (k chosen, every reader of it reads it linked).
  void add_output_links() {
    std::vector<char> is_required(problem_.num_tensors, 0);
    for (int t : problem_.required) is_required[t] = 1;
    std::vector<std::vector<int>> readers(problem_.num_tensors);
    for (int k = 0; k < n_; ++k)
      for (int t : problem_.candidates[k].needs) readers[t].push_back(k);
    link_columns_.assign(problem_.num_tensors, {});
    z_of_.assign(n_, -1);
    for (int k = 0; k < n_; ++k) {
      const auto& c = problem_.candidates[k];
      if (c.output_link_saving < 0 || is_required[c.output]) continue;
      int z = column(-c.output_link_saving * scale_);
      z_of_[k] = z;
      link_columns_[c.output].push_back(z);
      row({z, k}, {1.0, -1.0}, 'L', 0.0);
      for (int h : readers[c.output])
        if (!reads_linked(problem_.candidates[h], c.output)) row({z, h}, {1.0, 1.0}, 'L', 1.0);
    }
  }
  // y_k of the links_together kernels: all of k's links or none.
  void add_links_together() {
    y_of_.assign(n_, -1);
    for (int k = 0; k < n_; ++k) {
      const auto& c = problem_.candidates[k];
      if (!c.links_together || (c.output_link_saving < 0 && c.input_link_savings.empty())) continue;
      int y = column(0.0);
      y_of_[k] = y;
      row({y, k}, {1.0, -1.0}, 'L', 0.0);  // y_k <= x_k
      if (c.output_link_saving >= 0) {
        if (z_of_[k] >= 0)
          row({y, z_of_[k]}, {1.0, -1.0}, 'E', 0.0);  // z_k = y_k
        else
          row({y}, {1.0}, 'L', 0.0);  // a required output stays dense, and so do k's inputs
      }
      for (auto [t, saving] : c.input_link_savings) {
        std::vector<int> idx = {y};
        std::vector<double> val = {1.0};
        for (int z : link_columns_[t]) {
          idx.push_back(z);
          val.push_back(-1.0);
        }
        row(idx, val, 'L', 0.0);  // y_k <= L_t
        if (link_columns_[t].empty()) continue;
        for (double& v : val) v = -v;
        idx.push_back(k);
        val.push_back(1.0);
        row(idx, val, 'L', 1.0);  // L_t - y_k + x_k <= 1
      }
    }
  }
  // w_kt: input t of k read in the internal layout (k chosen, and t kept in it by its producer).
  void add_input_links() {
    for (int k = 0; k < n_; ++k)
      for (auto [t, saving] : problem_.candidates[k].input_link_savings) {
        if (link_columns_[t].empty() || saving <= 0) continue;
        int w = column(-saving * scale_);
        row({w, k}, {1.0, -1.0}, 'L', 0.0);
        if (y_of_[k] >= 0) row({w, y_of_[k]}, {1.0, -1.0}, 'L', 0.0);  // w_kt <= y_k
        std::vector<int> idx = {w};
        std::vector<double> val = {1.0};
        for (int z : link_columns_[t]) {
          idx.push_back(z);
          val.push_back(-1.0);
        }
        row(idx, val, 'L', 0.0);
      }
  }
  // A root-only solve is not handed the warm start (selection_from still never returns worse): its
  // heuristics stop at the warm start whenever that is as good as what the root finds, which in
  // lazy profiling is the all-measured selection of the round before, so the round ends with
  // nothing new to measure and a full solve follows. Cold runs at 2 threads, solver time with the
  // warm start at the root -> without: YOLOX-nano tiny 120.3 s over 116 solves -> 21.0 s over 36
  // (optimise 157.5 -> 112.5 s); ConvNeXt-T 14.2 -> 20.4 s (optimise 74.1 -> 76.5 s).
  void set_warm_start(const std::vector<int>& warm_start) {
    if (warm_start.empty() || !selection_is_feasible(problem_, warm_start)) return;
    if (depth_ == SolveDepth::RootOnly) return;
    std::vector<int> cols(n_);
    std::vector<double> values(n_, 0.0);
    for (int k = 0; k < n_; ++k) cols[k] = k;
    for (int k : warm_start) values[k] = 1.0;
    Cbc_setMIPStartI(model_, n_, cols.data(), values.data());
    handed_warm_start_ = warm_start;
  }
  // Ends the search at the first selection costing less than `below` seconds; CBC rejects every
  // selection that does not, so a search that finds none proves there is none.
  void stop_at_first_below(double below) {
    char cutoff[32];
    std::snprintf(cutoff, sizeof cutoff, "%.17g", below * scale_);
    set_parameter("cutoff", cutoff);
    set_parameter("maxSolutions", "1");
  }
  // Writes the model to DIR/blp-N.mps(.gz) and to DIR/blp-N.start the time limit and the number
  // of kernel columns, then the CBC settings (parameters()) as name value pairs on one line, then
  // the warm start handed to CBC, if any (one kernel column per line); N counts the solves of this
  // process. bench/blp_replay.cc reads them, to study solver settings offline on the problems of a
  // real run.
  void write_problem(const std::string& dir) {
    static std::atomic<int> next_index{0};
    std::string base = str_cat(dir, "/blp-", next_index++);
    Cbc_writeMps(model_, base.c_str());
    std::ofstream start(base + ".start");
    start << time_limit_seconds_ << " " << n_ << "\n";
    for (const auto& [name, value] : parameters()) start << name << " " << value << " ";
    start << "\n";
    for (int k : handed_warm_start_) start << k << "\n";
  }
  // Solves in a child process (solve_in_child); `crash` says why when it died. With
  // KORCH_BLP_DUMP_DIR set, the problem is written there first (write_problem).
  std::optional<CbcOutcome> solve(std::string* crash) {
    if (const char* dir = std::getenv("KORCH_BLP_DUMP_DIR")) write_problem(dir);
    bool died = false;
    std::optional<CbcOutcome> outcome = solve_in_child(model_, n_, crash, &died);
    if (died) *crash += keep_problem_for_report(model_);
    return outcome;
  }

 private:
  // CBC's settings by name, in the order applied.
  std::vector<std::pair<std::string, std::string>> parameters() const {
    std::vector<std::pair<std::string, std::string>> all(std::begin(kCbcParameters), std::end(kCbcParameters));
    if (depth_ == SolveDepth::RootOnly)
      all.insert(all.end(), std::begin(kRootOnlyCbcParameters), std::end(kRootOnlyCbcParameters));
    all.insert(all.end(), set_later_.begin(), set_later_.end());
    return all;
  }
  // Sets a CBC parameter after construction, recorded for write_problem.
  void set_parameter(const std::string& name, const std::string& value) {
    Cbc_setParameter(model_, name.c_str(), value.c_str());
    set_later_.emplace_back(name, value);
  }
  int column(double objective) {
    Cbc_addCol(model_, column_name(num_cols_).c_str(), 0.0, 1.0, objective, 0, 0, nullptr, nullptr);
    return num_cols_++;
  }
  void row(std::vector<int> idx, std::vector<double> val, char sense, double rhs) {
    Cbc_addRow(model_, "", static_cast<int>(idx.size()), idx.data(), val.data(), sense, rhs);
  }
  void row_at_least(const std::vector<int>& idx, double rhs) {
    row(idx, std::vector<double>(idx.size(), 1.0), 'G', rhs);
  }

  const SelectionProblem& problem_;
  SolveDepth depth_;
  double time_limit_seconds_;
  std::vector<int> handed_warm_start_;
  std::vector<std::pair<std::string, std::string>> set_later_;  // parameters set after the constructor's
  int n_;
  std::vector<std::vector<int>> producers_, coverers_;
  Cbc_Model* model_;
  double scale_ = 1.0;
  int num_cols_ = 0;
  std::vector<std::vector<int>> link_columns_;  // z columns of each tensor's producers
  std::vector<int> z_of_, y_of_;
};

// The selection CBC found (or the warm start where it found none), pruned, never worse than the
// warm start, with its status.
SelectionResult selection_from(const SelectionProblem& problem, const std::vector<int>& warm_start,
                               const std::optional<CbcOutcome>& outcome, const std::string& crash, double scale,
                               double time_limit_seconds, SolveDepth depth, double relative_gap) {
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
  } else if (result.proven_optimal && relative_gap > 0 && result.lower_bound < result.cost * (1 - 1e-9)) {
    // CBC reports a search ended by the allowed gap as optimal; the bound says it was not proven.
    result.proven_optimal = false;
    result.within_gap = true;
    double gap = result.cost > 0 ? std::max(0.0, (result.cost - result.lower_bound) / result.cost) : 0;
    result.status = str_cat("optimal within ", relative_gap * 100, "% (solver stopped at a gap of ",
                            std::round(gap * 10000) / 100, "%)");
  } else if (result.proven_optimal) {
    result.status = "optimal";
    result.lower_bound = result.cost;
  } else {
    double gap = result.cost > 0 ? std::max(0.0, (result.cost - result.lower_bound) / result.cost) : 0;
    result.status = str_cat(depth == SolveDepth::RootOnly ? "root only" : "time limit", ", gap ",
                            std::round(gap * 10000) / 100, "%");
  }
  return result;
}

// Every family of columns and rows, in the order CBC's path depends on.
void add_selection_blp(BlpModel& blp) {
  blp.add_kernel_columns();
  blp.add_required_rows();
  blp.add_input_rows();
  blp.add_cover_rows();
  blp.add_output_links();
  blp.add_links_together();
  blp.add_input_links();
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

SelectionResult solve_selection_blp(const SelectionProblem& problem, const std::vector<int>& warm_start,
                                    double time_limit_seconds, SolveDepth depth, double relative_gap) {
  auto start = std::chrono::steady_clock::now();
  BlpModel blp(problem, time_limit_seconds, depth, relative_gap);
  add_selection_blp(blp);
  blp.set_warm_start(warm_start);
  std::string crash;
  std::optional<CbcOutcome> outcome = blp.solve(&crash);
  SelectionResult result =
      selection_from(problem, warm_start, outcome, crash, blp.scale(), time_limit_seconds, depth, relative_gap);
  result.seconds = seconds_since(start);
  return result;
}

SelectionResult find_selection_below(const SelectionProblem& problem, const std::vector<int>& fallback, double below,
                                     double time_limit_seconds) {
  auto start = std::chrono::steady_clock::now();
  BlpModel blp(problem, time_limit_seconds, SolveDepth::ToOptimality, 0);
  add_selection_blp(blp);
  blp.stop_at_first_below(below);  // no warm start: the fallback costs more than `below`, CBC would reject it
  std::string crash;
  std::optional<CbcOutcome> outcome = blp.solve(&crash);
  SelectionResult result;
  if (outcome && outcome->proven_infeasible && !outcome->has_solution) {
    if (fallback.empty() || !selection_is_feasible(problem, fallback))
      fail("BLP: no feasible kernel selection costs less than ", below, " s, and no fallback selection was given");
    result.chosen = prune(problem, fallback);
    result.cost = selection_cost(problem, result.chosen);
    result.lower_bound = below;
    result.none_below = true;
    result.status = str_cat("no selection below ", below * 1e3, " ms");
  } else {
    result =
        selection_from(problem, fallback, outcome, crash, blp.scale(), time_limit_seconds, SolveDepth::ToOptimality, 0);
    if (outcome && outcome->has_solution && !result.proven_optimal && result.cost < below)
      result.status = str_cat("below ", below * 1e3, " ms (the first selection found)");
  }
  result.seconds = seconds_since(start);
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
