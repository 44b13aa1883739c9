// Timing a kernel with its layout conversions skipped (see link_savings.h).
#include "backend/cpu/link_savings.h"

#include <algorithm>
#include <utility>

#include "backend/timing.h"

namespace korch::cpu {

namespace {

// Bytes of a tensor in the dense layout.
double dense_bytes(const PrimGraph& g, TensorId t) {
  return static_cast<double>(num_elements(g.tensor(t).shape)) * dtype_size(g.tensor(t).dtype);
}

// (pointer, dense bytes) of a kernel's inputs: what CacheState::prepare reads back.
std::vector<MemorySpan> input_spans(const PrimGraph& g, const Kernel& k, const std::vector<const void*>& inputs) {
  std::vector<MemorySpan> spans;
  for (size_t i = 0; i < inputs.size(); ++i)
    spans.emplace_back(inputs[i], static_cast<int64_t>(dense_bytes(g, k.inputs[i])));
  return spans;
}

}  // namespace

std::vector<double> measure_link_savings(const PrimGraph& g, const Kernel& k, CompiledKernel& compiled,
                                         const std::vector<const void*>& inputs, double dense_seconds,
                                         CacheState& cache_state, TimingStats* stats) {
  std::vector<int> linked_inputs;
  for (size_t i = 0; i < k.inputs.size(); ++i)
    if (!g.tensor(k.inputs[i]).is_constant() && !compiled.input_layout(static_cast<int>(i)).empty())
      linked_inputs.push_back(static_cast<int>(i));
  bool linked_output = !compiled.output_layout().empty();
  if (linked_inputs.empty() && !linked_output) return {};
  // A Halide kernel reads and writes a layout through strides at about its dense speed: it saves
  // nothing itself, but its candidate tensors (0) let the oneDNN kernels around it link. Its
  // links are all-or-nothing at run time (link_layouts); the BLP takes them together
  // (SelectionProblem::Candidate::links_together).
  if (compiled.layout_by_strides()) {
    std::vector<double> savings(1 + k.inputs.size(), -1.0);
    if (linked_output) savings[0] = 0.0;
    for (int i : linked_inputs) savings[1 + i] = 0.0;
    return savings;
  }
  // Buffers in the internal layouts (padded blocked layouts may be larger than the dense ones),
  // filled with a harmless value: only the time matters.
  std::vector<std::vector<float>> buffers;
  std::vector<const void*> ptrs = inputs;
  std::vector<MemorySpan> read_back = input_spans(g, k, inputs);
  buffers.reserve(linked_inputs.size() + 1);
  auto buffer = [&](int64_t bytes) {
    buffers.emplace_back(static_cast<size_t>((bytes + 3) / 4 + 16), 0.25f);
    return buffers.back().data();
  };
  for (int i : linked_inputs) {
    int64_t bytes = compiled.input_layout_bytes(i);
    compiled.keep_input_layout(i);
    ptrs[i] = buffer(bytes);
    read_back[i] = {ptrs[i], bytes};
  }
  int64_t out_bytes = linked_output ? compiled.output_layout_bytes() : 0;
  if (linked_output) compiled.keep_output_layout();
  void* out = buffer(std::max<int64_t>(out_bytes, static_cast<int64_t>(dense_bytes(g, k.output))));
  std::vector<MemorySpan> touched = compiled.held_memory();
  touched.emplace_back(out, std::max<int64_t>(out_bytes, static_cast<int64_t>(dense_bytes(g, k.output))));
  double linked_seconds =
      median_run_seconds([&] { compiled.run(ptrs, out); }, 5, 0.02, [&] { cache_state.prepare(read_back, touched); },
                         stats, kProfileMedianPrecision);
  double saved = std::max(0.0, dense_seconds - linked_seconds);
  double total_bytes = linked_output ? dense_bytes(g, k.output) : 0.0;
  for (int i : linked_inputs) total_bytes += dense_bytes(g, k.inputs[i]);
  std::vector<double> savings(1 + k.inputs.size(), -1.0);
  double share = total_bytes > 0 ? saved / total_bytes : 0.0;
  if (linked_output) savings[0] = share * dense_bytes(g, k.output);
  for (int i : linked_inputs) savings[1 + i] = share * dense_bytes(g, k.inputs[i]);
  return savings;
}

}  // namespace korch::cpu
