// Fused softmax attention (plan/attention_pattern.h) as one CPU kernel. For each batch entry and
// block of query rows: the block's scores S = Q Kt over all N keys go to a per-thread buffer sized
// to stay in the core's cache, the score steps (scale, mask), the row max, exp and row sum run on
// that buffer, then E V and the division by the row sums write the block of Y. The [M, N] scores
// never reach memory, and each row sees its exact maximum (no running rescale), so the kernel
// computes the same expression as the primitives, in a different order only inside the GEMMs.
// Two implementations of the GEMMs, each a pair of schedule variants (the score buffer's budget
// per thread): oneDNN's dnnl_sgemm, single-threaded inside the kernel's OpenMP loop over (batch
// entry, row block), which packs Kt and V again for every block; and, where the CPU has AVX-512,
// korch's register-tiled micro-kernels: Kt packed once per batch entry and thread into panels of
// 48 keys, an 8x48 tile of scores per step with the row maxima taken while the tile is in
// registers, and E V in 6x64 tiles over blocks of 256 keys read straight from V's rows. Leading
// scalar scales of the scores become the first GEMM's alpha. Each row's steps, max, exp and sum
// run while the row is in L1, the exp with AVX-512 where the CPU has it.
// Also compile_library_kernel, the dispatch korch and exported packages share for kernels with
// Linear primitives.
#include <dnnl.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "backend/cpu/compiled_kernel.h"
#include "plan/attention_pattern.h"
#include "util/error.h"

