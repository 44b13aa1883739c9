// The runtime of a package written by `korch export` (compiled inside the package, not into
// korch): loads model.kpkg + weights.bin, rebuilds the primitive graph, builds every plan
// kernel once (the package's ahead-of-time Halide functions, oneDNN primitives, or the
// reference interpreter where neither applies, exactly as korch's Executor chooses), places
// the intermediate tensors in one arena and implements the C API of korch_model.h.
#include "korch_model.h"

#include <HalideRuntime.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "backend/cpu/compiled_kernel.h"
#include "backend/cpu/layout_link.h"
#include "korch_kernels.h"
#include "package_format.h"
#include "reference/reference.h"
#include "runtime/arena.h"
#include "util/error.h"

namespace {

using namespace korch;

constexpr int64_t kAlign = 64;
int64_t tensor_bytes(const TensorInfo& t) { return num_elements(t.shape) * static_cast<int64_t>(dtype_size(t.dtype)); }

// Halide's parallel loops on OpenMP, the pool oneDNN uses (the same loop as korch's JIT path).
int omp_do_par_for(void* user_context, halide_task_t f, int min, int extent, uint8_t* closure) {
  int result = 0;
#pragma omp parallel for schedule(static)
  for (int i = min; i < min + extent; ++i) {
    int r = f(user_context, i, closure);
    if (r != 0) {
#pragma omp atomic write
      result = r;
    }
  }
  return result;
}

thread_local std::string t_halide_error;
void halide_error_to_string(void*, const char* msg) { t_halide_error = msg ? msg : "unknown Halide error"; }

void install_halide_handlers() {
  static bool done = [] {
    halide_set_custom_do_par_for(omp_do_par_for);
    halide_set_error_handler(halide_error_to_string);
    return true;
  }();
  (void)done;
}

// x86 features by the names GCC's __builtin_cpu_supports knows; unknown names are refused.
bool cpu_supports(const std::string& f, bool* known) {
  *known = true;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
#define KORCH_FEATURE(name) \
  if (f == name) return __builtin_cpu_supports(name);
  KORCH_FEATURE("sse4.1")
  KORCH_FEATURE("sse4.2")
  KORCH_FEATURE("avx")
  KORCH_FEATURE("avx2")
  KORCH_FEATURE("fma")
  KORCH_FEATURE("f16c")
  KORCH_FEATURE("avx512f")
  KORCH_FEATURE("avx512cd")
  KORCH_FEATURE("avx512bw")
  KORCH_FEATURE("avx512dq")
  KORCH_FEATURE("avx512vl")
  KORCH_FEATURE("avx512ifma")
  KORCH_FEATURE("avx512vbmi")
  KORCH_FEATURE("avx512vnni")
  KORCH_FEATURE("avx512bf16")
#undef KORCH_FEATURE
#endif
  *known = false;
  return false;
}

std::vector<unsigned char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open '", path, "'");
  f.seekg(0, std::ios::end);
  std::streamoff n = f.tellg();
  f.seekg(0);
  std::vector<unsigned char> bytes(static_cast<size_t>(n));
  if (n > 0 && !f.read(reinterpret_cast<char*>(bytes.data()), n)) fail("cannot read '", path, "'");
  return bytes;
}

halide_type_t halide_type_of(DType t) {
  switch (t) {
    case DType::F32: return halide_type_t(halide_type_float, 32);
    case DType::F64: return halide_type_t(halide_type_float, 64);
    case DType::I64: return halide_type_t(halide_type_int, 64);
    case DType::I32: return halide_type_t(halide_type_int, 32);
    case DType::I8: return halide_type_t(halide_type_int, 8);
    case DType::U8:
    case DType::Bool: return halide_type_t(halide_type_uint, 8);
    default: break;  // no Halide kernel computes on the other types (is_kernel_dtype)
  }
  throw korch_pkg::PackageError(std::string("model.kpkg: a compiled kernel has element type ") + dtype_name(t));
}

// One ahead-of-time Halide function: buffers in Kernel::inputs order, then the output.
class HalideAotKernel : public cpu::CompiledKernel {
 public:
  HalideAotKernel(const PrimGraph& g, const Kernel& k, int index, std::string description)
      : index_(index), description_(std::move(description)) {
    for (TensorId t : k.inputs) add_buffer(g.tensor(t));
    add_buffer(g.tensor(k.output));
    for (size_t i = 0; i < buffers_.size(); ++i) {
      buffers_[i].dim = dims_[i].empty() ? nullptr : dims_[i].data();
      pointers_.push_back(&buffers_[i]);
    }
  }
  void run(const std::vector<const void*>& inputs, void* output) override {
    KORCH_CHECK(inputs.size() + 1 == buffers_.size(), "Halide kernel ", index_, " argument count");
    for (size_t i = 0; i < inputs.size(); ++i) buffers_[i].host = static_cast<uint8_t*>(const_cast<void*>(inputs[i]));
    buffers_.back().host = static_cast<uint8_t*>(output);
    int rc = korch_pkg::kHalideKernels[index_].entry(pointers_.data());
    if (rc != 0) fail("Halide kernel ", korch_pkg::kHalideKernels[index_].name, " failed (", rc, "): ", t_halide_error);
  }
  std::string describe() const override { return description_; }

