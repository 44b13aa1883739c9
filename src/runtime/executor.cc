// Arena planning and plan execution.
#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "backend/cpu/layout_link.h"
#include "runtime/link_verification.h"
#include "util/error.h"

namespace korch {

namespace {
constexpr int64_t kAlign = 64;
int64_t align_up(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }
int64_t tensor_bytes(const TensorInfo& t) { return num_elements(t.shape) * static_cast<int64_t>(dtype_size(t.dtype)); }
}  // namespace

ArenaPlan plan_arena(const PrimGraph& g, const Plan& plan, const std::vector<int64_t>* bytes) {
  ArenaPlan a;
  a.offset.assign(g.num_tensors(), -1);
  int n = static_cast<int>(plan.kernels.size());
  std::vector<int> first(g.num_tensors(), -1), last(g.num_tensors(), -1);
  for (int i = 0; i < n; ++i) {
    first[plan.kernels[i].output] = i;
    last[plan.kernels[i].output] = std::max(last[plan.kernels[i].output], i);
    for (TensorId t : plan.kernels[i].inputs) last[t] = std::max(last[t], i);
  }
  for (TensorId t : g.outputs())
    if (first[t] >= 0) last[t] = n;  // outputs live to the end
  struct Item {
    TensorId t;
    int64_t size;
  };
  std::vector<Item> items;
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (first[t] >= 0) {
      items.push_back({t, align_up(std::max<int64_t>(bytes ? bytes->at(t) : tensor_bytes(g.tensor(t)), 1))});
      a.total_bytes += items.back().size;
    }
  // Largest first, first fit among tensors whose lifetimes overlap.
  std::sort(items.begin(), items.end(),
            [](const Item& x, const Item& y) { return x.size > y.size || (x.size == y.size && x.t < y.t); });
  std::vector<Item> placed;
  for (const Item& it : items) {
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Item& p : placed)
      if (!(last[p.t] < first[it.t] || last[it.t] < first[p.t]))
        busy.emplace_back(a.offset[p.t], a.offset[p.t] + p.size);
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (auto [lo, hi] : busy) {
      if (off + it.size <= lo) break;
      off = std::max(off, hi);
    }
    a.offset[it.t] = off;
    a.arena_bytes = std::max(a.arena_bytes, off + it.size);
    placed.push_back(it);
  }
  return a;
}

Executor::Executor(const PrimGraph& g, Plan plan, int threads) : g_(g), plan_(std::move(plan)), threads_(threads) {
  validate_plan_or_throw(g_, plan_);
  cpu::set_num_threads(threads_);
  for (const Kernel& k : plan_.kernels) {
    std::string why;
    auto compiled = cpu::compile_kernel(g_, k, &why);
    if (!compiled) {
      compiled = cpu::compile_reference_kernel(g_, k);
      ++fallbacks_;
    }
    kernels_.push_back(std::move(compiled));
  }
  // A Halide kernel links only after its strided build matched its dense one (link_verification.h).
  auto verify_strided = [&](int i) {
    std::string why;
    if (strided_layout_matches_dense(g_, plan_.kernels[i], *kernels_[i], &why)) return true;
    unlinked_.push_back(why);
    std::fprintf(stderr, "korch: warning: kernel %d keeps its tensors dense: %s\n", i, why.c_str());
    return false;
  };
  cpu::LayoutLinks links = cpu::link_layouts(g_, plan_.kernels, kernels_, verify_strided);
  linked_ = links.num_linked;
  arena_ = plan_arena(g_, plan_, &links.bytes);
  storage_.resize(std::max<int64_t>(arena_.arena_bytes, 1));  // 64-byte aligned by its allocator
}

std::vector<TensorData> Executor::run(const std::vector<TensorData>& inputs) {
  if (inputs.size() != g_.inputs().size())
    fail("the model has ", g_.inputs().size(), " inputs but ", inputs.size(), " were given");
  cpu::set_num_threads(threads_);
  unsigned char* base = storage_.data();
  std::vector<const void*> where(g_.num_tensors(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo& info = g_.tensor(g_.inputs()[i]);
    if (inputs[i].dtype() != info.dtype || inputs[i].shape() != info.shape)
      fail("input '", info.name, "' must be ", dtype_name(info.dtype), shape_str(info.shape), ", got ",
           dtype_name(inputs[i].dtype()), shape_str(inputs[i].shape()));
    where[g_.inputs()[i]] = inputs[i].raw();
  }
  for (TensorId t = 0; t < g_.num_tensors(); ++t) {
    if (g_.tensor(t).is_constant()) where[t] = g_.tensor(t).constant->raw();
    if (arena_.offset[t] >= 0) where[t] = base + arena_.offset[t];
  }
  // Graph outputs that a kernel produces are written straight into the returned tensors (no copy
  // out of the arena); the others (inputs or constants passed through) are copied below.
  std::vector<TensorData> outputs;
  outputs.reserve(g_.outputs().size());
  for (TensorId t : g_.outputs()) {
    const TensorInfo& info = g_.tensor(t);
    outputs.emplace_back(info.dtype, info.shape);
    if (arena_.offset[t] >= 0 && where[t] == base + arena_.offset[t]) where[t] = outputs.back().raw();
  }
  if (profiling_) timings_.assign(kernels_.size(), {});
  std::vector<const void*> args;
  for (size_t i = 0; i < kernels_.size(); ++i) {
    const Kernel& k = plan_.kernels[i];
    args.clear();
    for (TensorId t : k.inputs) args.push_back(where[t]);
    auto t0 = std::chrono::steady_clock::now();
    kernels_[i]->run(args, const_cast<void*>(where[k.output]));
    if (profiling_) {
      timings_[i].description = kernels_[i]->describe();
      timings_[i].seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  for (size_t o = 0; o < outputs.size(); ++o)
    if (where[g_.outputs()[o]] != outputs[o].raw())
      std::memcpy(outputs[o].raw(), where[g_.outputs()[o]], outputs[o].byte_size());
  return outputs;
}

}  // namespace korch
