// `korch calibrate`: measures the figures of the analytic cost model on this machine:
// memory bandwidth (triad over 3 x 128 MiB arrays, all threads), fp32 GEMM rate through
// oneDNN, a simple vector-op rate, and the per-kernel overhead of an empty parallel region; and
// this CPU's fp32 FMA peak (measured clock and FMA throughput) for the limit benchmarks.
#pragma once
#include <string>
#include <vector>

#include "cost/machine.h"

namespace korch {

MachineFigures calibrate_machine(int threads);

// The bandwidth benchmark: triad a = b + 3c over 3 x 128 MiB arrays, on all OpenMP threads.
class TriadBenchmark {
 public:
  TriadBenchmark();               // allocates and first-touches the arrays (in parallel)
  double run_seconds();           // one timed run
  static double bytes_per_run();  // counted as the 3 arrays (write allocation not included)

 private:
  std::vector<float> a_, b_, c_;
};

// The fp32 FMA peak of `threads` cores: threads x lanes x 2 (an FMA is two flops) x fma_units x
// clock. The clock is measured on every thread at once (a timed chain of dependent integer adds,
// one cycle each; the fastest thread counts), the FMA throughput with a timed loop of independent
// FMAs of the widest vector korch's kernels use. fma_units is the CPU's known count where the
// vendor documents it (AMD Zen, 256-bit: 2), else the measured throughput rounded. x86-64 with AVX2
// and FMA only (korch::Error otherwise).
struct FmaPeak {
  int threads = 1;
  int lanes = 8;                       // fp32 lanes per vector: 8 (AVX2), 16 (AVX-512)
  double clock_ghz = 0;                // measured
  double measured_fmas_per_cycle = 0;  // vector FMAs per cycle per core, measured
  int known_fma_units = 0;             // from the CPU model (0: not known)
  int fma_units = 0;                   // what the peak uses
  std::string cpu;                     // vendor and family, as the unit count was looked up
  double gflops() const { return threads * lanes * 2.0 * fma_units * clock_ghz; }
  std::string formula() const;  // "2 threads x 16 lanes x 2 (FMA) x 2 FMA units x 2.45 GHz = 157 GFLOP/s"
};
FmaPeak measure_fma_peak(int threads);

}  // namespace korch
