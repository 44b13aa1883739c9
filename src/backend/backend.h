// Backend: everything korch needs from a target to compile, verify, time, run and export the
// kernels of a plan. The optimizer above it sees only CostModel / KernelMeasurer; the profiler
// (cost/profiler.h) and the runtime (runtime/executor.h) see only this interface, so a target
// plugs in by implementing it and registering a factory under its name.
//
// Guarantees every backend keeps:
//  - compile() returns a kernel that computes exactly the primitives of the Kernel (its
//    schedule variant picked by Kernel::schedule), or nullptr with the reason; it never returns
//    a kernel it knows to be wrong. The profiler checks each one against the reference executor
//    before its time counts.
//  - supports() is a cheap structural check: false means compile() would refuse the kernel.
//  - Kernels read and write buffers from allocate() (host memory, or device memory where
//    host_memory() is false; then upload()/download() move bytes across).
//  - target() and versions() change whenever a cached measurement or a schedule-variant index
//    could mean something else (another ISA, thread count, library or code generator).
//  - ahead_of_time(), where a backend has it, builds each kernel of a package with the code
//    generator and schedule variant compile() would use, and falls back to the reference
//    interpreter only where its code generators refuse the kernel.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/timing.h"
#include "ir/prim_graph.h"
#include "plan/kernel.h"

