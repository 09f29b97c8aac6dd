// RMSNorm backward, pipelined: a persistent CTA streams its rows of x, dy (and dresidual_out)
// into shared memory with cp.async, kPipelineStages - 1 rows ahead per row group, so that loads
// stay in flight while the current row is reduced and its dx stored (the registers kernel
// serializes load -> reduce -> store per row and leaves HBM idle in between).
//
// blockDim = (T, groups): each row group of T threads walks its own rows, row = slot * groups
// + group, + slots * groups, ... where slot is the CTA, or with a cluster (rows too long for one
// CTA; then groups = 1) the cluster, whose CTAs split each row's columns. Thread t owns vectors
// t, t + T, ... of its CTA's columns, in shared memory as in registers, so it only ever waits
// for its own copies. dweight/dbias partial sums stay in registers across rows; at the end the
// groups of a CTA add them in group order into the slot's row of partial sums, reduced over
// slots after a grid barrier (reduce_slots_in_grid, under a cooperative launch) or by
// the reduce_partials kernel (or, with one slot, written straight to dweight/dbias).
#pragma once

#include <type_traits>

#include "cuda/async_copy.cuh"
#include "cuda/element.cuh"
#include "cuda/grid_reduce.cuh"
#include "cuda/kept_columns.cuh"
#include "cuda/kernel_params.h"
#include "cuda/launch_config.h"
#include "cuda/reduce.cuh"
#include "cuda/rms_norm_bwd_kernels.cuh"
#include "cuda/rms_norm_fwd_kernels.cuh"
#include "cuda/stage_ring.cuh"

namespace normkit::cuda {

// The end of a pipelined backward CTA (rms_norm_bwd_pipelined, rms_norm_bwd_lean): its row
// groups' dweight (and dbias) sums, acc_w / acc_b of this thread's columns (col in the row,
// stage_col in the CTA's chunk from col_begin; active: whether each exists), added in group
// order into the slot's partial sums (or dweight/dbias with one slot); then, where the launch
// asks for it, the reduction over the slots in the grid. Shared memory (the stages) is reused.
template <typename WT, int VEC, int IMAX, bool DBIAS>
__device__ __forceinline__ void write_cta_sums(const BwdParams& p, int64_t slot,
                                               int64_t col_begin, const int* stage_col,
                                               const int64_t* col, const bool* active,
                                               const float (&acc_w)[IMAX][VEC],
                                               const float (&acc_b)[IMAX][VEC],
                                               unsigned char* block_smem) {
  const RowShape& shape = p.shape;
  const int64_t hidden = shape.hidden;
  const bool want_w = p.want_dweight();
  if (!want_w && !DBIAS) return;
  if (blockDim.y == 1) {  // one row group: its sums are the CTA's
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (active[i]) write_slot_vector<WT, VEC>(p, slot, col[i], acc_w[i], acc_b[i]);
    }
  } else {
    // Each group parks its sums in shared memory ([group][column], dweight then dbias); then
    // every thread of the CTA takes whole columns and adds their groups in group order, or
    // group 0 alone its threads' columns (KernelFacts::bwd_group_sums_by_cta): the same sums.
    const int cols = static_cast<int>(shape.cols_per_cta);
    const int groups = static_cast<int>(blockDim.y);
    float* parked = reinterpret_cast<float*>(block_smem);
    float* parked_b = parked + groups * cols;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (!active[i]) continue;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        parked[threadIdx.y * cols + stage_col[i] + k] = acc_w[i][k];
        if constexpr (DBIAS) parked_b[threadIdx.y * cols + stage_col[i] + k] = acc_b[i][k];
      }
    }
    __syncthreads();
    // Column c of the CTA's chunk: its groups' sums in group order, into the slot.
    auto write_column = [&](int c) {
      float total_w = 0.0f, total_b = 0.0f;
      for (int g = 0; g < groups; ++g) {
        total_w += parked[g * cols + c];
        if constexpr (DBIAS) total_b += parked_b[g * cols + c];
      }
      write_slot_sums<WT>(p, slot, col_begin + c, total_w, total_b);
    };
    if (p.group_sums_by_cta) {
      const int64_t cols_in_row = hidden - col_begin < cols ? hidden - col_begin : cols;
      const int threads = groups * static_cast<int>(blockDim.x);
      for (int c = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x); c < cols_in_row;
           c += threads) {
        write_column(c);
      }
    } else if (threadIdx.y == 0) {  // (NK_TUNE_BWD_GROUP_SUMS_BY_CTA=0)
#pragma unroll
      for (int i = 0; i < IMAX; ++i) {
        if (!active[i]) continue;
#pragma unroll
        for (int k = 0; k < VEC; ++k) write_column(stage_col[i] + k);
      }
    }
  }
  if (p.reduce_in_grid()) {  // (uniform over the grid)
    __syncthreads();  // the parked sums are read: shared memory is free
    reduce_slots_in_grid<WT>(p, reinterpret_cast<float*>(block_smem));
  }
}