namespace korch::cpu {
namespace {

// Floats of scores one thread keeps per row block, by schedule variant (modulo 2): 1 MiB (half of
// the 2 MiB L2 of recent x86 server cores) and 256 KiB (cores with a small L2). Each thread's
// buffer is kept between runs. Variants 0-1 use dnnl_sgemm, 2-3 korch's AVX-512 tiles.
constexpr int64_t kScoreBudgetFloats[] = {256 * 1024, 64 * 1024};
constexpr int kSgemmVariants = 2;

bool cpu_has_avx512() {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
}

// One elementwise step on the scores: x = x op operand, or operand op x (operand_first).
struct ScoreStep {
  PrimOp op;
  bool operand_first = false;
  int input = -1;                     // Kernel::inputs index of the operand
  std::vector<int64_t> batch_offset;  // operand element offset per flattened batch entry
  int64_t row_stride = 0, col_stride = 0;
};

using V16 = float __attribute__((vector_size(64)));
using I16 = int32_t __attribute__((vector_size(64)));

// exp on 16 lanes: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, then a degree-6
// polynomial (Cephes expf coefficients, ~1 ulp), scaled by 2^n through the exponent bits.
// Inputs below -87.3 give 0 (the reference underflows there too, to subnormals at most
// 1.2e-38 away); NaN stays NaN.
// x[0..16) = exp(x - shift), added to *sum.
[[gnu::always_inline]] inline void exp_shifted16(float* values, float shift, V16* sum) {
  V16 x;
  std::memcpy(&x, values, sizeof x);
  x -= shift;
  const V16 hi = x > 88.37f ? V16{} + 88.37f : x;
  const V16 lo = hi < -87.33f ? V16{} - 87.33f : hi;
  const V16 magic = V16{} + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const V16 t = lo * 1.44269504088896341f + magic;
  const V16 n = t - magic;
  const V16 r = lo - n * 0.693359375f + n * 2.12194440e-4f;
  V16 p = V16{} + 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * r * r + r + 1.0f;
  I16 bits;
  std::memcpy(&bits, &t, sizeof bits);
  bits = (bits - 0x4B400000) << 23;  // n, from t's mantissa
  I16 pb;
  std::memcpy(&pb, &p, sizeof pb);
  pb += bits;
  V16 result;
  std::memcpy(&result, &pb, sizeof result);
  result = x < -87.33f ? V16{} : result;
  result = x != x ? x : result;
  *sum += result;
  std::memcpy(values, &result, sizeof result);
}

// Row max, then x = exp(x - max) in place; returns the row sum. Compiled for AVX2 and
// the baseline, picked at load time.
__attribute__((target_clones("avx2", "default"))) float softmax_numerator(float* row, int64_t n) {
  int64_t j = 0;
  V16 vmax = V16{} - INFINITY;
  for (; j + 16 <= n; j += 16) {
    V16 x;
    std::memcpy(&x, row + j, sizeof x);
    vmax = x > vmax ? x : vmax;
  }
  float m = -INFINITY;
  for (int l = 0; l < 16; ++l) m = std::max(m, vmax[l]);
  for (; j < n; ++j) m = std::max(m, row[j]);
  V16 vsum{};
  for (j = 0; j + 16 <= n; j += 16) exp_shifted16(row + j, m, &vsum);
  float s = 0;
  for (int l = 0; l < 16; ++l) s += vsum[l];
  for (; j < n; ++j) {
    row[j] = std::exp(row[j] - m);
    s += row[j];
  }
  return s;
}

// softmax_numerator with AVX-512 intrinsics: the same Cody-Waite reduction and polynomial, with
// 2^n applied by vscalefps (which also gives 0 below -103.9, where the reference underflows to at
// most 1e-45, and keeps NaN). Zero-masking forms with every lane set: the unmasked intrinsics
// trip GCC 12's -Wuninitialized inside its own header.
constexpr __mmask16 kAll = 0xFFFF;
// x = exp(x - m) in place for the n values of row; returns their sum.
__attribute__((target("avx512f"))) float exp_shifted_avx512(float* row, int64_t n, float m) {
  const __m512 shift = _mm512_set1_ps(m), floor = _mm512_set1_ps(-104.0f);
  __m512 vsum = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 x = _mm512_maskz_max_ps(kAll, floor, _mm512_sub_ps(_mm512_loadu_ps(row + j), shift));  // NaN stays
    const __m512 k = _mm512_maskz_roundscale_ps(kAll, _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512 e = _mm512_maskz_scalef_ps(kAll, p, k);
    vsum = _mm512_add_ps(vsum, e);
    _mm512_storeu_ps(row + j, e);
  }
  float lanes[16];
  _mm512_storeu_ps(lanes, vsum);
  float sum = 0;
  for (float lane : lanes) sum += lane;
  for (; j < n; ++j) {
    row[j] = std::exp(row[j] - m);
    sum += row[j];
  }
  return sum;
}

__attribute__((target("avx512f"))) float softmax_numerator_avx512(float* row, int64_t n) {
  int64_t j = 0;
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (; j + 16 <= n; j += 16) vmax = _mm512_maskz_max_ps(kAll, vmax, _mm512_loadu_ps(row + j));
  float lanes[16];
  _mm512_storeu_ps(lanes, vmax);
  float m = *std::max_element(lanes, lanes + 16);
  for (; j < n; ++j) m = std::max(m, row[j]);
  return exp_shifted_avx512(row, n, m);
}

// The row's softmax numerator in place, returning its sum, by the widest code this CPU runs.
float softmax_row(float* row, int64_t n) {
  return cpu_has_avx512() ? softmax_numerator_avx512(row, n) : softmax_numerator(row, n);
}

// f(row[j], o[j * stride]) updates row[j]; stride 0 broadcasts one value. 16 lanes at a time where
// the operand is contiguous or one value.
template <typename F>
[[gnu::always_inline]] inline void combine(float* row, const float* o, int64_t stride, int64_t n, F f) {
  int64_t j = 0;
  if (stride <= 1) {
    for (; j + 16 <= n; j += 16) {
      V16 x, c;
      std::memcpy(&x, row + j, sizeof x);
      if (stride == 0)
        c = V16{} + o[0];
      else
        std::memcpy(&c, o + j, sizeof c);
      f(x, c);
      std::memcpy(row + j, &x, sizeof x);
    }
  }
  for (; j < n; ++j) {
    V16 x = V16{} + row[j], c = V16{} + o[j * stride];
    f(x, c);
    row[j] = x[0];
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void apply_step(PrimOp op, bool operand_first, float* row,
                                                                             const float* o, int64_t stride,
                                                                             int64_t n) {
  switch (op) {
    case PrimOp::Add: return combine(row, o, stride, n, [](V16& x, const V16& c) { x = x + c; });
    case PrimOp::Mul: return combine(row, o, stride, n, [](V16& x, const V16& c) { x = x * c; });
    case PrimOp::Sub:
      if (operand_first) return combine(row, o, stride, n, [](V16& x, const V16& c) { x = c - x; });
      return combine(row, o, stride, n, [](V16& x, const V16& c) { x = x - c; });
    default:
      if (operand_first) return combine(row, o, stride, n, [](V16& x, const V16& c) { x = c / x; });
      return combine(row, o, stride, n, [](V16& x, const V16& c) { x = x / c; });
  }
}

// rows x cols values (rows ld apart), each row divided by its sum.
__attribute__((target_clones("avx512f", "avx2", "default"))) void divide_rows(float* out, int64_t ld, const float* sums,
                                                                              int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = out + r * ld;
    const V16 sum = V16{} + sums[r];
    int64_t d = 0;
    for (; d + 16 <= cols; d += 16) {
      V16 x;
      std::memcpy(&x, row + d, sizeof x);
      x /= sum;
      std::memcpy(row + d, &x, sizeof x);
    }
    for (; d < cols; ++d) row[d] /= sums[r];
  }
}

// korch's AVX-512 GEMM tiles. Scores: Kt is packed into panels of kPanelKeys keys, panel p holding
// Kt[d, kPanelKeys p + c] at [d][c] (zero past the last key), so that one step of the reduction
// over d reads three vectors of the panel and broadcasts one Q value per row: 24 accumulators
// for kScoreTileRows x kPanelKeys scores, 24 FMAs per 11 loads.
constexpr int kScoreTileRows = 8;
constexpr int64_t kPanelKeys = 48;
// E V: kValueTileRows rows x up to 64 output columns (4 vectors), over blocks of kValueBlockKeys
// keys (that block of V stays in L1/L2 while every row of the score block passes over it).
constexpr int kValueTileRows = 6;
constexpr int64_t kValueBlockKeys = 256;

// Lane masks of the three vectors of a panel of `keys` (<= kPanelKeys) valid keys.
struct PanelMasks {
  __mmask16 m[3];
};
PanelMasks panel_masks(int64_t keys) {
  PanelMasks pm{};
  for (int c = 0; c < 3; ++c) {
    const int64_t lanes = std::clamp<int64_t>(keys - 16 * c, 0, 16);
    pm.m[c] = static_cast<__mmask16>((1u << lanes) - 1);
  }
  return pm;
}

// s[r][0..keys) = alpha * sum_d q[r * q_rs + d * q_cs] panel[d][..] for R rows, over the first C
// vectors of the panel (a last panel of few keys needs fewer); the 16 lanes of row_max[16 r ..]
// take the maxima of the stored lanes.
template <int R, int C>
__attribute__((target("avx512f"))) void score_tile(const float* q, int64_t q_rs, int64_t q_cs, const float* panel,
                                                   int64_t dk, float alpha, float* s, int64_t ld, PanelMasks pm,
                                                   float* row_max) {
  __m512 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 3
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int64_t d = 0; d < dk; ++d) {
    __m512 b[C];
#pragma GCC unroll 3
    for (int c = 0; c < C; ++c) b[c] = _mm512_loadu_ps(panel + d * kPanelKeys + 16 * c);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(q[r * q_rs + d * q_cs]);
#pragma GCC unroll 3
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(a, b[c], acc[r][c]);
    }
  }
  const __m512 scale = _mm512_set1_ps(alpha);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    __m512 m = _mm512_loadu_ps(row_max + 16 * r);
#pragma GCC unroll 3
    for (int c = 0; c < C; ++c) {
      const __m512 x = _mm512_mul_ps(acc[r][c], scale);
      _mm512_mask_storeu_ps(s + r * ld + 16 * c, pm.m[c], x);
      m = _mm512_mask_max_ps(m, pm.m[c], m, x);
    }
    _mm512_storeu_ps(row_max + 16 * r, m);
  }
}

