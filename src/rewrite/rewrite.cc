#include "rewrite/rewrite.h"

#include <cstdlib>
#include <utility>
#include <vector>

#include "rewrite/rewriter.h"

namespace korch {

int RewriteStats::total() const {
  int n = 0;
  for (const auto& [rule, count] : fired) n += count;
  return n;
}

bool rewrites_enabled_by_default() {
  const char* v = std::getenv("KORCH_REWRITE");
  if (!v) return true;
  std::string s = v;
  return !(s == "off" || s == "0" || s == "false" || s == "none");
}

PrimGraph rewrite_graph(const PrimGraph& graph, RewriteStats* stats) {
  // In this order: identity resizes go first so that a Concat of resized branches shows the
  // pointwise Conv behind it; splitting that Conv over the Concat lets each part commute
  // with its branch's Resize; a part that then follows another channel-linear map merges
  // with it. A Conv after a space-to-depth (Focus) absorbs it. A softmax's division moves
  // past the MatMul it feeds (attention's P V).
  const std::vector<std::pair<const char*, Rewriter::Rule>> rules = {
      {"remove_identity_resize", remove_identity_resize},
      {"split_pointwise_conv_over_concat", split_pointwise_conv_over_concat},
      {"commute_pointwise_conv_with_resize", commute_pointwise_conv_with_resize},
      {"compose_channel_linear_maps", compose_channel_linear_maps},
      {"fold_space_to_depth_into_conv", fold_space_to_depth_into_conv},
      {"defer_softmax_normalization", defer_softmax_normalization},
  };
  PrimGraph g = graph;
  // Every rule removes work, so this reaches a fixpoint; the bound only guards against a bug.
  for (int round = 0; round < 8; ++round) {
    int fired_this_round = 0;
    for (const auto& [name, rule] : rules) {
      int fired = 0;
      PrimGraph next = Rewriter::apply(g, rule, &fired);
      if (fired == 0) continue;
      g = next.without_dead_code();
      fired_this_round += fired;
      if (stats) stats->fired[name] += fired;
    }
    if (fired_this_round == 0) break;
  }
  return g;
}

}  // namespace korch
