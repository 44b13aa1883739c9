// The FMA peak of the limit benchmarks: a plausible clock and FMA throughput for an x86-64 core,
// the unit count the peak uses consistent with the measurement, and the formula's product.
#include "backend/cpu/calibrate.h"

#include <gtest/gtest.h>

#include <cmath>

#include "util/error.h"

namespace korch {
namespace {

TEST(FmaPeak, MeasuredClockAndUnitsArePlausible) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no AVX2+FMA";
  FmaPeak p = measure_fma_peak(1);
  EXPECT_EQ(p.threads, 1);
  EXPECT_EQ(p.lanes, __builtin_cpu_supports("avx512f") ? 16 : 8);
  EXPECT_GT(p.clock_ghz, 0.8);  // server and desktop cores run at 1-6 GHz
  EXPECT_LT(p.clock_ghz, 7.0);
  // Fastest of repeated runs, so a busy machine still gets near the real throughput (1-2 per cycle).
  EXPECT_GT(p.measured_fmas_per_cycle, 0.5);
  EXPECT_LT(p.measured_fmas_per_cycle, 4.5);
  EXPECT_GE(p.fma_units, 1);
  EXPECT_LE(p.fma_units, 4);
  if (p.known_fma_units == 0) {
    EXPECT_EQ(p.fma_units, std::lround(p.measured_fmas_per_cycle));
  }
  EXPECT_FALSE(p.cpu.empty());
  EXPECT_DOUBLE_EQ(p.gflops(), p.lanes * 2.0 * p.fma_units * p.clock_ghz);
  EXPECT_NE(p.formula().find(" GFLOP/s"), std::string::npos) << p.formula();
#else
  EXPECT_THROW(measure_fma_peak(1), Error);
#endif
}

}  // namespace
}  // namespace korch
