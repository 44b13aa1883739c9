// `korch calibrate`: measures the figures of the analytic cost model on this machine:
// memory bandwidth (triad over 3 x 128 MiB arrays, all threads), fp32 GEMM rate through
// oneDNN, a simple vector-op rate, and the per-kernel overhead of an empty parallel region.
#pragma once
#include "cost/machine.h"

namespace korch {

MachineFigures calibrate_machine(int threads);

}  // namespace korch
