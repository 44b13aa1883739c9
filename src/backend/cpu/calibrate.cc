// Micro-benchmarks behind `korch calibrate` (medians of repeated runs).
#include "backend/cpu/calibrate.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <dnnl.hpp>
#include <vector>

#include "cost/profiler.h"

namespace korch {

namespace {

template <typename F>
double median_seconds(int repeats, F&& f) {
  std::vector<double> times;
  f();  // warm-up
  for (int i = 0; i < repeats; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median_of(std::move(times));
}

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
