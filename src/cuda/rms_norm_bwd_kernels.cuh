// RMSNorm backward kernels: dx per row, and per-slot float32 partial sums of dweight/dbias
// (a slot is a fixed set of rows: CTA or cluster `slot` handles rows slot, slot + slots, ...),
// reduced over slots in a fixed order by the reduce_partials kernel that follows (or
// reduce_slots, or in the kernel after a grid barrier: grid_reduce.cuh): bitwise
// deterministic, no atomics.
#pragma once

#include "cuda/element.cuh"
#include "cuda/grid_reduce.cuh"
#include "cuda/kernel_params.h"
#include "cuda/reduce.cuh"
#include "cuda/rms_norm_fwd_kernels.cuh"

namespace normkit::cuda {

// Called first by the backward's main kernels under NK_TUNE_BWD_EARLY_DEPENDENT=1: the
// reduction kernel launched after them as a programmatic dependent may start now, its CTAs
// waiting (cudaGridDependencySynchronize) in the room the persistent grid leaves. (It still
// reads the partial sums only after the whole grid has completed and flushed them.) Measured
// 0.2-1 us slower than the implicit trigger at the CTAs' exit, so off by default.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// dx = rstd * (g - xhat * mean(g * xhat)) (+ dresidual_out), stored as XT.
template <typename XT, int VEC>
__device__ __forceinline__ void store_dx(const BwdParams& p, int64_t row, int64_t col, int64_t n,
                                         const float* xhat, const float* g, float rstd,
                                         float mean) {
  float dx[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) dx[k] = rstd * (g[k] - xhat[k] * mean);
  if (p.dresidual_out) {
    float d[VEC];
    load_upto<XT, VEC>(static_cast<const XT*>(p.dresidual_out) + row * p.dresidual_out_stride + col,
                       n, d);
#pragma unroll
    for (int k = 0; k < VEC; ++k) dx[k] += d[k];
  }
  store_upto<XT, VEC>(static_cast<XT*>(p.dx) + row * p.dx_stride + col, n, dx);
}

// Writes one slot's dweight/dbias sums of column c: to the workspace, or with a single slot
// straight to dweight/dbias in the weight's dtype.
template <typename WT>
__device__ __forceinline__ void write_slot_sums(const BwdParams& p, int64_t slot, int64_t c,
                                                float sum_w, float sum_b) {
  if (p.dweight) static_cast<WT*>(p.dweight)[c] = from_float<WT>(sum_w);
  if (p.partial_dweight) p.partial_dweight[slot * p.shape.hidden + c] = sum_w;
  if (p.dbias) static_cast<WT*>(p.dbias)[c] = from_float<WT>(sum_b);
  if (p.partial_dbias) p.partial_dbias[slot * p.shape.hidden + c] = sum_b;
}

// write_slot_sums for VEC consecutive columns from col (a multiple of VEC; hidden a multiple of
// VEC too): 16-byte stores into the workspace when VEC allows (its rows are then 16-byte
// aligned), else element by element.
template <typename WT, int VEC>
__device__ __forceinline__ void write_slot_vector(const BwdParams& p, int64_t slot, int64_t col,
                                                  const float* sum_w, const float* sum_b) {
  if constexpr (VEC % 4 == 0) {
    if (!p.dweight && !p.dbias) {
      const int64_t at = slot * p.shape.hidden + col;
#pragma unroll
      for (int k = 0; k < VEC; k += 4) {
        if (p.partial_dweight) {
          __stcg(reinterpret_cast<float4*>(p.partial_dweight + at + k),
                 make_float4(sum_w[k], sum_w[k + 1], sum_w[k + 2], sum_w[k + 3]));
        }
        if (p.partial_dbias) {
          __stcg(reinterpret_cast<float4*>(p.partial_dbias + at + k),
                 make_float4(sum_b[k], sum_b[k + 1], sum_b[k + 2], sum_b[k + 3]));
        }
      }
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < VEC; ++k) write_slot_sums<WT>(p, slot, col + k, sum_w[k], sum_b[k]);
}

// Dynamic shared memory of rms_norm_bwd_registers, in floats: per row group, one sum per
// column of the CTA for dbias, and for dweight too when several row groups must be combined.
__host__ __device__ inline int64_t bwd_group_floats(int rows_per_block, int64_t cols_per_cta,
                                                    bool want_dweight, bool want_dbias) {
  const int arrays = (want_dbias ? 1 : 0) + (want_dweight && rows_per_block > 1 ? 1 : 0);
  return arrays * rows_per_block * cols_per_cta;
}

// Persistent: CTA (or cluster) `slot` walks rows slot, slot + slots, ... keeping its row part
// in registers, its dweight partial sums in registers and its dbias partial sums in shared
// memory across rows. As in the forward, loads and stores sit in separate loops.
template <typename XT, typename WT, typename DYT, int VEC, int IMAX>
__global__ void __launch_bounds__(256, 2) rms_norm_bwd_registers(BwdParams p) {
  if (p.early_dependent) allow_dependent_launch();
  __shared__ float scratch[kMaxWarps];
  __shared__ float cluster_slot;
  extern __shared__ float group_sums[];
  const RowShape& shape = p.shape;
  const int cluster = shape.cluster_size;
  const int rank = blockIdx.x % cluster;
  const int64_t slot = blockIdx.x / cluster;
  const int64_t slots = gridDim.x / cluster;
  const int64_t col_begin = rank * shape.cols_per_cta;
  const int64_t col_end = min(shape.hidden, col_begin + shape.cols_per_cta);
  const bool want_w = p.want_dweight(), want_b = p.want_dbias();
  const int groups = blockDim.y;
  // Column c of the CTA (0-based) for row group g: dbias at [g * cols + c], dweight after all
  // dbias arrays.
  const int64_t cols = shape.cols_per_cta;
  float* dbias_sums = group_sums;
  float* dweight_sums = group_sums + (want_b ? groups * cols : 0);
  auto local = [&](int i) { return (static_cast<int64_t>(i) * blockDim.x + threadIdx.x) * VEC; };

  float acc_w[IMAX][VEC];
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc_w[i][k] = 0.0f;
  }
  if (want_b) {
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        if (i < shape.items && local(i) + k < cols) dbias_sums[threadIdx.y * cols + local(i) + k] = 0.0f;
      }
    }
  }

  // Trip count is uniform over the block and the cluster (it depends on slot only).
  for (int64_t base = slot * groups; base < shape.rows; base += slots * groups) {
    const int64_t row = base + threadIdx.y;
    const bool valid = row < shape.rows;
    auto active = [&](int i) {
      return i < shape.items && valid && col_begin + local(i) < col_end;
    };
    const float rstd = valid ? p.rstd[row] : 0.0f;
    // x and dy stay packed in their own types: half the registers of float32 for 16-bit data.
    Lanes<XT, VEC> xs[IMAX];
    Lanes<DYT, VEC> dys[IMAX];
    // Narrow items (misaligned rows) also keep their weight, loaded with x: reloaded per item in
    // the dx loop, each load would wait for the previous item's store (kWeightWithX).
    constexpr bool kWeightFirst = kWeightWithX<XT, VEC, IMAX>;
    [[maybe_unused]] Lanes<WT, VEC> ws[kWeightFirst ? IMAX : 1];
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      const int64_t col = col_begin + local(i);
      if (active(i)) {
        xs[i] = load_lanes_upto<XT, VEC>(static_cast<const XT*>(p.x) + row * p.x_stride + col,
                                         col_end - col);
        dys[i] = load_lanes_upto<DYT, VEC>(
            static_cast<const DYT*>(p.dy) + row * p.dy_stride + col, col_end - col);
        if constexpr (kWeightFirst) {
          if (p.weight) {
            ws[i] = load_readonly_lanes_upto<WT, VEC>(static_cast<const WT*>(p.weight) + col,
                                                      col_end - col);
          }
        }
      } else {
        xs[i] = Lanes<XT, VEC>{};
        dys[i] = Lanes<DYT, VEC>{};
      }
    }
    // The scale of item i: weight (or 1 + weight), or 1 without a weight.
    auto item_scale = [&](int i, int64_t col, int64_t n, float* w) {
      if constexpr (kWeightFirst) {
        weight_scale<WT, VEC>(p, ws[i], w);
      } else {
        load_scale<WT, VEC>(p, col, n, w);
      }
    };
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      const int64_t col = col_begin + local(i);
      const int64_t n = col_end - col;
      if (active(i)) {
        float w[VEC];
        item_scale(i, col, n, w);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          const float dy = to_float(dys[i].get(k));
          const float xhat = to_float(xs[i].get(k)) * rstd;
          acc_w[i][k] += dy * xhat;
          dot += dy * w[k] * xhat;
          if (want_b && k < n) dbias_sums[threadIdx.y * cols + local(i) + k] += dy;
        }
      }
    }
    dot = row_sum(dot, shape, scratch, &cluster_slot);
    const float mean = dot * shape.inv_hidden;
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      const int64_t col = col_begin + local(i);
      const int64_t n = col_end - col;
      if (active(i)) {
        float w[VEC], dx[VEC];
        item_scale(i, col, n, w);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          const float xhat = to_float(xs[i].get(k)) * rstd;
          dx[k] = rstd * (to_float(dys[i].get(k)) * w[k] - xhat * mean);
        }
        if (p.dresidual_out) {
          float d[VEC];
          load_upto<XT, VEC>(static_cast<const XT*>(p.dresidual_out) +
                                 row * p.dresidual_out_stride + col, n, d);
#pragma unroll
          for (int k = 0; k < VEC; ++k) dx[k] += d[k];
        }
        store_upto<XT, VEC>(static_cast<XT*>(p.dx) + row * p.dx_stride + col, n, dx);
      }
    }
  }
  if (!want_w && !want_b) return;

  // Several rows per block: each group parks its dweight sums in shared memory; group 0 adds
  // the groups in order (dbias sums are already there).
  if (groups > 1 && want_w) {
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        if (i < shape.items && local(i) + k < cols) {
          dweight_sums[threadIdx.y * cols + local(i) + k] = acc_w[i][k];
        }
      }
    }
  }
  if (groups > 1) __syncthreads();
  if (threadIdx.y == 0) {
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const int64_t c = local(i) + k;
        if (i >= shape.items || col_begin + c >= col_end) continue;
        float total_w = acc_w[i][k], total_b = 0.0f;
        if (want_w) {
          for (int group = 1; group < groups; ++group) total_w += dweight_sums[group * cols + c];
        }
        if (want_b) {
          for (int group = 0; group < groups; ++group) total_b += dbias_sums[group * cols + c];
        }
        write_slot_sums<WT>(p, slot, col_begin + c, total_w, total_b);
      }
    }
  }
  if (p.reduce_in_grid()) {  // (uniform over the grid)
    __syncthreads();  // the group sums are read: shared memory is free
    reduce_slots_in_grid<WT>(p, group_sums);
  }
}

