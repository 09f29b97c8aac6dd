// RMSNorm forward, pipelined: a persistent CTA streams its rows of x (and residual) into
// shared memory with cp.async, kPipelineStages - 1 rows ahead per row group, so that HBM reads
// stay in flight while the current row is reduced and stored, and the weight is loaded once,
// alongside the first rows. The planner uses it for few rows (there the weight's load no
// longer follows the reduction); with many rows the registers kernel, 4 CTAs per SM each with
// a row in flight, measured 3-5% faster (docs/notes.md v10).
//
// blockDim = (T, groups): row group g of CTA b (or, with CLUSTER, of cluster b, whose CTAs
// split each row's columns; then groups = 1) walks rows b * groups + g, + slots * groups, ...
// Thread t owns vectors t, t + T, ... of its CTA's columns in shared memory as in registers, so
// it only waits for its own copies; weight and bias for those columns stay in registers.
#pragma once

#include "cuda/async_copy.cuh"
#include "cuda/element.cuh"
#include "cuda/kept_columns.cuh"
#include "cuda/kernel_params.h"
#include "cuda/launch_config.h"
#include "cuda/reduce.cuh"
#include "cuda/stage_ring.cuh"

namespace normkit::cuda {

// CLUSTER: rows split over a cluster, as in the pipelined backward (one row group per CTA),
// each row completed one row late as there.
template <typename XT, typename WT, typename YT, int VEC, int IMAX, bool CLUSTER>
__global__ void __launch_bounds__(512) rms_norm_fwd_pipelined(FwdParams p) {
  extern __shared__ __align__(16) unsigned char block_smem[];
  __shared__ float scratch[2 * kMaxWarps];
  __shared__ ClusterRowSums cluster_sums;  // with CLUSTER (then one row group per CTA)
  const RowShape& shape = p.shape;
  const bool with_residual = p.residual != nullptr;
  // Stage operands: 0 x, 1 residual.
  const StageRing st(block_smem, shape.cols_per_cta, sizeof(XT), with_residual ? sizeof(XT) : 0,
                     0);
  const int cluster = CLUSTER ? shape.cluster_size : 1;
  const int rank = CLUSTER ? static_cast<int>(blockIdx.x % cluster) : 0;
  const int64_t slot = CLUSTER ? blockIdx.x / cluster : blockIdx.x;
  const int64_t col_begin = CLUSTER ? rank * shape.cols_per_cta : 0;
  int64_t col[IMAX];
  int stage_col[IMAX];  // < cols_per_cta <= 512 threads x kPipelineItems x 16
  bool active[IMAX];
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    stage_col[i] = static_cast<int>((i * blockDim.x + threadIdx.x) * VEC);
    col[i] = col_begin + stage_col[i];
    active[i] = i < shape.items && col[i] < shape.hidden;
  }

  const ReadPolicy read_policy(sizeof(XT) * VEC >= 16 && p.evict_first_reads,
                               sizeof(XT) * VEC >= 16 && p.evict_last_reads);
  // Starts the copies of `row` into stage s (nothing past the last row), as one group.
  auto issue = [&](int64_t row, int s) {
    if (row < shape.rows) {
      const XT* x = static_cast<const XT*>(p.x) + row * p.x_stride;
      const XT* res =
          with_residual ? static_cast<const XT*>(p.residual) + row * p.residual_stride : nullptr;
#pragma unroll
      for (int i = 0; i < IMAX; ++i) {
        if (!active[i]) continue;
        cp_async_vector<XT, VEC>(st.at<XT>(s, 0) + stage_col[i], x + col[i], read_policy);
        if (with_residual) {
          cp_async_vector<XT, VEC>(st.at<XT>(s, 1) + stage_col[i], res + col[i], read_policy);
        }
      }
    }
    cp_async_commit();
  };

  const int64_t step = static_cast<int64_t>(CLUSTER ? gridDim.x / cluster : gridDim.x) * blockDim.y;
  int64_t row = slot * blockDim.y + threadIdx.y;
  static_assert(kPipelineStages == 3, "the prologue assumes 3 stages");
  issue(row, 0);
  issue(row + step, 1);
  KeptColumns<WT, VEC, IMAX> weight, bias;
  weight.load(p.weight, weight_offset(p), col, active);
  if (p.bias) bias.load(p.bias, 0.0f, col, active);

