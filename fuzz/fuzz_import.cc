// libFuzzer target: bytes -> onnx::ModelProto -> korch import -> reference execution.
//
// Contract under test: every malformed or unsupported model must be rejected with a
// korch::Error. Anything else -- another exception type, a crash, an abort, a hang, a
// sanitizer report or an out-of-memory -- is a finding.
//
// External data is resolved against a directory that does not exist, so the fuzzer can
// never read real files from disk.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "frontend/onnx_import.h"
#include "ir/prim_graph.h"
#include "ir/tensor_data.h"
#include "onnx/onnx_pb.h"
#include "reference/reference.h"
#include "util/error.h"

// Optional size cap (a proposed korch API, see fuzz/README.md). Declared weak so this target
// also builds against a korch without it; when present, the fuzzer caps tensors at 256 MiB
// so that "valid but absurdly large" shapes must be rejected with korch::Error.
namespace korch {
void set_max_tensor_bytes(size_t bytes) __attribute__((weak));
}

namespace {

// Directory used as base_dir; it must not exist.
const char* kNoSuchDir = "/nonexistent-korch-fuzz-dir/empty";

// Graphs whose tensors hold more elements than this in total are imported but not
// executed (the reference executor is naive and the fuzzer would spend its time there).
constexpr int64_t kMaxRunElements = 1'000'000;

// Total elements over all tensors of the graph, saturating at `limit` + 1; -1 if some
// shape is invalid (negative dimension) -- which the verifier should already reject.
int64_t total_elements(const korch::PrimGraph& g, int64_t limit) {
  int64_t total = 0;
  for (const korch::TensorInfo& t : g.tensors()) {
    int64_t n = 1;
    for (int64_t d : t.shape) {
      if (d < 0) return -1;
      if (d == 0) {
        n = 0;
        break;
      }
      if (n > limit / d) return limit + 1;
      n *= d;
    }
    total += n;
    if (total > limit) return limit + 1;
  }
  return total;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (korch::set_max_tensor_bytes) korch::set_max_tensor_bytes(size_t{256} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  onnx::ModelProto model;
  if (!model.ParseFromArray(data, static_cast<int>(size))) return 0;

  korch::ImportedModel imported;
  try {
    imported = korch::import_onnx_model(model, kNoSuchDir, {});
  } catch (const korch::Error&) {
    return 0;  // the expected way to reject bad input
  }

  const korch::PrimGraph& g = imported.graph;
  int64_t total = total_elements(g, kMaxRunElements);
  if (total < 0) {
    // An imported graph must be valid: a negative dimension is bad input that slipped through.
    std::fprintf(stderr, "fuzz_import: import accepted a graph with a negative dimension\n");
    std::abort();
  }
  if (total > kMaxRunElements) return 0;

  std::vector<korch::TensorData> inputs;
  try {
    for (korch::TensorId id : g.inputs()) {
      const korch::TensorInfo& info = g.tensor(id);
      inputs.emplace_back(info.dtype, info.shape);  // zero-filled
    }
    std::vector<korch::TensorData> outputs = korch::reference::run_graph(g, inputs);
    (void)outputs;
  } catch (const korch::Error&) {
    return 0;
  }
  return 0;
}
