// Machine figures for the analytic cost model, measured by `korch calibrate` and kept in a
// small JSON file. Defaults are the figures measured on the team's 2-core AVX-512 machine.
#pragma once
#include <string>

namespace korch {

struct MachineFigures {
  double bandwidth_gbs = 23.8;      // memory bandwidth, all threads (triad)
  double gemm_gflops = 184.0;       // oneDNN fp32 matmul
  double vector_gops = 32.0;        // simple elementwise operations per second (x1e9)
  double kernel_overhead_us = 2.0;  // fixed cost of launching one kernel
  int threads = 2;
  std::string source = "defaults";  // where the figures came from
};

MachineFigures load_machine_figures(const std::string& path);  // throws korch::Error on a bad file
void save_machine_figures(const MachineFigures& m, const std::string& path);
// The default location: $KORCH_MACHINE_FILE, else $XDG_CACHE_HOME/korch/machine.json, else
// $HOME/.cache/korch/machine.json.
std::string default_machine_file();
// Figures from the default file when it exists and is valid, defaults otherwise.
MachineFigures machine_figures_or_defaults();

// Built-in figure sets of GPUs, from their data sheets (peak rates: the analytic model is a lower
// bound). "h200": NVIDIA H200 SXM, HBM3e 4.8 TB/s, 67 TFLOP/s fp32 FMA, 494 TFLOP/s dense TF32
// tensor cores (used for GEMMs when tf32 is set), ~3 us per kernel launched from a CUDA graph.
// Throws korch::Error for an unknown name.
MachineFigures builtin_machine_figures(const std::string& name, bool tf32 = false);
bool is_builtin_machine(const std::string& name);

}  // namespace korch
