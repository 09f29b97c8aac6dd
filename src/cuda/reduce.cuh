// Deterministic reductions across the threads that share one row: a sub-warp or warp
// (shuffles), a block (shuffles + shared memory, fixed order), or a thread-block cluster
// (distributed shared memory, fixed order). Every thread of the row receives the same result.
// Sums serve the mean square and the backward's dot product; maxima the quantization scales.
#pragma once

#include <cooperative_groups.h>

#include "cuda/async_copy.cuh"

namespace normkit::cuda {

struct SumOp {
  static constexpr float kIdentity = 0.0f;
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

// Maximum of non-negative values (|v|): 0 is the identity, and NaN operands are ignored.
struct MaxOp {
  static constexpr float kIdentity = 0.0f;
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Reduction over aligned groups of `width` lanes (a power of two <= 32) within a warp.
template <typename Op>
__device__ __forceinline__ float group_reduce(float v, int width, Op op) {
  for (int offset = width / 2; offset > 0; offset /= 2) {
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

__device__ __forceinline__ float group_sum(float v, int width) {
  return group_reduce(v, width, SumOp{});
}

constexpr int kMaxWarps = 32;

// Reduction over the blockDim.x threads (a multiple of 32) of each row group threadIdx.y.
// `scratch` holds kMaxWarps floats (blockDim.x * blockDim.y <= 1024). Every thread of the block
// must call it; it starts with a barrier so scratch can be reused across calls.
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, float* scratch, Op op) {
  const int warps = blockDim.x / 32;
  v = group_reduce(v, 32, op);
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.y * warps + threadIdx.x / 32] = v;
  __syncthreads();
  float total = Op::kIdentity;
  for (int w = 0; w < warps; ++w) total = op(total, scratch[threadIdx.y * warps + w]);
  return total;
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
  return block_reduce(v, scratch, SumOp{});
}

// block_sum of `sum` and the maximum of `max` (non-negative) together, behind the same two
// barriers; `sum` comes out bit for bit as block_sum's. `scratch` holds 2 * kMaxWarps floats.
__device__ __forceinline__ void block_sum_and_max(float& sum, float& max, float* scratch) {
  const int warps = blockDim.x / 32;
  sum = group_reduce(sum, 32, SumOp{});
  max = group_reduce(max, 32, MaxOp{});
  __syncthreads();
  if (threadIdx.x % 32 == 0) {
    scratch[threadIdx.y * warps + threadIdx.x / 32] = sum;
    scratch[kMaxWarps + threadIdx.y * warps + threadIdx.x / 32] = max;
  }
  __syncthreads();
  float total = SumOp::kIdentity, largest = MaxOp::kIdentity;
  for (int w = 0; w < warps; ++w) {
    total += scratch[threadIdx.y * warps + w];
    largest = fmaxf(largest, scratch[kMaxWarps + threadIdx.y * warps + w]);
  }
  sum = total;
  max = largest;
}

// Sum over the blockDim.x threads (a multiple of 32) of row group threadIdx.y only: the other
// groups of the block go on independently (named barrier 1 + threadIdx.y; at most 15 groups).
// `scratch` holds 2 * kMaxWarps floats; callers alternate `parity` between calls, so that one
// barrier per call suffices (a group cannot overwrite a half that it may still be reading).
__device__ __forceinline__ float row_group_sum(float v, float* scratch, int parity) {
  v = group_sum(v, 32);
  if (blockDim.x == 32) return v;
  const int warps = blockDim.x / 32;
  float* sums = scratch + parity * kMaxWarps + threadIdx.y * warps;
  if (threadIdx.x % 32 == 0) sums[threadIdx.x / 32] = v;
  named_barrier(1 + threadIdx.y, blockDim.x);
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += sums[w];
  return total;
}

// Reduction of `v` (already equal on every thread of this CTA) over the CTAs of the cluster,
// in rank order. `slot` is one float of this CTA's shared memory.
template <typename Op>
__device__ __forceinline__ float cluster_reduce(float v, float* slot, Op op) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0 && threadIdx.y == 0) *slot = v;
  cluster.sync();
  float total = Op::kIdentity;
  const unsigned ranks = cluster.num_blocks();
  for (unsigned r = 0; r < ranks; ++r) total = op(total, *cluster.map_shared_rank(slot, r));
  cluster.sync();  // no CTA may overwrite or leave its slot while others still read it
  return total;
#else
  (void)slot;
  (void)op;
  __trap();  // the launcher never picks clusters below sm_90
  return v;
#endif
}

__device__ __forceinline__ float cluster_sum(float v, float* slot) {
  return cluster_reduce(v, slot, SumOp{});
}

// cluster_sum of `sum` and the cluster maximum of `max`, through one exchange; `slots` is two
// floats of this CTA's shared memory. `sum` comes out bit for bit as cluster_sum's.
__device__ __forceinline__ void cluster_sum_and_max(float& sum, float& max, float* slots) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    slots[0] = sum;
    slots[1] = max;
  }
  cluster.sync();
  float total = SumOp::kIdentity, largest = MaxOp::kIdentity;
  const unsigned ranks = cluster.num_blocks();
  for (unsigned r = 0; r < ranks; ++r) {
    const float* remote = cluster.map_shared_rank(slots, r);
    total += remote[0];
    largest = fmaxf(largest, remote[1]);
  }
  cluster.sync();  // no CTA may overwrite or leave its slots while others still read them
  sum = total;
  max = largest;
#else
  (void)slots;
  __trap();  // the launcher never picks clusters below sm_90
#endif
}

// cluster_sum for a sequence of calls with alternating `parity` (0, 1, 0, ...), as the
// pipelined kernels make one per row: `slots` holds two floats of this CTA's shared memory,
// and one cluster barrier per call suffices. A CTA writes slots[parity] again only two calls
// later, after the barrier of the call in between, which every CTA reaches only once done
// reading slots[parity] of the call before.
__device__ __forceinline__ float cluster_sum_alternating(float v, float* slots, int parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  float* slot = slots + parity;
  if (threadIdx.x == 0 && threadIdx.y == 0) *slot = v;
  cluster.sync();
  float total = 0.0f;
  const unsigned ranks = cluster.num_blocks();
  for (unsigned r = 0; r < ranks; ++r) total += *cluster.map_shared_rank(slot, r);
  return total;
#else
  (void)slots;
  (void)parity;
  __trap();  // the launcher never picks clusters below sm_90
  return v;
#endif
}

// Called once by every thread of every CTA of a cluster after its last
// cluster_sum_alternating: no CTA may exit (its shared memory would go) while another may
// still read its slot.
__device__ __forceinline__ void cluster_sum_done() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cooperative_groups::this_cluster().sync();
#endif
}

}  // namespace normkit::cuda
