// The profiler on the CPU backend: a Halide kernel with channels-last candidates is verified and timed dense (its
// linked builds are verified when a plan links them: backend/cpu/link_verification) and offers the BLP
// no link savings; schedule variants are tried only where the default schedule takes long enough;
// a kernel no backend compiles is dropped with one log line saying why. On a backend with scripted
// timings: the schedule variant kept is the fastest once its layout conversions are saved.
#include "cost/profiler.h"

#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/compiled_kernel.h"
#include "plan/kernel.h"

namespace korch {
namespace {

TEST(CpuProfiler, MeasuresChannelsLastHalideKernelsDenseWithZeroLinkSavings) {
  PrimGraph g;  // 48 channels: both blocked formats apply (nChw8c on AVX2, nChw16c on AVX-512)
  TensorId x = g.add_input("x", DType::F32, {1, 48, 10, 12});
  auto bias = std::make_shared<TensorData>(DType::F32, Shape{1, 48, 1, 1});
  for (int64_t i = 0; i < bias->size(); ++i) bias->data<float>()[i] = 0.01f * static_cast<float>(i);
  TensorId y = g.add_primitive(PrimOp::Add, {x, g.add_constant("bias", bias)}, {});
  g.mark_output(g.add_primitive(PrimOp::Mul, {y, g.add_primitive(PrimOp::Sigmoid, {y}, {})}, {}));
  Kernel k = make_kernel(g, {0, 1, 2});
  cpu::HalideLayouts candidates = cpu::channels_last_candidates(g, k);
  ASSERT_TRUE(candidates.any());
  EXPECT_TRUE(candidates.output);

  auto backend = make_backend("cpu", BackendOptions{2});
  Profiler profiler(*backend, nullptr);
  std::optional<double> seconds = profiler.measure(g, k);
  ASSERT_TRUE(seconds.has_value());
  EXPECT_GT(*seconds, 0.0);
  EXPECT_EQ(profiler.stats().mismatches, 0);
  // Its candidate tensors are offered to the BLP with no saving of its own (0), so that the
  // oneDNN kernels around it can link; the constant bias is not a candidate (-1).
  std::vector<double> savings = profiler.link_savings(k);
  ASSERT_EQ(savings.size(), k.inputs.size() + 1);
  EXPECT_EQ(savings[0], 0.0);
  for (size_t i = 0; i < k.inputs.size(); ++i)
    EXPECT_EQ(savings[1 + i], g.tensor(k.inputs[i]).is_constant() ? -1.0 : 0.0) << "input " << i;
}

// A memory-bound kernel's other schedule variants are compiled and timed only when its default
// schedule takes at least variants_from_seconds (no timing decides this test: 0 and infinity).
TEST(CpuProfiler, TriesScheduleVariantsOnlyFromTheThreshold) {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {64, 64});
  g.mark_output(g.add_primitive(PrimOp::Transpose, {x}, Attrs().set("perm", std::vector<int64_t>{1, 0})));
  Kernel k = make_kernel(g, {0});
  int variants = cpu::schedule_variants(g, k);
  ASSERT_EQ(variants, 3);  // default tiles, the 8x8 block transpose and its 8x16 tiles
  for (double threshold : {0.0, std::numeric_limits<double>::infinity()}) {
    auto backend = make_backend("cpu", BackendOptions{2});
    Profiler profiler(*backend, nullptr);
    profiler.set_variants_from_seconds(threshold);
    ASSERT_TRUE(profiler.measure(g, k).has_value());
    EXPECT_EQ(profiler.stats().variants, threshold == 0.0 ? variants : 1) << threshold;
  }
}

// The summary's split of the profiling seconds: every warm-up and timed run follows one cache
// reset, at least five runs are timed, and a kernel that links nothing times no link savings.
TEST(CpuProfiler, ReportsWhereTheTimingWent) {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {32, 64});
  g.mark_output(g.add_primitive(PrimOp::Exp, {x}, {}));
  Kernel k = make_kernel(g, {0});
  auto backend = make_backend("cpu", BackendOptions{1});
  Profiler profiler(*backend, nullptr);
  profiler.set_variants_from_seconds(std::numeric_limits<double>::infinity());
  ASSERT_TRUE(profiler.measure(g, k).has_value());
  const ProfilerStats& s = profiler.stats();
  EXPECT_GE(s.timing.timed_runs, 5);
  EXPECT_EQ(s.timing.warmup_runs, 2);
  EXPECT_EQ(s.timing.prepares, s.timing.timed_runs + s.timing.warmup_runs);
  EXPECT_GT(s.timing.timed_seconds, 0.0);
  EXPECT_EQ(s.link_timed, 0);
  EXPECT_EQ(s.link_timing.timed_runs, 0);
  EXPECT_LE(s.compile_seconds + s.verify_seconds + s.inputs_seconds + s.timing.seconds(), s.seconds);
}

