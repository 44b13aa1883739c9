// Layout linking between oneDNN kernels (see layout_link.h).
#include "backend/cpu/layout_link.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "util/error.h"

namespace korch::cpu {

namespace {

// KORCH_LAYOUT_LINK: 0 = off, exact = only layouts that already match, onednn = rebuild
// oneDNN kernels to match but keep Halide kernels dense, anything else = all links.
enum class Mode { kOff, kExact, kRelayoutOnednnOnly, kRelayout };

Mode mode() {
  const char* v = std::getenv("KORCH_LAYOUT_LINK");
  std::string s = v ? v : "";
  if (s == "0") return Mode::kOff;
  if (s == "exact") return Mode::kExact;
  if (s == "onednn") return Mode::kRelayoutOnednnOnly;
  return Mode::kRelayout;
}

}  // namespace

bool halide_layout_links_enabled() {
  Mode m = mode();
  return m == Mode::kExact || m == Mode::kRelayout;
}

LayoutLinks link_layouts(const PrimGraph& g, const std::vector<Kernel>& kernels,
                         const std::vector<CompiledKernel*>& compiled, const std::function<bool(int)>& verify_strided) {
  KORCH_CHECK(kernels.size() == compiled.size(), "link_layouts: ", kernels.size(), " kernels but ", compiled.size(),
              " compiled ones");
  LayoutLinks links;
  links.linked.assign(g.num_tensors(), 0);
  links.bytes.assign(g.num_tensors(), 0);
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    links.bytes[t] = num_elements(g.tensor(t).shape) * static_cast<int64_t>(dtype_size(g.tensor(t).dtype));
  Mode m = mode();
  if (m == Mode::kOff) return links;
  std::vector<int> producers(g.num_tensors(), 0);
  std::vector<std::vector<std::pair<int, int>>> readers(g.num_tensors());  // (kernel, input index)
  for (size_t i = 0; i < kernels.size(); ++i) {
    ++producers[kernels[i].output];
    for (size_t j = 0; j < kernels[i].inputs.size(); ++j)
      readers[kernels[i].inputs[j]].emplace_back(static_cast<int>(i), static_cast<int>(j));
  }
  std::vector<char> is_output(g.num_tensors(), 0);
  for (TensorId t : g.outputs()) is_output[t] = 1;
  std::vector<int> producer_of(g.num_tensors(), -1);
  for (size_t i = 0; i < kernels.size(); ++i) producer_of[kernels[i].output] = static_cast<int>(i);
  auto link = [&](TensorId t) {
    CompiledKernel& p = *compiled[producer_of[t]];
    p.keep_output_layout();
    for (auto [k, j] : readers[t]) compiled[k]->keep_input_layout(j);
    links.linked[t] = 1;
    links.bytes[t] = std::max(links.bytes[t], p.output_layout_bytes());
    ++links.num_linked;
  };
  // True when every reader of t runs after its producer and reads the producer's layout.
  auto layouts_agree = [&](TensorId t) {
    int producer = producer_of[t];
    const std::string& key = compiled[producer]->output_layout();
    return std::all_of(readers[t].begin(), readers[t].end(), [&](const std::pair<int, int>& r) {
      return r.first > producer && compiled[r.first]->input_layout(r.second) == key;
    });
  };
  // Halide kernels take the format of their oneDNN neighbours, each kernel one format, and only
  // nhwc or this CPU's blocked format (the two their strided builds are tested in). A tensor between a
  // Halide kernel and oneDNN kernels that can link fixes the Halide kernels' format; a tensor only
  // between Halide kernels switches an unfixed reader to its producer's format without fixing it.
  std::vector<char> format_fixed(kernels.size(), 0);
  const std::string native_blocked = native_blocked_format();
  auto adapt_halide_kernels = [&](TensorId t) {
    int producer = producer_of[t];
    bool onednn_side = !compiled[producer]->layout_by_strides();
    std::string format = onednn_side ? compiled[producer]->output_format() : "";
    // Every Halide kernel on t with its current format (one per kernel, for all its tensors).
    std::vector<std::pair<int, std::string>> halide_sides;
    if (!onednn_side) halide_sides.emplace_back(producer, compiled[producer]->output_format());
    for (auto [k, j] : readers[t]) {
      std::string f = compiled[k]->input_format(j);
      if (f.empty()) return;  // this reader cannot take t linked: nothing links, nothing is fixed
      if (compiled[k]->layout_by_strides()) {
        halide_sides.emplace_back(k, f);
        continue;
      }
      if (!format.empty() && f != format) return;  // oneDNN sides disagree (not rebuilt for Halide)
      format = f;
      onednn_side = true;
    }
    if (!onednn_side) format = compiled[producer]->output_format();
    if (format != "nhwc" && format != native_blocked) return;
    std::vector<int> to_switch;
    for (const auto& [k, current] : halide_sides) {
      if (current == format) continue;
      if (format_fixed[k] || !compiled[k]->use_format(format, false)) return;
      to_switch.push_back(k);
    }
    if (onednn_side)
      for (const auto& side : halide_sides) format_fixed[side.first] = 1;
    for (int k : to_switch) compiled[k]->use_format(format, true);
  };
  std::vector<TensorId> strided;  // links that involve a Halide kernel (layout_by_strides)
  // In execution order, so that a kernel's inputs are settled before its
  // output.
  for (size_t i = 0; i < kernels.size(); ++i) {
    TensorId t = kernels[i].output;
    const std::vector<std::pair<int, int>>& rs = readers[t];
    if (producers[t] != 1 || is_output[t] || rs.empty()) continue;
    CompiledKernel& p = *compiled[i];
    if (p.output_layout().empty()) continue;
    bool by_strides = p.layout_by_strides() || std::any_of(rs.begin(), rs.end(), [&](const std::pair<int, int>& r) {
                        return compiled[r.first]->layout_by_strides();
                      });
    if (by_strides && m == Mode::kRelayout) adapt_halide_kernels(t);
    if (!layouts_agree(t) && (m == Mode::kRelayout || m == Mode::kRelayoutOnednnOnly) && !by_strides) {
      // Readers that want another layout are rebuilt for the producer's, when
      // oneDNN keeps a non-reference implementation for all of them; else the
      // producer is rebuilt for the one layout its readers share.
      std::vector<int> others;
      std::string wanted;
      bool shared = true;
      for (auto [k, j] : rs)
        if (compiled[k]->input_layout(j) != p.output_layout()) {
          others.push_back(k);
          std::string f = compiled[k]->input_format(j);
          if (f.empty() || (!wanted.empty() && f != wanted)) shared = false;
          wanted = f;
        }
      std::string format = p.output_format();
      bool readers_can =
          std::all_of(others.begin(), others.end(), [&](int k) { return compiled[k]->use_format(format, false); });
      if (readers_can) {
        for (int k : others) compiled[k]->use_format(format, true);
      } else if (shared && others.size() == rs.size()) {
        p.use_format(wanted, true);
      }
    }
    if (!layouts_agree(t)) continue;
    if (by_strides) {
      strided.push_back(t);  // settled below, once every oneDNN kernel has its layouts
      continue;
    }
    link(t);
  }
  // A Halide kernel reads and writes its layout only when every one of its candidate tensors links:
  // a kernel with some tensors nhwc and others dense would transpose through strided loads and
  // stores (10x slower than its dense run on efficientvit_b1's hardswish kernels). Kernels with an
  // unlinkable candidate drop all their links, until no such kernel is left.
  std::vector<char> candidate(g.num_tensors(), 0);
  for (TensorId t : strided) candidate[t] = layouts_agree(t) ? 1 : 0;  // oneDNN kernels rebuilt later may have moved
  auto candidate_tensors = [&](size_t i) {
    std::vector<TensorId> ts;
    for (size_t j = 0; j < kernels[i].inputs.size(); ++j)
      if (!compiled[i]->input_layout(static_cast<int>(j)).empty()) ts.push_back(kernels[i].inputs[j]);
    if (!compiled[i]->output_layout().empty()) ts.push_back(kernels[i].output);
    return ts;
  };
  auto all_candidates = [&](const std::vector<TensorId>& ts) {
    return std::all_of(ts.begin(), ts.end(), [&](TensorId t) { return candidate[t] != 0; });
  };
  // Then each kernel left complete is verified in its format (verify_strided); one that fails drops
  // its links too, and the rest settle again.
  std::vector<signed char> verified(kernels.size(), -1);
  for (bool dropped = true; dropped;) {
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < kernels.size(); ++i) {
        if (!compiled[i]->layout_by_strides()) continue;
        std::vector<TensorId> ts = candidate_tensors(i);
        bool complete = all_candidates(ts);
        bool any = std::any_of(ts.begin(), ts.end(), [&](TensorId t) { return candidate[t] != 0; });
        if (complete || !any) continue;
        for (TensorId t : ts) candidate[t] = 0;
        changed = true;
      }
    }
    dropped = false;
    if (!verify_strided) break;
    for (size_t i = 0; i < kernels.size(); ++i) {
      if (!compiled[i]->layout_by_strides() || verified[i] >= 0) continue;
      std::vector<TensorId> ts = candidate_tensors(i);
      if (ts.empty() || !all_candidates(ts)) continue;
      verified[i] = verify_strided(static_cast<int>(i)) ? 1 : 0;
      if (verified[i]) continue;
      for (TensorId t : ts) candidate[t] = 0;
      dropped = true;
    }
  }
  for (TensorId t : strided)
    if (candidate[t]) link(t);
  return links;
}

}  // namespace korch::cpu