 private:
  void add_buffer(const TensorInfo& t) {
    halide_buffer_t b{};
    b.type = halide_type_of(t.dtype);
    b.dimensions = static_cast<int32_t>(t.shape.size());
    std::vector<halide_dimension_t> d;
    int64_t stride = 1;
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) {
      d.push_back(halide_dimension_t(0, static_cast<int32_t>(*it), static_cast<int32_t>(stride)));
      stride *= *it;
    }
    buffers_.push_back(b);
    dims_.push_back(std::move(d));
  }
  int index_;
  std::string description_;
  std::vector<halide_buffer_t> buffers_;
  std::vector<std::vector<halide_dimension_t>> dims_;
  std::vector<halide_buffer_t*> pointers_;
};

struct Io {
  std::string name;
  TensorId tensor;
  DType dtype;
  Shape shape;
  int64_t bytes;
};

Attrs read_attrs(korch_pkg::Reader& r) {
  Attrs a;
  uint64_t n = r.count(9);
  for (uint64_t i = 0; i < n; ++i) {
    std::string key = r.str();
    switch (r.u8()) {
      case korch_pkg::kAttrInt: a.set(key, r.i64()); break;
      case korch_pkg::kAttrFloat: a.set(key, r.f64()); break;
      case korch_pkg::kAttrInts: a.set(key, r.i64s()); break;
      case korch_pkg::kAttrFloats: a.set(key, r.f64s()); break;
      case korch_pkg::kAttrString: a.set(key, r.str()); break;
      default: throw korch_pkg::PackageError("model.kpkg: unknown attribute kind");
    }
  }
  return a;
}

DType checked_dtype(uint8_t v) {
  if (v >= kNumDTypes) throw korch_pkg::PackageError("model.kpkg: unknown dtype");
  return static_cast<DType>(v);
}

}  // namespace

struct korch_model {
  std::string dir;
  int threads = 1;
  PrimGraph g;
  std::vector<Kernel> kernels;
  std::vector<std::unique_ptr<cpu::CompiledKernel>> compiled;
  std::vector<Io> inputs, outputs;
  std::vector<int64_t> offset;  // per tensor: arena offset or -1
  std::vector<int64_t> bytes;   // per tensor: buffer size (internal layouts may be larger)
  int linked = 0;               // tensors kept in oneDNN's internal layout between kernels
  std::vector<unsigned char> storage;
  std::vector<const void*> where;
  std::string error;
  std::string info;
  std::string dump_dir;

  void load(const std::string& package_dir, int requested_threads);
  void place_tensors();
  void run(const void* const* in, void* const* out);
};

