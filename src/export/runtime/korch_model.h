/* korch_model.h: the C API of a model exported by `korch export`.
 *
 * A package (the folder `korch export` writes) holds the model's graph, plan and weights
 * (model.kpkg, weights.bin), its Halide kernels compiled ahead of time, and a runtime that
 * builds the oneDNN primitives at korch_create(). It needs oneDNN and OpenMP at run time, and
 * neither korch, ONNX, protobuf, CBC nor libHalide.
 *
 * Tensors are dense, row-major buffers of the dtype and shape the queries report. Inputs and
 * outputs are given in declaration order (korch_input_name(m, 0), ...). A model runs one
 * korch_run at a time (calls on one korch_model must not overlap); separate korch_model
 * objects are independent.
 *
 * Errors: functions returning int return 0 on success and a negative value on error;
 * functions returning pointers return NULL. korch_last_error() says what went wrong (one
 * line). Bad arguments (NULL pointers, indices out of range) are errors, never crashes. */
#ifndef KORCH_MODEL_H
#define KORCH_MODEL_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define KORCH_API
#else
#define KORCH_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define KORCH_API_VERSION 1

typedef struct korch_model korch_model;

/* Element types (the values korch_*_dtype return). Bool is one byte (0 or 1). */
typedef enum korch_dtype {
  KORCH_F32 = 0,
  KORCH_F64 = 1,
  KORCH_I64 = 2,
  KORCH_I32 = 3,
  KORCH_I8 = 4,
  KORCH_U8 = 5,
  KORCH_BOOL = 6
} korch_dtype;

/* Loads the package in `package_dir` (the folder holding model.kpkg and weights.bin).
 * threads: CPU threads (OpenMP, shared by oneDNN and Halide); 0 uses the thread count the
 * package was exported with. Refuses to load on a CPU without the instruction-set features
 * the kernels were compiled for. On failure returns NULL and writes a message into err
 * (when err is not NULL; at most errlen bytes, NUL-terminated). */
KORCH_API korch_model* korch_create(const char* package_dir, int threads, char* err, size_t errlen);
KORCH_API void korch_destroy(korch_model* model);

KORCH_API int korch_num_inputs(const korch_model* model);
KORCH_API int korch_num_outputs(const korch_model* model);
/* Name, dtype (a korch_dtype, -1 on error), rank (-1 on error) and byte size (-1 on error)
 * of input/output i. */
KORCH_API const char* korch_input_name(const korch_model* model, int i);
KORCH_API const char* korch_output_name(const korch_model* model, int i);
KORCH_API int korch_input_dtype(const korch_model* model, int i);
KORCH_API int korch_output_dtype(const korch_model* model, int i);
KORCH_API int korch_input_rank(const korch_model* model, int i);
KORCH_API int korch_output_rank(const korch_model* model, int i);
/* Writes min(rank, max_dims) dimensions into dims and returns the rank; -1 on error. */
KORCH_API int korch_input_shape(const korch_model* model, int i, int64_t* dims, int max_dims);
KORCH_API int korch_output_shape(const korch_model* model, int i, int64_t* dims, int max_dims);
KORCH_API int64_t korch_input_bytes(const korch_model* model, int i);
KORCH_API int64_t korch_output_bytes(const korch_model* model, int i);

/* Runs the model. inputs[i] points at input i (korch_input_bytes(model, i) bytes, read only);
 * outputs[i] points at a caller-owned buffer of korch_output_bytes(model, i) bytes that
 * receives output i. Returns 0, or -1 with korch_last_error() set. */
KORCH_API int korch_run(korch_model* model, const void* const* inputs, void* const* outputs);

/* The last error of `model` ("" when none), or of the last failed korch_create when model is NULL.
 * Valid until the next call on the same model. */
KORCH_API const char* korch_last_error(const korch_model* model);
KORCH_API const char* korch_dtype_name(int dtype);
/* A short description of the package: target, CPU features, kernels by backend. */
KORCH_API const char* korch_model_info(const korch_model* model);

#ifdef __cplusplus
}
#endif

#endif /* KORCH_MODEL_H */
