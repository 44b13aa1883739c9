// Softmax attention as korch's primitives show it after fission and the
// defer_softmax_normalization rewrite:
//   S  = MatMul(Q, Kt)                       Q [..., M, Dk], Kt [..., Dk, N]
//   S' = S (op c)*                            elementwise steps on the scores, each with one other
//                                             operand broadcast to S's shape (a scale, a mask)
//   E  = Exp(Sub(S', ReduceMax(S', last)))    (reductions over the last axis, kept)
//   Y  = Div(MatMul(E, V), ReduceSum(E, last)) V [..., N, Dv], Y [..., M, Dv]
// match_attention finds it ending at a Div; the set of these primitives is one kernel that reads
// Q, Kt, V (and the score operands) and writes only Y: the one kind of kernel with two Linear
// primitives korch offers. The set is convex and single-sink because every intermediate tensor
// is read only inside it (checked), and the batch dims of Q, Kt, V and Y are equal (checked), so
// a kernel may walk blocks of query rows with all keys of one batch entry.
// The extended pattern also takes in the layout chains around it that a strided view expresses
// (ir/strided_view.h): the Slice/Reshape/Transpose chains that make Q, Kt and V out of the
// tensors before them (a scalar scale on Q's chain too, folded into the scores), and the
// Transpose/Reshape chain after Y; each of those intermediates is read only by the next link.
// Exporters wrap every attention in such chains (heads split from a fused QKV projection,
// transposed, merged back), so the fused kernel reads and writes the neighbours' tensors directly.
#pragma once
#include <optional>
#include <vector>

#include "ir/prim_graph.h"
#include "ir/strided_view.h"
#include "plan/kernel.h"

namespace korch {

// One operand (or the output) of the attention as a strided view of a tensor outside the
// pattern: `tensor` is what the core reads (Q, Kt, V) or writes (Y); `base` the kernel input the
// view starts from (or the kernel's output, for Y); `chain` the layout primitives between them.
struct AttentionView {
  TensorId tensor = kNone, base = kNone;
  std::vector<PrimId> chain;
  StridedView view;  // of tensor's elements in base
};

struct AttentionPattern {
  PrimId scores = kNone;            // S = MatMul(Q, Kt)
  std::vector<PrimId> score_steps;  // the elementwise steps S -> S', in order
  std::vector<int> score_operand;   // per step: which of its two inputs (0, 1) is the other operand
  PrimId row_max = kNone, shift = kNone, exp = kNone, row_sum = kNone;
  PrimId values = kNone;     // MatMul(E, V)
  PrimId normalize = kNone;  // Div(E V, rowsum)
  TensorId q = kNone, kt = kNone, v = kNone, output = kNone;
  std::vector<PrimId> prims;  // all of the above, ascending
  // The extended pattern's views (with_views); empty chains and dense views in the core one.
  AttentionView q_view, kt_view, v_view, y_view;
  float q_scale = 1;                  // scalar factor on Q's chain (folded into the scores)
  std::vector<PrimId> q_scale_prims;  // the Mul/Div primitives that make it
  bool has_views() const;
};

// The attention pattern whose final Div is `div`, or nullopt. consumers: g.consumers().
std::optional<AttentionPattern> match_attention(const PrimGraph& g, PrimId div,
                                                const std::vector<std::vector<PrimId>>& consumers);
// Every attention pattern of the graph.
std::vector<AttentionPattern> find_attention(const PrimGraph& g);
// The pattern extended by the layout chains around it (nullopt when there are none).
std::optional<AttentionPattern> with_views(const PrimGraph& g, const AttentionPattern& core,
                                           const std::vector<std::vector<PrimId>>& consumers);
// The pattern when kernel k is exactly one attention pattern's primitives (core or extended).
std::optional<AttentionPattern> attention_of_kernel(const PrimGraph& g, const Kernel& k);

}  // namespace korch
