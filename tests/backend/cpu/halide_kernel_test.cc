// The CPU backend's Halide kernels against the reference executor: every case of the shared
// table (tests/backend/kernel_cases.h) with every schedule variant and every activation layout
// the kernel takes, plus what only the CPU's code generator has (streaming stores, summation
// order, the exp range). tests/backend/conformance_test.cc runs the same table on every backend.
#include <Halide.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <thread>

#include "backend/cpu/compiled_kernel.h"
#include "backend/kernel_cases.h"
#include "check/test_case.h"
#include "cost/profiler.h"
#include "plan/kernel.h"
#include "util/error.h"

namespace korch {
namespace {

Attrs axes(std::vector<int64_t> a, int64_t keep) { return Attrs().set("axes", a).set("keepdims", keep); }

void check_variant(const PrimGraph& g, const Kernel& k, cpu::CompiledKernel& compiled, cpu::CompiledKernel& reference);
void check_channels_last(const PrimGraph& g, const Kernel& k, cpu::CompiledKernel& reference);

// Compiles the graph's primitives as one kernel (every schedule variant) and compares with the
// reference kernel.
void check_kernel_or_throw(const KernelCase& c) {
  SCOPED_TRACE(c.name);
  PrimGraph g = c.build();
  std::vector<PrimId> all;
  for (PrimId p = 0; p < g.num_prims(); ++p) all.push_back(p);
  Kernel k = make_kernel(g, all);
  auto reference = cpu::compile_reference_kernel(g, k);
  // Every schedule variant the backend offers for the kernel (profiling keeps the fastest).
  int variants = cpu::schedule_variants(g, k);
  ASSERT_GE(variants, 1);
  for (int v = 0; v < variants; ++v) {
    k.schedule = v;
    std::string why;
    auto compiled = cpu::compile_kernel(g, k, &why);
    ASSERT_NE(compiled, nullptr) << "variant " << v << ": " << why;
    check_variant(g, k, *compiled, *reference);
  }
  k.schedule = 0;
  check_channels_last(g, k, *reference);
  k.schedule = variants;
  std::string why;
  EXPECT_EQ(cpu::compile_kernel(g, k, &why), nullptr) << "schedule variant past the last one was accepted";
}

void check_variant(const PrimGraph& g, const Kernel& k, cpu::CompiledKernel& compiled, cpu::CompiledKernel& reference) {
  SCOPED_TRACE("schedule variant " + std::to_string(k.schedule));
  for (uint32_t seed : {1u, 2u}) {
    std::vector<TensorData> inputs = random_kernel_inputs(g, k, seed);
    std::vector<const void*> ptrs;
    for (const TensorData& t : inputs) ptrs.push_back(t.raw());
    const TensorInfo& out = g.tensor(k.output);
    TensorData got(out.dtype, out.shape), want(out.dtype, out.shape);
    compiled.run(ptrs, got.raw());
    reference.run(ptrs, want.raw());
    Comparison cmp = compare_tensors(got, want, Tolerance{1e-5, 1e-4});
    EXPECT_TRUE(cmp.pass) << compiled.describe() << ": max abs " << cmp.max_abs_error << ", " << cmp.mismatches
                          << " mismatches " << cmp.problem;
  }
}

// A kernel with channels-last candidates, run with every candidate tensor kept nhwc, nChw8c and
// nChw16c (what layout linking does between it and oneDNN convolutions) where the kernel takes
// the format, against the reference on dense tensors.
void check_channels_last(const PrimGraph& g, const Kernel& k, cpu::CompiledKernel& reference) {
  cpu::HalideLayouts candidates = cpu::channels_last_candidates(g, k);
  if (!candidates.any()) return;
  for (std::string format : {"nhwc", "nChw8c", "nChw16c"}) {
    SCOPED_TRACE("channels-last " + format);
    std::string why;
    auto compiled = cpu::compile_kernel(g, k, &why);
    ASSERT_NE(compiled, nullptr) << why;
    int block = cpu::channel_block(format);
    bool divisible = (!candidates.output || cpu::takes_format(g.tensor(k.output).shape, format)) &&
                     (!candidates.concat_output || cpu::output_concat_takes_format(g, k, format));
    for (size_t i = 0; i < k.inputs.size(); ++i)
      if (candidates.inputs[i] && !cpu::takes_format(g.tensor(k.inputs[i]).shape, format)) divisible = false;
    ASSERT_EQ(compiled->use_format(format, true), divisible);
    if (!divisible) continue;
    for (size_t i = 0; i < k.inputs.size(); ++i)
      if (candidates.inputs[i]) {
        EXPECT_EQ(compiled->input_layout(static_cast<int>(i)),
                  cpu::activation_layout_key(g.tensor(k.inputs[i]).shape, format));
        compiled->keep_input_layout(static_cast<int>(i));
      }
    if (candidates.output) compiled->keep_output_layout();
    EXPECT_FALSE(compiled->use_format(format == "nhwc" ? "nChw8c" : "nhwc", false)) << "a kept layout switched";
    for (uint32_t seed : {1u, 2u}) {
      std::vector<TensorData> inputs = random_kernel_inputs(g, k, seed), stored;
      std::vector<const void*> dense, ptrs;
      for (size_t i = 0; i < inputs.size(); ++i)
        stored.push_back(candidates.inputs[i] ? cpu::permute_activation(inputs[i], format, true) : inputs[i]);
      for (size_t i = 0; i < inputs.size(); ++i) {
        dense.push_back(inputs[i].raw());
        ptrs.push_back(stored[i].raw());
      }
      const TensorInfo& out = g.tensor(k.output);
      TensorData got(out.dtype, out.shape), want(out.dtype, out.shape);
      compiled->run(ptrs, got.raw());
      reference.run(dense, want.raw());
      if (candidates.output) got = cpu::permute_activation(got, format, false);
      Comparison cmp = compare_tensors(got, want, Tolerance{1e-5, 1e-4});
      EXPECT_TRUE(cmp.pass) << compiled->describe() << ": max abs " << cmp.max_abs_error << ", " << cmp.mismatches
                            << " mismatches " << cmp.problem;
    }
    bool concat = candidates.concat_output && candidates.output;
    EXPECT_NE(compiled->describe().find(block > 0 ? "nChw"
                                        : concat  ? "nhwc, channel concat"
                                                  : "channels-last"),
              std::string::npos)
        << compiled->describe();
    if (concat) {
      EXPECT_NE(compiled->describe().find("channel concat: one update per piece"), std::string::npos)
          << compiled->describe();
    }
    // Max pools keep their two separable passes (kh + kw taps per output, not kh * kw).
    bool max_pool =
        std::any_of(k.prims.begin(), k.prims.end(), [&](PrimId p) { return g.prim(p).op == PrimOp::MaxPool; });
    if (max_pool) {
      EXPECT_NE(compiled->describe().find("separable stages channels innermost"), std::string::npos)
          << compiled->describe();
    }
    // A 2-D max pool written nhwc as the kernel's output slides its passes down chunks of rows where
    // the chunks overlap little (a 3x3 stride-2 window: 1 row per chunk), not a 13x13 stride-1 one.
    if (max_pool && k.prims.size() == 1 && format == "nhwc" && candidates.output) {
      const Primitive& pool = g.prim(k.prims[0]);
      const std::vector<int64_t> window = pool.attrs.ints("kernel"), strides = pool.attrs.ints("strides");
      const bool chunks = compiled->describe().find("parallel chunks of") != std::string::npos;
      if (window == std::vector<int64_t>{3, 3} && strides == std::vector<int64_t>{2, 2}) {
        EXPECT_TRUE(chunks) << compiled->describe();
      }
      if (window == std::vector<int64_t>{13, 13}) {
        EXPECT_FALSE(chunks) << compiled->describe();
      }
    }
  }
}

void check_kernel(const KernelCase& c) {
  try {
    check_kernel_or_throw(c);
  } catch (const std::exception& e) {
    ADD_FAILURE() << c.name << ": " << e.what();
  }
}

TEST(CpuKernels, MatchReferenceAcrossKindsAndFusions) {
  cpu::set_num_threads(2);
  for (const KernelCase& c : memory_bound_kernel_cases()) check_kernel(c);
}

// JIT kernels drop Halide's runtime checks of their buffers (no_asserts) because every buffer a
// kernel passes is made from the shapes and layouts its pipeline was built for. With the checks
// kept (KORCH_HALIDE_ASSERTS=1, a target of its own) the same table passes: every dense and
// strided (channels-last, blocked) buffer the kernels pass meets what their pipelines require,
// or Halide's checks would make the run fail.
TEST(CpuKernels, BuffersMeetHalidesChecksThatJitKernelsDrop) {
  EXPECT_TRUE(cpu::halide_jit_target().has_feature(Halide::Target::NoAsserts));
  EXPECT_TRUE(cpu::halide_jit_target().has_feature(Halide::Target::NoBoundsQuery));
  ASSERT_EQ(setenv("KORCH_HALIDE_ASSERTS", "1", 1), 0);
  bool asserts_kept = !cpu::halide_jit_target().has_feature(Halide::Target::NoAsserts) ||
                      cpu::halide_target().has_feature(Halide::Target::NoAsserts);  // HL_JIT_TARGET asked for none
  EXPECT_TRUE(asserts_kept);
  cpu::set_num_threads(2);
  for (const KernelCase& c : memory_bound_kernel_cases()) check_kernel(c);
  unsetenv("KORCH_HALIDE_ASSERTS");
}

// Kernels compile for LLVM's sapphirerapids CPU only where the CPU has its AVX512-FP16 and
// AVX-VNNI instructions (checked here through the compiler's own CPU detection): Halide 14 asks
// for it on AMD's AVX-512 CPUs too, whose kernels then die of SIGILL (Zen 5: vmovsh in a MaxPool
// kernel of YOLOv4). HL_JIT_TARGET set by hand is taken as given.
TEST(CpuKernels, TargetHasOnlyInstructionsTheCpuRuns) {
  if (const char* env = std::getenv("HL_JIT_TARGET"); env && *env && std::strcmp(env, "host") != 0)
    GTEST_SKIP() << "HL_JIT_TARGET=" << env;
  bool spr_isa = __builtin_cpu_supports("avx512fp16") && __builtin_cpu_supports("avxvnni");
  if (!spr_isa) {
    EXPECT_FALSE(cpu::halide_target().has_feature(Halide::Target::AVX512_SapphireRapids));
  }
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_TRUE(cpu::halide_target().has_feature(Halide::Target::AVX512)) << cpu::halide_target().to_string();
  }
}

// Each case whose name contains a tag of `expected` must have a schedule variant whose
// description contains the tag's text.
void expect_tagged_variants(const std::vector<KernelCase>& cs,
                            const std::vector<std::pair<std::string, std::string>>& expected) {
  for (const KernelCase& c : cs) {
    for (const auto& [tag, description] : expected) {
      if (c.name.find(tag) == std::string::npos) continue;
      PrimGraph g = c.build();
      std::vector<PrimId> all;
      for (PrimId p = 0; p < g.num_prims(); ++p) all.push_back(p);
      Kernel k = make_kernel(g, all);
      bool found = false;
      for (int v = 0; v < cpu::schedule_variants(g, k); ++v) {
        k.schedule = v;
        std::string why;
        auto compiled = cpu::compile_kernel(g, k, &why);
        ASSERT_NE(compiled, nullptr) << c.name << " variant " << v << ": " << why;
        found |= compiled->describe().find(description) != std::string::npos;
      }
      EXPECT_TRUE(found) << c.name;
    }
  }
}

// Cases named "(... variant)" must get that schedule variant (by its description).
TEST(CpuKernels, ScheduleVariantsExistWhereTheyHelp) {
  expect_tagged_variants(memory_bound_kernel_cases(),
                         {{"(fused parallel variant)", "parallel over the fused outer axes"},
                          {"(block transpose variant)", "block transpose in registers"},
                          {"(tall block transpose variant)", "tile 8x16 of 8x8 blocks"},
                          {"(piecewise concat variant)", "one update per piece"}});
}

// Kernels that differ only in extents (a BatchNorm's scale and shift + ReLU at three resolutions
// and channel counts) share one compiled pipeline per schedule variant, and each still matches
// the reference, tails included.
TEST(CpuKernels, KernelsDifferingOnlyInExtentsShareOnePipeline) {
  cpu::set_num_threads(2);
  CodegenStats before = cpu::halide_codegen_stats();
  int variants = 0;
  for (Shape s : {Shape{1, 16, 20, 20}, Shape{1, 24, 28, 29}, Shape{1, 32, 33, 17}}) {
    SCOPED_TRACE(shape_str(s));
    PrimGraph g;
    TensorId x = g.add_input("x", DType::F32, s);
    TensorId scale = g.add_input("scale", DType::F32, {1, s[1], 1, 1});
    TensorId shift = g.add_input("shift", DType::F32, {1, s[1], 1, 1});
    TensorId y = g.add_primitive(PrimOp::Mul, {x, scale}, {});
    g.mark_output(g.add_primitive(PrimOp::Relu, {g.add_primitive(PrimOp::Add, {y, shift}, {})}, {}));
    Kernel k = whole_graph_kernel(g);
    auto reference = cpu::compile_reference_kernel(g, k);
    int n = cpu::schedule_variants(g, k);
    if (variants == 0) variants = n;
    ASSERT_EQ(n, variants);
    for (int v = 0; v < n; ++v) {
      k.schedule = v;
      std::string why;
      auto compiled = cpu::compile_kernel(g, k, &why);
      ASSERT_NE(compiled, nullptr) << why;
      check_variant(g, k, *compiled, *reference);
    }
  }
  CodegenStats d = cpu::halide_codegen_stats() - before;
  EXPECT_EQ(d.requested, 3 * variants);
  EXPECT_LE(d.compiled, variants);  // none when an earlier test compiled the same program
  EXPECT_GE(d.reused_other_extents, 2 * variants);
}

// A kernel compiled for another Halide target (HL_JIT_TARGET changed within the process, as the
// strict_float export checks do) gets its own compilation, not the pipeline of the first target.
TEST(CpuKernels, PipelinesAreKeptPerTarget) {
  PrimGraph g;  // a shape no other test uses, so that neither target's pipeline exists yet
  TensorId x = g.add_input("x", DType::F32, {1, 3, 37, 41});
  g.mark_output(g.add_primitive(PrimOp::Exp, {g.add_primitive(PrimOp::Add, {x, x}, {})}, {}));
  Kernel k = whole_graph_kernel(g);
  const char* saved = std::getenv("HL_JIT_TARGET");
  std::string previous = saved ? saved : "";
  CodegenStats before = cpu::halide_codegen_stats();
  std::string why;
  ASSERT_NE(cpu::compile_kernel(g, k, &why), nullptr) << why;
  setenv("HL_JIT_TARGET", "host-strict_float", 1);
  auto strict = cpu::compile_kernel(g, k, &why);
  if (saved)
    setenv("HL_JIT_TARGET", previous.c_str(), 1);
  else
    unsetenv("HL_JIT_TARGET");
  ASSERT_NE(strict, nullptr) << why;
  CodegenStats d = cpu::halide_codegen_stats() - before;
  EXPECT_EQ(d.requested, 2);
  EXPECT_EQ(d.compiled, 2);
}

// A long float sum is not one serial chain: without strict_float Halide lets LLVM reassociate it
// (several vector accumulators), so the mean of 2^20 values in [1, 2) is within 2e-6 of the exact
// one (1.8e-7 measured; strictly serial, HL_JIT_TARGET=host-strict_float: 4.9e-6). Read back
// through x - mean (a materialised mean).
TEST(CpuKernels, LongMeanIsAccurate) {
  cpu::set_num_threads(2);
  const int64_t n = int64_t{1} << 20;
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {1, n});
  TensorId m = g.add_primitive(PrimOp::ReduceMean, {x}, axes({1}, 1));
  g.mark_output(g.add_primitive(PrimOp::Sub, {x, m}, {}));
  Kernel k = make_kernel(g, {0, 1});
  std::string why;
  auto compiled = cpu::compile_kernel(g, k, &why);
  ASSERT_NE(compiled, nullptr) << why;
  TensorData in(DType::F32, {1, n}), out(DType::F32, {1, n});
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(1.0f, 2.0f);
  double exact = 0;
  for (int64_t i = 0; i < n; ++i) exact += in.data<float>()[i] = uniform(rng);
  exact /= static_cast<double>(n);
  compiled->run({in.raw()}, out.raw());
  double mean = static_cast<double>(in.data<float>()[0]) - static_cast<double>(out.data<float>()[0]);
  EXPECT_LT(std::abs(mean - exact) / exact, 2e-6) << compiled->describe();
}