void korch_model::load(const std::string& package_dir, int requested_threads) {
  dir = package_dir;
  if (const char* d = std::getenv("KORCH_DUMP_DIR")) dump_dir = d;
  std::vector<unsigned char> model = read_file(dir + "/model.kpkg");
  korch_pkg::Reader r(model.data(), model.size(), dir + "/model.kpkg");
  r.expect_magic();
  uint32_t version = r.u32();
  if (version != korch_pkg::kVersion)
    fail(dir, "/model.kpkg has format version ", version, ", this runtime reads version ", korch_pkg::kVersion);
  std::string package_id = r.str();
  if (package_id != korch_pkg::kPackageId)
    fail(dir, " holds package ", package_id, " but this library was built for package ", korch_pkg::kPackageId,
         " (rebuild the library from the same export)");
  std::string target = r.str();
  std::vector<std::string> features = r.strs();
  for (const std::string& f : features) {
    bool known = false;
    if (!cpu_supports(f, &known))
      fail("this CPU lacks ", f, known ? "" : " (unknown feature)",
           ", which the package's kernels were compiled for (target ", target,
           "); export the model again on this machine");
  }
  int default_threads = r.i32();
  threads = requested_threads > 0 ? requested_threads : std::max(default_threads, 1);
  uint64_t weights_size = r.u64();
  std::vector<unsigned char> weights = read_file(dir + "/weights.bin");
  if (weights.size() != weights_size)
    fail(dir, "/weights.bin has ", weights.size(), " bytes, the model expects ", weights_size);

  // Tensors in id order: replaying inputs, constants and primitives in that order gives every
  // tensor and primitive its original id.
  uint64_t nt = r.count(1);
  std::vector<std::string> names;
  std::vector<uint8_t> kinds;
  std::vector<DType> dtypes;
  std::vector<Shape> shapes;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  std::vector<int32_t> producers;
  for (uint64_t t = 0; t < nt; ++t) {
    names.push_back(r.str());
    dtypes.push_back(checked_dtype(r.u8()));
    shapes.push_back(r.i64s());
    kinds.push_back(r.u8());
    spans.emplace_back(0, 0);
    producers.push_back(kNone);
    if (kinds.back() == korch_pkg::kTensorConstant) {
      spans.back().first = r.u64();
      spans.back().second = r.u64();
    } else if (kinds.back() == korch_pkg::kTensorComputed) {
      producers.back() = r.i32();
    } else if (kinds.back() != korch_pkg::kTensorInput) {
      throw korch_pkg::PackageError("model.kpkg: unknown tensor kind");
    }
  }
  uint64_t np = r.count(1);
  struct PrimRecord {
    PrimOp op;
    std::vector<TensorId> inputs;
    TensorId output;
    Attrs attrs;
  };
  std::vector<PrimRecord> prims;
  for (uint64_t p = 0; p < np; ++p) {
    PrimRecord rec;
    uint8_t op = r.u8();
    if (op > static_cast<uint8_t>(kLastPrimOp)) throw korch_pkg::PackageError("model.kpkg: unknown primitive");
    rec.op = static_cast<PrimOp>(op);
    rec.inputs = r.i32s();
    rec.output = r.i32();
    rec.attrs = read_attrs(r);
    prims.push_back(std::move(rec));
  }
  for (uint64_t t = 0; t < nt; ++t) {
    TensorId id = kNone;
    if (kinds[t] == korch_pkg::kTensorInput) {
      id = g.add_input(names[t], dtypes[t], shapes[t]);
    } else if (kinds[t] == korch_pkg::kTensorConstant) {
      auto [off, len] = spans[t];
      auto value = std::make_shared<TensorData>(dtypes[t], shapes[t]);
      if (off > weights.size() || len > weights.size() - off || len != value->byte_size())
        fail("weights of '", names[t], "' lie outside weights.bin or have the wrong size");
      if (len) std::memcpy(value->raw(), weights.data() + off, len);
      id = g.add_constant(names[t], value);
    } else {
      int32_t p = producers[t];
      if (p != g.num_prims() || p < 0 || static_cast<uint64_t>(p) >= np || prims[p].output != static_cast<TensorId>(t))
        fail("model.kpkg: tensor ", t, " is produced out of order");
      for (TensorId u : prims[p].inputs)
        if (u < 0 || u >= static_cast<TensorId>(t)) fail("model.kpkg: primitive ", p, " reads a later tensor");
      id = g.add_primitive(prims[p].op, prims[p].inputs, prims[p].attrs, kNone, names[t]);
      if (g.tensor(id).dtype != dtypes[t] || g.tensor(id).shape != shapes[t])
        fail("model.kpkg: tensor '", names[t], "' does not have the recorded dtype/shape");
    }
    if (id != static_cast<TensorId>(t)) fail("model.kpkg: tensor ids do not replay");
  }
  auto check_id = [&](TensorId t) {
    if (t < 0 || t >= g.num_tensors()) fail("model.kpkg: tensor id ", t, " out of range");
    return t;
  };
  std::vector<TensorId> in_ids = r.i32s(), out_ids = r.i32s();
  std::vector<std::string> out_names = r.strs();
  if (out_names.size() != out_ids.size()) fail("model.kpkg: output names do not match outputs");
  for (TensorId t : in_ids) {
    const TensorInfo& info = g.tensor(check_id(t));
    inputs.push_back({info.name, t, info.dtype, info.shape, tensor_bytes(info)});
  }
  for (size_t i = 0; i < out_ids.size(); ++i) {
    const TensorInfo& info = g.tensor(check_id(out_ids[i]));
    g.mark_output(out_ids[i]);
    outputs.push_back({out_names[i], out_ids[i], info.dtype, info.shape, tensor_bytes(info)});
  }
  uint64_t nk = r.count(1);
  install_halide_handlers();
  omp_set_num_threads(threads);
  int n_halide = 0, n_onednn = 0, n_ref = 0;
  for (uint64_t i = 0; i < nk; ++i) {
    Kernel k;
    k.prims = r.i32s();
    k.output = check_id(r.i32());
    k.inputs = r.i32s();
    k.num_linear = r.i32();
    k.schedule = r.i32();
    uint8_t backend = r.u8();
    int32_t halide_index = r.i32();
    std::string description = r.str();
    for (PrimId p : k.prims)
      if (p < 0 || p >= g.num_prims()) fail("model.kpkg: kernel ", i, " names primitive ", p);
    for (TensorId t : k.inputs) check_id(t);
    std::unique_ptr<cpu::CompiledKernel> c;
    if (backend == korch_pkg::kBackendHalide) {
      if (halide_index < 0 || halide_index >= korch_pkg::kNumHalideKernels)
        fail("model.kpkg: kernel ", i, " uses Halide function ", halide_index, ", the library has ",
             korch_pkg::kNumHalideKernels);
      c = std::make_unique<HalideAotKernel>(g, k, halide_index, description);
      ++n_halide;
    } else if (backend == korch_pkg::kBackendOneDNN) {
      std::string why;
      c = cpu::compile_library_kernel(g, k, &why);
      if (c) ++n_onednn;
    }
    if (!c) {
      c = cpu::compile_reference_kernel(g, k);
      ++n_ref;
    }
    kernels.push_back(std::move(k));
    compiled.push_back(std::move(c));
  }
  if (!r.at_end()) fail("model.kpkg has trailing bytes");
  for (TensorId t : out_ids) {
    bool made = std::any_of(kernels.begin(), kernels.end(), [&](const Kernel& k) { return k.output == t; });
    if (!made && !g.tensor(t).is_constant() && std::find(in_ids.begin(), in_ids.end(), t) == in_ids.end())
      fail("model.kpkg: output '", g.tensor(t).name, "' is computed by no kernel");
  }
  std::vector<cpu::CompiledKernel*> linkable;
  for (const auto& c : compiled) linkable.push_back(c.get());
  cpu::LayoutLinks links = cpu::link_layouts(g, kernels, linkable);  // as korch's Executor
  bytes = links.bytes;
  linked = links.num_linked;
  place_tensors();
  std::string feats;
  for (const std::string& f : features) feats += (feats.empty() ? "" : ",") + f;
  info = str_cat("package ", package_id, ": target ", target, ", cpu features [", feats, "], ", kernels.size(),
                 " kernels (", n_halide, " halide aot, ", n_onednn, " onednn, ", n_ref, " reference), ", linked,
                 " tensors in oneDNN layouts between kernels, ", threads, " threads, arena ", storage.size(), " bytes");
}

