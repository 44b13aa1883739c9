// Regression tests for the importer fuzzer's findings (fuzz/findings/*.onnx): each input either
// imports and runs on zero inputs, or stops with a korch::Error. Never a crash, a hang, an
// out-of-memory or another exception type.
#include <gtest/gtest.h>

#include <filesystem>

#include "frontend/onnx_import.h"
#include "reference/reference.h"
#include "util/error.h"

namespace korch {
namespace {

TEST(FuzzFindings, ImportAndRunOrCleanError) {
  namespace fs = std::filesystem;
  std::string dir = std::string(KORCH_SOURCE_DIR) + "/fuzz/findings";
  int count = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".onnx") continue;
    ++count;
    SCOPED_TRACE(entry.path().filename().string());
    try {
      ImportedModel m = import_onnx_file(entry.path().string());
      int64_t elements = 0;
      for (const TensorInfo& t : m.graph.tensors()) elements += num_elements(t.shape);
      if (elements > 1000000) continue;
      std::vector<TensorData> inputs;
      for (TensorId t : m.graph.inputs()) inputs.emplace_back(m.graph.tensor(t).dtype, m.graph.tensor(t).shape);
      reference::run_graph(m.graph, inputs);
    } catch (const Error&) {
      // a clear error is a fine outcome
    } catch (const std::exception& e) {
      ADD_FAILURE() << "non-korch exception: " << e.what();
    }
  }
  EXPECT_GE(count, 18);
}

}  // namespace
}  // namespace korch
