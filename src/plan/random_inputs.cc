// Random kernel and graph inputs (see random_inputs.h).
#include "plan/random_inputs.h"

#include <algorithm>
#include <cstdint>

namespace korch {

namespace {

// SplitMix64 (Steele, Lea and Flood): a 64-bit state, one add and three multiply-xorshifts per
// number; statistically good enough for test data and ~10x faster than std::mt19937 with
// uniform_real_distribution, which were most of the profiler's input preparation.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t operator()() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1): 24 random bits, exact in float.
  float real() { return static_cast<float>(static_cast<int64_t>((*this)() >> 40) - (int64_t{1} << 23)) * 0x1p-23f; }

 private:
  uint64_t state_;
};

}  // namespace

std::vector<TensorData> random_graph_inputs(const PrimGraph& g, uint32_t seed) {
  Kernel whole_graph;
  whole_graph.inputs = g.inputs();
  return random_kernel_inputs(g, whole_graph, seed);
}

std::vector<TensorData> random_kernel_inputs(const PrimGraph& g, const Kernel& k, uint32_t seed) {
  SplitMix64 rng(seed);
  std::vector<TensorData> values;
  for (TensorId t : k.inputs) {
    const TensorInfo& info = g.tensor(t);
    if (info.is_constant()) {
      values.push_back(*info.constant);
      continue;
    }
    TensorData v(info.dtype, info.shape);
    // Integer tensors used as Gather indices stay within the gathered axis.
    int64_t limit = 3;
    for (PrimId p : k.prims) {
      const Primitive& prim = g.prim(p);
      if (prim.op == PrimOp::Gather && prim.inputs[1] == t)
        limit = std::min<int64_t>(limit == 3 ? INT64_MAX : limit, g.tensor(prim.inputs[0]).shape[prim.attrs.i("axis")]);
    }
    float* f32 = info.dtype == DType::F32 ? v.data<float>() : nullptr;
    for (int64_t i = 0; i < v.size(); ++i) {
      if (f32)
        f32[i] = rng.real();
      else if (is_floating(info.dtype))
        v.set_f64(i, rng.real());
      else if (info.dtype == DType::Bool)
        v.set_i64(i, rng() & 1);
      else
        v.set_i64(i, static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(limit, 1))));
    }
    values.push_back(std::move(v));
  }
  return values;
}

}  // namespace korch
