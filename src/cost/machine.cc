// Load/save of MachineFigures as JSON (nlohmann-json).
#include "cost/machine.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace korch {

MachineFigures load_machine_figures(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail("cannot open machine file '", path, "'");
  MachineFigures m;
  try {
    nlohmann::json j = nlohmann::json::parse(f);
    m.bandwidth_gbs = j.at("bandwidth_gbs").get<double>();
    m.gemm_gflops = j.at("gemm_gflops").get<double>();
    m.vector_gops = j.value("vector_gops", m.vector_gops);
    m.kernel_overhead_us = j.value("kernel_overhead_us", m.kernel_overhead_us);
    m.threads = j.value("threads", m.threads);
  } catch (const std::exception& e) {
    fail("machine file '", path, "' is invalid (", e.what(), "); rerun `korch calibrate`");
  }
  if (!(m.bandwidth_gbs > 0) || !(m.gemm_gflops > 0) || !(m.vector_gops > 0) || m.kernel_overhead_us < 0)
    fail("machine file '", path, "' has non-positive figures; rerun `korch calibrate`");
  m.source = path;
  return m;
}

void save_machine_figures(const MachineFigures& m, const std::string& path) {
  nlohmann::json j = {{"bandwidth_gbs", m.bandwidth_gbs},
                      {"gemm_gflops", m.gemm_gflops},
                      {"vector_gops", m.vector_gops},
                      {"kernel_overhead_us", m.kernel_overhead_us},
                      {"threads", m.threads}};
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream f(path);
  if (!f) fail("cannot write machine file '", path, "'");
  f << j.dump(2) << "\n";
}

std::string default_machine_file() {
  if (const char* e = std::getenv("KORCH_MACHINE_FILE")) return e;
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return std::string(x) + "/korch/machine.json";
  if (const char* h = std::getenv("HOME")) return std::string(h) + "/.cache/korch/machine.json";
  return "korch_machine.json";
}

bool is_builtin_machine(const std::string& name) { return name == "h200"; }

MachineFigures builtin_machine_figures(const std::string& name, bool tf32) {
  if (!is_builtin_machine(name)) fail("no built-in machine figures named '", name, "' (known: h200)");
  MachineFigures m;
  m.bandwidth_gbs = 4800;
  m.gemm_gflops = tf32 ? 494000 : 67000;
  m.vector_gops = 33500;  // one fp32 operation per FMA slot: half the FMA flop rate
  m.kernel_overhead_us = 3;
  m.threads = 1;
  m.source = tf32 ? "built-in h200 (TF32 GEMMs)" : "built-in h200 (fp32)";
  return m;
}

MachineFigures machine_figures_or_defaults() {
  std::string path = default_machine_file();
  if (!std::filesystem::exists(path)) return MachineFigures{};
  return load_machine_figures(path);
}

}  // namespace korch
