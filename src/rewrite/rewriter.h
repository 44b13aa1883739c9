// Rewriter: the engine every algebraic rewrite rule runs on. One rule at a time walks the
// source graph in topological order and copies it into a new graph; at each primitive the
// rule may emit replacement primitives instead of the copy. A rule reads the source graph
// (producers, consumers, constants) and emits into the new one through mapped tensor ids.
// Replaced primitives that nothing reads any more are dropped by dead-code removal at the
// end of the pipeline. Graph outputs keep their names.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/prim_graph.h"

namespace korch {

class Rewriter {
 public:
  explicit Rewriter(const PrimGraph& source);

  // The source graph and facts about it.
  const PrimGraph& source() const { return source_; }
  const Primitive& prim(PrimId p) const { return source_.prim(p); }
  const TensorInfo& tensor(TensorId t) const { return source_.tensor(t); }
  // The primitive computing t if it has op `op`, else nullptr.
  const Primitive* producer(TensorId t, PrimOp op) const;
  // True if t is read by exactly one primitive and is not a graph output, so its producer
  // may be replaced without duplicating work.
  bool single_use(TensorId t) const;

  // The new graph: the tensor that stands for source tensor t there.
  TensorId mapped(TensorId t) const;
  const TensorInfo& new_tensor(TensorId t) const { return target_.tensor(t); }
  TensorId emit(PrimOp op, std::vector<TensorId> new_inputs, Attrs attrs, int32_t origin);
  TensorId constant(const std::string& name, TensorData value);
  // An origin for primitives a rule derives from `origin` ("NAME#suffix", same op type), so
  // per-op plans keep them apart from what is left of the original operator.
  int32_t derived_origin(int32_t origin, const std::string& suffix);

  // A rule returns the new-graph tensor that replaces primitive p's output, or nothing to
  // keep p as it is.
  using Rule = std::function<std::optional<TensorId>(Rewriter&, PrimId)>;
  // Runs `rule` over the whole source graph; returns the new graph and how often it fired.
  static PrimGraph apply(const PrimGraph& source, const Rule& rule, int* fired);

 private:
  const PrimGraph& source_;
  PrimGraph target_;
  std::vector<TensorId> map_;
  std::vector<int> uses_;
  std::vector<char> is_output_;
};

// Shared pattern facts.
// A Conv that mixes channels pixel by pixel: 1x1 (any rank), stride 1, no padding, group 1.
bool is_pointwise_conv(const PrimGraph& g, const Primitive& conv);
// A Resize that changes only spatial axes (2..) and is linear in its input (not
// tf_crop_and_resize, whose extrapolation value is not), and grows the spatial size.
bool is_spatial_upsample(const PrimGraph& g, const Primitive& resize);

}  // namespace korch
