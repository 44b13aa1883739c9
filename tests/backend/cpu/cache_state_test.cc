// The part of an input CacheState reads back before a timed run (read_back_part).
#include "backend/cpu/cache_state.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace korch::cpu {
namespace {

TEST(CacheState, ReadsBackInputsUpToHalfTheLastLevelCacheTheirTailLineAligned) {
  const int64_t llc = int64_t{32} << 20;
  std::vector<unsigned char> buffer(int64_t{64} << 20);
  const unsigned char* data = buffer.data();

  // An input that fits in half the cache is read back whole.
  for (int64_t bytes : {int64_t{0}, int64_t{1}, int64_t{4096}, llc / 2}) {
    MemorySpan part = read_back_part({data, bytes}, llc);
    EXPECT_EQ(part.first, data);
    EXPECT_EQ(part.second, bytes);
  }
  // A larger one: its tail, at least half the cache and less than a line more, ending where the
  // input ends, starting a whole number of lines into it.
  for (int64_t bytes : {llc / 2 + 1, llc / 2 + 100, llc, int64_t{64} << 20}) {
    MemorySpan part = read_back_part({data, bytes}, llc);
    const auto* start = static_cast<const unsigned char*>(part.first);
    EXPECT_EQ(start + part.second, data + bytes);
    EXPECT_GE(part.second, llc / 2);
    EXPECT_LT(part.second, llc / 2 + 64);
    EXPECT_EQ((start - data) % 64, 0);
  }
}

}  // namespace
}  // namespace korch::cpu