// x, dy and the weight of vector `col` of a row (n elements left in its range), as the
// streaming kernels read them in both passes.
template <typename XT, typename WT, typename DYT, int VEC>
__device__ __forceinline__ void load_streamed(const BwdParams& p, const XT* x, const DYT* dy_row,
                                              int64_t col, int64_t n, float* xv, float* dy,
                                              float* w) {
  load_upto<XT, VEC>(x + col, n, xv);
  load_upto<DYT, VEC>(dy_row + col, n, dy);
  load_scale<WT, VEC>(p, col, n, w);
}

// Any row length: CTA `slot` walks rows slot, slot + slots, ...; pass 1 computes the row's
// dot product, pass 2 writes dx and accumulates the slot's partial sums in the workspace
// (read-modify-write by the one thread that owns each column of the slot).
template <typename XT, typename WT, typename DYT, int VEC>
__global__ void __launch_bounds__(512) rms_norm_bwd_streaming(BwdParams p) {
  if (p.early_dependent) allow_dependent_launch();
  __shared__ float scratch[kMaxWarps];
  const RowShape& shape = p.shape;
  const int64_t slot = blockIdx.x;
  const int64_t step = static_cast<int64_t>(blockDim.x) * VEC;
  float* partial_w = p.partial_dweight ? p.partial_dweight + slot * shape.hidden : nullptr;
  float* partial_b = p.partial_dbias ? p.partial_dbias + slot * shape.hidden : nullptr;
  for (int64_t row = slot; row < shape.rows; row += gridDim.x) {
    const float rstd = p.rstd[row];
    const XT* x = static_cast<const XT*>(p.x) + row * p.x_stride;
    const DYT* dy_row = static_cast<const DYT*>(p.dy) + row * p.dy_stride;
    float dot = 0.0f;
    for (int64_t col = threadIdx.x * VEC; col < shape.hidden; col += step) {
      float xv[VEC], dy[VEC], w[VEC];
      load_streamed<XT, WT, DYT, VEC>(p, x, dy_row, col, shape.hidden - col, xv, dy, w);
#pragma unroll
      for (int k = 0; k < VEC; ++k) dot += dy[k] * w[k] * xv[k] * rstd;
    }
    const float mean = block_sum(dot, scratch) * shape.inv_hidden;
    const bool first = row == slot;
    for (int64_t col = threadIdx.x * VEC; col < shape.hidden; col += step) {
      const int64_t n = shape.hidden - col;
      float xhat[VEC], dy[VEC], w[VEC], g[VEC];
      load_streamed<XT, WT, DYT, VEC>(p, x, dy_row, col, n, xhat, dy, w);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        xhat[k] *= rstd;
        g[k] = dy[k] * w[k];
        if (k < n) {
          if (partial_w) partial_w[col + k] = (first ? 0.0f : partial_w[col + k]) + dy[k] * xhat[k];
          if (partial_b) partial_b[col + k] = (first ? 0.0f : partial_b[col + k]) + dy[k];
        }
      }
      store_dx<XT, VEC>(p, row, col, n, xhat, g, rstd, mean);
    }
  }
}

}  // namespace normkit::cuda
