// Compile -> verify -> time, with the persistent cache in front.
#include "cost/profiler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <dnnl.hpp>
#include <random>
#include <thread>

#include "backend/cpu/compiled_kernel.h"
#include "check/test_case.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch {

namespace {

std::string cpu_features() {
  std::string f = "x86-64";
  if (__builtin_cpu_supports("avx2")) f += " avx2";
  if (__builtin_cpu_supports("fma")) f += " fma";
  if (__builtin_cpu_supports("avx512f")) f += " avx512f";
  if (__builtin_cpu_supports("avx512bw")) f += " avx512bw";
  return f;
}

std::string kernel_summary(const PrimGraph& g, const Kernel& k) {
  std::string s;
  for (PrimId p : k.prims) s += std::string(s.empty() ? "" : " ") + prim_op_name(g.prim(p).op);
  return s + " -> " + dtype_name(g.tensor(k.output).dtype) + shape_str(g.tensor(k.output).shape);
}

}  // namespace

std::vector<TensorData> random_kernel_inputs(const PrimGraph& g, const Kernel& k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
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
    for (int64_t i = 0; i < v.size(); ++i) {
      if (is_floating(info.dtype))
        v.set_f64(i, real(rng));
      else if (info.dtype == DType::Bool)
        v.set_i64(i, rng() & 1);
      else
        v.set_i64(i, static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(limit, 1))));
    }
    values.push_back(std::move(v));
  }
  return values;
}