// y[r][0..16 C) (+)= sum_j p[r * ldp + j] v[j * ldv + ..] over `keys` keys for R rows; the last of the
// C vectors covers the lanes of `last`.
template <int R, int C>
__attribute__((target("avx512f"))) void value_tile(const float* p, int64_t ldp, const float* v, int64_t ldv,
                                                   int64_t keys, float* y, int64_t ldy, __mmask16 last,
                                                   bool accumulate) {
  auto mask = [&](int c) { return c == C - 1 ? last : kAll; };
  __m512 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c)
      acc[r][c] = accumulate ? _mm512_maskz_loadu_ps(mask(c), y + r * ldy + 16 * c) : _mm512_setzero_ps();
  for (int64_t j = 0; j < keys; ++j) {
    __m512 b[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) b[c] = _mm512_maskz_loadu_ps(mask(c), v + j * ldv + 16 * c);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(p[r * ldp + j]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(a, b[c], acc[r][c]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) _mm512_mask_storeu_ps(y + r * ldy + 16 * c, mask(c), acc[r][c]);
}

using ScoreTileFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, float, float*, int64_t, PanelMasks,
                             float*);
using ValueTileFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t, __mmask16, bool);

template <int C, int... R>
constexpr std::array<ScoreTileFn, sizeof...(R)> score_tiles(std::integer_sequence<int, R...>) {
  return {&score_tile<R + 1, C>...};
}
template <int C, int... R>
constexpr std::array<ValueTileFn, sizeof...(R)> value_tiles(std::integer_sequence<int, R...>) {
  return {&value_tile<R + 1, C>...};
}
// kScoreTiles[c - 1][r - 1] and kValueTiles[c - 1][r - 1]: the tile of r rows and c vectors.
constexpr std::array<std::array<ScoreTileFn, kScoreTileRows>, 3> kScoreTiles = {
    score_tiles<1>(std::make_integer_sequence<int, kScoreTileRows>()),
    score_tiles<2>(std::make_integer_sequence<int, kScoreTileRows>()),
    score_tiles<3>(std::make_integer_sequence<int, kScoreTileRows>())};