// DBIAS: dbias partial sums wanted (their registers are only allocated then). CLUSTER: rows
// split over a cluster (a separate instantiation: the cluster code in the loop cost the
// unsplit kernel registers, spills and 5-30% of its speed, docs/notes.md v11).
//
// Split rows complete one row late: a row's cluster sum needs every CTA's part, so rather than
// wait for it at once, a CTA goes on to the next row's dot product and its push, and only then
// completes the row before, whose sum had that much time to arrive. The pending row keeps its
// stage: rows of up to kClusterDeferMaxItems vectors per thread have kClusterPipelineStages
// stages (two rows in flight, the current row, the pending one); longer ones keep
// kPipelineStages and one row in flight (a row of 16384 columns is 64 KB of x and dy per CTA).
// PENDING_REGS (those longer split rows, without dbias and dresidual_out: KernelFacts::
// bwd_pending_in_registers): the pending row's x and dy stay in registers instead of its
// stage, which then takes a second row in flight (kPipelineStages: two in flight, the current).
// Each iteration completes the pending row first, then loads the current one into the same
// registers (holding both at once, with the current row's dot product first as above, spilled
// 64 bytes per thread and ran 1.6x slower: docs/notes.md, twenty-second session).
// ROW_SUM_QUADS: each row's dot product summed over its warps four slots at a time
// (row_group_sum's QUADS, bit for bit; LaunchConfig::row_sum_quads).
template <typename XT, typename WT, typename DYT, int VEC, int IMAX, bool DBIAS, bool CLUSTER,
          bool PENDING_REGS = false, bool SMEM_WEIGHT = false, bool ROW_SUM_QUADS = false>
