// Deterministic sums across the threads that share one row: a sub-warp or warp (shuffles), a
// block (shuffles + shared memory, fixed order), or a thread-block cluster (distributed shared
// memory, fixed order). Every thread of the row receives the same total.
#pragma once

#include <cooperative_groups.h>

namespace normkit::cuda {

// Sum over aligned groups of `width` lanes (a power of two <= 32) within a warp.
__device__ __forceinline__ float group_sum(float v, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

constexpr int kMaxWarps = 32;

// Sum over the blockDim.x threads (a multiple of 32) of each row group threadIdx.y. `scratch`
// holds kMaxWarps floats (blockDim.x * blockDim.y <= 1024). Every thread of the block must call
// it; it starts with a barrier so scratch can be reused across calls.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int warps = blockDim.x / 32;
  v = group_sum(v, 32);
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.y * warps + threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += scratch[threadIdx.y * warps + w];
  return total;
}

// Sum of `v` (already equal on every thread of this CTA) over the CTAs of the cluster, added
// in rank order. `slot` is one float of this CTA's shared memory.
__device__ __forceinline__ float cluster_sum(float v, float* slot) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0 && threadIdx.y == 0) *slot = v;
  cluster.sync();
  float total = 0.0f;
  const unsigned ranks = cluster.num_blocks();
  for (unsigned r = 0; r < ranks; ++r) total += *cluster.map_shared_rank(slot, r);
  cluster.sync();  // no CTA may overwrite or leave its slot while others still read it
  return total;
#else
  (void)slot;
  __trap();  // the launcher never picks clusters below sm_90
  return v;
#endif
}

}  // namespace normkit::cuda
