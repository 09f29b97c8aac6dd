// RMSNorm forward of rows that no cluster of registers or pipelined CTAs holds (past 262144
// bf16 or 131072 float32 columns), under KernelFacts::fwd_cluster_streaming: a cluster of CTAs
// per row, each streaming its chunk of the row twice, first for its share of the sum of squares
// (summed over the cluster through distributed shared memory), then, from L2, for y.
//
// Why: rms_norm_fwd_streaming runs one CTA per row, so hundreds of rows of a megabyte or more
// are between their two passes at once, far more than L2 holds, and its second pass reads HBM
// again: 41-64% of copy bandwidth (docs/notes.md, twenty-second session). Here a few clusters'
// rows (a few MB) are in flight at once.
#pragma once

#include "cuda/cluster_streaming.cuh"
#include "cuda/element.cuh"
#include "cuda/kernel_params.h"
#include "cuda/read_policy.cuh"
#include "cuda/reduce.cuh"
#include "cuda/rms_norm_fwd_kernels.cuh"

namespace normkit::cuda {

// blockDim = (T, 1); cluster_size CTAs per row, CTA `rank` covering columns [rank * cols_per_cta,
// ...) (a multiple of VEC) of the rows slot, slot + slots, ... of its cluster. Each thread loads
// kClusterStreamingBatch full vectors before it uses any (see there). Two CTAs per SM
// (apply_fwd_cluster_streaming counts fwd_ctas_per_sm): 64 registers, 88-90 unbounded.
template <typename XT, typename WT, typename YT, int VEC>
__global__ void __launch_bounds__(512, 2) rms_norm_fwd_cluster_streaming(FwdParams p) {
  __shared__ float scratch[kMaxWarps];
  __shared__ ClusterRowSums cluster_sums;
  constexpr int B = kClusterStreamingBatch;
  const RowShape& shape = p.shape;
  const StreamingChunk ch = streaming_chunk<VEC>(shape);
  // Pass 1's reads of x stay in L2 for pass 2 (evict-last) unless a residual is added: pass 2
  // then reads residual_out, written in pass 1. Pass 2's reads are their last use.
  constexpr bool kHinted = sizeof(XT) * VEC == 16;
  const ReadPolicy keep(false, kHinted && !p.residual);
  const ReadPolicy done(kHinted);
  cluster_row_sums_init(cluster_sums);
  unsigned sum_phases = 0;
  int k_row = 0;
  for (int64_t row = ch.slot; row < shape.rows; row += ch.slots, ++k_row) {
    const XT* x = static_cast<const XT*>(p.x) + row * p.x_stride;
    // Pass 1 (from HBM): this CTA's share of the sum of squares of s = x (+ residual).
    float sum_sq = 0.0f;
    for (int64_t i = 0; i < ch.batched; i += B) {
      Lanes<XT, VEC> xs[B];
#pragma unroll
      for (int b = 0; b < B; ++b) xs[b].load(x + ch.first_col + (i + b) * ch.step, keep);
      if (p.residual) {
        const XT* r = static_cast<const XT*>(p.residual) + row * p.residual_stride;
        Lanes<XT, VEC> rs[B];
#pragma unroll
        for (int b = 0; b < B; ++b) rs[b].load(r + ch.first_col + (i + b) * ch.step, done);
#pragma unroll
        for (int b = 0; b < B; ++b) {
          float s[VEC];
#pragma unroll
          for (int k = 0; k < VEC; ++k) {
            s[k] = round_to<XT>(xs[b].get_float(k) + rs[b].get_float(k));
            sum_sq += s[k] * s[k];
          }
          store_vec<XT, VEC>(static_cast<XT*>(p.residual_out) + row * p.residual_out_stride +
                                 ch.first_col + (i + b) * ch.step,
                             s);
        }
      } else {
#pragma unroll
        for (int b = 0; b < B; ++b) {
#pragma unroll
          for (int k = 0; k < VEC; ++k) sum_sq += xs[b].get_float(k) * xs[b].get_float(k);
        }
      }
    }
    for (int64_t i = ch.batched; i < ch.vectors; ++i) {
      const int64_t col = ch.first_col + i * ch.step;
      float s[VEC];
      load_input<XT, VEC>(p, row, col, ch.col_end - col, s);
#pragma unroll
      for (int k = 0; k < VEC; ++k) sum_sq += s[k] * s[k];
    }
    // The next row's chunk, on its way into L2 through the reduction and pass 2.
    if (kHinted && p.prefetch_bytes && threadIdx.x == 0 && row + ch.slots < shape.rows) {
      prefetch_chunk(x + ch.slots * p.x_stride, ch.col_begin, ch.col_end, p.prefetch_bytes);
      if (p.residual) {
        prefetch_chunk(static_cast<const XT*>(p.residual) + (row + ch.slots) * p.residual_stride,
                       ch.col_begin, ch.col_end, p.prefetch_bytes);
      }
    }
    // Pushed to every CTA of the cluster and waited for at once (as the backward's).
    cluster_row_push(block_sum(sum_sq, scratch), cluster_sums, k_row % kClusterRowSlots);
    const float rstd =
        1.0f / sqrtf(cluster_row_wait(cluster_sums, k_row % kClusterRowSlots, sum_phases) *
                         shape.inv_hidden +
                     p.eps);
    if (p.rstd && ch.rank == 0 && threadIdx.x == 0) p.rstd[row] = rstd;
    // Pass 2 (the same bytes, read moments ago: from L2): y. The normalized input lives in
    // residual_out when a residual was added (this thread wrote exactly these elements).
    const XT* src =
        p.residual ? static_cast<const XT*>(p.residual_out) + row * p.residual_out_stride : x;
    YT* y = static_cast<YT*>(p.y) + row * p.y_stride;
    for (int64_t i = 0; i < ch.batched; i += B) {
      Lanes<XT, VEC> ss[B];
#pragma unroll
      for (int b = 0; b < B; ++b) ss[b].load(src + ch.first_col + (i + b) * ch.step, done);
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const int64_t col = ch.first_col + (i + b) * ch.step;
        float s[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) s[k] = ss[b].get_float(k);
        scale_in_place<WT, VEC>(p, col, VEC, s, rstd);
        store_vec<YT, VEC>(y + col, s);
      }
    }
    for (int64_t i = ch.batched; i < ch.vectors; ++i) {
      const int64_t col = ch.first_col + i * ch.step;
      float s[VEC];
      load_upto<XT, VEC>(src + col, ch.col_end - col, s);
      scale_in_place<WT, VEC>(p, col, ch.col_end - col, s, rstd);
      store_upto<YT, VEC>(y + col, ch.col_end - col, s);
    }
  }
  cluster_sum_done();
}

}  // namespace normkit::cuda
