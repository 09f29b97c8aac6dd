// What the cluster-streaming kernels (forward and backward) share.
#pragma once

#include <cstdint>

#include "cuda/element.cuh"
#include "cuda/kernel_params.h"

namespace normkit::cuda {

// How many vectors of each input a thread loads before it uses any: each pass is a loop of
// such batches of full vectors (no per-vector range test between their loads, so all are in
// flight at once), then at most one partial vector. With one vector at a time (a range test per
// load), the backward's 32768-column chunks took ~30 us a row, 4x their bytes' time
// (docs/notes.md, twenty-third session).
constexpr int kClusterStreamingBatch = 4;

// What one thread of a cluster-streaming kernel covers: CTA `rank` of its cluster takes columns
// [col_begin, col_end) of the rows slot, slot + slots, ...; the thread's vectors start at
// first_col, `step` columns apart: `vectors` of them, the first `full` whole (one partial vector
// may end the row), the first `batched` of those in whole batches of kClusterStreamingBatch.
struct StreamingChunk {
  int64_t rank, slot, slots, col_begin, col_end, first_col, step, vectors, full, batched;
};

template <int VEC>
__device__ __forceinline__ StreamingChunk streaming_chunk(const RowShape& shape) {
  StreamingChunk c;
  const int cluster = shape.cluster_size;
  c.rank = blockIdx.x % cluster;
  c.slot = blockIdx.x / cluster;
  c.slots = gridDim.x / cluster;
  c.col_begin = c.rank * shape.cols_per_cta;
  c.col_end = min(shape.hidden, c.col_begin + shape.cols_per_cta);
  c.first_col = c.col_begin + static_cast<int64_t>(threadIdx.x) * VEC;
  c.step = static_cast<int64_t>(blockDim.x) * VEC;
  const bool any = c.first_col < c.col_end;
  c.vectors = any ? (c.col_end - c.first_col + c.step - 1) / c.step : 0;
  c.full = any ? (c.col_end - c.first_col - VEC) / c.step + 1 : 0;
  c.batched = c.full / kClusterStreamingBatch * kClusterStreamingBatch;
  return c;
}

// Asks for the first max_bytes of the CTA's chunk [col_begin, col_end) of the row at `row` in
// L2 (one bulk request by one thread, rounded down to whole 16-byte words). `row + col_begin`
// must be 16-byte aligned: callers use it only with 16-byte vectors.
template <typename T>
__device__ __forceinline__ void prefetch_chunk(const T* row, int64_t col_begin, int64_t col_end,
                                               uint32_t max_bytes) {
  const uint32_t bytes =
      min(static_cast<uint32_t>((col_end - col_begin) * sizeof(T)), max_bytes) & ~15u;
  if (bytes > 0) prefetch_l2_bulk(row + col_begin, bytes);
}

}  // namespace normkit::cuda
