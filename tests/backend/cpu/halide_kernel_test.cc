// CPU backend kernels against the reference executor, in the spirit of ggml's
// test-backend-ops: every primitive kind alone and in fused shapes, compiled
// with Halide (or oneDNN for linear kernels), run on random inputs, compared
// elementwise.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "backend/cpu/compiled_kernel.h"
#include "check/test_case.h"
#include "cost/profiler.h"
#include "orchestrate/kernel.h"
#include "util/error.h"

namespace korch {
namespace {

struct Case {
  std::string name;
  std::function<PrimGraph()> build;  // the whole graph is one kernel
};

Attrs axes(std::vector<int64_t> a, int64_t keep) { return Attrs().set("axes", a).set("keepdims", keep); }

void check_variant(const PrimGraph& g, const Kernel& k, cpu::CompiledKernel& compiled, cpu::CompiledKernel& reference);
void check_channels_last(const PrimGraph& g, const Kernel& k, cpu::CompiledKernel& reference);

// Compiles the graph's primitives as one kernel (every schedule variant) and compares with the
// reference kernel.
void check_kernel_or_throw(const Case& c) {
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
                     (!candidates.blocked_only || cpu::output_concat_takes_format(g, k, format));
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
    EXPECT_NE(compiled->describe().find(block > 0 ? "nChw" : "channels-last"), std::string::npos)
        << compiled->describe();
    if (candidates.blocked_only && candidates.output) {
      EXPECT_NE(compiled->describe().find("channel concat: one update per piece"), std::string::npos)
          << compiled->describe();
    }
    // Max pools keep their two separable passes (kh + kw taps per output, not kh * kw).
    bool max_pool =
        std::any_of(k.prims.begin(), k.prims.end(), [&](PrimId p) { return g.prim(p).op == PrimOp::MaxPool; });
    if (max_pool) {
      EXPECT_NE(compiled->describe().find("separable window channels innermost"), std::string::npos)
          << compiled->describe();
    }
  }
}

void check_kernel(const Case& c) {
  try {
    check_kernel_or_throw(c);
  } catch (const std::exception& e) {
    ADD_FAILURE() << c.name << ": " << e.what();
  }
}

std::vector<Case> cases() {
  std::vector<Case> cs;
  for (PrimOp op : {PrimOp::Neg, PrimOp::Abs, PrimOp::Exp, PrimOp::Tanh, PrimOp::Sigmoid, PrimOp::Erf, PrimOp::Floor,
                    PrimOp::Round, PrimOp::Sign, PrimOp::Relu, PrimOp::Sin, PrimOp::Cos}) {
    cs.push_back({std::string("unary ") + prim_op_name(op), [op] {
                    PrimGraph g;
                    TensorId x = g.add_input("x", DType::F32, {3, 37});
                    g.mark_output(g.add_primitive(op, {x}, {}));
                    return g;
                  }});
  }
  for (PrimOp op : {PrimOp::Add, PrimOp::Sub, PrimOp::Mul, PrimOp::Div, PrimOp::Max, PrimOp::Min, PrimOp::Less,
                    PrimOp::Equal, PrimOp::GreaterEqual}) {
    cs.push_back({std::string("binary broadcast ") + prim_op_name(op), [op] {
                    PrimGraph g;
                    TensorId a = g.add_input("a", DType::F32, {2, 3, 33});
                    TensorId b = g.add_input("b", DType::F32, {3, 1});
                    g.mark_output(g.add_primitive(op, {a, b}, {}));
                    return g;
                  }});
  }
  cs.push_back({"where + cast", [] {
                  PrimGraph g;
                  TensorId a = g.add_input("a", DType::F32, {4, 20});
                  TensorId b = g.add_input("b", DType::F32, {20});
                  TensorId c = g.add_primitive(PrimOp::Greater, {a, b}, {});
                  TensorId w = g.add_primitive(PrimOp::Where, {c, a, b}, {});
                  g.mark_output(g.add_primitive(PrimOp::Cast, {w}, Attrs().set("to", int64_t(DType::I64))));
                  return g;
                }});
  cs.push_back({"softmax (stable)", [] {
                  PrimGraph g;
                  TensorId x = g.add_input("x", DType::F32, {8, 100});
                  TensorId m = g.add_primitive(PrimOp::ReduceMax, {x}, axes({1}, 1));
                  TensorId e = g.add_primitive(PrimOp::Exp, {g.add_primitive(PrimOp::Sub, {x, m}, {})}, {});
                  TensorId s = g.add_primitive(PrimOp::ReduceSum, {e}, axes({1}, 1));
                  g.mark_output(g.add_primitive(PrimOp::Div, {e, s}, {}));
                  return g;
                }});
  cs.push_back(
      {"layernorm core", [] {
         PrimGraph g;
         TensorId x = g.add_input("x", DType::F32, {2, 5, 64});
         TensorId m = g.add_primitive(PrimOp::ReduceMean, {x}, axes({2}, 1));
         TensorId d = g.add_primitive(PrimOp::Sub, {x, m}, {});
         TensorId v = g.add_primitive(PrimOp::ReduceMean, {g.add_primitive(PrimOp::Mul, {d, d}, {})}, axes({2}, 1));
         TensorId eps = g.add_constant("eps", std::make_shared<const TensorData>(TensorData::scalar_f32(1e-5f)));
         TensorId sd = g.add_primitive(PrimOp::Sqrt, {g.add_primitive(PrimOp::Add, {v, eps}, {})}, {});
         g.mark_output(g.add_primitive(PrimOp::Div, {d, sd}, {}));
         return g;
       }});
  cs.push_back({"reductions over several axes, no keepdims", [] {
                  PrimGraph g;
                  TensorId x = g.add_input("x", DType::F32, {3, 4, 5, 6});
                  TensorId s = g.add_primitive(PrimOp::ReduceSum, {x}, axes({0, 2}, 0));
                  TensorId p = g.add_primitive(PrimOp::ReduceMin, {x}, axes({0, 2}, 0));
                  g.mark_output(g.add_primitive(PrimOp::Add, {s, p}, {}));
                  return g;
                }});
  cs.push_back(
      {"argmax", [] {
         PrimGraph g;
         TensorId x = g.add_input("x", DType::F32, {4, 10, 3});
         g.mark_output(g.add_primitive(
             PrimOp::ArgMax, {x},
             Attrs().set("axis", int64_t{1}).set("keepdims", int64_t{0}).set("select_last_index", int64_t{0})));
         return g;
       }});
  cs.push_back(
      {"transpose + reshape + slice", [] {
         PrimGraph g;
         TensorId x = g.add_input("x", DType::F32, {2, 3, 4, 5});
         TensorId t = g.add_primitive(PrimOp::Transpose, {x}, Attrs().set("perm", std::vector<int64_t>{0, 2, 3, 1}));
         TensorId r = g.add_primitive(PrimOp::Reshape, {t}, Attrs().set("shape", std::vector<int64_t>{8, 15}));
         Attrs sl;
         sl.set("starts", std::vector<int64_t>{7, 1})
             .set("steps", std::vector<int64_t>{-2, 3})
             .set("sizes", std::vector<int64_t>{4, 5});
         g.mark_output(g.add_primitive(PrimOp::Slice, {r}, sl));
         return g;
       }});
  cs.push_back(
      {"concat + broadcast mul", [] {
         PrimGraph g;
         TensorId a = g.add_input("a", DType::F32, {2, 3, 7});
         TensorId b = g.add_input("b", DType::F32, {2, 5, 7});
         TensorId c = g.add_primitive(PrimOp::Concat, {a, b, a}, Attrs().set("axis", int64_t{1}));
         TensorId s = g.add_input("s", DType::F32, {11, 1});
         TensorId bs = g.add_primitive(PrimOp::Broadcast, {s}, Attrs().set("shape", std::vector<int64_t>{11, 7}));
         g.mark_output(g.add_primitive(PrimOp::Mul, {c, bs}, {}));
         return g;
       }});
  // YOLOX's box decode after the ScatterND fission: rows of 21 rebuilt from pieces of 2, 2 and 17
  // around two updates (one a nested Concat), the pieces computed elementwise.
  cs.push_back({"innermost concat of computed pieces (piecewise concat variant)", [] {
                  PrimGraph g;
                  TensorId x = g.add_input("x", DType::F32, {1, 37, 21});
                  TensorId grid = g.add_input("grid", DType::F32, {1, 37, 2});
                  auto cols = [&](TensorId t, int64_t start, int64_t size) {
                    Attrs a;
                    a.set("starts", std::vector<int64_t>{0, 0, start})
                        .set("steps", std::vector<int64_t>{1, 1, 1})
                        .set("sizes", std::vector<int64_t>{1, 37, size});
                    return g.add_primitive(PrimOp::Slice, {t}, a);
                  };
                  Attrs last = Attrs().set("axis", int64_t{2});
                  TensorId xy = g.add_primitive(PrimOp::Add, {cols(x, 0, 2), grid}, {});
                  TensorId first = g.add_primitive(PrimOp::Concat, {xy, cols(x, 2, 19)}, last);
                  TensorId wh = g.add_primitive(PrimOp::Exp, {cols(first, 2, 2)}, {});
                  g.mark_output(g.add_primitive(PrimOp::Concat, {cols(first, 0, 2), wh, cols(first, 4, 17)}, last));
                  return g;
                }});
  for (std::string mode : {"constant", "reflect", "edge"}) {
    cs.push_back({"pad " + mode, [mode] {
                    PrimGraph g;
                    TensorId x = g.add_input("x", DType::F32, {1, 2, 5, 6});
                    Attrs a;
                    a.set("pads", std::vector<int64_t>{0, 0, 2, 1, 0, 0, 1, 3}).set("mode", mode).set("value", 0.5);
                    g.mark_output(g.add_primitive(PrimOp::Pad, {x}, a));
                    return g;
                  }});
  }
  cs.push_back({"gather with runtime indices", [] {
                  PrimGraph g;
                  TensorId table = g.add_input("table", DType::F32, {30, 16});
                  TensorId ids = g.add_input("ids", DType::I64, {2, 5});
                  g.mark_output(g.add_primitive(PrimOp::Gather, {table, ids}, Attrs().set("axis", int64_t{0})));
                  return g;
                }});
  for (PrimOp op : {PrimOp::MaxPool, PrimOp::AvgPool}) {
    for (int64_t include_pad : {0, 1}) {
      cs.push_back({std::string(prim_op_name(op)) + " 3x3 s2 pad1 ceil, include_pad " + std::to_string(include_pad),
                    [op, include_pad] {
                      PrimGraph g;
                      TensorId x = g.add_input("x", DType::F32, {1, 3, 11, 10});
                      Attrs a;
                      a.set("kernel", std::vector<int64_t>{3, 3}).set("strides", std::vector<int64_t>{2, 2});
                      a.set("pads", std::vector<int64_t>{1, 1, 1, 1}).set("dilations", std::vector<int64_t>{1, 1});
                      a.set("ceil_mode", int64_t{1}).set("count_include_pad", include_pad);
                      TensorId y = g.add_primitive(op, {x}, a);
                      g.mark_output(g.add_primitive(PrimOp::Relu, {y}, {}));
                      return g;
                    }});
    }
  }
  // Max pools as the separable two-pass stencil: YOLO's SPP block (stride 1, same padding, three
  // window sizes concatenated), a pool that is the kernel's output, asymmetric pads with a
  // stride, batch 2 (parallel over images), and a 1-D pool (direct window).
  // 16 channels: also a channels-last candidate in the blocked formats (whole channel blocks).
  for (Shape spp_in : {Shape{1, 4, 13, 13}, Shape{1, 16, 13, 11}}) {
    cs.push_back({"SPP: MaxPool 5/9/13 s1 same pad + Concat, input " + shape_str(spp_in), [spp_in] {
                    PrimGraph g;
                    TensorId x = g.add_input("x", DType::F32, spp_in);
                    std::vector<TensorId> parts = {x};
                    for (int64_t k : {5, 9, 13}) {
                      Attrs a;
                      a.set("kernel", std::vector<int64_t>{k, k}).set("strides", std::vector<int64_t>{1, 1});
                      a.set("pads", std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2});
                      a.set("dilations", std::vector<int64_t>{1, 1}).set("ceil_mode", int64_t{0});
                      parts.push_back(g.add_primitive(PrimOp::MaxPool, {x}, a));
                    }
                    g.mark_output(g.add_primitive(PrimOp::Concat, parts, Attrs().set("axis", int64_t{1})));
                    return g;
                  }});
  }
  struct PoolCase {
    std::vector<int64_t> in, kernel, strides, pads;
  };
  for (const PoolCase& pc : std::vector<PoolCase>{{{1, 3, 13, 13}, {13, 13}, {1, 1}, {6, 6, 6, 6}},
                                                  {{2, 3, 9, 17}, {3, 2}, {2, 3}, {0, 1, 2, 0}},
                                                  {{1, 5, 20}, {4}, {2}, {1, 1}}}) {
    cs.push_back({"MaxPool alone, input " + shape_str(pc.in) + " kernel " + shape_str(pc.kernel), [pc] {
                    PrimGraph g;
                    TensorId x = g.add_input("x", DType::F32, pc.in);
                    Attrs a;
                    a.set("kernel", pc.kernel).set("strides", pc.strides).set("pads", pc.pads);
                    a.set("dilations", std::vector<int64_t>(pc.kernel.size(), 1)).set("ceil_mode", int64_t{0});
                    g.mark_output(g.add_primitive(PrimOp::MaxPool, {x}, a));
                    return g;
                  }});
  }
  // Resize: upsampling (YOLO / Candy / SegFormer heads), downsampling, crop
  // with extrapolation, integer nearest, each followed by an elementwise
  // consumer in the same kernel.
  struct ResizeCase {
    std::string mode, coord_mode, nearest_mode;
    std::vector<int64_t> in, out;
    DType dtype;
    int64_t exclude_outside;
  };
  for (const ResizeCase& rc : std::vector<ResizeCase>{
           {"nearest", "asymmetric", "floor", {1, 3, 5, 6}, {1, 3, 10, 12}, DType::F32, 0},
           {"nearest", "asymmetric", "floor", {2, 16, 5, 6}, {2, 16, 10, 12}, DType::F32, 0},  // channel blocks
           {"nearest", "half_pixel", "round_prefer_ceil", {1, 2, 7, 5}, {1, 2, 4, 11}, DType::F32, 0},
           {"nearest", "asymmetric", "floor", {1, 2, 4, 4}, {1, 2, 8, 8}, DType::I64, 0},
           {"linear", "half_pixel", "round_prefer_floor", {1, 3, 6, 7}, {1, 3, 24, 28}, DType::F32, 0},
           {"linear", "align_corners", "round_prefer_floor", {1, 2, 9, 8}, {1, 2, 5, 13}, DType::F32, 0},
           {"linear", "pytorch_half_pixel", "round_prefer_floor", {1, 2, 6, 6}, {1, 2, 1, 9}, DType::F32, 0},
           {"cubic", "half_pixel", "round_prefer_floor", {1, 2, 5, 6}, {1, 2, 9, 10}, DType::F32, 1},
           {"linear", "tf_crop_and_resize", "round_prefer_floor", {1, 2, 6, 6}, {1, 2, 7, 5}, DType::F32, 0},
       }) {
    cs.push_back({"resize " + rc.mode + " " + rc.coord_mode + " " + std::string(dtype_name(rc.dtype)) + " " +
                      shape_str(rc.in) + "->" + shape_str(rc.out),
                  [rc] {
                    PrimGraph g;
                    TensorId x = g.add_input("x", rc.dtype, rc.in);
                    std::vector<double> scales, roi(2 * rc.in.size(), 0.0);
                    for (size_t i = 0; i < rc.in.size(); ++i) {
                      scales.push_back(static_cast<double>(rc.out[i]) / static_cast<double>(rc.in[i]));
                      roi[rc.in.size() + i] = 1.0;
                    }
                    if (rc.coord_mode == "tf_crop_and_resize") {  // a window partly outside the input
                      roi = {0, 0, -0.2, 0.3, 1, 1, 0.9, 1.25};
                    }
                    Attrs a;
                    a.set("sizes", rc.out).set("scales", scales).set("roi", roi).set("mode", rc.mode);
                    a.set("coord_mode", rc.coord_mode).set("nearest_mode", rc.nearest_mode);
                    a.set("cubic_coeff_a", -0.75).set("exclude_outside", rc.exclude_outside);
                    a.set("extrapolation_value", 0.25);
                    TensorId y = g.add_primitive(PrimOp::Resize, {x}, a);
                    g.mark_output(g.add_primitive(PrimOp::Add, {y, y}, {}));
                    return g;
                  }});
  }
  // Long contiguous rows (LLVM vectorises the running reduction: Halide allows reassociation).
  cs.push_back({"softmax over rows of 96", [] {
                  PrimGraph g;
                  TensorId x = g.add_input("x", DType::F32, {3, 5, 96});
                  TensorId m = g.add_primitive(PrimOp::ReduceMax, {x}, axes({2}, 1));
                  TensorId e = g.add_primitive(PrimOp::Exp, {g.add_primitive(PrimOp::Sub, {x, m}, {})}, {});
                  TensorId s = g.add_primitive(PrimOp::ReduceSum, {e}, axes({2}, 1));
                  g.mark_output(g.add_primitive(PrimOp::Div, {e, s}, {}));
                  return g;
                }});
  for (PrimOp op : {PrimOp::ReduceMin, PrimOp::ReduceMean, PrimOp::ReduceProd}) {
    cs.push_back({std::string(prim_op_name(op)) + " over the last two axes (plane of 4x32)", [op] {
                    PrimGraph g;
                    TensorId x = g.add_input("x", DType::F32, {2, 3, 4, 32});
                    TensorId y = op == PrimOp::ReduceProd ? g.add_primitive(PrimOp::Sigmoid, {x}, {}) : x;
                    g.mark_output(g.add_primitive(op, {y}, axes({2, 3}, 0)));
                    return g;
                  }});
  }
  // Reductions with rows that are not a multiple of the vector width, integer accumulators,
  // several reduced axes, and the reduction as the kernel's output.
  for (DType t : {DType::F32, DType::I32}) {
    cs.push_back({std::string("sum and max over rows of 45, no keepdims, ") + dtype_name(t), [t] {
                    PrimGraph g;
                    TensorId in = g.add_input("x", t, {4, 7, 45});
                    // Random integers are small and non-negative: shift them below zero, so that
                    // a maximum starting from 0 instead of the type's minimum would show.
                    TensorId five =
                        g.add_constant("five", std::make_shared<const TensorData>(TensorData::from_i64(t, {}, {5})));
                    TensorId x = g.add_primitive(PrimOp::Sub, {in, five}, {});
                    TensorId s = g.add_primitive(PrimOp::ReduceSum, {x}, axes({2}, 0));
                    TensorId m = g.add_primitive(PrimOp::ReduceMax, {x}, axes({2}, 0));
                    g.mark_output(g.add_primitive(PrimOp::Sub, {s, m}, {}));
                    return g;
                  }});
  }
  // Rows of 37 have a tail; rows of 32 are whole vectors (streaming stores: StreamedRows).
  for (int64_t width : {37, 32})
    cs.push_back({"max over planes of 7x" + std::to_string(width) + ", subtracted (materialised, two reduced axes" +
                      (width == 37 ? ", tail)" : ", streamed rows variant)"),
                  [width] {
                    PrimGraph g;
                    TensorId x = g.add_input("x", DType::F32, {2, 3, 7, width});
                    TensorId m = g.add_primitive(PrimOp::ReduceMax, {x}, axes({2, 3}, 1));
                    g.mark_output(g.add_primitive(PrimOp::Sub, {x, m}, {}));
                    return g;
                  }});
  cs.push_back({"mean over rows of 50 as the output (fused parallel variant)", [] {
                  PrimGraph g;
                  TensorId x = g.add_input("x", DType::F32, {2, 9, 50});
                  g.mark_output(g.add_primitive(PrimOp::ReduceMean, {x}, axes({2}, 1)));
                  return g;
                }});
  cs.push_back({"sum of everything (scalar output)", [] {
                  PrimGraph g;
                  TensorId x = g.add_input("x", DType::F32, {6, 40});
                  g.mark_output(g.add_primitive(PrimOp::ReduceSum, {x}, axes({0, 1}, 0)));
                  return g;
                }});
  cs.push_back({"short outer axis: 3 channels of 17x33 (fused parallel variant)", [] {
                  PrimGraph g;
                  TensorId x = g.add_input("x", DType::F32, {1, 3, 17, 33});
                  g.mark_output(g.add_primitive(PrimOp::Sigmoid, {g.add_primitive(PrimOp::Relu, {x}, {})}, {}));
                  return g;
                }});
  cs.push_back(
      {"transpose of the last two axes with a SiLU, rows not a multiple of the tile (tall block transpose variant)",
       [] {
         PrimGraph g;
         TensorId x = g.add_input("x", DType::F32, {2, 37, 45});
         TensorId t = g.add_primitive(PrimOp::Transpose, {x}, Attrs().set("perm", std::vector<int64_t>{0, 2, 1}));
         g.mark_output(g.add_primitive(PrimOp::Mul, {t, g.add_primitive(PrimOp::Sigmoid, {t}, {})}, {}));
         return g;
       }});
  cs.push_back(
      {"transposed input times a channel scale plus a residual (block transpose variant)", [] {
         PrimGraph g;
         TensorId x = g.add_input("x", DType::F32, {2, 3, 20, 12});
         TensorId r = g.add_input("r", DType::F32, {2, 3, 12, 20});
         TensorId s = g.add_input("s", DType::F32, {3, 1, 1});
         TensorId t = g.add_primitive(PrimOp::Transpose, {x}, Attrs().set("perm", std::vector<int64_t>{0, 1, 3, 2}));
         g.mark_output(g.add_primitive(PrimOp::Add, {g.add_primitive(PrimOp::Mul, {t, s}, {}), r}, {}));
         return g;
       }});
  cs.push_back(
      {"transpose of an elementwise result, int64 (block transpose variant)", [] {
         PrimGraph g;
         TensorId x = g.add_input("x", DType::I64, {9, 17});
         TensorId n = g.add_primitive(PrimOp::Neg, {x}, {});
         g.mark_output(g.add_primitive(PrimOp::Transpose, {n}, Attrs().set("perm", std::vector<int64_t>{1, 0})));
         return g;
       }});
  cs.push_back(
      {"where over a transposed input, a bool mask and a broadcast row (block transpose variant)", [] {
         PrimGraph g;
         TensorId x = g.add_input("x", DType::F32, {3, 16, 10});
         TensorId mask = g.add_input("mask", DType::Bool, {3, 10, 16});
         TensorId row = g.add_input("row", DType::F32, {16});
         TensorId t = g.add_primitive(PrimOp::Transpose, {x}, Attrs().set("perm", std::vector<int64_t>{0, 2, 1}));
         g.mark_output(g.add_primitive(PrimOp::Where, {mask, t, row}, {}));
         return g;
       }});
  cs.push_back({"sum of two transposed inputs (block transpose variant)", [] {
                  PrimGraph g;
                  TensorId a = g.add_input("a", DType::F32, {4, 33, 8});
                  TensorId b = g.add_input("b", DType::F32, {4, 33, 8});
                  Attrs swap = Attrs().set("perm", std::vector<int64_t>{0, 2, 1});
                  g.mark_output(g.add_primitive(
                      PrimOp::Add,
                      {g.add_primitive(PrimOp::Transpose, {a}, swap),
                       g.add_primitive(PrimOp::Transpose, {g.add_primitive(PrimOp::Exp, {b}, {})}, swap)},
                      {}));
                  return g;
                }});
  cs.push_back({"an input read transposed and as it is (x + x^T)", [] {
                  PrimGraph g;
                  TensorId x = g.add_input("x", DType::F32, {24, 24});
                  TensorId t = g.add_primitive(PrimOp::Transpose, {x}, Attrs().set("perm", std::vector<int64_t>{1, 0}));
                  g.mark_output(g.add_primitive(PrimOp::Add, {x, t}, {}));
                  return g;
                }});
  cs.push_back({"global average pool + sigmoid gate (squeeze-excite shape)", [] {
                  PrimGraph g;
                  TensorId x = g.add_input("x", DType::F32, {1, 8, 6, 6});
                  TensorId m = g.add_primitive(PrimOp::ReduceMean, {x}, axes({2, 3}, 1));
                  g.mark_output(g.add_primitive(PrimOp::Mul, {x, g.add_primitive(PrimOp::Sigmoid, {m}, {})}, {}));
                  return g;
                }});
  // Channels-last candidates (check_channels_last also runs them with nhwc tensors): channel
  // counts that are not a multiple of the vector, one above two vectors (parallel channel chunks).
  for (int64_t channels : {24, 40, 48}) {
    cs.push_back({"instance norm + relu + reflect pad, " + std::to_string(channels) + " channels", [channels] {
                    PrimGraph g;
                    TensorId x = g.add_input("x", DType::F32, {1, channels, 9, 11});
                    TensorId m = g.add_primitive(PrimOp::ReduceMean, {x}, axes({2, 3}, 1));
                    TensorId d = g.add_primitive(PrimOp::Sub, {x, m}, {});
                    TensorId v = g.add_primitive(PrimOp::ReduceMean, {g.add_primitive(PrimOp::Mul, {d, d}, {})},
                                                 axes({2, 3}, 1));
                    TensorId eps =
                        g.add_constant("eps", std::make_shared<const TensorData>(TensorData::scalar_f32(1e-5f)));
                    TensorId sd = g.add_primitive(PrimOp::Sqrt, {g.add_primitive(PrimOp::Add, {v, eps}, {})}, {});
                    TensorId gamma = g.add_input("gamma", DType::F32, {channels, 1, 1});
                    TensorId y = g.add_primitive(PrimOp::Mul, {g.add_primitive(PrimOp::Div, {d, sd}, {}), gamma}, {});
                    Attrs pad;
                    pad.set("pads", std::vector<int64_t>{0, 0, 1, 1, 0, 0, 1, 1}).set("mode", std::string("reflect"));
                    pad.set("value", 0.0);
                    TensorId r = g.add_primitive(PrimOp::Relu, {y}, {});
                    g.mark_output(g.add_primitive(PrimOp::Pad, {r}, pad));
                    return g;
                  }});
  }
  cs.push_back({"SiLU of a biased activation plus a residual (channels-last candidate)", [] {
                  PrimGraph g;
                  TensorId x = g.add_input("x", DType::F32, {1, 32, 7, 13});
                  TensorId res = g.add_input("res", DType::F32, {1, 32, 7, 13});
                  TensorId bias = g.add_input("bias", DType::F32, {1, 32, 1, 1});
                  TensorId y = g.add_primitive(PrimOp::Add, {x, bias}, {});
                  TensorId s = g.add_primitive(PrimOp::Mul, {y, g.add_primitive(PrimOp::Sigmoid, {y}, {})}, {});
                  g.mark_output(g.add_primitive(PrimOp::Add, {s, res}, {}));
                  return g;
                }});
  // A kernel ending in a channel Concat: channels-last in blocked formats only, each piece
  // written whole blocks (8 + 16 + 8 channels: nChw8c; 16 + 16: nChw16c too).
  for (std::vector<int64_t> pieces : {std::vector<int64_t>{8, 16, 8}, std::vector<int64_t>{16, 16}}) {
    std::string name = "SiLU and a nearest upsample, then a channel concat of";
    for (int64_t c : pieces) name += " " + std::to_string(c);
    cs.push_back(
        {name + " (channels-last candidate)", [pieces] {
           PrimGraph g;
           std::vector<TensorId> parts;
           for (size_t i = 0; i < pieces.size(); ++i) {
             std::string id = std::to_string(i);
             if (i == 1) {  // upsampled 2x: [1, c, 3, 5] -> [1, c, 6, 10]
               TensorId x = g.add_input("small" + id, DType::F32, {1, pieces[i], 3, 5});
               Attrs up;
               up.set("sizes", std::vector<int64_t>{1, pieces[i], 6, 10});
               up.set("scales", std::vector<double>{1, 1, 2, 2}).set("roi", std::vector<double>(8, 0.0));
               up.set("mode", std::string("nearest")).set("coord_mode", std::string("asymmetric"));
               up.set("nearest_mode", std::string("floor")).set("cubic_coeff_a", -0.75);
               up.set("exclude_outside", int64_t{0}).set("extrapolation_value", 0.0);
               parts.push_back(g.add_primitive(PrimOp::Resize, {x}, up));
             } else {
               TensorId x = g.add_input("x" + id, DType::F32, {1, pieces[i], 6, 10});
               parts.push_back(g.add_primitive(PrimOp::Mul, {x, g.add_primitive(PrimOp::Sigmoid, {x}, {})}, {}));
             }
           }
           g.mark_output(g.add_primitive(PrimOp::Concat, parts, Attrs().set("axis", int64_t{1})));
           return g;
         }});
  }
  cs.push_back({"average pool 3x3 stride 2 plus a residual (channels-last candidate)", [] {
                  PrimGraph g;
                  TensorId x = g.add_input("x", DType::F32, {1, 24, 9, 10});
                  TensorId res = g.add_input("res", DType::F32, {1, 24, 5, 5});
                  Attrs pool;
                  pool.set("kernel", std::vector<int64_t>{3, 3}).set("strides", std::vector<int64_t>{2, 2});
                  pool.set("pads", std::vector<int64_t>{1, 1, 1, 1}).set("dilations", std::vector<int64_t>{1, 1});
                  pool.set("ceil_mode", int64_t{0}).set("count_include_pad", int64_t{0});
                  g.mark_output(g.add_primitive(PrimOp::Add, {g.add_primitive(PrimOp::AvgPool, {x}, pool), res}, {}));
                  return g;
                }});
  cs.push_back({"max and sum over pixels, no keepdims (channels-last candidate)", [] {
                  PrimGraph g;
                  TensorId x = g.add_input("x", DType::F32, {2, 20, 5, 6});
                  TensorId mx = g.add_primitive(PrimOp::ReduceMax, {x}, axes({2, 3}, 0));
                  TensorId sm = g.add_primitive(PrimOp::ReduceSum, {x}, axes({2, 3}, 0));
                  g.mark_output(g.add_primitive(PrimOp::Add, {mx, sm}, {}));
                  return g;
                }});
  return cs;
}