constexpr std::array<std::array<ValueTileFn, kValueTileRows>, 4> kValueTiles = {
    value_tiles<1>(std::make_integer_sequence<int, kValueTileRows>()),
    value_tiles<2>(std::make_integer_sequence<int, kValueTileRows>()),
    value_tiles<3>(std::make_integer_sequence<int, kValueTileRows>()),
    value_tiles<4>(std::make_integer_sequence<int, kValueTileRows>())};

// Panel p of Kt (element [d, j] at kt[d * d_stride + j * j_stride], dk x n) into out (dk x kPanelKeys).
void pack_panel(const float* kt, int64_t d_stride, int64_t j_stride, int64_t dk, int64_t n, int64_t p, float* out) {
  const int64_t j0 = p * kPanelKeys, keys = std::min(kPanelKeys, n - j0);
  if (keys < kPanelKeys) std::fill(out, out + dk * kPanelKeys, 0.0f);
  if (d_stride == 1) {  // Kt's columns (K's rows) contiguous
    for (int64_t c = 0; c < keys; ++c) {
      const float* from = kt + (j0 + c) * j_stride;
      for (int64_t d = 0; d < dk; ++d) out[d * kPanelKeys + c] = from[d];
    }
  } else {
    for (int64_t d = 0; d < dk; ++d) {
      const float* from = kt + d * d_stride + j0 * j_stride;
      for (int64_t c = 0; c < keys; ++c) out[d * kPanelKeys + c] = from[c * j_stride];
    }
  }
}