__global__ void __launch_bounds__(512) rms_norm_bwd_pipelined(BwdParams p) {
  static_assert(!PENDING_REGS || (CLUSTER && IMAX > kClusterDeferMaxItems && !DBIAS),
                "registers hold the pending row of the longer split rows only");
  static_assert(!SMEM_WEIGHT || (CLUSTER && IMAX > kClusterDeferMaxItems),
                "shared memory holds the weight of the longer split rows only");
  if (p.early_dependent) allow_dependent_launch();
  // Rows in flight ahead of the current one.
  constexpr int kAhead = CLUSTER && IMAX > kClusterDeferMaxItems && !PENDING_REGS ? 1 : 2;
  extern __shared__ __align__(16) unsigned char block_smem[];
  __shared__ alignas(16) float scratch[2 * kRowSumFloats<ROW_SUM_QUADS>];
  __shared__ ClusterRowSums cluster_sums;  // with CLUSTER (then one row group per CTA)
  const RowShape& shape = p.shape;
  const int64_t hidden = shape.hidden;
  // (PENDING_REGS: the launcher takes it only without dresidual_out.)
  const bool with_dres = !PENDING_REGS && p.dresidual_out != nullptr;
  // Stage operands: 0 x, 1 dy, 2 dresidual_out.
  const StageRing st(block_smem, shape.cols_per_cta, sizeof(XT), sizeof(DYT),
                     with_dres ? sizeof(XT) : 0);
  // A cluster splits each row: CTA `rank` covers columns [rank * cols_per_cta, ...) of the
  // rows of cluster `slot`, which are the same for all its CTAs (uniform trip counts).
  const int cluster = CLUSTER ? shape.cluster_size : 1;
  const int rank = CLUSTER ? static_cast<int>(blockIdx.x % cluster) : 0;
  const int64_t slot = CLUSTER ? blockIdx.x / cluster : blockIdx.x;
  const int64_t col_begin = CLUSTER ? rank * shape.cols_per_cta : 0;
  // This thread's columns (in the row, and in its stage) and which of them exist: the same
  // for every row.
  int64_t col[IMAX];
  int stage_col[IMAX];  // < cols_per_cta <= 512 threads x kPipelineItems x 16
  bool active[IMAX];
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    stage_col[i] = static_cast<int>((i * blockDim.x + threadIdx.x) * VEC);
    col[i] = col_begin + stage_col[i];
    active[i] = i < shape.items && col[i] < hidden;
  }

  // (Only 16-byte copies take the policy: narrower vectors never create it.)
  const bool wide = sizeof(XT) * VEC >= 16 && sizeof(DYT) * VEC >= 16;
  const ReadPolicy read_policy(wide && p.evict_first_reads, wide && p.evict_last_reads);
  // Starts the copies of `row` into stage s (nothing past the last row), as one group.
  auto issue = [&](int64_t row, int s) {
    if (row < shape.rows) {
      const XT* x = static_cast<const XT*>(p.x) + row * p.x_stride;
      const DYT* dy = static_cast<const DYT*>(p.dy) + row * p.dy_stride;
      const XT* dres =
          with_dres ? static_cast<const XT*>(p.dresidual_out) + row * p.dresidual_out_stride : nullptr;
#pragma unroll
      for (int i = 0; i < IMAX; ++i) {
        if (!active[i]) continue;
        cp_async_vector<XT, VEC>(st.at<XT>(s, 0) + stage_col[i], x + col[i], read_policy);
        cp_async_vector<DYT, VEC>(st.at<DYT>(s, 1) + stage_col[i], dy + col[i], read_policy);
        if (with_dres) {
          cp_async_vector<XT, VEC>(st.at<XT>(s, 2) + stage_col[i], dres + col[i], read_policy);
        }
      }
    }
    cp_async_commit();
  };
  auto rstd_of = [&](int64_t row) { return row < shape.rows ? p.rstd[row] : 0.0f; };

  const int64_t step = static_cast<int64_t>(CLUSTER ? gridDim.x / cluster : gridDim.x) * blockDim.y;
  int64_t row = slot * blockDim.y + threadIdx.y;
  static_assert(kPipelineStages == 3, "the prologue and the rstd ring assume 3 stages");
  issue(row, 0);
  if constexpr (kAhead == 2) issue(row + step, 1);
  // rstd of this row and the next kAhead, loaded as early as their rows' copies are started.
  float rstd_ring[3] = {rstd_of(row), kAhead == 2 ? rstd_of(row + step) : 0.0f, 0.0f};
  // The weight of this thread's columns is the same for every row: loaded once, while the
  // first rows are in flight.
  std::conditional_t<SMEM_WEIGHT, SharedColumns<WT, VEC, IMAX>, KeptColumns<WT, VEC, IMAX>> weight;
  if constexpr (SMEM_WEIGHT) {
    // (One row group: the chunk follows the group's stages.)
    weight.load(reinterpret_cast<WT*>(block_smem + kPipelineStages * st.stage_bytes), p.weight,
                weight_offset(p), col, stage_col, active);
  } else {
    weight.load(p.weight, weight_offset(p), col, active);
  }

  float acc_w[IMAX][VEC], acc_b[IMAX][VEC];
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc_w[i][k] = acc_b[i][k] = 0.0f;
  }

  // This thread's x and dy of the row in stage s.
  auto load_row = [&](int s, Lanes<XT, VEC>(&xs)[IMAX], Lanes<DYT, VEC>(&dys)[IMAX]) {
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (!active[i]) continue;
      xs[i].load(st.at<XT>(s, 0) + stage_col[i]);
      dys[i].load(st.at<DYT>(s, 1) + stage_col[i]);
    }
  };
  // dot = sum(dy * w * xhat) over this thread's columns of the row in stage s, xhat = x *
  // rstd; adds dy * xhat (and dy) to the dweight (dbias) sums. xs and dys receive the row.
  auto row_dot = [&](int s, float rstd, Lanes<XT, VEC>(&xs)[IMAX], Lanes<DYT, VEC>(&dys)[IMAX]) {
    load_row(s, xs, dys);
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (!active[i]) continue;
      float w[VEC];
      weight.get(i, w);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float dy = to_float(dys[i].get(k));
        const float xhat = to_float(xs[i].get(k)) * rstd;
        acc_w[i][k] = fmaf(dy, xhat, acc_w[i][k]);
        if constexpr (DBIAS) acc_b[i][k] += dy;
        dot = fmaf(dy * w[k], xhat, dot);
      }
    }
    return dot;
  };
  // dx = rstd * (dy * w - xhat * mean) = (rstd * dy) * w - (rstd^2 * mean) * x (+ the
  // dresidual_out of stage s), mean = the row's dot / hidden.
  auto store_row_dx = [&](int64_t row, int s, float rstd, float dot,
                          const Lanes<XT, VEC>(&xs)[IMAX], const Lanes<DYT, VEC>(&dys)[IMAX]) {
    const float x_coef = rstd * rstd * (dot * shape.inv_hidden);
    XT* dx_row = static_cast<XT*>(p.dx) + row * p.dx_stride;
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (!active[i]) continue;
      float w[VEC], dx[VEC];
      weight.get(i, w);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        dx[k] = fmaf(rstd * to_float(dys[i].get(k)), w[k], -x_coef * to_float(xs[i].get(k)));
      }
      if (with_dres) {
        Lanes<XT, VEC> d;
        d.load(st.at<XT>(s, 2) + stage_col[i]);
#pragma unroll
        for (int k = 0; k < VEC; ++k) dx[k] += to_float(d.get(k));
      }
      store_vec<XT, VEC>(dx_row + col[i], dx);
    }
  };

  int stage = 0, parity = 0;
  if constexpr (PENDING_REGS) {
    // Row k is in stage k % kPipelineStages until its dot product, then (pending) in xs_pending
    // and dys_pending; it completes in iteration k + 1, before row k + 1's dot product.
    cluster_row_sums_init(cluster_sums);
    unsigned sum_phases = 0;
    float rstd_pending = 0.0f;
    int64_t pending = -1;
    Lanes<XT, VEC> xs_pending[IMAX];
    Lanes<DYT, VEC> dys_pending[IMAX];
    int k = 0;
    for (; row < shape.rows; row += step, ++k) {
      issue(row + 2 * step, stage == 0 ? 2 : stage - 1);
      rstd_ring[2] = rstd_of(row + 2 * step);
      cp_async_wait<kPipelineStages - 1>();  // this row's copies (this thread's own) have landed
      const float rstd = rstd_ring[0];
      if (pending >= 0) {
        const float pending_dot =
            cluster_row_wait(cluster_sums, (k - 1) % kClusterRowSlots, sum_phases);
        store_row_dx(pending, 0, rstd_pending, pending_dot, xs_pending, dys_pending);
      }
      const float dot = row_group_sum<ROW_SUM_QUADS>(
          row_dot(stage, rstd, xs_pending, dys_pending), scratch, parity);
      cluster_row_push(dot, cluster_sums, k % kClusterRowSlots);
      parity ^= 1;
      pending = row;
      rstd_pending = rstd;
      rstd_ring[0] = rstd_ring[1];
      rstd_ring[1] = rstd_ring[2];
      stage = stage == kPipelineStages - 1 ? 0 : stage + 1;
    }
    if (pending >= 0) {
      const float pending_dot =
          cluster_row_wait(cluster_sums, (k - 1) % kClusterRowSlots, sum_phases);
      store_row_dx(pending, 0, rstd_pending, pending_dot, xs_pending, dys_pending);
    }
  } else if constexpr (CLUSTER) {
    constexpr int kStages = kAhead + 2;  // the rows in flight, the current one, the pending one
    static_assert(kAhead == 1 || kStages == kClusterPipelineStages, "as the planner sizes them");
    cluster_row_sums_init(cluster_sums);
    unsigned sum_phases = 0;
    // Row k is in stage k % kStages and cluster sum slot k % kClusterRowSlots; it completes in
    // iteration k + 1.
    float rstd_pending = 0.0f;
    int64_t pending = -1;
    int k = 0;
    // Completes the pending row k - 1 (its x and dy reloaded from its stage: registers for two
    // rows would spill).
    auto complete_pending = [&](Lanes<XT, VEC>(&xs)[IMAX], Lanes<DYT, VEC>(&dys)[IMAX]) {
      const int s = (stage + kStages - 1) % kStages;
      const float dot = cluster_row_wait(cluster_sums, (k - 1) % kClusterRowSlots, sum_phases);
      load_row(s, xs, dys);
      store_row_dx(pending, s, rstd_pending, dot, xs, dys);
    };
    for (; row < shape.rows; row += step, ++k) {
      issue(row + kAhead * step, (stage + kAhead) % kStages);
      rstd_ring[kAhead] = rstd_of(row + kAhead * step);
      cp_async_wait<kAhead>();  // this row's copies (this thread's own) have landed
      const float rstd = rstd_ring[0];
      Lanes<XT, VEC> xs[IMAX];
      Lanes<DYT, VEC> dys[IMAX];
      const float dot =
          row_group_sum<ROW_SUM_QUADS>(row_dot(stage, rstd, xs, dys), scratch, parity);
      parity ^= 1;
      cluster_row_push(dot, cluster_sums, k % kClusterRowSlots);
      if (pending >= 0) complete_pending(xs, dys);
      pending = row;
      rstd_pending = rstd;
      rstd_ring[0] = rstd_ring[1];
      rstd_ring[1] = rstd_ring[2];
      stage = (stage + 1) % kStages;
    }
    if (pending >= 0) {
      Lanes<XT, VEC> xs[IMAX];
      Lanes<DYT, VEC> dys[IMAX];
      complete_pending(xs, dys);
    }
  } else {
    for (; row < shape.rows; row += step) {
      issue(row + 2 * step, stage == 0 ? 2 : stage - 1);
      rstd_ring[2] = rstd_of(row + 2 * step);
      cp_async_wait<kPipelineStages - 1>();  // this row's copies (this thread's own) have landed
      const float rstd = rstd_ring[0];
      Lanes<XT, VEC> xs[IMAX];
      Lanes<DYT, VEC> dys[IMAX];
      const float dot =
          row_group_sum<ROW_SUM_QUADS>(row_dot(stage, rstd, xs, dys), scratch, parity);
      parity ^= 1;
      store_row_dx(row, stage, rstd, dot, xs, dys);
      rstd_ring[0] = rstd_ring[1];
      rstd_ring[1] = rstd_ring[2];
      stage = stage == kPipelineStages - 1 ? 0 : stage + 1;
    }
  }
  cp_async_wait<0>();  // only empty groups remain, but shared memory is reused below
  if constexpr (CLUSTER) cluster_sum_done();
  if (p.dependent_after_rows) allow_dependent_launch();

  write_cta_sums<WT, VEC, IMAX, DBIAS>(p, slot, col_begin, stage_col, col, active, acc_w, acc_b,
                                       block_smem);
}

}  // namespace normkit::cuda
