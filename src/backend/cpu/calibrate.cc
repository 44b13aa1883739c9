// Micro-benchmarks behind `korch calibrate` (medians of repeated runs) and the FMA peak of the
// limit benchmarks (fastest of repeated runs: the peak is what the core can do undisturbed).
#include "backend/cpu/calibrate.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <dnnl.hpp>
#include <iomanip>
#include <sstream>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "cost/profiler.h"
#include "util/error.h"

namespace korch {

namespace {

template <typename F>
std::vector<double> timed_runs(int repeats, F&& f) {
  std::vector<double> times;
  f();  // warm-up
  for (int i = 0; i < repeats; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return times;
}

template <typename F>
double median_seconds(int repeats, F&& f) {
  return median_of(timed_runs(repeats, std::forward<F>(f)));
}

// The fastest of repeated runs: a run that another process interrupted only takes longer.
template <typename F>
double fastest_seconds(int repeats, F&& f) {
  std::vector<double> times = timed_runs(repeats, std::forward<F>(f));
  return *std::min_element(times.begin(), times.end());
}

#if defined(__x86_64__)
constexpr int kAddsPerIteration = 100;

// Cycles of this core per second: a chain of dependent register-to-register integer adds (one
// cycle each; the loop's own counter and branch run beside the chain). Adds of an immediate would
// not do: Golden Cove cores fold chains of those at register renaming, several per cycle.
double clock_hz() {
  const int64_t iterations = 100000;  // 10^7 cycles, ~4 ms at 2.5 GHz
  uint64_t x = 0, one = 1;
  double s = fastest_seconds(15, [&] {
    for (int64_t i = 0; i < iterations; ++i) asm volatile(".rept 100\n\tadd %1, %0\n\t.endr" : "+r"(x) : "r"(one));
  });
  return static_cast<double>(iterations) * kAddsPerIteration / s;
}

// Vector FMAs per second on this core: 12 independent accumulators, more than an FMA's latency
// (4-5 cycles) times the FMA units (at most 2) of the CPUs korch targets.
constexpr int kChains = 12;

// `iterations` x kChains FMAs on vectors V (GCC vector extensions; a * b + c contracts to an FMA);
// returns a sum of the accumulators so that none is optimised away. Inlined into the callers below,
// which compile it for their instruction set.
template <typename V>
[[gnu::always_inline]] inline float fma_chains(int64_t iterations, float start) {
  V acc[kChains];
  for (V& a : acc) a = V{} + start;
  const V scale = V{} + 0.9999999f, shift = V{} + 1e-7f;
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * scale + shift;
  }
  float sum = 0;
  for (const V& a : acc) sum += a[0];
  return sum;
}

typedef float Floats8 __attribute__((vector_size(32)));
typedef float Floats16 __attribute__((vector_size(64)));
__attribute__((target("avx2,fma"))) float fma_chains_avx2(int64_t iterations, float start) {
  return fma_chains<Floats8>(iterations, start);
}
__attribute__((target("avx512f"))) float fma_chains_avx512(int64_t iterations, float start) {
  return fma_chains<Floats16>(iterations, start);
}

double fmas_per_second(int lanes) {
  const int64_t iterations = 200000;
  volatile float sink = 0;
  double s = fastest_seconds(
      15, [&] { sink = lanes == 16 ? fma_chains_avx512(iterations, sink) : fma_chains_avx2(iterations, sink); });
  return static_cast<double>(iterations) * kChains / s;
}

// The vendor's FMA unit count for `lanes`-wide vectors where it is documented (0 otherwise):
// AMD Zen 2 and later run two 256-bit FMAs per cycle (Zen 1 splits them into 128-bit halves).
int known_fma_units(int lanes, std::string* cpu) {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __get_cpuid(0, &eax, &ebx, &ecx, &edx);
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  __get_cpuid(1, &eax, &ebx, &ecx, &edx);
  unsigned family = (eax >> 8) & 0xf, model = (eax >> 4) & 0xf;
  if (family == 0xf) family += (eax >> 20) & 0xff;
  if (family == 0x6 || family == 0xf) model += ((eax >> 16) & 0xf) << 4;
  std::ostringstream os;
  os << vendor << " family 0x" << std::hex << family << " model 0x" << model;
  *cpu = os.str();
  bool zen2_or_later = std::string(vendor) == "AuthenticAMD" && (family > 0x17 || (family == 0x17 && model >= 0x30));
  return zen2_or_later && lanes == 8 ? 2 : 0;
}
#endif

double measure_bandwidth() {
  TriadBenchmark triad;
  double s = median_seconds(7, [&] { triad.run_seconds(); });
  return TriadBenchmark::bytes_per_run() / s / 1e9;
}

double measure_gemm() {
  using namespace dnnl;
  const int64_t m = 1024, k = 1024, n = 1024;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  memory::desc a_md({m, k}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc b_md({k, n}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc c_md({m, n}, memory::data_type::f32, memory::format_tag::ab);
  matmul::primitive_desc pd(matmul::desc(a_md, b_md, c_md), eng);
  matmul mm(pd);
  memory a(a_md, eng), b(b_md, eng), c(c_md, eng);
  std::fill_n(static_cast<float*>(a.get_data_handle()), m * k, 0.5f);
  std::fill_n(static_cast<float*>(b.get_data_handle()), k * n, 0.25f);
  double s = median_seconds(9, [&] {
    mm.execute(strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    strm.wait();
  });
  return 2.0 * m * n * k / s / 1e9;
}

double measure_vector_ops() {
  const size_t n = 1u << 20;  // cache-resident
  std::vector<float> a(n, 1.0f);
  const int chain = 16;
  double s = median_seconds(9, [&] {
#pragma omp parallel for simd
    for (size_t i = 0; i < n; ++i) {
      float v = a[i];
      for (int r = 0; r < chain; ++r) v = v * 0.999f + 0.001f;
      a[i] = v;
    }
  });
  return 2.0 * chain * n / s / 1e9;
}

double measure_overhead() {
  volatile int sink = 0;
  double s = median_seconds(101, [&] {
#pragma omp parallel
    { sink = sink + 1; }
  });
  return s * 1e6;
}

constexpr size_t kTriadFloats = (128u << 20) / sizeof(float);

}  // namespace

TriadBenchmark::TriadBenchmark() : a_(kTriadFloats), b_(kTriadFloats), c_(kTriadFloats) {
  float* a = a_.data();
  float* b = b_.data();
  float* c = c_.data();
#pragma omp parallel for
  for (size_t i = 0; i < kTriadFloats; ++i) {
    a[i] = 0.0f;
    b[i] = 1.0f;
    c[i] = 2.0f;
  }
}

double TriadBenchmark::run_seconds() {
  auto t0 = std::chrono::steady_clock::now();
  float* a = a_.data();
  const float* b = b_.data();
  const float* c = c_.data();
#pragma omp parallel for simd
  for (size_t i = 0; i < kTriadFloats; ++i) a[i] = b[i] + 3.0f * c[i];
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string FmaPeak::formula() const {
  std::ostringstream os;
  os << threads << " threads x " << lanes << " fp32 lanes x 2 (FMA) x " << fma_units << " FMA units x " << std::fixed
     << std::setprecision(2) << clock_ghz << " GHz = " << std::setprecision(1) << gflops() << " GFLOP/s";
  return os.str();
}

FmaPeak measure_fma_peak(int threads) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    fail("the FMA peak is measured with AVX2 and FMA, which this CPU lacks");
  FmaPeak peak;
  peak.threads = threads;
  peak.lanes = __builtin_cpu_supports("avx512f") ? 16 : 8;
  // Every thread measures at once, so the clock is the one all-core load gets (turbo drops).
  std::vector<double> hz(threads), fmas_per_cycle(threads);
#pragma omp parallel num_threads(threads)
  {
    int t = omp_get_thread_num();
    hz[t] = clock_hz();
    fmas_per_cycle[t] = fmas_per_second(peak.lanes) / hz[t];
  }
  peak.clock_ghz = *std::max_element(hz.begin(), hz.end()) / 1e9;
  peak.measured_fmas_per_cycle = *std::max_element(fmas_per_cycle.begin(), fmas_per_cycle.end());
  peak.known_fma_units = known_fma_units(peak.lanes, &peak.cpu);
  peak.fma_units = peak.known_fma_units > 0 ? peak.known_fma_units
                                            : std::max(1, static_cast<int>(std::lround(peak.measured_fmas_per_cycle)));
  return peak;
#else
  (void)threads;
  fail("the FMA peak is measured on x86-64 only");
#endif
}

double TriadBenchmark::bytes_per_run() { return 3.0 * kTriadFloats * sizeof(float); }

MachineFigures calibrate_machine(int threads) {
  omp_set_num_threads(threads);
  MachineFigures m;
  m.threads = threads;
  m.bandwidth_gbs = measure_bandwidth();
  m.gemm_gflops = measure_gemm();
  m.vector_gops = measure_vector_ops();
  m.kernel_overhead_us = std::max(0.5, measure_overhead());
  m.source = "calibrated";
  return m;
}

}  // namespace korch
