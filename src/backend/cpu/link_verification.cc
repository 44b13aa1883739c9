// A Halide kernel's strided (linked) build against its dense build (see link_verification.h).
#include "backend/cpu/link_verification.h"

#include <cstring>
#include <exception>
#include <vector>

#include "plan/random_inputs.h"
#include "reference/compare.h"
#include "util/error.h"

namespace korch {

bool strided_layout_matches_dense(const PrimGraph& g, const Kernel& k, cpu::CompiledKernel& compiled,
                                  std::string* why) {
  // The formats the tensors are stored in (for the messages): each tensor is permuted into its own.
  std::string format = compiled.output_format();
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    std::string f = compiled.input_format(static_cast<int>(i));
    if (!f.empty() && f != format) format += (format.empty() ? "" : "+") + f;
  }
  try {
    std::vector<TensorData> inputs = random_kernel_inputs(g, k, static_cast<uint32_t>(k.hash));
    std::vector<const void*> dense_ptrs, strided_ptrs;
    for (const TensorData& t : inputs) dense_ptrs.push_back(t.raw());
    const TensorInfo& out = g.tensor(k.output);
    TensorData want(out.dtype, out.shape);
    compiled.reset_to_dense();
    compiled.run(dense_ptrs, want.raw());

    std::vector<TensorData> stored;  // the inputs that link, in `format`
    stored.reserve(inputs.size());
    strided_ptrs = dense_ptrs;
    for (size_t i = 0; i < k.inputs.size(); ++i) {
      if (g.tensor(k.inputs[i]).is_constant() || compiled.input_layout(static_cast<int>(i)).empty()) continue;
      stored.push_back(cpu::permute_activation(inputs[i], compiled.input_format(static_cast<int>(i)), true));
      strided_ptrs[i] = stored.back().raw();
      compiled.keep_input_layout(static_cast<int>(i));
    }
    bool output_linked = !compiled.output_layout().empty();
    if (output_linked) compiled.keep_output_layout();
    TensorData got(out.dtype, out.shape);
    compiled.run(strided_ptrs, got.raw());
    compiled.reset_to_dense();
    if (output_linked) got = cpu::permute_activation(got, compiled.output_format(), false);
    Comparison c = compare_tensors(got, want, Tolerance{1e-4, 1e-3});
    if (!c.pass && why)
      *why = str_cat("its ", format, " build differs from its dense build (max abs ", c.max_abs_error, ", ",
                     c.mismatches, " elements) in ", compiled.describe());
    return c.pass;
  } catch (const std::exception& e) {
    compiled.reset_to_dense();
    if (why) *why = str_cat("its ", format, " build failed: ", e.what(), " in ", compiled.describe());
    return false;
  }
}

}  // namespace korch
