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

// The links of one plan, decided step by step (link_layouts).
class Linker {
 public:
  Linker(const PrimGraph& g, const std::vector<Kernel>& kernels, const std::vector<CompiledKernel*>& compiled,
         Mode mode)
      : g_(g), kernels_(kernels), compiled_(compiled), mode_(mode) {
    links_.linked.assign(g.num_tensors(), 0);
    links_.bytes.assign(g.num_tensors(), 0);
    for (TensorId t = 0; t < g.num_tensors(); ++t)
      links_.bytes[t] = num_elements(g.tensor(t).shape) * static_cast<int64_t>(dtype_size(g.tensor(t).dtype));
    producers_.assign(g.num_tensors(), 0);
    readers_.resize(g.num_tensors());
    for (size_t i = 0; i < kernels.size(); ++i) {
      ++producers_[kernels[i].output];
      for (size_t j = 0; j < kernels[i].inputs.size(); ++j)
        readers_[kernels[i].inputs[j]].emplace_back(static_cast<int>(i), static_cast<int>(j));
    }
    is_output_.assign(g.num_tensors(), 0);
    for (TensorId t : g.outputs()) is_output_[t] = 1;
    producer_of_.assign(g.num_tensors(), -1);
    for (size_t i = 0; i < kernels.size(); ++i) producer_of_[kernels[i].output] = static_cast<int>(i);
    format_fixed_.assign(kernels.size(), 0);
  }

  const LayoutLinks& links() const { return links_; }

  // In execution order, so that a kernel's inputs are settled before its output: each tensor
  // whose producer writes an internal layout, with readers switched or rebuilt to agree with it
  // where the mode allows. Tensors between oneDNN kernels are linked; those a Halide kernel
  // (layout_by_strides) produces or reads are returned, to be settled by link_strided once every
  // oneDNN kernel has its layouts.
  std::vector<TensorId> link_in_execution_order() {
    std::vector<TensorId> strided;
    for (size_t i = 0; i < kernels_.size(); ++i) {
      TensorId t = kernels_[i].output;
      if (producers_[t] != 1 || is_output_[t] || readers_[t].empty()) continue;
      if (compiled_[i]->output_layout().empty()) continue;
      bool by_strides = involves_halide_kernel(t);
      if (by_strides && mode_ == Mode::kRelayout) adapt_halide_kernels(t);
      if (!layouts_agree(t) && (mode_ == Mode::kRelayout || mode_ == Mode::kRelayoutOnednnOnly) && !by_strides)
        rebuild_onednn_kernels(t);
      if (!layouts_agree(t)) continue;
      if (by_strides) {
        strided.push_back(t);
        continue;
      }
      link(t);
    }
    return strided;
  }

  // A Halide kernel reads and writes its layout only when every one of its candidate tensors links:
  // a kernel with some tensors nhwc and others dense would transpose through strided loads and
  // stores (10x slower than its dense run on efficientvit_b1's hardswish kernels). Kernels with an
  // unlinkable candidate drop all their links, until no such kernel is left. Then each kernel left
  // complete is verified in its format (verify_strided); one that fails drops its links too, and
  // the rest settle again. What is left of `strided` is linked.
  void link_strided(const std::vector<TensorId>& strided, const std::function<bool(int)>& verify_strided) {
    candidate_.assign(g_.num_tensors(), 0);
    for (TensorId t : strided) candidate_[t] = layouts_agree(t) ? 1 : 0;  // oneDNN kernels rebuilt later may have moved
    verified_.assign(kernels_.size(), -1);
    for (bool dropped = true; dropped;) {
      drop_incomplete_kernels();
      dropped = verify_strided && drop_unverified_kernels(verify_strided);
    }
    for (TensorId t : strided)
      if (candidate_[t]) link(t);
  }

 private:
  // Whether t's producer or one of its readers is a Halide kernel (layout_by_strides).
  bool involves_halide_kernel(TensorId t) const {
    const std::vector<std::pair<int, int>>& rs = readers_[t];
    return compiled_[producer_of_[t]]->layout_by_strides() ||
           std::any_of(rs.begin(), rs.end(),
                       [&](const std::pair<int, int>& r) { return compiled_[r.first]->layout_by_strides(); });
  }