// Channels-last (nChw8c) plane means over 224x224 pixels sum each row first, then the rows: the
// worst of 64 channels' means of values in [1, 2) is within 1.5e-6 of the exact one (6.1e-7
// measured; one running sum per channel, as before: 8.7e-6, in the same time, 0.66 ms).
TEST(CpuKernels, ChannelsLastPlaneMeanIsAccurate) {
  cpu::set_num_threads(2);
  const int64_t channels = 64, side = 224;
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {1, channels, side, side});
  TensorId m = g.add_primitive(PrimOp::ReduceMean, {x}, axes({2, 3}, 1));
  g.mark_output(g.add_primitive(PrimOp::Sub, {x, m}, {}));
  Kernel k = make_kernel(g, {0, 1});
  std::string why;
  auto compiled = cpu::compile_kernel(g, k, &why);
  ASSERT_NE(compiled, nullptr) << why;
  ASSERT_TRUE(compiled->use_format("nChw8c", true));
  compiled->keep_input_layout(0);
  compiled->keep_output_layout();
  TensorData in(DType::F32, {1, channels, side, side});
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(1.0f, 2.0f);
  for (int64_t i = 0; i < in.size(); ++i) in.data<float>()[i] = uniform(rng);
  TensorData stored = cpu::permute_activation(in, "nChw8c", true), out(DType::F32, in.shape());
  compiled->run({stored.raw()}, out.raw());
  TensorData dense = cpu::permute_activation(out, "nChw8c", false);
  double worst = 0;
  for (int64_t c = 0; c < channels; ++c) {
    double exact = 0;
    for (int64_t i = 0; i < side * side; ++i) exact += in.data<float>()[c * side * side + i];
    exact /= static_cast<double>(side * side);
    double mean = static_cast<double>(in.data<float>()[c * side * side]) -
                  static_cast<double>(dense.data<float>()[c * side * side]);
    worst = std::max(worst, std::abs(mean - exact) / exact);
  }
  EXPECT_LT(worst, 1.5e-6) << compiled->describe();
}

