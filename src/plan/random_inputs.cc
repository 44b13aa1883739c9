// Random kernel and graph inputs (see random_inputs.h).
#include "plan/random_inputs.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

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
  // Uniform in [0, 1): the same 24 bits.
  float unit() { return static_cast<float>((*this)() >> 40) * 0x1p-24f; }

 private:
  uint64_t state_;
};

// Whether every element of constant c is >= 0 (only small constants are read: a weight's sign is
// no property the model's arithmetic guarantees).
bool constant_never_negative(const TensorData& c) {
  if (!is_floating(c.dtype()) || c.size() > 4096) return false;
  for (int64_t i = 0; i < c.size(); ++i)
    if (!(c.get_f64(i) >= 0)) return false;
  return true;
}

// Whether constant c is one even integer (x^c >= 0 for every x).
bool even_integer_exponent(const TensorInfo& c) {
  if (!c.is_constant() || c.constant->size() != 1) return false;
  double e = c.constant->get_f64(0);
  return e == static_cast<double>(static_cast<int64_t>(e)) && static_cast<int64_t>(e) % 2 == 0;
}

// The answer for t within `depth` producers. Answers are kept per (tensor, depth): a tensor read
// along several paths (a residual stream, Add(x, Max(x, c)) repeated) is examined once per depth,
// not once per path (exponentially many).
using NeverNegativeMemo = std::unordered_map<int64_t, bool>;
constexpr int kNeverNegativeDepth = 32;

bool never_negative_within(const PrimGraph& g, TensorId t, int depth, NeverNegativeMemo& memo);

bool examine(const PrimGraph& g, TensorId t, int depth, NeverNegativeMemo& memo) {
  const TensorInfo& info = g.tensor(t);
  if (info.is_constant()) return constant_never_negative(*info.constant);
  if (info.producer == kNone || depth == 0) return false;
  const Primitive& p = g.prim(info.producer);
  auto operand = [&](size_t i) { return never_negative_within(g, p.inputs[i], depth - 1, memo); };
  auto all_operands = [&] {
    for (size_t i = 0; i < p.inputs.size(); ++i)
      if (!operand(i)) return false;
    return true;
  };
  switch (p.op) {
    case PrimOp::Abs:
    case PrimOp::Exp:
    case PrimOp::Sqrt:
    case PrimOp::Sigmoid:
    case PrimOp::Relu: return true;
    case PrimOp::Mul: return p.inputs[0] == p.inputs[1] || all_operands();
    case PrimOp::Pow: return even_integer_exponent(g.tensor(p.inputs[1])) || operand(0);
    case PrimOp::Max: return operand(0) || operand(1);
    case PrimOp::Where: return operand(1) && operand(2);
    case PrimOp::Add:
    case PrimOp::Div:
    case PrimOp::Min:
    case PrimOp::Concat:
    case PrimOp::Cast:
    case PrimOp::Copy: return all_operands();
    case PrimOp::ReduceSum:
    case PrimOp::ReduceMean:
    case PrimOp::ReduceMax:
    case PrimOp::ReduceMin:
    case PrimOp::ReduceProd:
    case PrimOp::Broadcast:
    case PrimOp::Transpose:
    case PrimOp::Reshape:
    case PrimOp::Slice:
    case PrimOp::Gather:
    case PrimOp::MaxPool:
    case PrimOp::AvgPool: return operand(0);
    default: return false;
  }
}

bool never_negative_within(const PrimGraph& g, TensorId t, int depth, NeverNegativeMemo& memo) {
  int64_t key = static_cast<int64_t>(t) * (kNeverNegativeDepth + 1) + depth;
  auto known = memo.find(key);
  if (known != memo.end()) return known->second;
  bool answer = examine(g, t, depth, memo);
  memo.emplace(key, answer);
  return answer;
}

}  // namespace

bool never_negative(const PrimGraph& g, TensorId t) {
  NeverNegativeMemo memo;
  return is_floating(g.tensor(t).dtype) && never_negative_within(g, t, kNeverNegativeDepth, memo);
}

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
    bool unit = never_negative(g, t);
    for (int64_t i = 0; i < v.size(); ++i) {
      if (f32)
        f32[i] = unit ? rng.unit() : rng.real();
      else if (is_floating(info.dtype))
        v.set_f64(i, unit ? rng.unit() : rng.real());
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