  void link(TensorId t) {
    CompiledKernel& p = *compiled_[producer_of_[t]];
    p.keep_output_layout();
    for (auto [k, j] : readers_[t]) compiled_[k]->keep_input_layout(j);
    links_.linked[t] = 1;
    links_.bytes[t] = std::max(links_.bytes[t], p.output_layout_bytes());
    ++links_.num_linked;
  }

  // True when every reader of t runs after its producer and reads the producer's layout.
  bool layouts_agree(TensorId t) const {
    int producer = producer_of_[t];
    const std::string& key = compiled_[producer]->output_layout();
    return std::all_of(readers_[t].begin(), readers_[t].end(), [&](const std::pair<int, int>& r) {
      return r.first > producer && compiled_[r.first]->input_layout(r.second) == key;
    });
  }

  // Halide kernels take the format of their oneDNN neighbours, and only nhwc or this CPU's blocked
  // format (the two their strided builds are tested in). A tensor between a Halide kernel and
  // oneDNN kernels that can link sets the tensor's format in the Halide kernels: that tensor alone
  // where the kernel can mix formats (use_tensor_format: nhwc beside the blocked format), else the
  // kernel's one format, which the tensor then fixes. A tensor only between Halide kernels takes
  // its producer's format. Tensors are settled in execution order, so a per-tensor switch never
  // undoes an earlier tensor's; a whole-kernel switch may, and link_strided drops what no longer
  // agrees.
  void adapt_halide_kernels(TensorId t) {
    int producer = producer_of_[t];
    bool onednn_side = !compiled_[producer]->layout_by_strides();
    std::string format = onednn_side ? compiled_[producer]->output_format() : "";
    // Every Halide kernel on t: (kernel, its input reading t or -1 for the producer, its format for t).
    struct Side {
      int kernel, input;
      std::string current;
    };
    std::vector<Side> halide_sides;
    if (!onednn_side) halide_sides.push_back({producer, -1, compiled_[producer]->output_format()});
    for (auto [k, j] : readers_[t]) {
      std::string f = compiled_[k]->input_format(j);
      if (f.empty()) return;  // this reader cannot take t linked: nothing links, nothing is fixed
      if (compiled_[k]->layout_by_strides()) {
        halide_sides.push_back({k, j, f});
        continue;
      }
      if (!format.empty() && f != format) return;  // oneDNN sides disagree (not rebuilt for Halide)
      format = f;
      onednn_side = true;
    }
    if (!onednn_side) format = compiled_[producer]->output_format();
    if (format != "nhwc" && format != native_blocked_) return;
    std::vector<const Side*> per_tensor, whole_kernel;
    for (const Side& side : halide_sides) {
      if (side.current == format) continue;
      if (compiled_[side.kernel]->use_tensor_format(side.input, format, false))
        per_tensor.push_back(&side);
      else if (!format_fixed_[side.kernel] && compiled_[side.kernel]->use_format(format, false))
        whole_kernel.push_back(&side);
      else
        return;
    }
    if (onednn_side)
      for (const Side& side : halide_sides) format_fixed_[side.kernel] = 1;
    for (const Side* side : per_tensor) compiled_[side->kernel]->use_tensor_format(side->input, format, true);
    for (const Side* side : whole_kernel) compiled_[side->kernel]->use_format(format, true);
  }

  // Readers of t (all oneDNN kernels) that want another layout are rebuilt for the producer's,
  // when oneDNN keeps a non-reference implementation for all of them; else the producer is
  // rebuilt for the one layout its readers share.
  void rebuild_onednn_kernels(TensorId t) {
    CompiledKernel& p = *compiled_[producer_of_[t]];
    const std::vector<std::pair<int, int>>& rs = readers_[t];
    std::vector<int> others;
    std::string wanted;
    bool shared = true;
    for (auto [k, j] : rs)
      if (compiled_[k]->input_layout(j) != p.output_layout()) {
        others.push_back(k);
        std::string f = compiled_[k]->input_format(j);
        if (f.empty() || (!wanted.empty() && f != wanted)) shared = false;
        wanted = f;
      }
    std::string format = p.output_format();
    bool readers_can =
        std::all_of(others.begin(), others.end(), [&](int k) { return compiled_[k]->use_format(format, false); });
    if (readers_can) {
      for (int k : others) compiled_[k]->use_format(format, true);
    } else if (shared && others.size() == rs.size()) {
      p.use_format(wanted, true);
    }
  }