// Under strict_float (what exported packages and the export test use), a plane mean gives the
// same bits whether the kernel runs dense (as exported packages run it) or linked channels-last
// (as `korch run` may): both sum each row first, then the rows, in the same order.
TEST(CpuKernels, PlaneSumsAgreeBitForBitDenseAndChannelsLast) {
  cpu::set_num_threads(2);
  ASSERT_EQ(setenv("HL_JIT_TARGET", "host-strict_float", 1), 0);
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {1, 16, 13, 29});
  TensorId m = g.add_primitive(PrimOp::ReduceMean, {x}, axes({2, 3}, 1));
  TensorId s = g.add_primitive(PrimOp::ReduceSum, {x}, axes({2, 3}, 1));
  g.mark_output(g.add_primitive(PrimOp::Add, {g.add_primitive(PrimOp::Sub, {x, m}, {}), s}, {}));
  Kernel k = make_kernel(g, {0, 1, 2, 3});
  std::vector<TensorData> inputs = random_kernel_inputs(g, k, 7);
  std::string why;
  auto dense = cpu::compile_kernel(g, k, &why);
  ASSERT_NE(dense, nullptr) << why;
  TensorData want(DType::F32, {1, 16, 13, 29});
  dense->run({inputs[0].raw()}, want.raw());
  for (std::string format : {"nhwc", "nChw8c", "nChw16c"}) {
    auto linked = cpu::compile_kernel(g, k, &why);
    ASSERT_NE(linked, nullptr) << why;
    ASSERT_TRUE(linked->use_format(format, true)) << format;
    linked->keep_input_layout(0);
    TensorData stored = cpu::permute_activation(inputs[0], format, true), got(DType::F32, {1, 16, 13, 29});
    linked->run({stored.raw()}, got.raw());
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.byte_size()), 0) << format << ": " << linked->describe();
  }
  unsetenv("HL_JIT_TARGET");
}