double median_run_seconds(const std::function<void()>& run, int min_runs, double budget_seconds) {
  using Clock = std::chrono::steady_clock;
  run();  // warm-up (first-touch, caches, JIT)
  run();
  std::vector<double> times;
  auto start = Clock::now();
  while (static_cast<int>(times.size()) < min_runs ||
         (std::chrono::duration<double>(Clock::now() - start).count() < budget_seconds && times.size() < 200)) {
    auto t0 = Clock::now();
    run();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

CpuProfiler::CpuProfiler(int threads, ProfileCache* cache, std::function<void(const std::string&)> log)
    : threads_(threads), cache_(cache), log_(std::move(log)) {
  target_ = str_cat(cpu_features(), " threads=", threads_);
}

std::string CpuProfiler::versions() {
  const dnnl_version_t* v = dnnl_version();
  return str_cat("halide14 onednn", v->major, ".", v->minor, ".", v->patch, " korch-codegen-2");
}

// Compiles, verifies (against `want`, the reference output for `inputs`, computed on first
// need so that a kernel no backend compiles costs no reference run) and times one schedule
// variant of a kernel.
ProfileEntry CpuProfiler::profile_variant(const PrimGraph& g, const Kernel& k, const std::vector<const void*>& inputs,
                                          std::optional<TensorData>& want) {
  ProfileEntry entry;
  entry.schedule = k.schedule;
  std::string why;
  std::unique_ptr<cpu::CompiledKernel> compiled;
  try {
    compiled = cpu::compile_kernel(g, k, &why);
  } catch (const std::exception& e) {  // a backend failing on one candidate drops only that candidate
    why = str_cat("code generation failed: ", e.what());
  }
  if (!compiled) {
    entry.description = why;
    return entry;
  }
  try {
    entry.implementable = true;
    entry.description = compiled->describe();
    const TensorInfo& out = g.tensor(k.output);
    if (!want) {
      want.emplace(out.dtype, out.shape);
      cpu::compile_reference_kernel(g, k)->run(inputs, want->raw());
    }
    TensorData got(out.dtype, out.shape);
    compiled->run(inputs, got.raw());
    Comparison c = compare_tensors(got, *want, Tolerance{1e-4, 1e-3});
    entry.verified = c.pass;
    if (!c.pass) {
      ++stats_.mismatches;
      entry.description = str_cat("mismatch vs reference (max abs ", c.max_abs_error, ", ", c.mismatches,
                                  " elements) in ", compiled->describe());
      if (log_) log_(str_cat("dropped kernel [", kernel_summary(g, k), "]: ", entry.description));
    } else {
      TensorData scratch(out.dtype, out.shape);
      entry.median_seconds = median_run_seconds([&] { compiled->run(inputs, scratch.raw()); });
      entry.samples = 1;
    }
  } catch (const std::exception& e) {
    entry.implementable = false;
    entry.verified = false;
    entry.description = str_cat("failed while verifying or timing: ", e.what(), " in ", compiled->describe());
    if (log_) log_(str_cat("dropped kernel [", kernel_summary(g, k), "]: ", entry.description));
  }
  return entry;
}

std::optional<double> CpuProfiler::measure(const PrimGraph& g, const Kernel& k) {
  auto start = std::chrono::steady_clock::now();
  ProfileKey key = cache_key(k);
  if (cache_) {
    if (auto hit = cache_->lookup(key)) {
      ++stats_.cache_hits;
      schedules_[k.hash] = hit->schedule;
      if (hit->implementable && hit->verified) return hit->median_seconds;
      return std::nullopt;
    }
  }
  cpu::set_num_threads(threads_);
  ProfileEntry best;
  try {
    // One set of random inputs and one reference output serve every schedule variant.
    std::vector<TensorData> inputs = random_kernel_inputs(g, k, static_cast<uint32_t>(k.hash));
    std::vector<const void*> ptrs;
    for (const TensorData& t : inputs) ptrs.push_back(t.raw());
    std::optional<TensorData> want;
    int variants = cpu::schedule_variants(g, k);
    for (int v = 0; v < variants; ++v) {
      Kernel variant = k;
      variant.schedule = v;
      ProfileEntry e = profile_variant(g, variant, ptrs, want);
      bool ok = e.implementable && e.verified;
      if (v == 0) {
        best = e;
        if (!ok) break;  // the default schedule failed: the kernel is dropped
      } else if (ok && e.median_seconds < best.median_seconds) {
        best = e;
      }
    }
  } catch (const std::exception& e) {  // e.g. the inputs cannot be generated
    best = ProfileEntry{};
    best.description = str_cat("profiling failed: ", e.what());
    if (log_) log_(str_cat("dropped kernel [", kernel_summary(g, k), "]: ", best.description));
  }
  if (best.implementable && best.verified)
    ++stats_.measured;
  else
    ++stats_.dropped;
  schedules_[k.hash] = best.schedule;
  if (cache_) cache_->store(key, best);
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (best.implementable && best.verified) return best.median_seconds;
  return std::nullopt;
}

std::optional<double> CpuProfiler::cached(const PrimGraph& /*g*/, const Kernel& k) {
  if (!cache_) return std::nullopt;
  auto hit = cache_->lookup(cache_key(k));
  if (!hit || !hit->implementable || !hit->verified) return std::nullopt;
  ++stats_.cache_hits;
  schedules_[k.hash] = hit->schedule;
  return hit->median_seconds;
}

int CpuProfiler::schedule(const Kernel& k) const {
  auto it = schedules_.find(k.hash);
  return it == schedules_.end() ? 0 : it->second;
}

bool CpuProfiler::implementable(const PrimGraph& g, const Kernel& k) {
  ProfileKey key = cache_key(k);
  if (cache_)
    if (auto hit = cache_->lookup(key)) return hit->implementable && hit->verified;
  std::string why;
  return cpu::can_compile(g, k, &why);
}

double CpuProfiler::measure_fallback(const PrimGraph& g, const Kernel& k) {
  ProfileKey key{k.hash, "cpu-reference", target_, versions()};
  if (cache_)
    if (auto hit = cache_->lookup(key)) return hit->median_seconds;
  auto compiled = cpu::compile_reference_kernel(g, k);
  std::vector<TensorData> inputs = random_kernel_inputs(g, k, 7);
  std::vector<const void*> ptrs;
  for (const TensorData& t : inputs) ptrs.push_back(t.raw());
  const TensorInfo& out = g.tensor(k.output);
  TensorData scratch(out.dtype, out.shape);
  ProfileEntry entry;
  entry.implementable = entry.verified = true;
  entry.description = "reference fallback";
  entry.median_seconds = median_run_seconds([&] { compiled->run(ptrs, scratch.raw()); }, 3, 0.0);
  entry.samples = 1;
  if (cache_) cache_->store(key, entry);
  return entry.median_seconds;
}

}  // namespace korch
