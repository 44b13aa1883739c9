// The backend registry, host buffers, the reference kernel and the defaults of Backend.
#include "backend/backend.h"

#include <cstring>
#include <map>
#include <mutex>

#include "backend/timing.h"
#include "ir/tensor_data.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch {

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, BackendFactory> factories;
};

Registry& registry() {
  static Registry r;  // constructed on first use, so registrations from any static initialiser find it
  return r;
}

class HostBuffer : public BackendBuffer {
 public:
  explicit HostBuffer(int64_t bytes) : storage_(static_cast<size_t>(std::max<int64_t>(bytes, 1))), bytes_(bytes) {}
  void* data() override { return storage_.data(); }
  int64_t bytes() const override { return bytes_; }

 private:
  std::vector<unsigned char, CacheLineAllocator<unsigned char>> storage_;  // 64-byte aligned
  int64_t bytes_;
};

// Runs the kernel's primitives one by one with the reference interpreter.
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

BackendRegistration::BackendRegistration(const std::string& name, BackendFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.factories[name] = std::move(factory);
}

std::vector<std::string> backend_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, factory] : r.factories) names.push_back(name);
  return names;
}

bool has_backend(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.factories.count(name) > 0;
}

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options) {
  BackendFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.factories.find(name);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    std::string known;
    for (const std::string& n : backend_names()) known += (known.empty() ? "" : ", ") + n;
    fail("unknown backend '", name, "' (available: ", known, ")");
  }
  if (options.threads < 1) fail("thread count must be positive, got ", options.threads);
  return factory(options);
}

std::unique_ptr<BackendBuffer> allocate_host_buffer(int64_t bytes) { return std::make_unique<HostBuffer>(bytes); }

std::unique_ptr<CompiledKernel> make_reference_kernel(const PrimGraph& g, const Kernel& k) {
  return std::make_unique<ReferenceKernel>(g, k);
}

void Backend::upload(void* device, const void* host, int64_t bytes) {
  std::memcpy(device, host, static_cast<size_t>(bytes));
}

void Backend::download(void* host, const void* device, int64_t bytes) {
  std::memcpy(host, device, static_cast<size_t>(bytes));
}

std::unique_ptr<RecordedLaunches> Backend::record(const std::function<void()>& /*launches*/, std::string* why_not) {
  if (why_not) *why_not = name() + " launches kernels directly";
  return nullptr;
}

double Backend::median_seconds(const std::function<void()>& run, const std::function<void()>& prepare,
                               TimingStats* stats) {
  return median_run_seconds(
      [&] {
        run();
        synchronize();
      },
      5, 0.02, prepare, stats, kProfileMedianPrecision);
}

}  // namespace korch