  // This thread's x (plus residual, rounded to XT: what is normalized) of the row in stage s,
  // and its sum of squares; with store_residual, the sum also goes to residual_out.
  auto load_row = [&](int64_t row, int s, bool store_residual, Lanes<XT, VEC>(&xs)[IMAX]) {
    float sum_sq = 0.0f;
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (!active[i]) continue;
      xs[i].load(st.at<XT>(s, 0) + stage_col[i]);
      if (with_residual) {
        Lanes<XT, VEC> r;
        r.load(st.at<XT>(s, 1) + stage_col[i]);
        float sum[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) sum[k] = to_float(xs[i].get(k)) + to_float(r.get(k));
        xs[i] = pack_lanes<XT, VEC>(sum);
        if (store_residual) {
          xs[i].store(static_cast<XT*>(p.residual_out) + row * p.residual_out_stride + col[i]);
        }
      }
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float v = to_float(xs[i].get(k));
        sum_sq = fmaf(v, v, sum_sq);
      }
    }
    return sum_sq;
  };
  // y = xs * rstd * w (+ b), rstd from the row's total sum of squares.
  auto store_row_y = [&](int64_t row, const Lanes<XT, VEC>(&xs)[IMAX], float sum_sq) {
    const float rstd = 1.0f / sqrtf(sum_sq * shape.inv_hidden + p.eps);
    if (p.rstd && rank == 0 && threadIdx.x == 0) p.rstd[row] = rstd;
    YT* y = static_cast<YT*>(p.y) + row * p.y_stride;
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (!active[i]) continue;
      float w[VEC], out[VEC];
      weight.get(i, w);
#pragma unroll
      for (int k = 0; k < VEC; ++k) out[k] = to_float(xs[i].get(k)) * rstd * w[k];
      if (p.bias) {
        float b[VEC];
        bias.get(i, b);
#pragma unroll
        for (int k = 0; k < VEC; ++k) out[k] += b[k];
      }
      store_vec<YT, VEC>(y + col[i], out);
    }
  };

  int stage = 0, parity = 0;
  if constexpr (CLUSTER) {
    // As the split-row backward: row k (stage k % 4, cluster sum slot k % 4) completes in
    // iteration k + 1, after the next row's push, so the wait for its cluster sum overlaps a
    // row of work; its x is reloaded from its stage then.
    static_assert(kClusterPipelineStages == 4, "the pending row takes the fourth stage");
    static_assert(IMAX <= kClusterDeferMaxItems, "as the planner sizes the stages");
    cluster_row_sums_init(cluster_sums);
    unsigned sum_phases = 0;
    int64_t pending = -1;
    int k = 0;
    auto complete_pending = [&](Lanes<XT, VEC>(&xs)[IMAX]) {
      const int s = (stage + kClusterPipelineStages - 1) % kClusterPipelineStages;
      const float sum_sq = cluster_row_wait(cluster_sums, (k - 1) % kClusterRowSlots, sum_phases);
      load_row(pending, s, false, xs);
      store_row_y(pending, xs, sum_sq);
    };
    for (; row < shape.rows; row += step, ++k) {
      issue(row + 2 * step, (stage + 2) % kClusterPipelineStages);
      cp_async_wait<kPipelineStages - 1>();  // this row's copies (this thread's own) have landed
      Lanes<XT, VEC> xs[IMAX];
      const float sum_sq =
          row_group_sum_whole_warps(load_row(row, stage, true, xs), scratch, parity);
      parity ^= 1;
      cluster_row_push(sum_sq, cluster_sums, k % kClusterRowSlots);
      if (pending >= 0) complete_pending(xs);
      pending = row;
      stage = (stage + 1) % kClusterPipelineStages;
    }
    if (pending >= 0) {
      Lanes<XT, VEC> xs[IMAX];
      complete_pending(xs);
    }
  } else {
    for (; row < shape.rows; row += step) {
      issue(row + 2 * step, stage == 0 ? 2 : stage - 1);
      cp_async_wait<kPipelineStages - 1>();  // this row's copies (this thread's own) have landed
      Lanes<XT, VEC> xs[IMAX];
      const float sum_sq =
          row_group_sum_whole_warps(load_row(row, stage, true, xs), scratch, parity);
      parity ^= 1;
      store_row_y(row, xs, sum_sq);
      stage = stage == kPipelineStages - 1 ? 0 : stage + 1;
    }
  }
  cp_async_wait<0>();  // only empty groups remain; nothing may be in flight at exit
  if constexpr (CLUSTER) cluster_sum_done();
}

}  // namespace normkit::cuda