// Outputs past the streaming threshold also get a streaming-store variant: StreamedPanels for
// transposing kernels (tiles copied out by korch_stream_rows), StreamedRows for the others (rows
// computed, then copied out). With the threshold at 0 bytes every case gets them; these cases
// add edges: a 2-D output (no outer axis to run in parallel), columns and rows not a multiple of
// the panel or tile (shifted inwards), two transposed inputs, 8-byte and 1-byte elements (rows
// of 256 and of 32 bytes, the latter not 16-byte aligned: plain copies), integer and bool rows.
TEST(CpuKernels, StreamingStoreVariantsMatchReference) {
  cpu::set_num_threads(2);
  ASSERT_EQ(setenv("KORCH_STREAM_STORES_FROM", "0", 1), 0);
  Attrs swap_last = Attrs().set("perm", std::vector<int64_t>{0, 2, 1});
  std::vector<KernelCase> streamed = memory_bound_kernel_cases();
  streamed.push_back(
      {"2-D transpose, 50x40 output (streamed panels variant)", [] {
         PrimGraph g;
         TensorId x = g.add_input("x", DType::F32, {40, 50});
         g.mark_output(g.add_primitive(PrimOp::Transpose, {x}, Attrs().set("perm", std::vector<int64_t>{1, 0})));
         return g;
       }});
  streamed.push_back({"sum of two transposed inputs, 3x70x33 (streamed panels variant)", [swap_last] {
                        PrimGraph g;
                        TensorId a = g.add_input("a", DType::F32, {3, 33, 70});
                        TensorId b = g.add_input("b", DType::F32, {3, 33, 70});
                        g.mark_output(g.add_primitive(PrimOp::Add,
                                                      {g.add_primitive(PrimOp::Transpose, {a}, swap_last),
                                                       g.add_primitive(PrimOp::Transpose, {b}, swap_last)},
                                                      {}));
                        return g;
                      }});
  for (DType t : {DType::I64, DType::U8})
    streamed.push_back(
        {std::string("transpose of ") + dtype_name(t) + ", 2x300x40 (streamed panels variant)", [swap_last, t] {
           PrimGraph g;
           TensorId x = g.add_input("x", t, {2, 40, 300});
           g.mark_output(g.add_primitive(PrimOp::Transpose, {x}, swap_last));
           return g;
         }});
  streamed.push_back({"broadcast scale of int32 rows of 32 (streamed rows variant)", [] {
                        PrimGraph g;
                        TensorId x = g.add_input("x", DType::I32, {3, 9, 32});
                        TensorId s = g.add_input("s", DType::I32, {3, 9, 1});
                        g.mark_output(g.add_primitive(PrimOp::Mul, {x, s}, {}));
                        return g;
                      }});
  streamed.push_back({"comparison of uint8 rows of 48, stored as bool (streamed rows variant)", [] {
                        PrimGraph g;
                        TensorId a = g.add_input("a", DType::U8, {4, 6, 48});
                        TensorId b = g.add_input("b", DType::U8, {4, 6, 48});
                        g.mark_output(g.add_primitive(PrimOp::Less, {a, b}, {}));
                        return g;
                      }});
  for (const KernelCase& c : streamed) check_kernel(c);
  expect_tagged_variants(streamed, {{"(streamed panels variant)", "streaming stores, parallel panels"},
                                    {"streamed rows variant)", "written with streaming stores"},
                                    {"softmax over rows of 96", "written with streaming stores"}});
  unsetenv("KORCH_STREAM_STORES_FROM");
}

