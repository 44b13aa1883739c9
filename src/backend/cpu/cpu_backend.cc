// Backend dispatch (oneDNN for linear kernels, Halide for the rest), the reference fallback
// kernel, and the shared OpenMP thread count.
#include <omp.h>

#include <cstring>
#include <map>

#include "backend/cpu/compiled_kernel.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch::cpu {

namespace {

class ReferenceKernel : public CompiledKernel {
 public:
  ReferenceKernel(const PrimGraph& g, const Kernel& k) : g_(g), k_(k) {}
  void run(const std::vector<const void*>& inputs, void* output) override {
    std::map<TensorId, std::shared_ptr<TensorData>> values;
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      const TensorInfo& t = g_.tensor(k_.inputs[i]);
      auto v = std::make_shared<TensorData>(t.dtype, t.shape);
      std::memcpy(v->raw(), inputs[i], v->byte_size());
      values[k_.inputs[i]] = v;
    }
    for (PrimId p : k_.prims) {
      const Primitive& prim = g_.prim(p);
      std::vector<const TensorData*> args;
      for (TensorId t : prim.inputs) args.push_back(values.at(t).get());
      const TensorInfo& out = g_.tensor(prim.output);
      values[prim.output] = std::make_shared<TensorData>(reference::evaluate(prim, args, out.dtype, out.shape));
    }
    const TensorData& result = *values.at(k_.output);
    std::memcpy(output, result.raw(), result.byte_size());
  }
  std::string describe() const override { return "reference fallback"; }

 private:
  const PrimGraph& g_;
  Kernel k_;
};

}  // namespace

std::unique_ptr<CompiledKernel> compile_reference_kernel(const PrimGraph& g, const Kernel& k) {
  return std::make_unique<ReferenceKernel>(g, k);
}

std::unique_ptr<CompiledKernel> compile_kernel(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  if (k.num_linear > 1) {
    if (why_not) *why_not = "more than one Linear primitive";
    return nullptr;
  }
  if (k.num_linear == 1) return compile_onednn_kernel(g, k, why_not);
  return compile_halide_kernel(g, k, why_not);
}

int schedule_variants(const PrimGraph& g, const Kernel& k) {
  if (k.num_linear > 1) return 1;
  return k.num_linear == 0 ? halide_schedule_variants(g, k) : onednn_schedule_variants(g, k);
}

bool can_compile(const PrimGraph& g, const Kernel& k, std::string* why_not) {
  if (k.num_linear > 1) {
    if (why_not) *why_not = "more than one Linear primitive";
    return false;
  }
  return k.num_linear == 1 ? onednn_supports(g, k, why_not) : halide_supports(g, k, why_not);
}

void set_num_threads(int threads) {
  if (threads < 1) fail("thread count must be positive, got ", threads);
  omp_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace korch::cpu
