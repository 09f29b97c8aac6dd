// How the backward's in-kernel reduction (grid_reduce.cuh) divides the columns among the CTAs:
// used by the kernel and by the launcher (plain C++, so the planner's tests see it too).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define NK_GRID_REDUCE_HD __host__ __device__
#else
#define NK_GRID_REDUCE_HD
#endif

namespace normkit::cuda {

// Columns each CTA sums: the power of two from 8 up that covers `hidden` with `ctas` CTAs (a
// warp then reads whole 32-byte sectors of the partial sums, which sit in L2).
NK_GRID_REDUCE_HD inline int64_t grid_reduce_columns_per_cta(int64_t hidden, int64_t ctas) {
  int64_t chunk = 8;
  while (chunk * ctas < hidden) chunk *= 2;
  return chunk;
}

// Dynamic shared memory the reduction needs: 4 floats (one 16-byte vector) per thread.
NK_GRID_REDUCE_HD inline int64_t grid_reduce_smem_bytes(int threads) {
  return static_cast<int64_t>(threads) * 4 * static_cast<int64_t>(sizeof(float));
}

}  // namespace normkit::cuda