// Below the threshold (the last-level cache) no streaming-store variant is offered.
TEST(CpuKernels, NoStreamingStoresForOutputsThatFitTheCache) {
  unsetenv("KORCH_STREAM_STORES_FROM");
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {4, 64, 64});
  TensorId t = g.add_primitive(PrimOp::Transpose, {x}, Attrs().set("perm", std::vector<int64_t>{0, 2, 1}));
  g.mark_output(g.add_primitive(PrimOp::Relu, {t}, {}));
  Kernel k = make_kernel(g, {0, 1});
  for (int v = 0; v < cpu::schedule_variants(g, k); ++v) {
    k.schedule = v;
    std::string why;
    auto compiled = cpu::compile_kernel(g, k, &why);
    ASSERT_NE(compiled, nullptr) << why;
    EXPECT_EQ(compiled->describe().find("streaming stores"), std::string::npos);
  }
}

// An input read both transposed and as it is has no single 8x8 block to stage: no block transpose.
TEST(CpuKernels, NoBlockTransposeForAnInputReadTwoWays) {
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {24, 24});
  TensorId t = g.add_primitive(PrimOp::Transpose, {x}, Attrs().set("perm", std::vector<int64_t>{1, 0}));
  g.mark_output(g.add_primitive(PrimOp::Add, {x, t}, {}));
  EXPECT_EQ(cpu::schedule_variants(g, make_kernel(g, {0, 1})), 1);
}