  // The tensors Halide kernel i offers in its layout.
  std::vector<TensorId> candidate_tensors(size_t i) const {
    std::vector<TensorId> ts;
    for (size_t j = 0; j < kernels_[i].inputs.size(); ++j)
      if (!compiled_[i]->input_layout(static_cast<int>(j)).empty()) ts.push_back(kernels_[i].inputs[j]);
    if (!compiled_[i]->output_layout().empty()) ts.push_back(kernels_[i].output);
    return ts;
  }
  bool all_candidates(const std::vector<TensorId>& ts) const {
    return std::all_of(ts.begin(), ts.end(), [&](TensorId t) { return candidate_[t] != 0; });
  }

  // Drops every candidate of each Halide kernel that has some but not all of its tensors left,
  // until no such kernel is left.
  void drop_incomplete_kernels() {
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < kernels_.size(); ++i) {
        if (!compiled_[i]->layout_by_strides()) continue;
        std::vector<TensorId> ts = candidate_tensors(i);
        bool complete = all_candidates(ts);
        bool any = std::any_of(ts.begin(), ts.end(), [&](TensorId t) { return candidate_[t] != 0; });
        if (complete || !any) continue;
        for (TensorId t : ts) candidate_[t] = 0;
        changed = true;
      }
    }
  }

  // Verifies (once) each complete Halide kernel not verified yet; drops the candidates of those
  // that fail. Whether any were dropped.
  bool drop_unverified_kernels(const std::function<bool(int)>& verify_strided) {
    bool dropped = false;
    for (size_t i = 0; i < kernels_.size(); ++i) {
      if (!compiled_[i]->layout_by_strides() || verified_[i] >= 0) continue;
      std::vector<TensorId> ts = candidate_tensors(i);
      if (ts.empty() || !all_candidates(ts)) continue;
      verified_[i] = verify_strided(static_cast<int>(i)) ? 1 : 0;
      if (verified_[i]) continue;
      for (TensorId t : ts) candidate_[t] = 0;
      dropped = true;
    }
    return dropped;
  }

  const PrimGraph& g_;
  const std::vector<Kernel>& kernels_;
  const std::vector<CompiledKernel*>& compiled_;
  const Mode mode_;
  const std::string native_blocked_ = native_blocked_format();
  LayoutLinks links_;
  std::vector<int> producers_;                             // per tensor: kernels that write it
  std::vector<std::vector<std::pair<int, int>>> readers_;  // per tensor: (kernel, input index)
  std::vector<char> is_output_;                            // per tensor: a graph output
  std::vector<int> producer_of_;                           // per tensor: the kernel that writes it, or -1
  std::vector<char> format_fixed_;                         // per kernel: its format is its oneDNN neighbours'
  std::vector<char> candidate_;                            // per tensor: still to be linked by link_strided
  std::vector<signed char> verified_;                      // per kernel: verify_strided's answer, -1 unasked
};

}  // namespace

bool halide_layout_links_enabled() {
  Mode m = mode();
  return m == Mode::kExact || m == Mode::kRelayout;
}

LayoutLinks link_layouts(const PrimGraph& g, const std::vector<Kernel>& kernels,
                         const std::vector<CompiledKernel*>& compiled, const std::function<bool(int)>& verify_strided) {
  KORCH_CHECK(kernels.size() == compiled.size(), "link_layouts: ", kernels.size(), " kernels but ", compiled.size(),
              " compiled ones");
  Mode m = mode();
  Linker linker(g, kernels, compiled, m);
  if (m == Mode::kOff) return linker.links();
  std::vector<TensorId> strided = linker.link_in_execution_order();
  linker.link_strided(strided, verify_strided);
  return linker.links();
}

}  // namespace korch::cpu