// The scores of `rows` query rows (q: row r, column d at q[r * q_rs + d * q_cs]) against every
// packed panel, into s (rows x n, ld n); row_max[r] gets each row's maximum (lane_max: 16 floats
// per row of scratch).
void score_block(const float* q, int64_t q_rs, int64_t q_cs, const float* panels, int64_t dk, int64_t n, float alpha,
                 int64_t rows, float* s, float* lane_max, float* row_max) {
  std::fill(lane_max, lane_max + 16 * rows, -INFINITY);
  const int64_t num_panels = (n + kPanelKeys - 1) / kPanelKeys;
  for (int64_t p = 0; p < num_panels; ++p) {
    const int64_t keys = std::min(kPanelKeys, n - p * kPanelKeys), vectors = (keys + 15) / 16;
    const PanelMasks pm = panel_masks(keys);
    const float* panel = panels + p * dk * kPanelKeys;
    for (int64_t r = 0; r < rows; r += kScoreTileRows) {
      const int64_t tile_rows = std::min<int64_t>(kScoreTileRows, rows - r);
      kScoreTiles[vectors - 1][tile_rows - 1](q + r * q_rs, q_rs, q_cs, panel, dk, alpha, s + r * n + p * kPanelKeys, n,
                                              pm, lane_max + 16 * r);
    }
  }
  for (int64_t r = 0; r < rows; ++r) row_max[r] = *std::max_element(lane_max + 16 * r, lane_max + 16 * r + 16);
}

// y (rows x dv, ld ldy) = p (rows x n, ld n) v (n x dv, rows ldv apart, columns contiguous).
void value_block(const float* p, int64_t n, const float* v, int64_t ldv, int64_t dv, int64_t rows, float* y,
                 int64_t ldy) {
  for (int64_t j0 = 0; j0 < n; j0 += kValueBlockKeys) {
    const int64_t keys = std::min(kValueBlockKeys, n - j0);
    for (int64_t c0 = 0; c0 < dv; c0 += 64) {
      const int64_t cols = std::min<int64_t>(64, dv - c0), vectors = (cols + 15) / 16;
      const __mmask16 last = static_cast<__mmask16>((1u << (cols - 16 * (vectors - 1))) - 1);
      for (int64_t r = 0; r < rows; r += kValueTileRows) {
        const int64_t tile_rows = std::min<int64_t>(kValueTileRows, rows - r);
        kValueTiles[vectors - 1][tile_rows - 1](p + r * n + j0, n, v + j0 * ldv + c0, ldv, keys, y + r * ldy + c0, ldy,
                                                last, j0 > 0);
      }
    }
  }
}

// Element strides of a tensor of `shape` broadcast (numpy-style, aligned right) to `to`.
std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& to) {
  std::vector<int64_t> own = strides_of(shape), out(to.size(), 0);
  const size_t shift = to.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) out[shift + i] = shape[i] == 1 ? 0 : own[i];
  return out;
}

// The element offset of each batch entry (the dims before the last two, flattened row-major) of
// a view with `shape` and `strides`, starting at `offset`.
std::vector<int64_t> batch_offsets(const Shape& shape, const std::vector<int64_t>& strides, int64_t offset) {
  const Shape batch(shape.begin(), shape.end() - 2);
  std::vector<int64_t> offsets;
  for (int64_t b = 0; b < num_elements(batch); ++b) {
    int64_t rest = b, at = offset;
    for (size_t d = batch.size(); d-- > 0;) {
      at += (rest % batch[d]) * strides[d];
      rest /= batch[d];
    }
    offsets.push_back(at);
  }
  return offsets;
}

// One GEMM operand of a batch entry: a matrix of a strided view whose rows or columns are
// contiguous, as dnnl_sgemm takes it (trans 'N': row-major with leading dimension ld; 'T': the
// transpose of such a matrix).
struct Matrix {
  int input = -1;                     // Kernel::inputs index (-1: the kernel's output)
  std::vector<int64_t> batch_offset;  // element offset per flattened batch entry
  int64_t row_stride = 0;             // elements between consecutive rows
  char trans = 'N';
  int64_t ld = 0;
};