TEST(CpuProfiler, LogsAKernelNoBackendCompiles) {
  PrimGraph g;  // integer Mod: Halide's rounds differently from ONNX's, so the backend refuses it
  TensorId a = g.add_input("a", DType::I32, {4, 8});
  TensorId b = g.add_input("b", DType::I32, {4, 8});
  g.mark_output(g.add_primitive(PrimOp::Mod, {a, b}, {}));
  Kernel k = make_kernel(g, {0});
  std::vector<std::string> lines;
  auto backend = make_backend("cpu", BackendOptions{2});
  Profiler profiler(*backend, nullptr, [&](const std::string& line) { lines.push_back(line); });
  EXPECT_FALSE(profiler.measure(g, k).has_value());
  EXPECT_EQ(profiler.stats().dropped, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("dropped kernel [Mod"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("integer Mod"), std::string::npos) << lines[0];
}

// A backend whose kernels compute through the reference interpreter, with two schedule variants
// whose times and link savings are scripted: which variant the profiler keeps is decided by its
// rule alone.
class ScriptedVariants : public Backend, public LayoutLinker {
 public:
  ScriptedVariants(std::vector<double> seconds, std::vector<double> savings)
      : seconds_(std::move(seconds)), savings_(std::move(savings)) {}
  std::string name() const override { return "scripted"; }
  std::string target() const override { return "test"; }
  std::string versions() const override { return "test"; }
  bool supports(const PrimGraph&, const Kernel&, std::string*) const override { return true; }
  int schedule_variants(const PrimGraph&, const Kernel&) const override { return static_cast<int>(seconds_.size()); }
  std::unique_ptr<CompiledKernel> compile(const PrimGraph& g, const Kernel& k, std::string*) override {
    compiled_variant_ = k.schedule;
    return make_reference_kernel(g, k);
  }
  std::unique_ptr<CompiledKernel> compile_fallback(const PrimGraph& g, const Kernel& k) override {
    return make_reference_kernel(g, k);
  }
  std::unique_ptr<BackendBuffer> allocate(int64_t bytes) override { return allocate_host_buffer(bytes); }
  double median_seconds(const std::function<void()>& run, const std::function<void()>&, TimingStats*) override {
    run();
    return seconds_.at(compiled_variant_);
  }
  LayoutLinker* layout_linker() override { return this; }
  LinkedPlan link(const PrimGraph&, const std::vector<Kernel>&,
                  const std::vector<std::unique_ptr<CompiledKernel>>&) override {
    return {};
  }
  // The output's link saves savings_[variant]; the input (read by the first primitive) none.
  std::vector<double> measure_savings(const PrimGraph&, const Kernel& k, CompiledKernel&,
                                      const std::vector<const void*>&, double, TimingStats*) override {
    return {savings_.at(k.schedule), 0.0};
  }

 private:
  std::vector<double> seconds_, savings_;
  int compiled_variant_ = 0;
};

// Variant 0 (a plain layout) 1.0 ms with nothing to save; variant 1 (an internal layout) 1.2 ms
// dense, of which linking saves 0.3 ms: among linked neighbours it runs 0.9 ms and is kept. With
// 0.1 ms saved (1.1 ms linked) variant 0 stays.
TEST(Profiler, KeepsTheVariantFastestWithItsLayoutConversionsSaved) {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {1, 16, 4, 4});
  g.mark_output(g.add_primitive(PrimOp::Relu, {x}, {}));
  Kernel k = make_kernel(g, {0});
  for (double saved : {0.3e-3, 0.1e-3}) {
    ScriptedVariants backend({1.0e-3, 1.2e-3}, {0.0, saved});
    Profiler profiler(backend, nullptr);
    profiler.set_variants_from_seconds(0);
    std::optional<double> seconds = profiler.measure(g, k);
    ASSERT_TRUE(seconds.has_value());
    int kept = saved > 0.2e-3 ? 1 : 0;
    EXPECT_EQ(profiler.schedule(k), kept) << saved;
    EXPECT_DOUBLE_EQ(*seconds, kept ? 1.2e-3 : 1.0e-3);
    EXPECT_EQ(profiler.stats().variants, 2);
  }
}

}  // namespace
}  // namespace korch
