// Alternatives to reduce_partials for the backward's dweight/dbias reduction over the slots:
// each CTA sums a few columns over every slot's float32 partial sums and writes them in the
// weight's dtype. Either a kernel of its own, reduce_slots (NK_TUNE_BWD_REDUCE_KERNEL=1), or
// inside the main kernel after a grid barrier (a cooperative launch; NK_TUNE_BWD_REDUCE_IN_GRID=1).
// Both measured slower than reduce_partials, except at 256 x 65536 (docs/notes.md, ninth session:
// the grid barrier cost more than the kernel boundary, 4096 x 1024 23.4 against 22.1 us).
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "cuda/element.cuh"
#include "cuda/grid_reduce_columns.h"
#include "cuda/kernel_params.h"

namespace normkit::cuda {

// Adds partial[s][col..col + V) for s = first, first + step, ... < slots to sum, in that order,
// 8 loads in flight.
template <int V>
__device__ __forceinline__ void add_slots(float (&sum)[V], const float* partial, int64_t col,
                                          int64_t first, int64_t step, int64_t slots,
                                          int64_t hidden) {
  auto load = [&](int64_t s, float (&v)[V]) {
    const float* at = partial + s * hidden + col;
    if constexpr (V == 4) {
      const float4 q = __ldcg(reinterpret_cast<const float4*>(at));
      v[0] = q.x;
      v[1] = q.y;
      v[2] = q.z;
      v[3] = q.w;
    } else {
      v[0] = __ldcg(at);
    }
  };
  constexpr int kInFlight = 8;
  int64_t s = first;
  for (; s + (kInFlight - 1) * step < slots; s += kInFlight * step) {
    float v[kInFlight][V];
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) load(s + j * step, v[j]);
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
#pragma unroll
      for (int k = 0; k < V; ++k) sum[k] += v[j][k];
    }
  }
  for (; s < slots; s += step) {
    float v[V];
    load(s, v);
#pragma unroll
    for (int k = 0; k < V; ++k) sum[k] += v[k];
  }
}

// Sums partial[slots][hidden] over the slots into out[hidden] for this CTA's `chunk` columns
// (a power of two from 8), V consecutive columns per thread (16-byte loads where V = 4). With
// as many column vectors as threads or more, each thread sums whole columns over every slot;
// else `lanes` threads share a column vector (slots lane, lane + lanes, ...), the lanes within
// a warp are added by an xor-butterfly and the warps in warp order through `scratch` (V floats
// per thread). A fixed order for a given (slots, chunk, block), so the result is bitwise
// reproducible; one barrier at most. blockDim.x * blockDim.y: a multiple of 32.
template <typename WT, int V>
__device__ __forceinline__ void sum_slots_of_columns(const float* partial, WT* out,
                                                     int64_t slots, int64_t hidden,
                                                     int64_t chunk, float* scratch) {
  const int threads = static_cast<int>(blockDim.x * blockDim.y);
  const int t = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x);
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * chunk;
  if (begin >= hidden) return;
  const int vectors = static_cast<int>(chunk / V);  // a power of two
  auto write = [&](int64_t col, const float (&sum)[V]) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if (col + k < hidden) out[col + k] = from_float<WT>(sum[k]);
    }
  };
  if (vectors >= threads) {
    for (int v = t; v < vectors; v += threads) {
      const int64_t col = begin + int64_t(v) * V;
      if (col >= hidden) break;
      float sum[V] = {};
      add_slots<V>(sum, partial, col, 0, 1, slots, hidden);
      write(col, sum);
    }
    return;
  }
  int lanes = 1;  // the largest power of two with lanes * vectors <= threads (whole warps)
  while (2 * lanes * vectors <= threads) lanes *= 2;
  const int v = t % vectors, lane = t / vectors;
  const int64_t col = begin + int64_t(v) * V;
  float sum[V] = {};
  if (lane < lanes && col < hidden) add_slots<V>(sum, partial, col, lane, lanes, slots, hidden);
  // With vectors < 32, warp w holds lanes [w * per_warp, (w + 1) * per_warp) of every vector:
  // the butterfly over offsets vectors, 2 vectors, ..., 16 adds them (one group per warp).
  // Otherwise each lane is a group of its own.
  const int per_warp = vectors < 32 ? 32 / vectors : 1;
  for (int offset = vectors; offset < 32; offset *= 2) {
#pragma unroll
    for (int k = 0; k < V; ++k) sum[k] += __shfl_xor_sync(0xffffffffu, sum[k], offset);
  }
  const int groups = lanes / per_warp;  // partial sums per vector left
  const int group = lane / per_warp;
  if (lane < lanes && lane % per_warp == 0) {
#pragma unroll
    for (int k = 0; k < V; ++k) scratch[(group * vectors + v) * V + k] = sum[k];
  }
  __syncthreads();
  if (t < vectors && col < hidden) {
    float total[V] = {};
    for (int g = 0; g < groups; ++g) {
#pragma unroll
      for (int k = 0; k < V; ++k) total[k] += scratch[(g * vectors + v) * V + k];
    }
    write(col, total);
  }
}

