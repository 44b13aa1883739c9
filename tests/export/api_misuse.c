/* Misuse of the exported C API must give clear errors, never crashes.
 * usage: api_misuse PACKAGE_DIR */
#include <korch_model.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;
#define EXPECT(cond, what)                                     \
  do {                                                         \
    if (!(cond)) {                                             \
      fprintf(stderr, "FAIL: %s (line %d)\n", what, __LINE__); \
      ++failures;                                              \
    }                                                          \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  char err[256] = "untouched";
  EXPECT(korch_create(NULL, 1, err, sizeof err) == NULL && strstr(err, "NULL"), "create(NULL dir)");
  EXPECT(korch_create(argv[1], -3, err, sizeof err) == NULL && strstr(err, "threads"), "create(threads < 0)");
  EXPECT(korch_create("/nonexistent/korch", 1, NULL, 0) == NULL && strstr(korch_last_error(NULL), "cannot open"),
         "create(bad dir) without an error buffer");
  char tiny[4];
  EXPECT(korch_create("/nonexistent/korch", 1, tiny, sizeof tiny) == NULL && strlen(tiny) == 3, "error truncated");
  korch_model* m = korch_create(argv[1], 1, err, sizeof err);
  if (!m) {
    fprintf(stderr, "FAIL: create: %s\n", err);
    return 1;
  }
  EXPECT(korch_num_inputs(NULL) == -1 && korch_num_outputs(NULL) == -1, "counts of NULL");
  EXPECT(korch_input_name(m, -1) == NULL && strstr(korch_last_error(m), "out of range"), "input index -1");
  EXPECT(korch_output_name(m, 1000) == NULL, "output index 1000");
  EXPECT(korch_input_dtype(m, 99) == -1 && korch_output_rank(m, 99) == -1 && korch_input_bytes(m, 99) == -1,
         "queries out of range");
  EXPECT(korch_input_shape(m, 0, NULL, 4) == -1, "shape into NULL");
  EXPECT(korch_input_shape(m, 0, NULL, 0) == korch_input_rank(m, 0), "rank via shape(NULL, 0)");
  EXPECT(strcmp(korch_dtype_name(KORCH_F32), "f32") == 0 && strcmp(korch_dtype_name(42), "invalid") == 0,
         "dtype names");
  void* outs[8] = {0};
  EXPECT(korch_run(m, NULL, outs) == -1 && strstr(korch_last_error(m), "inputs"), "run(NULL inputs)");
  const void* ins[8] = {0};
  EXPECT(korch_run(m, ins, outs) == -1 && strstr(korch_last_error(m), "NULL"), "run(NULL input pointer)");
  EXPECT(korch_run(NULL, ins, outs) == -1 && strstr(korch_last_error(NULL), "NULL"), "run(NULL model)");
  EXPECT(korch_run(m, ins, NULL) == -1, "run(NULL outputs)");
  korch_destroy(m);
  korch_destroy(NULL);
  if (failures) return 1;
  printf("api misuse: all clear errors\n");
  return 0;
}