// One elementwise primitive over `xs` as a Halide kernel; empty where it does not compile.
std::vector<float> run_unary_halide_kernel(PrimOp op, const std::vector<float>& xs) {
  int64_t n = static_cast<int64_t>(xs.size());
  PrimGraph g;
  TensorId x = g.add_input("x", DType::F32, {n});
  g.mark_output(g.add_primitive(op, {x}, {}));
  TensorData in(DType::F32, {n}), out(DType::F32, {n});
  std::copy(xs.begin(), xs.end(), static_cast<float*>(in.raw()));
  std::string why;
  auto compiled = cpu::compile_halide_kernel(g, make_kernel(g, {0}), &why);
  EXPECT_NE(compiled, nullptr) << why;
  if (!compiled) return {};
  compiled->run({in.raw()}, out.raw());
  const float* got = static_cast<const float*>(out.raw());
  return std::vector<float>(got, got + n);
}

// Exp and Sigmoid (Halide::exp): over the whole float range they stay within 1e-6 relative of
// libm (a cheaper exp with 2e-6 doubled YOLOX's error against float64), overflow to +inf where
// exp does, and come out (near) zero where exp underflows.
TEST(CpuKernels, ExpAndSigmoidHoldOverTheFloatRange) {
  std::vector<float> xs;
  for (float x = -120.0f; x <= 120.0f; x += 0.37f) xs.push_back(x);
  for (float x : {-104.0f, -88.8f, -87.4f, -87.3f, -87.2f, 0.0f, 88.0f, 88.72f, 88.73f, 89.0f}) xs.push_back(x);
  int64_t n = static_cast<int64_t>(xs.size());
  for (PrimOp op : {PrimOp::Exp, PrimOp::Sigmoid}) {
    SCOPED_TRACE(prim_op_name(op));
    std::vector<float> got = run_unary_halide_kernel(op, xs);
    ASSERT_EQ(got.size(), xs.size());
    for (int64_t i = 0; i < n; ++i) {
      double v = xs[i];
      double want = op == PrimOp::Exp ? std::exp(v) : 1.0 / (1.0 + std::exp(-v));
      if (op == PrimOp::Exp && v > 88.7228)
        EXPECT_TRUE(std::isinf(got[i]) && got[i] > 0) << "exp(" << v << ") = " << got[i];
      else if (want < 1.25e-38)
        EXPECT_LE(std::fabs(got[i]), 1.25e-38) << prim_op_name(op) << "(" << v << ") = " << got[i];
      else
        EXPECT_LE(std::fabs(got[i] - want), 1e-6 * want) << prim_op_name(op) << "(" << v << ") = " << got[i];
    }
  }
}

