// The partial sums of a MatMul's GEMV schedule variant (onednn_builder.cc): Y = A B for an A of at
// most kGemvMaxRows rows and a constant B stored dense [K, N], K split into parts whose sums are
// written apart (every part a pass over its own consecutive rows of B), the parts after the
// second added into the second. The kernel's oneDNN epilogue adds the first two with the bias and
// post-ops. Each pass reads four rows of B at a time: four streams per core keep more cache-line
// reads in flight than one, and at batch 1 the time is the read of B. Xeon VM, 2 threads,
// [1,960]x[960,1280], B evicted from the private caches by a 128 MB sweep: one stream per core
// 11-12 GB/s, oneDNN 2.6's brgemm matmul 9-11, four streams 15-19; B flushed to DRAM: four
// streams and oneDNN's sgemm with B transposed both ~31 GB/s. AVX-512, or AVX2 with FMA
// (gemv_supported).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/onednn_internal.h"

namespace korch::cpu::onednn_detail {

namespace {

constexpr int kStreams = 4;  // rows of B read together

// out[Rows][n] = a[Rows, k0:k1] B[k0:k1, :], with a's rows lda apart, in vectors of V (load, fmadd,
// store: every product fused with its sum, so that no compiler option regroups them and every
// build of this file gives the same bits).
#define KORCH_GEMV_PART(NAME, TARGET, V, WIDTH, LOAD, SET1, FMADD, STORE)                                        \
  template <int Rows>                                                                                            \
  __attribute__((target(TARGET))) void NAME(const float* a, int64_t lda, const float* b, int64_t n, int64_t k0,  \
                                            int64_t k1, float* out) {                                            \
    std::fill(out, out + Rows * n, 0.f);                                                                         \
    int64_t k = k0;                                                                                              \
    for (; k + kStreams <= k1; k += kStreams) {                                                                  \
      const float* row[kStreams];                                                                                \
      float x[Rows][kStreams];                                                                                   \
      for (int i = 0; i < kStreams; ++i) {                                                                       \
        row[i] = b + (k + i) * n;                                                                                \
        for (int m = 0; m < Rows; ++m) x[m][i] = a[m * lda + k + i];                                             \
      }                                                                                                          \
      int64_t j = 0;                                                                                             \
      for (; j + WIDTH <= n; j += WIDTH) {                                                                       \
        V acc[Rows];                                                                                             \
        for (int m = 0; m < Rows; ++m) acc[m] = LOAD(out + m * n + j);                                           \
        for (int i = 0; i < kStreams; ++i) {                                                                     \
          const V v = LOAD(row[i] + j);                                                                          \
          for (int m = 0; m < Rows; ++m) acc[m] = FMADD(SET1(x[m][i]), v, acc[m]);                               \
        }                                                                                                        \
        for (int m = 0; m < Rows; ++m) STORE(out + m * n + j, acc[m]);                                           \
      }                                                                                                          \
      for (; j < n; ++j)                                                                                         \
        for (int m = 0; m < Rows; ++m)                                                                           \
          for (int i = 0; i < kStreams; ++i) out[m * n + j] = std::fma(x[m][i], row[i][j], out[m * n + j]);      \
    }                                                                                                            \
    for (; k < k1; ++k)                                                                                          \
      for (int m = 0; m < Rows; ++m)                                                                             \
        for (int64_t j = 0; j < n; ++j) out[m * n + j] = std::fma(a[m * lda + k], b[k * n + j], out[m * n + j]); \
  }

KORCH_GEMV_PART(gemv_part_avx512, "avx512f", __m512, 16, _mm512_loadu_ps, _mm512_set1_ps, _mm512_fmadd_ps,
                _mm512_storeu_ps)
KORCH_GEMV_PART(gemv_part_avx2, "avx2,fma", __m256, 8, _mm256_loadu_ps, _mm256_set1_ps, _mm256_fmadd_ps,
                _mm256_storeu_ps)
#undef KORCH_GEMV_PART

template <int Rows>
void gemv_part_rows(bool avx512, const float* a, int64_t lda, const float* b, int64_t n, int64_t k0, int64_t k1,
                    float* out) {
  if (avx512)
    gemv_part_avx512<Rows>(a, lda, b, n, k0, k1, out);
  else
    gemv_part_avx2<Rows>(a, lda, b, n, k0, k1, out);
}

void gemv_part(bool avx512, const float* a, int64_t lda, int64_t rows, const float* b, int64_t n, int64_t k0,
               int64_t k1, float* out) {
  switch (rows) {
    case 1: return gemv_part_rows<1>(avx512, a, lda, b, n, k0, k1, out);
    case 2: return gemv_part_rows<2>(avx512, a, lda, b, n, k0, k1, out);
    case 3: return gemv_part_rows<3>(avx512, a, lda, b, n, k0, k1, out);
    default: return gemv_part_rows<4>(avx512, a, lda, b, n, k0, k1, out);
  }
}

}  // namespace

bool gemv_has_avx512() {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
}

bool gemv_supported() {
  static const bool supported = gemv_has_avx512() || (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
  return supported;
}

void gemv_partial_sums(const float* a, int64_t lda, int64_t rows, const float* b, int64_t k, int64_t n, int parts,
                       float* partials, bool avx512) {
  KORCH_CHECK(rows >= 1 && rows <= kGemvMaxRows && parts >= 2 && gemv_supported() && (!avx512 || gemv_has_avx512()),
              "GEMV of ", rows, " rows in ", parts, " parts on this CPU");
  const int64_t part_size = rows * n;
#pragma omp parallel for schedule(static)
  for (int p = 0; p < parts; ++p)
    gemv_part(avx512, a, lda, rows, b, n, k * p / parts, k * (p + 1) / parts, partials + p * part_size);
  if (parts == 2) return;
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < part_size; ++j) {
    float s = partials[part_size + j];
    for (int p = 2; p < parts; ++p) s += partials[p * part_size + j];
    partials[part_size + j] = s;
  }
}

}  // namespace korch::cpu::onednn_detail