std::optional<Matrix> gemm_matrix(const StridedView& v, int input, bool transposable, std::string* why_not,
                                  const char* name) {
  const size_t rank = v.shape.size();
  const int64_t rows = v.shape[rank - 2], cols = v.shape[rank - 1];
  int64_t rs = v.strides[rank - 2], cs = v.strides[rank - 1];
  if (cols == 1) cs = 1;
  if (rows == 1) rs = std::max<int64_t>(cols, 1) * cs;
  Matrix m;
  m.input = input;
  m.row_stride = rs;
  if (cs == 1 && rs >= cols) {
    m.ld = std::max<int64_t>(rs, 1);
  } else if (transposable && rs == 1 && cs >= rows) {
    m.trans = 'T';
    m.ld = std::max<int64_t>(cs, 1);
  } else {
    if (why_not)
      *why_not = str_cat("the attention's ", name, " view has strides ", rs, ", ", cs, " (no contiguous axis)");
    return std::nullopt;
  }
  m.batch_offset = batch_offsets(v.shape, v.strides, v.offset);
  return m;
}

class AttentionKernel final : public CompiledKernel {
 public:
  // built() is false (and why_not says why) when a view has no contiguous axis.
  AttentionKernel(const PrimGraph& g, const Kernel& k, const AttentionPattern& a, std::string* why_not) {
    auto input_index = [&](TensorId t) {
      auto at = std::find(k.inputs.begin(), k.inputs.end(), t);
      KORCH_CHECK(at != k.inputs.end(), "attention operand is no kernel input");
      return static_cast<int>(at - k.inputs.begin());
    };
    std::optional<Matrix> q = gemm_matrix(a.q_view.view, input_index(a.q_view.base), true, why_not, "Q");
    std::optional<Matrix> kt =
        q ? gemm_matrix(a.kt_view.view, input_index(a.kt_view.base), true, why_not, "Kt") : std::nullopt;
    std::optional<Matrix> v =
        kt ? gemm_matrix(a.v_view.view, input_index(a.v_view.base), true, why_not, "V") : std::nullopt;
    std::optional<Matrix> y = v ? gemm_matrix(a.y_view.view, -1, false, why_not, "output") : std::nullopt;
    if (!y) return;
    q_ = *q;
    kt_ = *kt;
    v_ = *v;
    y_ = *y;
    alpha_ = a.q_scale;
    const Shape& qs = g.tensor(a.q).shape;
    const Shape& vs = g.tensor(a.v).shape;
    m_ = qs[qs.size() - 2];
    dk_ = qs.back();
    n_ = vs[vs.size() - 2];
    dv_ = vs.back();
    batch_ = num_elements(Shape(qs.begin(), qs.end() - 2));
    const Shape scores = g.tensor(g.prim(a.scores).output).shape;
    for (size_t i = 0; i < a.score_steps.size(); ++i) {
      const Primitive& prim = g.prim(a.score_steps[i]);
      ScoreStep s;
      s.op = prim.op;
      s.operand_first = a.score_operand[i] == 0;
      TensorId operand = prim.inputs[a.score_operand[i]];
      s.input = input_index(operand);
      std::vector<int64_t> strides = broadcast_strides(g.tensor(operand).shape, scores);
      const size_t rank = scores.size();
      s.row_stride = strides[rank - 2];
      s.col_stride = strides[rank - 1];
      s.batch_offset = batch_offsets(scores, strides, 0);
      const bool scalar = num_elements(g.tensor(operand).shape) == 1;
      if (scalar && steps_.empty() && (s.op == PrimOp::Mul || (s.op == PrimOp::Div && !s.operand_first)))
        alpha_steps_.push_back(std::move(s));
      else
        steps_.push_back(std::move(s));
    }
    // Variants past the sgemm ones are the tiles; a plan made on an AVX-512 CPU still loads on one
    // without (the sgemm kernel with the same budget, and describe() says so).
    tiles_ = k.schedule >= kSgemmVariants && cpu_has_avx512();
    const int64_t budget = kScoreBudgetFloats[std::max(k.schedule, 0) % kSgemmVariants];
    rows_ = std::clamp<int64_t>(budget / std::max<int64_t>(n_, 1), 1, m_);
    if (tiles_ && rows_ > kScoreTileRows) rows_ -= rows_ % kScoreTileRows;
    const int views =
        !a.q_view.chain.empty() + !a.kt_view.chain.empty() + !a.v_view.chain.empty() + !a.y_view.chain.empty();
    description_ = str_cat("attention (fused softmax, ", rows_, " query rows x ", n_, " keys per block, ",
                           steps_.size(), " score steps, ", alpha_steps_.size(), " scales in alpha, ", views,
                           " strided views", alpha_ != 1 ? ", Q scaled" : "",
                           !tiles_           ? ", dnnl_sgemm)"
                           : v_.trans == 'N' ? ", korch AVX-512 tiles)"
                                             : ", korch AVX-512 score tiles, dnnl_sgemm for E V)");
    built_ = true;
  }
  bool built() const { return built_; }

