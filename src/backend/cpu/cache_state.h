// CacheState: puts the caches in the state a kernel finds inside a model run: everything evicted
// (the rest of the model's weights and activations went through since the kernel last ran), then
// the kernel's inputs read back (their producer just wrote them), on every thread. Profiling a
// kernel over and over with its weights and inputs hot in L2 underprices weight-heavy kernels
// (a 2048x1000 MatMul: 0.05 ms alone, 0.4 ms in ResNet-50) and every extra kernel boundary.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace korch::cpu {

class CacheState {
 public:
  // Evicts the caches, then reads `inputs` (pointer, bytes). The eviction buffer (1.5 times the
  // last-level cache) is allocated on first use.
  void prepare(const std::vector<std::pair<const void*, int64_t>>& inputs);

 private:
  std::vector<uint64_t> evict_;
};

}  // namespace korch::cpu
