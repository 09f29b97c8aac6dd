// RMSNorm backward of rows that no cluster of pipelined CTAs holds (past 262144 bf16 or 131072
// float32 columns), under KernelFacts::bwd_cluster_streaming: a cluster of CTAs per row, each
// streaming its chunk of the row's columns twice, first for its share of the row's dot product
// (summed over the cluster through distributed shared memory), then, from L2, for dx. dweight
// and dbias accumulate per column in shared memory over the cluster's rows and go to the
// cluster's slot once, at the end.
//
// Why: rms_norm_bwd_streaming runs one CTA per row, so hundreds of rows of megabytes are in
// flight and its second pass reads HBM again, and it adds every row into its slot of the
// workspace (a read and a write of 4 bytes per column per row): 14-37% of copy bandwidth
// (docs/notes.md, twenty-second session). Here a few clusters' rows (a few MB each) are in
// flight at once, and the workspace is written once per cluster.
#pragma once

#include "cuda/element.cuh"
#include "cuda/kernel_params.h"
#include "cuda/reduce.cuh"
#include "cuda/rms_norm_bwd_kernels.cuh"
#include "cuda/rms_norm_fwd_kernels.cuh"

namespace normkit::cuda {

// blockDim = (T, 1); cluster_size CTAs per row, CTA `rank` covering columns [rank * cols_per_cta,
// ...) (a multiple of VEC) of the rows slot, slot + slots, ... of its cluster. Dynamic shared
// memory: cols_per_cta floats of dweight sums, then as many of dbias sums where wanted.
template <typename XT, typename WT, typename DYT, int VEC>
__global__ void __launch_bounds__(512) rms_norm_bwd_cluster_streaming(BwdParams p) {
  extern __shared__ __align__(16) unsigned char block_smem[];
  __shared__ float scratch[kMaxWarps];
  __shared__ ClusterRowSums cluster_sums;
  const RowShape& shape = p.shape;
  const int cluster = shape.cluster_size;
  const int64_t rank = blockIdx.x % cluster;
  const int64_t slot = blockIdx.x / cluster;
  const int64_t slots = gridDim.x / cluster;
  const int64_t col_begin = rank * shape.cols_per_cta;
  const int64_t col_end = min(shape.hidden, col_begin + shape.cols_per_cta);
  const int64_t first_col = col_begin + static_cast<int64_t>(threadIdx.x) * VEC;
  const int64_t step = static_cast<int64_t>(blockDim.x) * VEC;
  const bool want_b = p.want_dbias();
  // Each thread reads and writes only its own columns' sums: no barrier around them.
  float* sum_w = reinterpret_cast<float*>(block_smem);
  float* sum_b = sum_w + shape.cols_per_cta;
  for (int64_t col = first_col; col < col_end; col += step) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      sum_w[col - col_begin + k] = 0.0f;
      if (want_b) sum_b[col - col_begin + k] = 0.0f;
    }
  }
  cluster_row_sums_init(cluster_sums);
  unsigned sum_phases = 0;
  int k_row = 0;
  for (int64_t row = slot; row < shape.rows; row += slots, ++k_row) {
    const float rstd = p.rstd[row];
    const XT* x = static_cast<const XT*>(p.x) + row * p.x_stride;
    const DYT* dy_row = static_cast<const DYT*>(p.dy) + row * p.dy_stride;
    // Pass 1 (from HBM): this CTA's share of sum(g * xhat), g = dy * w, as the streaming
    // kernel forms it.
    // (Unrolled by 4 so that each thread has four vectors of x and dy in flight.)
    float dot = 0.0f;
#pragma unroll 4
    for (int64_t col = first_col; col < col_end; col += step) {
      float xv[VEC], dy[VEC], w[VEC];
      load_streamed<XT, WT, DYT, VEC>(p, x, dy_row, col, col_end - col, xv, dy, w);
#pragma unroll
      for (int k = 0; k < VEC; ++k) dot += dy[k] * w[k] * xv[k] * rstd;
    }
    // Pushed to every CTA of the cluster and waited for at once (the pipelined kernels' slots
    // and their reuse rule: a CTA pushes row k only after its wait for row k - 1).
    cluster_row_push(block_sum(dot, scratch), cluster_sums, k_row % kClusterRowSlots);
    const float mean =
        cluster_row_wait(cluster_sums, k_row % kClusterRowSlots, sum_phases) * shape.inv_hidden;
    // Pass 2 (the same bytes, read moments ago: from L2): dx and the column sums.
#pragma unroll 4
    for (int64_t col = first_col; col < col_end; col += step) {
      const int64_t n = col_end - col;
      float xhat[VEC], dy[VEC], w[VEC], g[VEC];
      load_streamed<XT, WT, DYT, VEC>(p, x, dy_row, col, n, xhat, dy, w);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        xhat[k] *= rstd;
        g[k] = dy[k] * w[k];
        sum_w[col - col_begin + k] += dy[k] * xhat[k];  // (zeros past the row's end)
        if (want_b) sum_b[col - col_begin + k] += dy[k];
      }
      store_dx<XT, VEC>(p, row, col, n, xhat, g, rstd, mean);
    }
  }
  cluster_sum_done();
  if (!p.want_dweight() && !want_b) return;
  for (int64_t col = first_col; col < col_end; col += step) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      if (col + k < col_end) {
        write_slot_sums<WT>(p, slot, col + k, sum_w[col - col_begin + k],
                            want_b ? sum_b[col - col_begin + k] : 0.0f);
      }
    }
  }
}

}  // namespace normkit::cuda
