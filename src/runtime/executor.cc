// Plan execution on a backend (see executor.h).
#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "cost/profiler.h"
#include "util/error.h"

namespace korch {

namespace {

int64_t dense_bytes(const TensorInfo& t) { return num_elements(t.shape) * static_cast<int64_t>(dtype_size(t.dtype)); }

}  // namespace

// The kernels that the backend compiles concurrently (Halide JIT on the CPU) are compiled on all
// cores first (default_compile_threads()), the others then one by one; a kernel no backend
// compiles runs on the reference fallback.
std::vector<std::unique_ptr<CompiledKernel>> Executor::compile_kernels() {
  size_t n = plan_.kernels.size();
  std::vector<std::unique_ptr<CompiledKernel>> compiled(n);
  std::vector<size_t> concurrent;
  for (size_t i = 0; i < n; ++i)
    if (backend_->compiles_concurrently(g_, plan_.kernels[i])) concurrent.push_back(i);
  if (std::min(concurrent.size(), static_cast<size_t>(default_compile_threads())) >= 2) {
    run_on_threads(concurrent.size(), default_compile_threads(), [&](size_t j) {
      std::string why;
      compiled[concurrent[j]] = backend_->compile(g_, plan_.kernels[concurrent[j]], &why);
    });
  } else {
    concurrent.clear();
  }
  for (size_t i = 0, c = 0; i < n; ++i) {
    if (c < concurrent.size() && concurrent[c] == i) {
      ++c;
    } else {
      std::string why;
      compiled[i] = backend_->compile(g_, plan_.kernels[i], &why);
    }
    if (!compiled[i]) {
      compiled[i] = backend_->compile_fallback(g_, plan_.kernels[i]);
      ++fallbacks_;
    }
  }
  return compiled;
}

Executor::Executor(std::shared_ptr<Backend> backend, const PrimGraph& g, Plan plan)
    : backend_(std::move(backend)), g_(g), plan_(std::move(plan)) {
  if (!backend_) fail("internal: Executor without a backend");
  validate_plan_or_throw(g_, plan_);
  backend_->bind_calling_thread();
  kernels_ = compile_kernels();
  if (LayoutLinker* linker = backend_->layout_linker()) links_ = linker->link(g_, plan_.kernels, kernels_);
  arena_ = plan_arena(g_, plan_.kernels, links_.bytes.empty() ? nullptr : &links_.bytes);
  storage_ = backend_->allocate(std::max<int64_t>(arena_.arena_bytes, 1));
  if (!backend_->host_memory()) {
    // Constants once, and a buffer per graph input that the runs upload into.
    device_at_.assign(g_.num_tensors(), nullptr);
    for (TensorId t = 0; t < g_.num_tensors(); ++t) {
      const TensorInfo& info = g_.tensor(t);
      bool input = std::find(g_.inputs().begin(), g_.inputs().end(), t) != g_.inputs().end();
      if (!info.is_constant() && !input) continue;
      device_tensors_.push_back(backend_->allocate(std::max<int64_t>(dense_bytes(info), 1)));
      device_at_[t] = device_tensors_.back()->data();
      if (info.is_constant()) backend_->upload(device_at_[t], info.constant->raw(), dense_bytes(info));
    }
  }
}

std::vector<TensorData> Executor::run(const std::vector<TensorData>& inputs) {
  if (inputs.size() != g_.inputs().size())
    fail("the model has ", g_.inputs().size(), " inputs but ", inputs.size(), " were given");
  backend_->bind_calling_thread();
  const bool host = backend_->host_memory();
  auto* base = static_cast<unsigned char*>(storage_->data());
  std::vector<const void*> where(g_.num_tensors(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    TensorId t = g_.inputs()[i];
    const TensorInfo& info = g_.tensor(t);
    if (inputs[i].dtype() != info.dtype || inputs[i].shape() != info.shape)
      fail("input '", info.name, "' must be ", dtype_name(info.dtype), shape_str(info.shape), ", got ",
           dtype_name(inputs[i].dtype()), shape_str(inputs[i].shape()));
    if (host) {
      where[t] = inputs[i].raw();
    } else {
      backend_->upload(device_at_[t], inputs[i].raw(), dense_bytes(info));
      where[t] = device_at_[t];
    }
  }
  for (TensorId t = 0; t < g_.num_tensors(); ++t) {
    if (g_.tensor(t).is_constant()) where[t] = host ? g_.tensor(t).constant->raw() : device_at_[t];
    if (arena_.offset[t] >= 0) where[t] = base + arena_.offset[t];
  }
  // On the host, graph outputs that a kernel produces are written straight into the returned
  // tensors (no copy out of the arena); the others are copied (downloaded) below.
  std::vector<TensorData> outputs;
  outputs.reserve(g_.outputs().size());
  for (TensorId t : g_.outputs()) {
    const TensorInfo& info = g_.tensor(t);
    outputs.emplace_back(info.dtype, info.shape);
    if (host && arena_.offset[t] >= 0 && where[t] == base + arena_.offset[t]) where[t] = outputs.back().raw();
  }
  if (profiling_) timings_.assign(kernels_.size(), {});
  std::vector<const void*> args;
  auto launch = [&] {
    for (size_t i = 0; i < kernels_.size(); ++i) {
      const Kernel& k = plan_.kernels[i];
      args.clear();
      for (TensorId t : k.inputs) args.push_back(where[t]);
      auto t0 = std::chrono::steady_clock::now();
      kernels_[i]->run(args, const_cast<void*>(where[k.output]));
      if (profiling_) {
        backend_->synchronize();
        timings_[i].description = kernels_[i]->describe();
        timings_[i].seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
    }
  };
  if (recorded_ && !profiling_) {
    recorded_->replay();
  } else {
    launch();
    // On a backend with its own memory every buffer address is fixed from run to run, so the
    // launches of a run without fallback kernels (those copy through the host) can be
    // recorded once, after a first run has warmed them up, and replayed from then on.
    if (!host && !profiling_ && !record_tried_) {
      record_tried_ = true;
      if (fallbacks_ > 0)
        record_why_ = str_cat(fallbacks_, " kernels run on the host");
      else
        recorded_ = backend_->record(launch, &record_why_);
    }
  }
  backend_->synchronize();
  for (size_t o = 0; o < outputs.size(); ++o) {
    TensorId t = g_.outputs()[o];
    if (where[t] == outputs[o].raw()) continue;
    bool on_host = host || (g_.tensor(t).is_constant() && !device_at_[t]);
    if (on_host)
      std::memcpy(outputs[o].raw(), where[t], outputs[o].byte_size());
    else
      backend_->download(outputs[o].raw(), where[t], static_cast<int64_t>(outputs[o].byte_size()));
  }
  return outputs;
}

}  // namespace korch
