// Streaming (non-temporal) stores for kernel outputs too large to stay in the last-level cache.
// A store that misses the cache first reads the line it writes (read for ownership); a transpose
// writes one 64-byte line per output row per tile, and those reads are scattered and cannot be
// prefetched: on a 2-vCPU Xeon VM a 768 MiB transpose reached 11 GB/s with plain stores and 31
// GB/s writing the same panels with streaming stores (the triad: 30 GB/s). Halide 14 has no
// streaming store, so generated kernels that use them (the StreamedPanels and StreamedRows schedule
// variants) call korch_stream_rows for each computed tile or row; the function is part of korch's
// library and of every exported package's runtime.
#pragma once
#include <cstdint>

extern "C" {
// Copies `rows` rows of `row_elements` elements of `element_bytes` bytes from src + src_offset to
// dst + dst_offset (offsets and row strides in elements), with streaming stores where the rows
// are 16-byte aligned (plain copies elsewhere), then fences the streaming stores so that they
// are visible to every thread once it returns. Returns 0 (Halide's extern call convention).
int korch_stream_rows(void* dst, int32_t dst_offset, const void* src, int32_t src_offset, int32_t rows,
                      int32_t row_elements, int32_t element_bytes, int32_t dst_stride, int32_t src_stride);
}

namespace korch::cpu {

// Bytes of the last-level cache the CPU's cores share (sysfs; sysconf's figure can be the whole
// package's, 320 MiB on a VM slice of a 32 MiB-per-CCD EPYC), 32 MiB when unknown, at most 256 MiB.
int64_t last_level_cache_bytes();
// Bytes of one core's L2 cache (sysfs), 2 MiB when unknown, between 256 KiB and 64 MiB.
int64_t private_cache_bytes();

// Outputs of at least this many bytes may be written with streaming stores (a schedule variant
// that profiling times like the others): the last-level cache's size, so that an output that the
// next kernel could still find in the cache is never written past it. KORCH_STREAM_STORES_FROM
// (bytes) overrides it (tests use small kernels).
int64_t streaming_output_bytes();

}  // namespace korch::cpu