  void run(const std::vector<const void*>& inputs, void* output) override {
    const float* q = static_cast<const float*>(inputs[q_.input]);
    const float* kt = static_cast<const float*>(inputs[kt_.input]);
    const float* v = static_cast<const float*>(inputs[v_.input]);
    float* y = static_cast<float*>(output);
    // Leading scalar scales fold into the QKt GEMM's alpha (at most an ulp per score away from
    // scaling the product) unless the scale is 0 or not finite, where they run as steps.
    float alpha = alpha_;
    bool folded = true;
    for (const ScoreStep& s : alpha_steps_) {
      const float c = static_cast<const float*>(inputs[s.input])[0];
      folded = folded && c != 0 && std::isfinite(c);
      alpha = s.op == PrimOp::Mul ? alpha * c : alpha / c;
    }
    if (!folded) alpha = alpha_;
    const std::vector<const ScoreStep*> steps = run_steps(folded);
    const int64_t blocks = (m_ + rows_ - 1) / rows_;
    const int64_t tasks = batch_ * blocks;
    int failed = 0;
    const size_t threads = static_cast<size_t>(omp_get_max_threads());
    if (scratch_.size() < threads) scratch_.resize(threads);
    const int64_t num_panels = (n_ + kPanelKeys - 1) / kPanelKeys, panel_floats = dk_ * kPanelKeys;
    // Q's row r, column d at q_at[r * q_rs + d * q_cs]; Kt's [d, j] at kt_at[d * d_stride + j * j_stride].
    const int64_t q_rs = q_.trans == 'N' ? q_.ld : 1, q_cs = q_.trans == 'N' ? 1 : q_.ld;
    const int64_t d_stride = kt_.trans == 'N' ? kt_.ld : 1, j_stride = kt_.trans == 'N' ? 1 : kt_.ld;
#pragma omp parallel reduction(| : failed)
    {
      std::vector<float>& scratch = scratch_[static_cast<size_t>(omp_get_thread_num())];
      const int64_t panel_total = tiles_ ? num_panels * panel_floats : 0;
      scratch.resize(static_cast<size_t>(rows_ * n_ + 18 * rows_ + panel_total));
      float* scores = scratch.data();
      float* sums = scores + rows_ * n_;
      float* row_max = sums + rows_;
      float* lane_max = row_max + rows_;
      float* panels = lane_max + 16 * rows_;  // tiles: Kt of batch entry `packed`, packed
      int64_t packed = -1;
#pragma omp for schedule(static)
      for (int64_t task = 0; task < tasks; ++task) {
        const int64_t b = task / blocks, r0 = (task % blocks) * rows_, rows = std::min(rows_, m_ - r0);
        const float* q_rows = q + q_.batch_offset[b] + r0 * q_.row_stride;
        if (tiles_ && packed != b) {  // a thread's tasks are consecutive: each packs its batch entries once
          for (int64_t p = 0; p < num_panels; ++p)
            pack_panel(kt + kt_.batch_offset[b], d_stride, j_stride, dk_, n_, p, panels + p * panel_floats);
          packed = b;
        }
        if (tiles_)
          score_block(q_rows, q_rs, q_cs, panels, dk_, n_, alpha, rows, scores, lane_max, row_max);
        else
          failed |= dnnl_sgemm(q_.trans, kt_.trans, rows, n_, dk_, alpha, q_rows, q_.ld, kt + kt_.batch_offset[b],
                               kt_.ld, 0.0f, scores, n_) != dnnl_success;
        for (int64_t r = 0; r < rows; ++r) {
          float* row = scores + r * n_;
          for (const ScoreStep* s : steps)
            apply_step(s->op, s->operand_first, row,
                       static_cast<const float*>(inputs[s->input]) + s->batch_offset[b] + (r0 + r) * s->row_stride,
                       s->col_stride, n_);
          // The tiles took each row's maximum on the way; steps change it.
          sums[r] = tiles_ && steps.empty() ? exp_shifted_avx512(row, n_, row_max[r]) : softmax_row(row, n_);
        }
        float* out = y + y_.batch_offset[b] + r0 * y_.row_stride;
        if (tiles_ && v_.trans == 'N')
          value_block(scores, n_, v + v_.batch_offset[b], v_.ld, dv_, rows, out, y_.ld);
        else
          failed |= dnnl_sgemm('N', v_.trans, rows, dv_, n_, 1.0f, scores, n_, v + v_.batch_offset[b], v_.ld, 0.0f, out,
                               y_.ld) != dnnl_success;
        divide_rows(out, y_.ld, sums, rows, dv_);
      }
    }
    if (failed) fail("attention kernel: dnnl_sgemm failed");
  }