// Tanh (a rational approximation, not libm's scalar tanhf): within 3e-7 of tanh over the float
// range, 1e-6 relative for |x| <= 1, never beyond +-1, with the sign of x; NaN stays NaN.
TEST(CpuKernels, TanhHoldsOverTheFloatRange) {
  std::vector<float> xs;
  for (float x = -12.0f; x <= 12.0f; x += 0.00731f) xs.push_back(x);
  for (float x : {-1e30f, -88.0f, -7.9f, -1e-3f, -4e-4f, -1e-7f, 0.0f, 1e-7f, 3.9e-4f, 4e-4f, 1e-3f, 7.9f, 1e30f,
                  std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN()})
    xs.push_back(x);
  int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> got = run_unary_halide_kernel(PrimOp::Tanh, xs);
  ASSERT_EQ(got.size(), xs.size());
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(xs[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "tanh(nan) = " << got[i];
      continue;
    }
    double want = std::tanh(static_cast<double>(xs[i]));
    EXPECT_LE(std::fabs(got[i] - want), 3e-7) << "tanh(" << xs[i] << ") = " << got[i];
    EXPECT_LE(std::fabs(got[i]), 1.0f) << "tanh(" << xs[i] << ") = " << got[i];
    EXPECT_EQ(got[i] < 0, xs[i] < 0) << "tanh(" << xs[i] << ") = " << got[i];
    if (std::fabs(xs[i]) <= 1.0f) {
      EXPECT_LE(std::fabs(got[i] - want), 1e-6 * std::fabs(want)) << "tanh(" << xs[i] << ") = " << got[i];
    }
  }
}