// Every kernel output in one arena (runtime/arena.h, as korch's Executor places them).
void korch_model::place_tensors() {
  ArenaPlan arena = plan_arena(g, kernels, &bytes);
  offset = std::move(arena.offset);
  storage.resize(arena.arena_bytes + kAlign);
  where.assign(g.num_tensors(), nullptr);
}

void korch_model::run(const void* const* in, void* const* out) {
  if (!in && !inputs.empty()) fail("inputs is NULL (the model has ", inputs.size(), " inputs)");
  if (!out) fail("outputs is NULL (the model has ", outputs.size(), " outputs)");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!in[i]) fail("inputs[", i, "] ('", inputs[i].name, "') is NULL");
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!out[i]) fail("outputs[", i, "] ('", outputs[i].name, "') is NULL");
  omp_set_num_threads(threads);
  unsigned char* base = storage.data() + (kAlign - reinterpret_cast<uintptr_t>(storage.data()) % kAlign) % kAlign;
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    where[t] = nullptr;
    if (g.tensor(t).is_constant()) where[t] = g.tensor(t).constant->raw();
    if (offset[t] >= 0) where[t] = base + offset[t];
  }
  for (size_t i = 0; i < inputs.size(); ++i) where[inputs[i].tensor] = in[i];
  std::vector<const void*> args;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const Kernel& k = kernels[i];
    args.clear();
    for (TensorId t : k.inputs) args.push_back(where[t]);
    compiled[i]->run(args, const_cast<void*>(where[k.output]));
    if (!dump_dir.empty()) {  // KORCH_DUMP_DIR: every kernel's output, raw (debugging; linked ones in their internal
                              // layout)
      std::string path = dump_dir + "/k" + std::to_string(i) + ".bin";
      std::ofstream f(path, std::ios::binary);
      f.write(static_cast<const char*>(where[k.output]), tensor_bytes(g.tensor(k.output)));
      if (!f) fail("cannot write '", path, "' (KORCH_DUMP_DIR)");
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].bytes) std::memcpy(out[i], where[outputs[i].tensor], static_cast<size_t>(outputs[i].bytes));
}

