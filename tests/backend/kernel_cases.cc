// The kernel cases every backend is checked on (see kernel_cases.h).
#include "backend/kernel_cases.h"

#include <cmath>
#include <memory>
#include <random>

#include "util/error.h"

namespace korch {

namespace {

Attrs axes(std::vector<int64_t> a, int64_t keep) { return Attrs().set("axes", a).set("keepdims", keep); }

// An integer constant of `n` elements whose values spread over the type's range (with wrapping):
// element i is start + i * step.
TensorId integer_row(PrimGraph& g, const std::string& name, DType t, int64_t n, int64_t start, int64_t step) {
  auto row = std::make_shared<TensorData>(t, Shape{n});
  for (int64_t i = 0; i < n; ++i) row->set_i64(i, start + i * step);
  return g.add_constant(name, row);
}

using Ints = std::vector<int64_t>;

// A small graph with seeded constant weights.
struct LinearGraph {
  PrimGraph g;
  std::mt19937 rng{1234};
  int names = 0;

  TensorId input(const Shape& s) { return g.add_input("x" + std::to_string(names++), DType::F32, s); }
  TensorId weight(const Shape& s) {
    auto t = std::make_shared<TensorData>(DType::F32, s);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (int64_t i = 0; i < t->size(); ++i) t->data<float>()[i] = dist(rng);
    return g.add_constant("w" + std::to_string(names++), t);
  }
  TensorId scalar(double v) {
    return g.add_constant("s" + std::to_string(names++),
                          std::make_shared<TensorData>(TensorData::scalar_f32(static_cast<float>(v))));
  }
  TensorId op(PrimOp op, std::vector<TensorId> in, Attrs a = Attrs()) {
    return g.add_primitive(op, std::move(in), std::move(a));
  }
  TensorId conv(TensorId x, TensorId w, Ints strides, Ints pads, int64_t group = 1) {
    Ints dilations(strides.size(), 1);
    return op(PrimOp::Conv, {x, w},
              Attrs().set("strides", strides).set("pads", pads).set("dilations", dilations).set("group", group));
  }
  PrimGraph done(TensorId out) {
    g.mark_output(out);
    return std::move(g);
  }
};

}  // namespace

std::vector<KernelCase> linear_kernel_cases() {
  std::vector<KernelCase> cs;
  cs.push_back({"conv 3x3 pad 1", [] {
                  LinearGraph b;
                  return b.done(b.conv(b.input({1, 8, 10, 10}), b.weight({16, 8, 3, 3}), {1, 1}, {1, 1, 1, 1}));
                }});
  cs.push_back({"conv stride 2, asymmetric pads", [] {
                  LinearGraph b;
                  return b.done(b.conv(b.input({2, 6, 11, 9}), b.weight({8, 6, 3, 3}), {2, 2}, {0, 1, 2, 1}));
                }});
  cs.push_back({"conv 1x1 + bias + relu", [] {
                  LinearGraph b;
                  TensorId y = b.conv(b.input({1, 16, 7, 7}), b.weight({32, 16, 1, 1}), {1, 1}, {0, 0, 0, 0});
                  return b.done(b.op(PrimOp::Relu, {b.op(PrimOp::Add, {y, b.weight({32, 1, 1})})}));
                }});
  cs.push_back(
      {"depthwise conv + bias + relu", [] {
         LinearGraph b;
         TensorId y = b.conv(b.input({1, 16, 12, 12}), b.weight({16, 1, 3, 3}), {1, 1}, {1, 1, 1, 1}, /*group=*/16);
         return b.done(b.op(PrimOp::Relu, {b.op(PrimOp::Add, {y, b.weight({16, 1, 1})})}));
       }});
  cs.push_back(
      {"grouped conv", [] {
         LinearGraph b;
         return b.done(b.conv(b.input({1, 8, 9, 9}), b.weight({12, 4, 3, 3}), {1, 1}, {1, 1, 1, 1}, /*group=*/2));
       }});
  cs.push_back({"conv + bias + residual add + relu", [] {
                  LinearGraph b;
                  TensorId y = b.conv(b.input({1, 16, 10, 10}), b.weight({16, 16, 3, 3}), {1, 1}, {1, 1, 1, 1});
                  y = b.op(PrimOp::Add, {y, b.weight({1, 16, 1, 1})});
                  return b.done(b.op(PrimOp::Relu, {b.op(PrimOp::Add, {b.input({1, 16, 10, 10}), y})}));
                }});
  cs.push_back({"conv transpose stride 2", [] {
                  LinearGraph b;
                  return b.done(b.op(PrimOp::ConvTranspose, {b.input({1, 8, 6, 6}), b.weight({8, 4, 3, 3})},
                                     Attrs()
                                         .set("strides", Ints{2, 2})
                                         .set("pads", Ints{1, 1, 1, 1})
                                         .set("dilations", Ints{1, 1})
                                         .set("group", int64_t{1})
                                         .set("out_spatial", Ints{11, 11})));
                }});
  cs.push_back({"matmul, constant weight + bias + gelu (erf)", [] {
                  LinearGraph b;
                  TensorId z = b.op(PrimOp::MatMul, {b.input({2, 5, 16}), b.weight({16, 12})});
                  z = b.op(PrimOp::Add, {b.weight({12}), z});
                  TensorId e = b.op(PrimOp::Add, {b.op(PrimOp::Erf, {b.op(PrimOp::Div, {z, b.scalar(std::sqrt(2.0))})}),
                                                  b.scalar(1)});
                  return b.done(b.op(PrimOp::Mul, {b.op(PrimOp::Mul, {z, e}), b.scalar(0.5)}));
                }});
  cs.push_back({"batched matmul, broadcast operands", [] {
                  LinearGraph b;
                  return b.done(b.op(PrimOp::MatMul, {b.input({2, 3, 5, 8}), b.input({3, 8, 4})}));
                }});
  cs.push_back({"matmul + scale + full residual", [] {
                  LinearGraph b;
                  TensorId y = b.op(PrimOp::MatMul, {b.input({2, 1, 3, 4, 6}), b.input({1, 2, 1, 6, 5})});
                  return b.done(b.op(PrimOp::Add, {b.op(PrimOp::Mul, {y, b.scalar(0.5)}), b.input({2, 2, 3, 4, 5})}));
                }});
  return cs;
}

// Softmax attention: S = Q Kt, score steps, E = exp(S' - rowmax), Y = (E V) / rowsum(E).
PrimGraph attention_graph(const Shape& batch, int64_t m, int64_t n, int64_t dk, int64_t dv, bool scale, bool mask,
                          bool scale_first, float scale_by) {
  LinearGraph b;
  auto dims = [&](int64_t r, int64_t c) {
    Shape s = batch;
    s.push_back(r);
    s.push_back(c);
    return s;
  };
  TensorId s = b.op(PrimOp::MatMul, {b.input(dims(m, dk)), b.input(dims(dk, n))});
  if (scale) s = scale_first ? b.op(PrimOp::Mul, {b.scalar(scale_by), s}) : b.op(PrimOp::Div, {s, b.scalar(8.0)});
  if (mask) s = b.op(PrimOp::Add, {s, b.input({1, n})});  // broadcast over batch and rows
  TensorId mx = b.op(PrimOp::ReduceMax, {s}, axes({static_cast<int64_t>(batch.size()) + 1}, 1));
  TensorId e = b.op(PrimOp::Exp, {b.op(PrimOp::Sub, {s, mx})});
  TensorId sum = b.op(PrimOp::ReduceSum, {e}, axes({static_cast<int64_t>(batch.size()) + 1}, 1));
  TensorId o = b.op(PrimOp::MatMul, {e, b.input(dims(n, dv))});
  return b.done(b.op(PrimOp::Div, {o, sum}));
}

std::vector<KernelCase> attention_kernel_cases() {
  std::vector<KernelCase> cs;
  cs.push_back({"attention [2,3] heads, 17 queries x 23 keys, scaled and masked", [] {
                  return attention_graph({2, 3}, 17, 23, 8, 8, true, true);
                }});
  cs.push_back({"attention, scale operand first, 40 keys, dv != dk",
                [] { return attention_graph({4}, 9, 40, 16, 5, true, false, true); }});
  cs.push_back({"attention scaled by zero (a scale alpha cannot take), masked",
                [] { return attention_graph({3}, 6, 20, 4, 4, true, true, true, 0.0f); }});
  cs.push_back(
      {"attention between layout chains, as PyTorch exports multi-head attention", [] {
         // qkv [seq, 1, 3 * heads * dk] -> Q, K, V [heads, seq, dk] through Slice, Reshape,
         // Transpose (Q scaled, K transposed to [heads, dk, seq]); Y back to [seq, heads * dk].
         const int64_t seq = 37, heads = 3, dk = 8, d = heads * dk;
         LinearGraph b;
         TensorId qkv = b.input({seq, 1, 3 * d});
         auto head_split = [&](int64_t part, Ints perm) {
           TensorId x = b.op(
               PrimOp::Slice, {qkv},
               Attrs().set("starts", Ints{0, 0, part * d}).set("sizes", Ints{seq, 1, d}).set("steps", Ints{1, 1, 1}));
           x = b.op(PrimOp::Reshape, {x}, Attrs().set("shape", Ints{seq, heads, dk}));
           return b.op(PrimOp::Transpose, {x}, Attrs().set("perm", perm));
         };
         TensorId q = b.op(PrimOp::Div, {head_split(0, {1, 0, 2}), b.scalar(2.8284271)});
         TensorId kt = head_split(1, {1, 2, 0});
         TensorId v = head_split(2, {1, 0, 2});
         TensorId s = b.op(PrimOp::MatMul, {q, kt});
         TensorId mx = b.op(PrimOp::ReduceMax, {s}, axes({2}, 1));
         TensorId e = b.op(PrimOp::Exp, {b.op(PrimOp::Sub, {s, mx})});
         TensorId sum = b.op(PrimOp::ReduceSum, {e}, axes({2}, 1));
         TensorId y = b.op(PrimOp::Div, {b.op(PrimOp::MatMul, {e, v}), sum});
         y = b.op(PrimOp::Transpose, {y}, Attrs().set("perm", Ints{1, 0, 2}));
         return b.done(b.op(PrimOp::Reshape, {y}, Attrs().set("shape", Ints{seq, d})));
       }});
  cs.push_back({"attention without score steps, rows split into blocks with a remainder",
                [] { return attention_graph({2}, 70, 1500, 4, 4, false, false); }});
  cs.push_back({"attention, dv wider than one 64-column tile, odd dk, keys past whole panels",
                [] { return attention_graph({2}, 21, 100, 5, 80, true, false); }});
  cs.push_back({"attention with Q and V read through transposes (column-major views)", [] {
                  LinearGraph b;
                  const Ints swap = {0, 2, 1};
                  TensorId q = b.op(PrimOp::Transpose, {b.input({3, 16, 10})}, Attrs().set("perm", swap));
                  TensorId v = b.op(PrimOp::Transpose, {b.input({3, 12, 30})}, Attrs().set("perm", swap));
                  TensorId s = b.op(PrimOp::MatMul, {q, b.input({3, 16, 30})});
                  TensorId mx = b.op(PrimOp::ReduceMax, {s}, axes({2}, 1));
                  TensorId e = b.op(PrimOp::Exp, {b.op(PrimOp::Sub, {s, mx})});
                  TensorId sum = b.op(PrimOp::ReduceSum, {e}, axes({2}, 1));
                  return b.done(b.op(PrimOp::Div, {b.op(PrimOp::MatMul, {e, v}), sum}));
                }});
  return cs;
}

Kernel whole_graph_kernel(const PrimGraph& g) {
  std::vector<PrimId> all;
  for (PrimId p = 0; p < g.num_prims(); ++p) all.push_back(p);
  return make_kernel(g, all);
}

std::vector<KernelCase> memory_bound_kernel_cases() {
  std::vector<KernelCase> cs;
  for (PrimOp op :
       {PrimOp::Neg, PrimOp::Abs, PrimOp::Exp, PrimOp::Tanh, PrimOp::Sigmoid, PrimOp::Erf, PrimOp::Floor, PrimOp::Round,
        PrimOp::Sign, PrimOp::Relu, PrimOp::Sin, PrimOp::Cos, PrimOp::Asin, PrimOp::Acos, PrimOp::Atan}) {
    cs.push_back({std::string("unary ") + prim_op_name(op), [op] {
                    PrimGraph g;
                    TensorId x = g.add_input("x", DType::F32, {3, 37});
                    g.mark_output(g.add_primitive(op, {x}, {}));
                    return g;
                  }});
  }
  // Pow by a constant: small integer exponents expand into multiplications (small_integer_exponent),
  // others take the general pow; negative bases with the integer exponents.
  for (float exponent : {2.0f, 3.0f, 0.5f, 2.5f}) {
    cs.push_back({str_cat("pow by the constant ", exponent), [exponent] {
                    PrimGraph g;
                    TensorId x = g.add_input("x", DType::F32, {3, 37});
                    if (exponent != std::floor(exponent)) x = g.add_primitive(PrimOp::Abs, {x}, {});
                    TensorId e = g.add_constant("e", std::make_shared<TensorData>(TensorData::scalar_f32(exponent)));
                    g.mark_output(g.add_primitive(PrimOp::Pow, {x, e}, {}));
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
  for (DType t : {DType::I32, DType::U8, DType::I64}) {
    cs.push_back({std::string("bitwise and/or/xor/not on ") + dtype_name(t), [t] {
                    PrimGraph g;
                    TensorId x = g.add_input("x", t, {3, 37});
                    TensorId spread = g.add_primitive(PrimOp::Add, {x, integer_row(g, "a", t, 37, -70001, 40503)}, {});
                    TensorId mask = integer_row(g, "m", t, 37, 12345, -2654435761);
                    TensorId y = g.add_primitive(PrimOp::BitAnd, {spread, mask}, {});
                    y = g.add_primitive(PrimOp::BitOr, {y, integer_row(g, "o", t, 37, 3, 77)}, {});
                    y = g.add_primitive(PrimOp::BitXor, {y, spread}, {});
                    g.mark_output(g.add_primitive(PrimOp::BitNot, {y}, {}));
                    return g;
                  }});
    // Shift amounts from -2 to beyond the type's width; values of both signs.
    cs.push_back({std::string("shifts left and right on ") + dtype_name(t), [t] {
                    PrimGraph g;
                    TensorId x = g.add_input("x", t, {2, 70});
                    TensorId v = g.add_primitive(PrimOp::Sub, {x, integer_row(g, "a", t, 70, 1000003, 15485863)}, {});
                    TensorId amount = integer_row(g, "s", t, 70, -2, 1);
                    TensorId left = g.add_primitive(PrimOp::ShiftLeft, {v, amount}, {});
                    TensorId right = g.add_primitive(PrimOp::ShiftRight, {v, amount}, {});
                    g.mark_output(g.add_primitive(PrimOp::BitXor, {left, right}, {}));
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
  // ConvNeXt's LayerNorm over channels-last rows, its result transposed back to channels-first
  // (the squares and the centred values come from other kernels).
  cs.push_back(
      {"layernorm tail transposed to channels-first", [] {
         LinearGraph lg;
         PrimGraph& g = lg.g;
         TensorId sq = lg.input({1, 56, 56, 96});
         TensorId d = lg.input({1, 56, 56, 96});
         TensorId v = g.add_primitive(PrimOp::ReduceMean, {sq}, axes({3}, 1));
         TensorId sd = g.add_primitive(PrimOp::Sqrt, {g.add_primitive(PrimOp::Add, {v, lg.scalar(2.0)}, {})}, {});
         TensorId y = g.add_primitive(PrimOp::Div, {d, sd}, {});
         y = g.add_primitive(PrimOp::Add, {g.add_primitive(PrimOp::Mul, {y, lg.weight({96})}, {}), lg.weight({96})},
                             {});
         g.mark_output(g.add_primitive(PrimOp::Transpose, {y}, Attrs().set("perm", Ints{0, 3, 1, 2})));
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
  // Attention's deferred softmax division: E V divided by the row sums of E, heads merged into the
  // rows' columns. Per parallel row, the sums are needed for that row only.
  cs.push_back(
      {"row sums dividing a product behind a head merge (reduce, div, transpose, reshape)", [] {
         PrimGraph g;
         TensorId e = g.add_input("e", DType::F32, {2, 16, 24});
         TensorId z = g.add_input("z", DType::F32, {2, 16, 8});
         TensorId sum = g.add_primitive(PrimOp::ReduceSum, {e}, axes({2}, 1));
         TensorId b = g.add_primitive(PrimOp::Broadcast, {sum}, Attrs().set("shape", std::vector<int64_t>{2, 16, 8}));
         TensorId y = g.add_primitive(PrimOp::Div, {z, b}, {});
         TensorId t = g.add_primitive(PrimOp::Transpose, {y}, Attrs().set("perm", std::vector<int64_t>{1, 0, 2}));
         g.mark_output(g.add_primitive(PrimOp::Reshape, {t}, Attrs().set("shape", std::vector<int64_t>{16, 16})));
         return g;
       }});
  cs.push_back(
      {"reshape regrouping across dims of extent 1", [] {
         PrimGraph g;
         TensorId x = g.add_input("x", DType::F32, {6, 1, 4, 5});
         TensorId r = g.add_primitive(PrimOp::Reshape, {x}, Attrs().set("shape", std::vector<int64_t>{1, 2, 12, 5, 1}));
         g.mark_output(g.add_primitive(PrimOp::Exp, {r}, {}));
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
  // window sizes concatenated), a pool that is the kernel's output (13x13 stride 1, a ResNet stem's
  // 3x3 stride 2 over an odd row count), asymmetric pads with a stride, batch 2 (parallel over
  // images), and a 1-D pool (direct window).
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
                                                  {{1, 5, 15, 12}, {3, 3}, {2, 2}, {1, 1, 1, 1}},
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
  // Interpolating Resizes in two stages (rows, then gathers along the innermost axis): a chain
  // (SegFormer-like heads), and one Resize among the pieces of a channel Concat.
  cs.push_back(
      {"linear resize of a linear resize", [] {
         auto linear = [](const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
           std::vector<double> scales, roi(2 * in.size(), 0.0);
           for (size_t i = 0; i < in.size(); ++i) {
             scales.push_back(static_cast<double>(out[i]) / static_cast<double>(in[i]));
             roi[in.size() + i] = 1.0;
           }
           Attrs a;
           a.set("sizes", out).set("scales", scales).set("roi", roi).set("mode", std::string("linear"));
           a.set("coord_mode", std::string("half_pixel")).set("nearest_mode", std::string("round_prefer_floor"));
           a.set("cubic_coeff_a", -0.75).set("exclude_outside", int64_t{0}).set("extrapolation_value", 0.0);
           return a;
         };
         PrimGraph g;
         TensorId x = g.add_input("x", DType::F32, {1, 3, 5, 7});
         TensorId h = g.add_input("h", DType::F32, {1, 2, 20, 28});
         TensorId s = g.add_primitive(PrimOp::Sigmoid, {x}, {});
         TensorId r1 = g.add_primitive(PrimOp::Resize, {s}, linear({1, 3, 5, 7}, {1, 3, 10, 14}));
         TensorId r2 = g.add_primitive(PrimOp::Resize, {r1}, linear({1, 3, 10, 14}, {1, 3, 20, 28}));
         g.mark_output(g.add_primitive(PrimOp::Concat, {r2, g.add_primitive(PrimOp::Relu, {h}, {})},
                                       Attrs().set("axis", int64_t{1})));
         return g;
       }});
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
  // A kernel ending in a channel Concat: channels-last in nhwc and this CPU's blocked format, each
  // piece written in whole vectors of that format's block (8 + 16 + 8 channels: where the block is
  // 8, AVX2; 16 + 16: every CPU).
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

}  // namespace korch
