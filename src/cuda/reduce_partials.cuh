// The backward's reduction kernel of the dweight/dbias slots (the default; reduce_slots in
// grid_reduce.cuh is the alternative, NK_TUNE_BWD_REDUCE_KERNEL=1).
#pragma once

#include <cstdint>

#include "cuda/element.cuh"

namespace normkit::cuda {

// Sums over the slots of a column, [slots, hidden] float32 -> [hidden] WT. blockDim = (32,
// lanes), lanes <= kReduceLanes: thread (c, l) owns VEC consecutive columns and adds slots l,
// l + lanes, l + 2 lanes, ... into kReduceChains independent running sums (loads of several
// slots in flight, not one dependent chain), which are then combined in chain order and the
// lanes in lane order: a fixed order for a given (slots, lanes), the same for either VEC, so
// the result is bitwise reproducible. VEC = 4 (16-byte loads; hidden % 4 == 0 and the partial
// sums 16-byte aligned) takes wide rows in a quarter of the CTAs: with one column per thread,
// 65536 columns took four waves of CTAs that each wait one load (ncu: 10.5 us, 11% of DRAM).
// blockIdx.y selects dweight (0) or dbias (1) when both are wanted.
// Launched as a programmatic dependent of the main kernel: its launch overlaps the main
// kernel's tail, and it waits for the main kernel's results before reading them.
constexpr int kReduceLanes = 16;
// 4 measured fastest: 8 and 16 (twenty-first session, the backward sweep twice) 1.01-1.13x
// slower at every shape (29 x 17389 16.3 -> 18.2 / 20.7 us, 4096 x 4096 43.5 -> 44.5 / 44.7).
constexpr int kReduceChains = 4;
// From this many columns (128 CTAs of 128 columns: about one per SM) the launcher takes VEC = 4.
constexpr int64_t kReduceVectorFromColumns = 16384;

template <int VEC>
__device__ __forceinline__ void add_columns(float (&sum)[VEC], const float* src) {
  if constexpr (VEC == 4) {
    const float4 v = *reinterpret_cast<const float4*>(src);
    sum[0] += v.x;
    sum[1] += v.y;
    sum[2] += v.z;
    sum[3] += v.w;
  } else {
#pragma unroll
    for (int k = 0; k < VEC; ++k) sum[k] += src[k];
  }
}

template <typename WT, int VEC>
__global__ void __launch_bounds__(32 * kReduceLanes)
    reduce_partials(const float* partial_w, WT* out_w, const float* partial_b, WT* out_b,
                    int64_t slots, int64_t hidden) {
  __shared__ float lane_sums[kReduceLanes][32 * VEC + 1];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
  const float* partial = blockIdx.y == 0 && partial_w ? partial_w : partial_b;
  WT* out = blockIdx.y == 0 && partial_w ? out_w : out_b;
  const int lanes = static_cast<int>(blockDim.y);
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x) * VEC;
  float chain[kReduceChains][VEC] = {};
  if (col < hidden) {  // VEC > 1 only where hidden % VEC == 0: all VEC columns exist
    const int64_t step = int64_t(lanes) * kReduceChains;
    int64_t s = threadIdx.y;
    for (; s + (kReduceChains - 1) * lanes < slots; s += step) {
#pragma unroll
      for (int j = 0; j < kReduceChains; ++j) {
        add_columns<VEC>(chain[j], partial + (s + j * lanes) * hidden + col);
      }
    }
#pragma unroll
    for (int j = 0; j < kReduceChains; ++j) {
      if (s + j * lanes < slots) add_columns<VEC>(chain[j], partial + (s + j * lanes) * hidden + col);
    }
  }
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kReduceChains; ++j) sum += chain[j][k];
    lane_sums[threadIdx.y][threadIdx.x * VEC + k] = sum;
  }
  __syncthreads();
  if (threadIdx.y == 0 && col < hidden) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      float total = 0.0f;
      for (int l = 0; l < lanes; ++l) total += lane_sums[l][threadIdx.x * VEC + k];
      out[col + k] = from_float<WT>(total);
    }
  }
}

}  // namespace normkit::cuda