namespace {

thread_local std::string t_create_error;

void copy_error(const std::string& msg, char* err, size_t errlen) {
  t_create_error = msg;
  if (!err || errlen == 0) return;
  size_t n = std::min(msg.size(), errlen - 1);
  std::memcpy(err, msg.data(), n);
  err[n] = '\0';
}

const Io* io_at(const korch_model* m, int i, bool input) {
  if (!m) return nullptr;
  const std::vector<Io>& v = input ? m->inputs : m->outputs;
  if (i < 0 || static_cast<size_t>(i) >= v.size()) {
    const_cast<korch_model*>(m)->error =
        str_cat(input ? "input" : "output", " index ", i, " is out of range (the model has ", v.size(),
                input ? " inputs)" : " outputs)");
    return nullptr;
  }
  return &v[i];
}

int shape_of(const Io* io, int64_t* dims, int max_dims) {
  if (!io) return -1;
  if (max_dims > 0 && !dims) return -1;
  for (int d = 0; d < max_dims && d < static_cast<int>(io->shape.size()); ++d) dims[d] = io->shape[d];
  return static_cast<int>(io->shape.size());
}

}  // namespace

extern "C" {

korch_model* korch_create(const char* package_dir, int threads, char* err, size_t errlen) {
  try {
    if (!package_dir) fail("package_dir is NULL");
    if (threads < 0) fail("threads must be >= 0 (0: the package's default), got ", threads);
    auto m = std::make_unique<korch_model>();
    m->load(package_dir, threads);
    copy_error("", err, errlen);
    return m.release();
  } catch (const std::bad_alloc&) {
    copy_error("out of memory while loading the package", err, errlen);
  } catch (const std::exception& e) {
    copy_error(e.what(), err, errlen);
  }
  return nullptr;
}

void korch_destroy(korch_model* model) { delete model; }

int korch_num_inputs(const korch_model* m) { return m ? static_cast<int>(m->inputs.size()) : -1; }
int korch_num_outputs(const korch_model* m) { return m ? static_cast<int>(m->outputs.size()) : -1; }
const char* korch_input_name(const korch_model* m, int i) {
  const Io* io = io_at(m, i, true);
  return io ? io->name.c_str() : nullptr;
}
const char* korch_output_name(const korch_model* m, int i) {
  const Io* io = io_at(m, i, false);
  return io ? io->name.c_str() : nullptr;
}
int korch_input_dtype(const korch_model* m, int i) {
  const Io* io = io_at(m, i, true);
  return io ? static_cast<int>(io->dtype) : -1;
}
int korch_output_dtype(const korch_model* m, int i) {
  const Io* io = io_at(m, i, false);
  return io ? static_cast<int>(io->dtype) : -1;
}
int korch_input_rank(const korch_model* m, int i) {
  const Io* io = io_at(m, i, true);
  return io ? static_cast<int>(io->shape.size()) : -1;
}
int korch_output_rank(const korch_model* m, int i) {
  const Io* io = io_at(m, i, false);
  return io ? static_cast<int>(io->shape.size()) : -1;
}
int korch_input_shape(const korch_model* m, int i, int64_t* dims, int max_dims) {
  return shape_of(io_at(m, i, true), dims, max_dims);
}
int korch_output_shape(const korch_model* m, int i, int64_t* dims, int max_dims) {
  return shape_of(io_at(m, i, false), dims, max_dims);
}
int64_t korch_input_bytes(const korch_model* m, int i) {
  const Io* io = io_at(m, i, true);
  return io ? io->bytes : -1;
}
int64_t korch_output_bytes(const korch_model* m, int i) {
  const Io* io = io_at(m, i, false);
  return io ? io->bytes : -1;
}

int korch_run(korch_model* m, const void* const* inputs, void* const* outputs) {
  if (!m) {
    t_create_error = "korch_run: model is NULL";
    return -1;
  }
  try {
    m->run(inputs, outputs);
    m->error.clear();
    return 0;
  } catch (const std::bad_alloc&) {
    m->error = "out of memory";
  } catch (const std::exception& e) {
    m->error = e.what();
  }
  return -1;
}

const char* korch_last_error(const korch_model* m) { return m ? m->error.c_str() : t_create_error.c_str(); }

const char* korch_dtype_name(int dtype) {
  if (dtype < 0 || dtype >= kNumDTypes) return "invalid";
  return dtype_name(static_cast<DType>(dtype));
}

const char* korch_model_info(const korch_model* m) { return m ? m->info.c_str() : nullptr; }

}  // extern "C"