  std::string describe() const override { return description_; }

 private:
  // The score steps to apply one by one: all of them, or those after the ones folded into alpha.
  std::vector<const ScoreStep*> run_steps(bool folded) const {
    std::vector<const ScoreStep*> steps;
    if (!folded)
      for (const ScoreStep& s : alpha_steps_) steps.push_back(&s);
    for (const ScoreStep& s : steps_) steps.push_back(&s);
    return steps;
  }

  Matrix q_, kt_, v_, y_;
  float alpha_ = 1;
  int64_t batch_ = 1, m_ = 0, n_ = 0, dk_ = 0, dv_ = 0, rows_ = 1;
  bool tiles_ = false;                  // korch's AVX-512 tiles instead of dnnl_sgemm
  std::vector<ScoreStep> alpha_steps_;  // leading steps that scale by one value
  std::vector<ScoreStep> steps_;        // the others
  // Per thread: a block's scores, row sums, row maxima, lane maxima, and for the tiles a batch
  // entry's packed Kt.
  std::vector<std::vector<float>> scratch_;
  std::string description_;
  bool built_ = false;
};

}  // namespace

bool attention_supports(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  if (attention_of_kernel(g, k)) return true;
  if (why_not) *why_not = "more than one Linear primitive, and not the fused softmax-attention pattern";
  return false;
}

int attention_schedule_variants(const PrimGraph& /*g*/, const Kernel& /*k*/) {
  return cpu_has_avx512() ? 2 * kSgemmVariants : kSgemmVariants;
}

std::unique_ptr<CompiledKernel> compile_attention_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  std::optional<AttentionPattern> a = attention_of_kernel(g, k);
  if (!a) {
    attention_supports(g, k, why_not);
    return nullptr;
  }
  auto kernel = std::make_unique<AttentionKernel>(g, k, *a, why_not);
  if (!kernel->built()) return nullptr;
  return kernel;
}

std::unique_ptr<CompiledKernel> compile_library_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  if (k.num_linear == 2) return compile_attention_kernel(g, k, why_not);
  if (k.num_linear > 2) {
    if (why_not) *why_not = "more than two Linear primitives";
    return nullptr;
  }
  return compile_onednn_kernel(g, k, why_not);
}

}  // namespace korch::cpu
