// Plan ordering, validation and JSON (nlohmann-json) serialisation.
#include "plan/plan.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ir/printer.h"
#include "util/error.h"

namespace korch {

double Plan::predicted_seconds() const {
  double s = 0;
  for (const Kernel& k : kernels) s += k.cost;
  return s - link_savings_seconds;
}

void sort_plan(const PrimGraph& g, Plan& plan) {
  std::stable_sort(plan.kernels.begin(), plan.kernels.end(), [&](const Kernel& a, const Kernel& b) {
    return g.tensor(a.output).producer < g.tensor(b.output).producer;
  });
  plan.kernels.erase(std::unique(plan.kernels.begin(), plan.kernels.end(),
                                 [](const Kernel& a, const Kernel& b) { return a.prims == b.prims; }),
                     plan.kernels.end());
}

std::vector<std::string> validate_plan(const PrimGraph& g, const Plan& plan) {
  std::vector<std::string> problems;
  std::vector<char> available(g.num_tensors(), 0);
  for (TensorId t : g.inputs()) available[t] = 1;
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).is_constant()) available[t] = 1;
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const Kernel& k = plan.kernels[i];
    for (PrimId p : k.prims)
      if (p < 0 || p >= g.num_prims()) {
        problems.push_back(str_cat("kernel ", i, " names primitive ", p, ", which does not exist"));
        return problems;
      }
    try {
      Kernel rebuilt = make_kernel(g, k.prims);
      if (rebuilt.output != k.output) problems.push_back(str_cat("kernel ", i, " output does not match its sink"));
      for (TensorId t : rebuilt.inputs)
        if (!available[t])
          problems.push_back(str_cat("kernel ", i, " reads tensor %", t, " (", g.tensor(t).name,
                                     ") before any kernel materialises it"));
      available[rebuilt.output] = 1;
    } catch (const Error& e) {
      problems.push_back(str_cat("kernel ", i, ": ", e.what()));
    }
  }
  for (TensorId t : g.outputs())
    if (!available[t]) problems.push_back(str_cat("graph output '", g.tensor(t).name, "' is never materialised"));
  return problems;
}

void validate_plan_or_throw(const PrimGraph& g, const Plan& plan) {
  auto problems = validate_plan(g, plan);
  if (!problems.empty()) fail("invalid plan: ", problems.front());
}

std::string codegen_mismatch(const Plan& plan, const std::string& codegen) {
  const char* consequence =
      ": some kernels may run with other schedules than korch optimize chose (re-run korch optimize)";
  if (!plan.codegen.empty() && plan.codegen != codegen)
    return str_cat("the plan names schedule variants of ", plan.codegen, ", this backend generates ",
                   codegen.empty() ? "one schedule per kernel" : codegen, consequence);
  if (plan.codegen.empty())
    for (const Kernel& k : plan.kernels)
      if (k.schedule != 0)
        return str_cat("the plan does not say which code generator its schedule variants belong to (written before ",
                       codegen, ")", consequence);
  return "";
}

std::string plan_to_json(const PrimGraph& g, const Plan& plan) {
  nlohmann::json j;
  j["format"] = "korch-plan-1";
  j["graph_hash"] = str_cat(std::hex, structural_hash(g));
  j["strategy"] = plan.strategy;
  j["cost_model"] = plan.cost_model;
  j["predicted_ms"] = plan.predicted_seconds() * 1e3;
  if (plan.link_savings_seconds != 0) j["link_savings_ms"] = plan.link_savings_seconds * 1e3;
  if (!plan.note.empty()) j["note"] = plan.note;
  if (!plan.codegen.empty()) j["codegen"] = plan.codegen;
  j["kernels"] = nlohmann::json::array();
  for (const Kernel& k : plan.kernels) {
    nlohmann::json kj;
    kj["prims"] = k.prims;
    std::vector<std::string> ops;
    for (PrimId p : k.prims) ops.push_back(prim_op_name(g.prim(p).op));
    kj["ops"] = ops;
    kj["output"] = k.output;
    kj["output_name"] = g.tensor(k.output).name;
    kj["inputs"] = k.inputs;
    kj["cost_us"] = k.cost * 1e6;
    kj["hash"] = str_cat(std::hex, k.hash);
    if (k.schedule != 0) kj["schedule"] = k.schedule;
    j["kernels"].push_back(kj);
  }
  return j.dump(1);
}

Plan plan_from_json(const PrimGraph& g, const std::string& text, const std::string& what) {
  Plan plan;
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    if (j.at("format").get<std::string>() != "korch-plan-1") fail(what, " is not a korch plan (format)");
    std::string hash = str_cat(std::hex, structural_hash(g));
    if (j.at("graph_hash").get<std::string>() != hash)
      fail(what, " was made for a different model (graph hash ", j.at("graph_hash").get<std::string>(), ", this model ",
           hash, "); run `korch optimize` on this model");
    plan.strategy = j.value("strategy", "loaded");
    plan.cost_model = j.value("cost_model", "");
    plan.link_savings_seconds = j.value("link_savings_ms", 0.0) * 1e-3;
    plan.note = j.value("note", "");
    plan.codegen = j.value("codegen", "");
    for (const auto& kj : j.at("kernels")) {
      std::vector<PrimId> prims = kj.at("prims").get<std::vector<PrimId>>();
      for (PrimId p : prims)
        if (p < 0 || p >= g.num_prims()) fail(what, ": kernel names primitive ", p, ", which does not exist");
      Kernel k = make_kernel(g, prims);
      k.cost = kj.value("cost_us", 0.0) * 1e-6;
      k.schedule = kj.value("schedule", 0);
      if (k.schedule < 0 || k.schedule > 64) fail(what, ": kernel schedule variant ", k.schedule, " is out of range");
      plan.kernels.push_back(std::move(k));
    }
  } catch (const nlohmann::json::exception& e) {
    fail(what, " is not a valid plan file (", e.what(), ")");
  }
  validate_plan_or_throw(g, plan);
  return plan;
}

void save_plan(const PrimGraph& g, const Plan& plan, const std::string& path) {
  std::ofstream f(path);
  if (!f) fail("cannot write plan file '", path, "'");
  f << plan_to_json(g, plan) << "\n";
}

Plan load_plan(const PrimGraph& g, const std::string& path) {
  std::ifstream f(path);
  if (!f) fail("cannot open plan file '", path, "'");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return plan_from_json(g, text, "plan file '" + path + "'");
}

std::vector<int> kernel_of_prim(const PrimGraph& g, const Plan& plan) {
  std::vector<int> group(g.num_prims(), -1);
  for (size_t i = 0; i < plan.kernels.size(); ++i)
    for (PrimId p : plan.kernels[i].prims)
      if (group[p] < 0) group[p] = static_cast<int>(i);
  for (int& x : group)
    if (x < 0) x = 0;
  return group;
}

}  // namespace korch
