/* A C program that runs a model exported by `korch export`.
 *
 *   korch_consumer PACKAGE_DIR [--threads N] [--input FILE.bin ...] [--output-dir DIR] [--serve]
 *
 * Inputs are raw little-endian files of exactly the declared dtype and shape, one per model
 * input in declaration order (without --input the inputs are zeros). Outputs are written raw
 * as DIR/output_K.bin. Prints the model's inputs and outputs, and the top-5 of the first
 * output when it is float32. --serve is the benchmark peer mode of bench/run_benchmarks.py: after
 * the first run it prints `ready`, then runs once per line read from stdin (until EOF or `quit`)
 * and prints each run's wall time in milliseconds. */
#define _POSIX_C_SOURCE 200809L
#include <korch_model.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int read_raw(const char* path, void* data, int64_t bytes) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "error: cannot open '%s'\n", path);
    return -1;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (size != bytes) {
    fprintf(stderr, "error: '%s' has %ld bytes, the input needs %lld\n", path, size, (long long)bytes);
    fclose(f);
    return -1;
  }
  size_t got = bytes ? fread(data, 1, (size_t)bytes, f) : 0;
  fclose(f);
  return got == (size_t)bytes ? 0 : -1;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

// Benchmark peer: one run per stdin line, its wall time (ms) on stdout.
static int serve(korch_model* m, void** inputs, void** outputs) {
  printf("ready %d inputs, %d outputs\n", korch_num_inputs(m), korch_num_outputs(m));
  fflush(stdout);
  char line[256];
  while (fgets(line, sizeof line, stdin) && strncmp(line, "quit", 4) != 0) {
    double t0 = now_ms();
    if (korch_run(m, (const void* const*)inputs, outputs) != 0) {
      fprintf(stderr, "error: %s\n", korch_last_error(m));
      return 1;
    }
    printf("%.6f\n", now_ms() - t0);
    fflush(stdout);
  }
  return 0;
}

static void print_io(const korch_model* m, int i, int input) {
  int64_t dims[16];
  int rank = input ? korch_input_shape(m, i, dims, 16) : korch_output_shape(m, i, dims, 16);
  printf("  %s: %s[", input ? korch_input_name(m, i) : korch_output_name(m, i),
         korch_dtype_name(input ? korch_input_dtype(m, i) : korch_output_dtype(m, i)));
  for (int d = 0; d < rank && d < 16; ++d) printf("%s%lld", d ? "," : "", (long long)dims[d]);
  printf("]\n");
}

int main(int argc, char** argv) {
  const char* package = NULL;
  const char* out_dir = NULL;
  const char* input_files[64];
  int n_input_files = 0, threads = 0, serve_mode = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--input") && i + 1 < argc && n_input_files < 64)
      input_files[n_input_files++] = argv[++i];
    else if (!strcmp(argv[i], "--output-dir") && i + 1 < argc)
      out_dir = argv[++i];
    else if (!strcmp(argv[i], "--serve"))
      serve_mode = 1;
    else if (!package && argv[i][0] != '-')
      package = argv[i];
    else {
      fprintf(stderr, "usage: %s PACKAGE_DIR [--threads N] [--input FILE.bin ...] [--output-dir DIR] [--serve]\n",
              argv[0]);
      return 2;
    }
  }
  if (!package) {
    fprintf(stderr, "usage: %s PACKAGE_DIR [--threads N] [--input FILE.bin ...] [--output-dir DIR] [--serve]\n",
            argv[0]);
    return 2;
  }
  char err[1024];
  korch_model* m = korch_create(package, threads, err, sizeof err);
  if (!m) {
    fprintf(stderr, "error: %s\n", err);
    return 1;
  }
  printf("%s\ninputs:\n", korch_model_info(m));
  int ni = korch_num_inputs(m), no = korch_num_outputs(m);
  for (int i = 0; i < ni; ++i) print_io(m, i, 1);
  printf("outputs:\n");
  for (int i = 0; i < no; ++i) print_io(m, i, 0);
  if (n_input_files != 0 && n_input_files != ni) {
    fprintf(stderr, "error: the model has %d inputs, %d --input files were given\n", ni, n_input_files);
    korch_destroy(m);
    return 1;
  }
  void** inputs = calloc((size_t)ni + 1, sizeof(void*));
  void** outputs = calloc((size_t)no + 1, sizeof(void*));
  int rc = 0;
  for (int i = 0; i < ni && rc == 0; ++i) {
    int64_t bytes = korch_input_bytes(m, i);
    inputs[i] = calloc(1, (size_t)bytes + 1);
    if (n_input_files && read_raw(input_files[i], inputs[i], bytes) != 0) rc = 1;
  }
  for (int i = 0; i < no; ++i) outputs[i] = calloc(1, (size_t)korch_output_bytes(m, i) + 1);
  if (rc == 0 && korch_run(m, (const void* const*)inputs, outputs) != 0) {
    fprintf(stderr, "error: %s\n", korch_last_error(m));
    rc = 1;
  }
  for (int i = 0; i < no && rc == 0 && out_dir; ++i) {
    char path[4096];
    snprintf(path, sizeof path, "%s/output_%d.bin", out_dir, i);
    FILE* f = fopen(path, "wb");
    int64_t bytes = korch_output_bytes(m, i);
    if (!f || fwrite(outputs[i], 1, (size_t)bytes, f) != (size_t)bytes) {
      fprintf(stderr, "error: cannot write '%s'\n", path);
      rc = 1;
    }
    if (f) fclose(f);
    if (rc == 0) printf("wrote %s\n", path);
  }
  if (rc == 0 && no > 0 && korch_output_dtype(m, 0) == KORCH_F32) {
    const float* y = (const float*)outputs[0];
    int64_t n = korch_output_bytes(m, 0) / 4;
    int64_t top[5];
    int k = 0;
    for (; k < 5 && k < n; ++k) {
      int64_t best = -1;
      for (int64_t j = 0; j < n; ++j) {
        int taken = 0;
        for (int t = 0; t < k; ++t) taken |= top[t] == j;
        if (!taken && (best < 0 || y[j] > y[best])) best = j;
      }
      top[k] = best;
    }
    printf("top-%d of %s:\n", k, korch_output_name(m, 0));
    for (int t = 0; t < k; ++t) printf("  %lld  %.6f\n", (long long)top[t], y[top[t]]);
  }
  if (rc == 0 && serve_mode) rc = serve(m, inputs, outputs);
  for (int i = 0; i < ni; ++i) free(inputs[i]);
  for (int i = 0; i < no; ++i) free(outputs[i]);
  free(inputs);
  free(outputs);
  korch_destroy(m);
  return rc;
}
