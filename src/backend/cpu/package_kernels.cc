// The CPU backend's ahead-of-time compiler for `korch export` (Backend::ahead_of_time): each
// kernel of a plan as the package runtime (src/export/runtime/korch_model.cc) will run it, with
// the choices the CPU backend makes at run time: oneDNN for a kernel with one Linear primitive
// where oneDNN takes it and the fused attention for the attention pattern's two (built when the
// package loads), Halide compiled ahead of time (no_runtime objects, for the target korch's JIT
// uses, HL_JIT_TARGET included) for the memory-bound ones,
// the reference interpreter elsewhere. One Halide standalone runtime object serves every kernel;
// the package checks at load that the CPU has every feature the target needs.
#include <Halide.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend/cpu/compiled_kernel.h"
#include "backend/cpu/cpu_backend.h"
#include "export/runtime/package_format.h"
#include "util/error.h"

#ifndef KORCH_HALIDE_RUNTIME_HEADER
#define KORCH_HALIDE_RUNTIME_HEADER ""
#endif

namespace korch::cpu {

namespace fs = std::filesystem;

namespace {

// x86 features the Halide target requires, by the names of GCC's __builtin_cpu_supports.
std::vector<std::string> required_cpu_features(const Halide::Target& t) {
  using T = Halide::Target;
  std::vector<std::string> f;
  auto add = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (std::find(f.begin(), f.end(), n) == f.end()) f.push_back(n);
  };
  if (t.arch != T::X86) return f;
  if (t.has_feature(T::SSE41)) add({"sse4.1"});
  if (t.has_feature(T::AVX)) add({"avx"});
  if (t.has_feature(T::AVX2)) add({"avx2"});
  if (t.has_feature(T::FMA)) add({"fma"});
  if (t.has_feature(T::F16C)) add({"f16c"});
  if (t.has_feature(T::AVX512)) add({"avx512f", "avx512cd"});
  if (t.has_feature(T::AVX512_Skylake)) add({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"});
  if (t.has_feature(T::AVX512_Cannonlake))
    add({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512ifma", "avx512vbmi"});
  if (t.has_feature(T::AVX512_SapphireRapids))
    add({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512ifma", "avx512vbmi", "avx512vnni",
         "avx512bf16"});
  return f;
}

void make_folder(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create folder '", dir.string(), "': ", ec.message());
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail("cannot write '", path.string(), "'");
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!f) fail("cannot write '", path.string(), "' (disk full?)");
}

class CpuPackageCompiler : public AheadOfTimeCompiler {
 public:
  PackagedKernels compile(const PrimGraph& g, const std::vector<Kernel>& kernels, const std::string& package_dir,
                          std::ostream& log) override {
    const fs::path dir = fs::path(package_dir) / "kernels";
    make_folder(dir);
    Halide::Target target = halide_target().without_feature(Halide::Target::JIT);
    Halide::Target kernel_target = target.with_feature(Halide::Target::NoRuntime);
    PackagedKernels p;
    p.target = target.to_string();
    p.required_features = required_cpu_features(target);
    p.implementation.assign(kernels.size(), korch_pkg::kBackendReference);
    p.aot_index.assign(kernels.size(), -1);
    p.description.assign(kernels.size(), "reference fallback");
    for (size_t i = 0; i < kernels.size(); ++i) {
      const Kernel& k = kernels[i];
      std::string why;
      if (!has_kernel_dtypes(g, k, &why)) {
        // the reference fallback runs it
      } else if (k.num_linear >= 1) {
        if (auto c = compile_library_kernel(g, k, &why)) {
          p.implementation[i] = korch_pkg::kBackendOneDNN;
          p.description[i] = c->describe();
        }
      } else if (k.num_linear == 0) {
        Halide::Pipeline pipeline;
        std::vector<Halide::ImageParam> params;
        std::string desc;
        if (build_halide_pipeline(g, k, target, &pipeline, &params, &desc, &why)) {
          std::string name = "korch_k" + std::to_string(i);
          std::vector<Halide::Argument> args(params.begin(), params.end());
          try {
            pipeline.compile_to_file((dir / name).string(), args, name, kernel_target);
            p.implementation[i] = korch_pkg::kBackendHalide;
            p.aot_index[i] = static_cast<int32_t>(p.aot_names.size());
            p.aot_names.push_back(name);
            p.objects.push_back("kernels/" + name + ".o");
            p.description[i] = desc + " (aot)";
          } catch (const Halide::Error& e) {
            why = str_cat("Halide: ", e.what());
          }
        }
      }
      if (p.implementation[i] == korch_pkg::kBackendReference) {
        ++p.fallback_kernels;
        log << "  kernel " << i << ": reference fallback (" << why << ")\n";
      } else if (p.implementation[i] == korch_pkg::kBackendHalide) {
        ++p.aot_kernels;
      } else {
        ++p.library_kernels;
      }
    }
    try {
      Halide::compile_standalone_runtime((dir / "halide_runtime.o").string(), target);
    } catch (const Halide::Error& e) {
      fail("cannot compile the Halide runtime for ", target.to_string(), ": ", e.what());
    }
    p.objects.push_back("kernels/halide_runtime.o");
    return p;
  }

  // kernels/kernels.cc: the package id and the table korch_kernels.h declares.
  std::vector<std::string> write_kernel_table(const std::vector<Kernel>& kernels, const PackagedKernels& p,
                                              const std::string& package_id, const std::string& package_dir) override {
    std::ostringstream reg;
    reg << "// Generated by `korch export`: the package's ahead-of-time Halide kernels.\n"
           "#include <HalideRuntime.h>\n\n#include \"korch_kernels.h\"\n";
    for (const std::string& n : p.aot_names) reg << "#include \"" << n << ".h\"\n";
    reg << "\nnamespace {\n";
    for (size_t i = 0; i < p.aot_names.size(); ++i) {
      auto at = std::find(p.aot_index.begin(), p.aot_index.end(), static_cast<int32_t>(i));
      if (at == p.aot_index.end() || static_cast<size_t>(at - p.aot_index.begin()) >= kernels.size())
        fail("internal: no plan kernel uses AOT function ", p.aot_names[i]);
      const Kernel& k = kernels[at - p.aot_index.begin()];
      reg << "int call_" << p.aot_names[i] << "(halide_buffer_t** b) { return " << p.aot_names[i] << "(";
      for (size_t a = 0; a <= k.inputs.size(); ++a) reg << (a ? ", " : "") << "b[" << a << "]";
      reg << "); }\n";
    }
    reg << "}  // namespace\n\nnamespace korch_pkg {\n"
        << "const char* const kPackageId = \"" << package_id << "\";\n"
        << "const int kNumHalideKernels = " << p.aot_names.size() << ";\n"
        << "const HalideKernelEntry kHalideKernels[] = {\n";
    for (const std::string& n : p.aot_names) reg << "    {\"" << n << "\", call_" << n << "},\n";
    reg << "    {nullptr, nullptr}};\n}  // namespace korch_pkg\n";
    make_folder(fs::path(package_dir) / "kernels");
    write_text(fs::path(package_dir) / "kernels" / "kernels.cc", reg.str());
    return {"kernels/kernels.cc"};
  }

  PackageRuntime package_runtime() const override {
    PackageRuntime r;
    r.headers = {"backend/cpu/compiled_kernel.h", "backend/cpu/layout_link.h", "backend/cpu/onednn_internal.h",
                 "backend/cpu/stream_store.h",    "plan/attention_pattern.h",  "ir/strided_view.h"};
    r.sources = {"backend/cpu/reference_kernel.cc",
                 "backend/cpu/onednn_layout.cc",
                 "backend/cpu/onednn_post_ops.cc",
                 "backend/cpu/onednn_analysis.cc",
                 "backend/cpu/onednn_builder.cc",
                 "backend/cpu/onednn_gemv.cc",
                 "backend/cpu/onednn_kernel.cc",
                 "backend/cpu/layout_link.cc",
                 "backend/cpu/stream_store.cc",
                 "backend/cpu/attention_kernel.cc",
                 "plan/attention_pattern.cc",
                 "ir/strided_view.cc"};
    r.files = {{KORCH_HALIDE_RUNTIME_HEADER, "runtime/HalideRuntime.h"}};
    r.find_packages = {"dnnl", "OpenMP"};
    r.link_targets = {"DNNL::dnnl", "OpenMP::OpenMP_CXX"};
    r.requirements = "oneDNN and OpenMP";
    return r;
  }
};

}  // namespace

std::unique_ptr<AheadOfTimeCompiler> make_package_compiler() { return std::make_unique<CpuPackageCompiler>(); }

}  // namespace korch::cpu
