// `korch calibrate`: measures the figures of the analytic cost model on this machine:
// memory bandwidth (triad over 3 x 128 MiB arrays, all threads), fp32 GEMM rate through
// oneDNN, a simple vector-op rate, and the per-kernel overhead of an empty parallel region.
#pragma once
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

}  // namespace korch