namespace korch {

class CompiledKernel {
 public:
  virtual ~CompiledKernel() = default;
  // Reads the kernel's inputs (Kernel::inputs order) and writes its output. Buffers are the
  // backend's memory, dense row-major with the tensors' dtypes and shapes unless a layout link
  // (LayoutLinker) switched the kernel to an internal layout.
  virtual void run(const std::vector<const void*>& inputs, void* output) = 0;
  virtual std::string describe() const = 0;  // implementation and schedule, for logs and plans
  // (pointer, bytes) of the memory the compiled kernel holds and reads or writes at every run
  // (reordered weights, internal buffers), which a cache reset evicts with its inputs and output.
  virtual std::vector<std::pair<const void*, int64_t>> held_memory() const { return {}; }
};

// A block of the backend's memory, freed with the object.
class BackendBuffer {
 public:
  virtual ~BackendBuffer() = default;
  virtual void* data() = 0;
  virtual int64_t bytes() const = 0;
};

// The layout links of one plan (LayoutLinker::link).
struct LinkedPlan {
  std::vector<int64_t> bytes;         // per tensor id: bytes its buffer needs (dense size unless linked)
  int num_linked = 0;                 // tensors handed over in an internal layout
  std::vector<std::string> unlinked;  // why kernels that could have linked keep their tensors dense
};

// The optional part of a backend whose kernels keep activations in internal layouts (oneDNN's
// blocked formats on the CPU) and can hand them to the next kernel without converting to the
// dense layout and back. A backend without internal layouts has none (Backend::layout_linker).
class LayoutLinker {
 public:
  virtual ~LayoutLinker() = default;
  // Decides the links of a plan (compiled[i] built for kernels[i], in execution order) and
  // switches the compiled kernels to read and write the linked tensors in internal layout.
  virtual LinkedPlan link(const PrimGraph& g, const std::vector<Kernel>& kernels,
                          const std::vector<std::unique_ptr<CompiledKernel>>& compiled) = 0;
  // What linking saves on a kernel whose dense run takes `dense_seconds` (the profiler stores
  // it with the kernel; ProfileEntry::link_savings says how). The kernel may be left switched
  // to internal layouts; the profiler does not run it again.
  // `stats` (may be null) is added what its timing cost.
  virtual std::vector<double> measure_savings(const PrimGraph& g, const Kernel& k, CompiledKernel& compiled,
                                              const std::vector<const void*>& inputs, double dense_seconds,
                                              TimingStats* stats) = 0;
};

// What a backend compiled ahead of time for a package (AheadOfTimeCompiler::compile): per plan
// kernel, the record the package's model file keeps, and the files the package's build links.
struct PackagedKernels {
  std::string target;                          // what the objects were compiled for (recorded in the package)
  std::vector<std::string> required_features;  // CPU features (__builtin_cpu_supports names) checked at load
  // Per plan kernel, in plan order (each as long as the plan):
  std::vector<uint8_t> implementation;   // the package runtime's implementation tag (korch_pkg::kBackend*)
  std::vector<int32_t> aot_index;        // index of its function in aot_names, or -1
  std::vector<std::string> description;  // implementation and schedule, for logs
  std::vector<std::string> aot_names;    // the ahead-of-time functions, by index
  std::vector<std::string> objects;      // objects written (package-relative), linked into its library
  int aot_kernels = 0;                   // kernels compiled ahead of time
  int library_kernels = 0;               // kernels a library builds when the package loads
  int fallback_kernels = 0;              // kernels the reference interpreter runs
};

// What a package's build needs from the backend besides the backend-neutral part of the package
// runtime (AheadOfTimeCompiler::package_runtime).
struct PackageRuntime {
  std::vector<std::string> headers;  // korch sources (relative to src/) copied into the package
  std::vector<std::string> sources;  // the same, also compiled into the package's library
  // Files from outside korch's source tree, copied as is: (absolute path, path in the package).
  std::vector<std::pair<std::string, std::string>> files;
  std::vector<std::string> find_packages;  // CMake packages the package's build finds (REQUIRED)
  std::vector<std::string> link_targets;   // their targets, linked into the package's library
  std::string requirements;                // the libraries in words ("oneDNN and OpenMP"), for its README
};

// The optional part of a backend that writes a plan's kernels into a package (`korch export`),
// so that the package runs them without the code generators. A backend without it cannot
// export packages (Backend::ahead_of_time).
class AheadOfTimeCompiler {
 public:
  virtual ~AheadOfTimeCompiler() = default;
  // Compiles every kernel of the plan (execution order) for the package in `package_dir`,
  // writing the objects under it; a kernel no code generator takes gets the reference
  // fallback, reported on `log`. Throws korch::Error when a file cannot be written or a runtime
  // the objects need cannot be compiled. Call after Backend::bind_calling_thread().
  virtual PackagedKernels compile(const PrimGraph& g, const std::vector<Kernel>& kernels,
                                  const std::string& package_dir, std::ostream& log) = 0;
  // Writes the generated sources that name the package (its id hashes the model file, which
  // holds compile()'s result, so they come after it): the table of the AOT functions the
  // package runtime calls. Returns them relative to the package folder, to be compiled.
  virtual std::vector<std::string> write_kernel_table(const std::vector<Kernel>& kernels,
                                                      const PackagedKernels& packaged, const std::string& package_id,
                                                      const std::string& package_dir) = 0;
  // What the package's build needs from this backend; the same for every plan.
  virtual PackageRuntime package_runtime() const = 0;
};

// A fixed sequence of kernel launches recorded once (Backend::record) and issued again as a whole.
class RecordedLaunches {
 public:
  virtual ~RecordedLaunches() = default;
  virtual void replay() = 0;  // issues the recorded launches again (ordered like any launch)
};

struct BackendOptions {
  int threads = 2;    // threads the backend's kernels use (CPU); ignored where meaningless
  bool tf32 = false;  // linear kernels may round operands to TF32 (GPU tensor cores); off: fp32 results
};

// What a backend's code generator did in this process (CPU: Halide pipelines): compilations
// requested by kernels, done, and served by code compiled for another kernel.
struct CodegenStats {
  int requested = 0;
  int compiled = 0;
  int reused = 0;                // requests served by a pipeline compiled for an earlier kernel
  int reused_other_extents = 0;  // of those, kernels whose extents differ from that kernel's
  int same_structure = 0;        // requests whose structure up to extents was requested before (shared or not)
  double compile_seconds = 0;    // JIT compilation, summed over the threads that compiled
  CodegenStats operator-(const CodegenStats& o) const {
    return {requested - o.requested,
            compiled - o.compiled,
            reused - o.reused,
            reused_other_extents - o.reused_other_extents,
            same_structure - o.same_structure,
            compile_seconds - o.compile_seconds};
  }
};

class Backend {
 public:
  virtual ~Backend() = default;

