// Cache resets before a timed kernel run (see cache_state.h).
#include "backend/cpu/cache_state.h"

#include <omp.h>

#include <algorithm>
#include <cstddef>

#include "backend/cpu/stream_store.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace korch::cpu {

namespace {

constexpr int64_t kLine = 64;

#if defined(__x86_64__)
bool has_clflushopt() {
  static const bool supported = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 23)) != 0;
  }();
  return supported;
}

__attribute__((target("clflushopt"))) void flush_lines(const MemorySpan& span) {
  const auto* p = static_cast<const char*>(span.first);
  auto first = reinterpret_cast<uintptr_t>(p) & ~static_cast<uintptr_t>(kLine - 1);
  auto end = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(span.second);
  for (uintptr_t a = first; a < end; a += kLine) _mm_clflushopt(reinterpret_cast<void*>(a));
}

bool can_flush_lines() { return has_clflushopt(); }
void fence_flushes() { _mm_sfence(); }
#else
bool can_flush_lines() { return false; }
void flush_lines(const MemorySpan&) {}
void fence_flushes() {}
#endif

}  // namespace

MemorySpan read_back_part(const MemorySpan& input, int64_t last_level_cache_bytes) {
  const auto* data = static_cast<const unsigned char*>(input.first);
  int64_t keep = std::max<int64_t>(kLine, last_level_cache_bytes / 2);
  if (input.second <= keep) return input;
  int64_t skip = (input.second - keep) / kLine * kLine;
  return {data + skip, input.second - skip};
}

// Every thread of the team reads its own slice of `bytes_per_thread` (one read per line: clean
// lines, no write-back later).
void CacheState::sweep(int64_t bytes_per_thread) {
  int threads = omp_get_max_threads();
  int64_t words = bytes_per_thread / 8;
  if (sweep_threads_ < threads || static_cast<int64_t>(sweep_.size()) < words * threads) {
    sweep_.assign(static_cast<size_t>(words * threads), 1);
    sweep_threads_ = threads;
  }
  uint64_t sum = 0;
  const uint64_t* e = sweep_.data();
#pragma omp parallel reduction(+ : sum)
  {
    const uint64_t* slice = e + words * omp_get_thread_num();
    for (int64_t i = 0; i < words; i += kLine / 8) sum += slice[i];
  }
  volatile uint64_t sink = sum;
  (void)sink;
}

void CacheState::prepare(const std::vector<MemorySpan>& inputs, const std::vector<MemorySpan>& touched) {
  if (can_flush_lines()) {
    for (const MemorySpan& s : inputs) flush_lines(s);
    for (const MemorySpan& s : touched) flush_lines(s);
    fence_flushes();
    sweep(2 * private_cache_bytes());
  } else {  // the whole last-level cache, shared by the team
    sweep(3 * last_level_cache_bytes() / 2 / std::max(1, omp_get_max_threads()));
  }
  uint64_t sum = 0;
  for (const MemorySpan& input : inputs) {
    auto [data, bytes] = read_back_part(input, last_level_cache_bytes());
    const auto* p = static_cast<const unsigned char*>(data);
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (int64_t i = 0; i < bytes; i += kLine) sum += p[i];
  }
  volatile uint64_t sink = sum;
  (void)sink;
}

}  // namespace korch::cpu