TEST(CpuKernels, MatchReferenceAcrossKindsAndFusions) {
  cpu::set_num_threads(2);
  for (const Case& c : cases()) check_kernel(c);
}

// Each case whose name contains a tag of `expected` must have a schedule variant whose
// description contains the tag's text.
void expect_tagged_variants(const std::vector<Case>& cs,
                            const std::vector<std::pair<std::string, std::string>>& expected) {
  for (const Case& c : cs) {
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
  expect_tagged_variants(cases(), {{"(fused parallel variant)", "parallel over the fused outer axes"},
                                   {"(block transpose variant)", "block transpose in registers"},
                                   {"(tall block transpose variant)", "tile 8x16 of 8x8 blocks"},
                                   {"(piecewise concat variant)", "one update per piece"}});
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
  std::vector<Case> streamed = cases();
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
  for (const Case& c : streamed) check_kernel(c);
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
    PrimGraph g;
    TensorId x = g.add_input("x", DType::F32, {n});
    g.mark_output(g.add_primitive(op, {x}, {}));
    Kernel k = make_kernel(g, {0});
    TensorData in(DType::F32, {n}), out(DType::F32, {n});
    std::copy(xs.begin(), xs.end(), static_cast<float*>(in.raw()));
    std::string why;
    auto compiled = cpu::compile_halide_kernel(g, k, &why);
    ASSERT_NE(compiled, nullptr) << why;
    compiled->run({in.raw()}, out.raw());
    const float* got = static_cast<const float*>(out.raw());
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
