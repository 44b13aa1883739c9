// CacheState: puts the caches in the state a kernel finds inside a model run: none of the memory
// the kernel touches is cached (the rest of the model's weights and activations went through
// since the kernel last ran), the private caches of every thread hold other data, and the
// kernel's inputs are read back (their producer just wrote them), each up to the part its
// producer can have left in the last-level cache (read_back_part). Profiling a kernel over and
// over with its weights and inputs hot underprices weight-heavy kernels (a 2048x1000 MatMul:
// 0.05 ms alone, 0.4 ms in ResNet-50) and every extra kernel boundary.
//
// The memory the kernel touches is flushed line by line (clflushopt), so that a reset costs in
// proportion to the kernel's own bytes: sweeping a buffer larger than the last-level cache cost
// 40 ms per timed run on a VM reporting a 480 MiB L3, 99% of the profiler's timing. The
// private caches (L1, L2) are swept by reading a buffer of twice their size on every thread.
// Where the CPU cannot flush lines, the whole last-level cache is swept instead.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace korch::cpu {

using MemorySpan = std::pair<const void*, int64_t>;  // (pointer, bytes)

// The part of an input a kernel finds cached after its producer wrote it: the last
// last_level_cache_bytes / 2 of it (line-aligned; the whole input when smaller). The producer
// wrote its output in order, and the head of an output larger than that was evicted by its tail
// and by what the producer read; reading back a 64 MiB input in full before timing left more of
// it in a 32 MiB cache than a model run does (EfficientViT-B1's Hardswish kernels ran 2-2.7x their
// profiled time in the plan).
MemorySpan read_back_part(const MemorySpan& input, int64_t last_level_cache_bytes);

class CacheState {
 public:
  // Evicts `inputs` and `touched` (the kernel's output and the memory its compiled form holds)
  // from every cache level and sweeps the private caches, then reads back each input's
  // read_back_part.
  void prepare(const std::vector<MemorySpan>& inputs, const std::vector<MemorySpan>& touched);

 private:
  std::vector<uint64_t> sweep_;  // allocated on first use
  int sweep_threads_ = 0;        // threads sweep_ has a slice for
  void sweep(int64_t bytes_per_thread);
};

}  // namespace korch::cpu
