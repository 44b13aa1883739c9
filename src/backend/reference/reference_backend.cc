// The reference backend: every kernel runs on the reference interpreter, in host memory. It is
// always available, implements every kernel, and is the ground truth the other backends are
// checked against (tests/backend/conformance_test.cc runs every registered backend on one table).
#include "backend/backend.h"

namespace korch {

namespace {

class ReferenceBackend : public Backend {
 public:
  std::string name() const override { return "reference"; }
  std::string target() const override { return "host"; }
  std::string versions() const override { return "reference"; }
  bool supports(const PrimGraph& /*g*/, const Kernel& /*k*/, std::string* /*why_not*/) const override { return true; }
  std::unique_ptr<CompiledKernel> compile(const PrimGraph& g, const Kernel& k, std::string* /*why_not*/) override {
    return make_reference_kernel(g, k);
  }
  std::unique_ptr<CompiledKernel> compile_fallback(const PrimGraph& g, const Kernel& k) override {
    return make_reference_kernel(g, k);
  }
  std::unique_ptr<BackendBuffer> allocate(int64_t bytes) override { return allocate_host_buffer(bytes); }
};

const BackendRegistration kRegistration("reference",
                                        [](const BackendOptions&) { return std::make_unique<ReferenceBackend>(); });

}  // namespace

}  // namespace korch
