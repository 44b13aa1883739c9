// Algebraic rewrites of the primitive graph, run once after import and before
// orchestration. Each rule replaces a pattern by one that computes the same values in exact
// arithmetic (only floating-point rounding differs) with fewer operations; the pipeline
// runs the rules to a fixpoint and removes what they left unused.
//
// Set KORCH_REWRITE=off to import graphs exactly as fission made them.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "ir/prim_graph.h"

namespace korch {

struct RewriteStats {
  std::map<std::string, int> fired;  // rule name -> times applied
  int total() const;
};

PrimGraph rewrite_graph(const PrimGraph& graph, RewriteStats* stats = nullptr);
// False when the environment sets KORCH_REWRITE=off (or 0 / false / none).
bool rewrites_enabled_by_default();

// The rules (one per file), each a Rewriter::Rule.
class Rewriter;
std::optional<TensorId> remove_identity_resize(Rewriter& r, PrimId p);
std::optional<TensorId> split_pointwise_conv_over_concat(Rewriter& r, PrimId p);
std::optional<TensorId> commute_pointwise_conv_with_resize(Rewriter& r, PrimId p);
std::optional<TensorId> compose_channel_linear_maps(Rewriter& r, PrimId p);
std::optional<TensorId> fold_space_to_depth_into_conv(Rewriter& r, PrimId p);
std::optional<TensorId> defer_softmax_normalization(Rewriter& r, PrimId p);

}  // namespace korch