  // --- identity (keys of the profile cache and of plans) ---
  virtual std::string name() const = 0;      // "cpu", "reference", ...
  virtual std::string target() const = 0;    // ISA or device, thread count, settings that change timings
  virtual std::string versions() const = 0;  // libraries and code generator
  // The code generator whose schedule-variant indices (Kernel::schedule) plans made for this
  // backend carry; "" where kernels have one schedule each.
  virtual std::string codegen() const { return ""; }
  virtual int threads() const { return 1; }
  // Makes the calling thread run this backend's kernels with threads() threads (OpenMP's
  // setting is per calling thread). Called before compiling, timing or running kernels.
  virtual void bind_calling_thread() {}

  // --- kernels ---
  virtual bool supports(const PrimGraph& g, const Kernel& k, std::string* why_not) const = 0;
  // Schedule variants compile() can build for the kernel (Kernel::schedule in [0, n)).
  virtual int schedule_variants(const PrimGraph& /*g*/, const Kernel& /*k*/) const { return 1; }
  virtual std::unique_ptr<CompiledKernel> compile(const PrimGraph& g, const Kernel& k, std::string* why_not) = 0;
  // Whether compile() of this kernel may run on another thread, concurrently with other such
  // compile() calls (never while kernels run or are timed). The profiler then compiles batches of
  // kernels on all cores before timing them one by one.
  virtual bool compiles_concurrently(const PrimGraph& /*g*/, const Kernel& /*k*/) const { return false; }
  // Any kernel, run by the reference interpreter on this backend's buffers (correct, slow): used
  // only where compile() refuses a single primitive, so that every model still runs.
  virtual std::unique_ptr<CompiledKernel> compile_fallback(const PrimGraph& g, const Kernel& k) = 0;
  // Process-wide counts of the code generator's compilations (zeros where it keeps none).
  virtual CodegenStats codegen_stats() const { return {}; }

  // --- memory ---
  virtual bool host_memory() const { return true; }
  virtual std::unique_ptr<BackendBuffer> allocate(int64_t bytes) = 0;
  virtual void upload(void* device, const void* host, int64_t bytes);
  virtual void download(void* host, const void* device, int64_t bytes);
  virtual void synchronize() {}

  // --- profiling ---
  // Puts caches in the state a kernel finds inside a model run, given the (pointer, bytes) of
  // the inputs it reads and of the other memory it touches (its output, held_memory()); called
  // untimed before every timed run.
  virtual void prepare_cache_state(const std::vector<std::pair<const void*, int64_t>>& /*inputs*/,
                                   const std::vector<std::pair<const void*, int64_t>>& /*touched*/) {}
  // Median seconds of `run` with `prepare` untimed before each run (warm-up excluded), taken
  // until it is known within kProfileMedianPrecision or the timing budget is spent; `stats`
  // (may be null) is added what the timing cost.
  virtual double median_seconds(const std::function<void()>& run, const std::function<void()>& prepare,
                                TimingStats* stats);
  virtual LayoutLinker* layout_linker() { return nullptr; }

  // --- launch recording ---
  // Records the launches `launches` issues (the same kernels on the same buffers at every run)
  // so that replay() issues them with less host overhead (CUDA graphs). Nothing is computed
  // while recording. nullptr with the reason where the backend cannot record them.
  virtual std::unique_ptr<RecordedLaunches> record(const std::function<void()>& launches, std::string* why_not);

  // --- packages ---
  // The part that compiles a plan's kernels into a package; nullptr where the backend cannot
  // export packages. Owned by the backend.
  virtual AheadOfTimeCompiler* ahead_of_time() { return nullptr; }
};

// The registry: backends register a factory under their name (a static BackendRegistration in
// the backend's own source file); make_backend builds one by name.
using BackendFactory = std::function<std::unique_ptr<Backend>(const BackendOptions&)>;
struct BackendRegistration {
  BackendRegistration(const std::string& name, BackendFactory factory);
};
// Throws korch::Error naming the registered backends when `name` is not one of them.
std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options = {});
std::vector<std::string> backend_names();  // sorted
bool has_backend(const std::string& name);

// A host-memory buffer (64-byte aligned), for backends whose kernels run on the host.
std::unique_ptr<BackendBuffer> allocate_host_buffer(int64_t bytes);
// The reference interpreter as a kernel over host buffers.
std::unique_ptr<CompiledKernel> make_reference_kernel(const PrimGraph& g, const Kernel& k);

}  // namespace korch
