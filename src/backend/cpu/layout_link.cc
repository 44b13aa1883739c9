// Layout linking between oneDNN kernels (see layout_link.h).
#include "backend/cpu/layout_link.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "util/error.h"

namespace korch::cpu {

namespace {

enum class Mode { kOff, kExact, kRelayout };

Mode mode() {
  const char* v = std::getenv("KORCH_LAYOUT_LINK");
  std::string s = v ? v : "";
  if (s == "0") return Mode::kOff;
  if (s == "exact") return Mode::kExact;
  return Mode::kRelayout;
}

}  // namespace

bool halide_layout_links_enabled() {
  const char* v = std::getenv("KORCH_LAYOUT_LINK");
  std::string s = v ? v : "";
  return s != "0" && s != "onednn";
}

LayoutLinks link_layouts(const PrimGraph& g, const std::vector<Kernel>& kernels,
                         const std::vector<std::unique_ptr<CompiledKernel>>& compiled) {
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
  // In execution order, so that a kernel's inputs are settled before its
  // output.
  for (size_t i = 0; i < kernels.size(); ++i) {
    TensorId t = kernels[i].output;
    const std::vector<std::pair<int, int>>& rs = readers[t];
    if (producers[t] != 1 || is_output[t] || rs.empty()) continue;
    CompiledKernel& p = *compiled[i];
    if (p.output_layout().empty()) continue;
    auto matches = [&] {
      return std::all_of(rs.begin(), rs.end(), [&](const std::pair<int, int>& r) {
        return r.first > static_cast<int>(i) && compiled[r.first]->input_layout(r.second) == p.output_layout();
      });
    };
    bool by_strides = p.layout_by_strides() || std::any_of(rs.begin(), rs.end(), [&](const std::pair<int, int>& r) {
                        return compiled[r.first]->layout_by_strides();
                      });
    if (!matches() && m == Mode::kRelayout && !by_strides) {
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
    if (!matches()) continue;
    p.keep_output_layout();
    for (auto [k, j] : rs) compiled[k]->keep_input_layout(j);
    links.linked[t] = 1;
    links.bytes[t] = std::max(links.bytes[t], p.output_layout_bytes());
    ++links.num_linked;
  }
  return links;
}

}  // namespace korch::cpu