// An interpolating Resize of the rows and the innermost axis runs its rows first as a stage of
// its own (each input value read once per output row), then gathers along the innermost axis;
// a Resize of the innermost axis alone, or a nearest one, stays one expression.
TEST(CpuKernels, BilinearResizeRunsItsRowsAsAStage) {
  auto resize_kernel = [](const std::string& mode, std::vector<int64_t> out) {
    PrimGraph g;
    std::vector<int64_t> in = {1, 4, 8, 8};
    TensorId x = g.add_input("x", DType::F32, in);
    std::vector<double> scales, roi(8, 0.0);
    for (size_t i = 0; i < 4; ++i) {
      scales.push_back(static_cast<double>(out[i]) / static_cast<double>(in[i]));
      roi[4 + i] = 1.0;
    }
    Attrs a;
    a.set("sizes", out).set("scales", scales).set("roi", roi).set("mode", mode);
    a.set("coord_mode", std::string("half_pixel")).set("nearest_mode", std::string("round_prefer_floor"));
    a.set("cubic_coeff_a", -0.75).set("exclude_outside", int64_t{0}).set("extrapolation_value", 0.0);
    g.mark_output(g.add_primitive(PrimOp::Resize, {x}, a));
    std::string why;
    auto compiled = cpu::compile_halide_kernel(g, make_kernel(g, {0}), &why);
    EXPECT_NE(compiled, nullptr) << why;
    return compiled ? compiled->describe() : std::string();
  };
  EXPECT_NE(resize_kernel("linear", {1, 4, 32, 32}).find("separable stages"), std::string::npos);
  EXPECT_NE(resize_kernel("cubic", {1, 4, 16, 24}).find("separable stages"), std::string::npos);
  EXPECT_EQ(resize_kernel("linear", {1, 4, 8, 32}).find("separable stages"), std::string::npos);
  EXPECT_EQ(resize_kernel("nearest", {1, 4, 32, 32}).find("separable stages"), std::string::npos);
}

TEST(CpuKernels, UnsupportedKernelsSayWhy) {
  PrimGraph g;
  TensorId a = g.add_input("a", DType::I64, {4});
  TensorId b = g.add_input("b", DType::I64, {4});
  g.mark_output(g.add_primitive(PrimOp::Div, {a, b}, {}));
  std::string why;
  EXPECT_EQ(cpu::compile_halide_kernel(g, make_kernel(g, {0}), &why), nullptr);
  EXPECT_NE(why.find("integer division"), std::string::npos) << why;
}

// The thread count is the calling thread's, as OpenMP's is: a runtime on another thread that
// sets its own leaves this thread's alone.
TEST(CpuThreads, EachCallingThreadKeepsItsOwnCount) {
  cpu::set_num_threads(2);
  std::thread other([] {
    cpu::set_num_threads(1);
    EXPECT_EQ(cpu::num_threads(), 1);
    EXPECT_EQ(omp_get_max_threads(), 1);
  });
  other.join();
  EXPECT_EQ(cpu::num_threads(), 2);
  EXPECT_EQ(omp_get_max_threads(), 2);
}

}  // namespace
}  // namespace korch
