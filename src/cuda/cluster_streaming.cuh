// What the cluster-streaming kernels (forward and backward) share.
#pragma once

#include <cstdint>

#include "cuda/element.cuh"

namespace normkit::cuda {

// How many vectors of each input a thread loads before it uses any: each pass is a loop of
// such batches of full vectors (no per-vector range test between their loads, so all are in
// flight at once), then at most one partial vector. With one vector at a time (a range test per
// load), the backward's 32768-column chunks took ~30 us a row, 4x their bytes' time
// (docs/notes.md, twenty-third session).
constexpr int kClusterStreamingBatch = 4;

// Asks for the CTA's chunk [col_begin, col_end) of the row at `row` in L2 (one bulk request by
// one thread, rounded down to whole 16-byte words). `row + col_begin` must be 16-byte aligned:
// callers use it only with 16-byte vectors.
template <typename T>
__device__ __forceinline__ void prefetch_chunk(const T* row, int64_t col_begin, int64_t col_end) {
  const uint32_t bytes = static_cast<uint32_t>((col_end - col_begin) * sizeof(T)) & ~15u;
  if (bytes > 0) prefetch_l2_bulk(row + col_begin, bytes);
}

}  // namespace normkit::cuda
