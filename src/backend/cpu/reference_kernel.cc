// The reference interpreter as a CPU kernel that keeps no layouts (compiled_kernel.h); korch's
// CPU backend and the exported package's runtime both fall back to it.
#include "backend/cpu/compiled_kernel.h"

namespace korch::cpu {

namespace {

class ReferenceKernel : public CompiledKernel {
 public:
  ReferenceKernel(const PrimGraph& g, const Kernel& k) : impl_(make_reference_kernel(g, k)) {}
  void run(const std::vector<const void*>& inputs, void* output) override { impl_->run(inputs, output); }
  std::string describe() const override { return impl_->describe(); }

 private:
  std::unique_ptr<korch::CompiledKernel> impl_;
};

}  // namespace

std::unique_ptr<CompiledKernel> compile_reference_kernel(const PrimGraph& g, const Kernel& k) {
  return std::make_unique<ReferenceKernel>(g, k);
}

}  // namespace korch::cpu