// Both widths: 16-byte loads where every row of the partial sums is 16-byte aligned.
template <typename WT>
__device__ __forceinline__ void sum_slots_of_columns(const float* partial, WT* out,
                                                     int64_t slots, int64_t hidden,
                                                     int64_t chunk, float* scratch) {
  if (hidden % 4 == 0 && reinterpret_cast<uintptr_t>(partial) % 16 == 0) {
    sum_slots_of_columns<WT, 4>(partial, out, slots, hidden, chunk, scratch);
  } else {
    sum_slots_of_columns<WT, 1>(partial, out, slots, hidden, chunk, scratch);
  }
}

// The reduction as a kernel of its own (NK_TUNE_BWD_REDUCE_KERNEL=1): blockIdx.x owns `chunk`
// columns (grid_reduce_columns_per_cta), blockIdx.y selects dweight (0, or dbias alone) or
// dbias (1). Launched as a programmatic dependent of the main kernel: it waits here for that
// grid's completion, then reads the partial sums.
constexpr int kReduceSlotsThreads = 256;
constexpr int64_t kReduceSlotsCtas = 264;  // the CTAs that chunk sizes aim for
template <typename WT>
__global__ void __launch_bounds__(kReduceSlotsThreads)
    reduce_slots(const float* partial_w, WT* out_w, const float* partial_b, WT* out_b,
                 int64_t slots, int64_t hidden, int64_t chunk) {
  __shared__ __align__(16) float scratch[kReduceSlotsThreads * 4];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
  const bool first = blockIdx.y == 0 && partial_w;
  sum_slots_of_columns<WT>(first ? partial_w : partial_b, first ? out_w : out_b, slots, hidden,
                           chunk, scratch);
}

// Called by every thread of every CTA, after the CTA's slot row of partial sums is written
// (and its shared memory is free for `scratch`). Only under a cooperative launch
// (p.reduce_in_grid()): cooperative_groups' grid barrier releases each CTA's writes at gpu
// scope before any CTA reads them.
template <typename WT>
__device__ __forceinline__ void reduce_slots_in_grid(const BwdParams& p, float* scratch) {
  cooperative_groups::this_grid().sync();
  const int64_t chunk = grid_reduce_columns_per_cta(p.shape.hidden, gridDim.x);
  if (p.grid_dweight) {
    sum_slots_of_columns<WT>(p.partial_dweight, static_cast<WT*>(p.grid_dweight), p.slots,
                             p.shape.hidden, chunk, scratch);
  }
  if (p.grid_dbias) {
    if (p.grid_dweight) __syncthreads();  // scratch is reused
    sum_slots_of_columns<WT>(p.partial_dbias, static_cast<WT*>(p.grid_dbias), p.slots,
                             p.shape.hidden, chunk, scratch);
  }
}

}  // namespace normkit::cuda
