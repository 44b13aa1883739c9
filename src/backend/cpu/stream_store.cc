// Streaming stores for large kernel outputs (see stream_store.h). Guarantees: the destination
// holds exactly the source's rows afterwards, whatever their alignment, and the stores are fenced.
#include "backend/cpu/stream_store.h"

#include <emmintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

extern "C" int korch_stream_rows(void* dst, int32_t dst_offset, const void* src, int32_t src_offset, int32_t rows,
                                 int32_t row_elements, int32_t element_bytes, int32_t dst_stride, int32_t src_stride) {
  const int64_t row_bytes = int64_t{row_elements} * element_bytes;
  char* d = static_cast<char*>(dst) + int64_t{dst_offset} * element_bytes;
  const char* s = static_cast<const char*>(src) + int64_t{src_offset} * element_bytes;
  const int64_t d_step = int64_t{dst_stride} * element_bytes, s_step = int64_t{src_stride} * element_bytes;
  const bool streamed = reinterpret_cast<uintptr_t>(d) % 16 == 0 && row_bytes % 16 == 0 && d_step % 16 == 0;
  for (int32_t r = 0; r < rows; ++r, d += d_step, s += s_step) {
    if (!streamed) {
      std::memcpy(d, s, static_cast<size_t>(row_bytes));
      continue;
    }
    for (int64_t b = 0; b < row_bytes; b += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + b), _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + b)));
  }
  _mm_sfence();
  return 0;
}

namespace korch::cpu {

namespace {

// Bytes of cpu0's cache `index` (sysfs), `fallback` when unknown.
int64_t sysfs_cache_bytes(int index, int64_t fallback) {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
  int64_t value = 0;
  std::string unit;
  if (!(f >> value && value > 0)) return fallback;
  f >> unit;
  return value * (unit == "K" || unit.empty() ? 1024 : unit == "M" ? 1024 * 1024 : 1);
}

}  // namespace

int64_t last_level_cache_bytes() {
  // Read once: variants_of asks for every candidate kernel.
  static const int64_t cached = std::min<int64_t>(sysfs_cache_bytes(3, int64_t{32} << 20), int64_t{256} << 20);
  return cached;
}

int64_t private_cache_bytes() {
  static const int64_t cached =
      std::clamp<int64_t>(sysfs_cache_bytes(2, int64_t{2} << 20), int64_t{256} << 10, int64_t{64} << 20);
  return cached;
}

int64_t streaming_output_bytes() {
  if (const char* v = std::getenv("KORCH_STREAM_STORES_FROM"); v && *v) {
    char* end = nullptr;
    long long bytes = std::strtoll(v, &end, 10);
    if (end && *end == '\0' && bytes >= 0) return bytes;
  }
  return last_level_cache_bytes();
}

}  // namespace korch::cpu
