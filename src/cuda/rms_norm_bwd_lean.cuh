// RMSNorm backward for the common call on a pipelined plan: 16-bit x, weight and dy, a weight
// (plain or zero-centred), no dresidual_out (dbias under DBIAS), rows not split over a
// cluster, and ITEMS (1 or 2) whole 16-byte vectors per thread covering each row exactly
// (LaunchConfig::lean; KernelFacts::bwd_lean). Why a kernel of its own: the forward's lean
// kernel (thirty-seventh session) took 7-23% off the small shapes by dropping what the general
// kernel tests at run time, and rms_norm_bwd_pipelined's row loop at 2 vectors per thread is
// 654 instructions (nvdisasm, static) with per-item range tests, 64-bit column offsets, a
// runtime choice of L2 policy around every copy and the dresidual_out branch. Here (519): 32-bit
// column offsets, one policy (evict-normal where no hint is asked) on every copy, no item
// tests, one 64-bit row offset per operand and row.
//
// The arithmetic is rms_norm_bwd_pipelined's unsplit branch in the same order (its dot
// product, dweight sums, row group sum and dx), and the CTA's sums are written the same way
// (write_cta_sums), so the same bits.
#pragma once

#include "cuda/async_copy.cuh"
#include "cuda/element.cuh"
#include "cuda/grid_reduce.cuh"
#include "cuda/kept_columns.cuh"  // weight_offset
#include "cuda/kernel_params.h"
#include "cuda/launch_config.h"
#include "cuda/read_policy.cuh"
#include "cuda/reduce.cuh"
#include "cuda/rms_norm_bwd_kernels.cuh"
#include "cuda/rms_norm_bwd_pipelined.cuh"  // write_cta_sums
#include "cuda/stage_ring.cuh"

namespace normkit::cuda {

// The register budget: one 512-thread CTA per SM at 2 vectors per thread (~113 registers, as
// rms_norm_bwd_pipelined's ~100), two at 1 vector (64 registers, no spills). Two CTAs' budget
// at 2 vectors spilled and measured 1.02-1.19x slower; 256-thread CTAs on three CTAs' budget
// 1.04-1.10x slower (thirty-ninth and fortieth sessions). ROW_SUM_QUADS: the row's dot product
// summed over its warps four at a time (row_group_sum's QUADS, bit for bit;
// LaunchConfig::row_sum_quads). DBIAS: dbias's sums too (KernelFacts::bwd_lean_dbias), 8 more
// floats per vector: 123-128 registers at 2 vectors, 64 at 1, no spills (ptxas, CUDA 13.0).
template <typename XT, typename WT, typename DYT, int ITEMS, bool ROW_SUM_QUADS = false,
          bool DBIAS = false>
__global__ void __launch_bounds__(512, ITEMS == 1 ? 2 : 1) rms_norm_bwd_lean(BwdParams p) {
  static_assert(sizeof(XT) == 2 && sizeof(WT) == 2 && sizeof(DYT) == 2, "16-bit types");
  static_assert(ITEMS >= 1 && ITEMS <= 2, "the weight stays in registers");
  constexpr int VEC = 8;  // 16 bytes
  if (p.early_dependent) allow_dependent_launch();
  extern __shared__ __align__(16) unsigned char block_smem[];
  __shared__ alignas(16) float scratch[2 * kRowSumFloats<ROW_SUM_QUADS>];
  const RowShape& shape = p.shape;  // cols_per_cta == hidden == blockDim.x * ITEMS * VEC
  const StageRing st(block_smem, shape.cols_per_cta, sizeof(XT), sizeof(DYT), 0);
  const int64_t slot = blockIdx.x;
  // This thread's columns: the same in the row and in its stage (32-bit: a row's columns fit).
  int stage_col[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    stage_col[i] = static_cast<int>((i * blockDim.x + threadIdx.x) * VEC);
  }

  const uint64_t policy = read_policy_always(p.evict_first_reads, p.evict_last_reads);
  const XT* const x_base = static_cast<const XT*>(p.x);
  const DYT* const dy_base = static_cast<const DYT*>(p.dy);
  // Starts the copies of `row` into stage s (nothing past the last row), as one group.
  auto issue = [&](int64_t row, int s) {
    if (row < shape.rows) {
      const XT* x = x_base + row * p.x_stride;
      const DYT* dy = dy_base + row * p.dy_stride;
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        cp_async16_hinted(st.at<XT>(s, 0) + stage_col[i], x + stage_col[i], policy);
        cp_async16_hinted(st.at<DYT>(s, 1) + stage_col[i], dy + stage_col[i], policy);
      }
    }
    cp_async_commit();
  };
  auto rstd_of = [&](int64_t row) { return row < shape.rows ? p.rstd[row] : 0.0f; };

  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
  int64_t row = slot * blockDim.y + threadIdx.y;
  static_assert(kPipelineStages == 3, "the prologue and the rstd ring assume 3 stages");
  issue(row, 0);
  issue(row + step, 1);
  float rstd_ring[3] = {rstd_of(row), rstd_of(row + step), 0.0f};
  // The weight of this thread's columns, loaded once while the first rows fly and kept in its
  // own type (half the registers of float32); read as float32 plus its offset (1 for the
  // zero-centred weight, else 0, added all the same as KeptColumns adds it: w + 0 turns -0
  // into +0).
  const float offset = weight_offset(p);
  Lanes<WT, VEC> w_lanes[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    w_lanes[i].load_readonly(static_cast<const WT*>(p.weight) + stage_col[i]);
  }
  auto weight_at = [&](int i, int k) { return w_lanes[i].get_float(k) + offset; };

  float acc_w[ITEMS][VEC], acc_b[DBIAS ? ITEMS : 1][VEC];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      acc_w[i][k] = 0.0f;
      if constexpr (DBIAS) acc_b[i][k] = 0.0f;
    }
  }

  int stage = 0, parity = 0;
  for (; row < shape.rows; row += step) {
    issue(row + 2 * step, stage == 0 ? 2 : stage - 1);
    rstd_ring[2] = rstd_of(row + 2 * step);
    cp_async_wait<kPipelineStages - 1>();  // this row's copies (this thread's own) have landed
    const float rstd = rstd_ring[0];
    Lanes<XT, VEC> xs[ITEMS];
    Lanes<DYT, VEC> dys[ITEMS];
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      xs[i].load(st.at<XT>(stage, 0) + stage_col[i]);
      dys[i].load(st.at<DYT>(stage, 1) + stage_col[i]);
    }
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float dy = to_float(dys[i].get(k));
        const float xhat = to_float(xs[i].get(k)) * rstd;
        acc_w[i][k] = fmaf(dy, xhat, acc_w[i][k]);
        if constexpr (DBIAS) acc_b[i][k] += dy;
        dot = fmaf(dy * weight_at(i, k), xhat, dot);
      }
    }
    dot = row_group_sum<ROW_SUM_QUADS>(dot, scratch, parity);
    parity ^= 1;
    // dx = (rstd * dy) * w - (rstd^2 * mean) * x, mean = the row's dot / hidden.
    const float x_coef = rstd * rstd * (dot * shape.inv_hidden);
    XT* dx_row = static_cast<XT*>(p.dx) + row * p.dx_stride;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      float dx[VEC];
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        dx[k] = fmaf(rstd * to_float(dys[i].get(k)), weight_at(i, k),
                     -x_coef * to_float(xs[i].get(k)));
      }
      store_vec<XT, VEC>(dx_row + stage_col[i], dx);
    }
    rstd_ring[0] = rstd_ring[1];
    rstd_ring[1] = rstd_ring[2];
    stage = stage == kPipelineStages - 1 ? 0 : stage + 1;
  }
  cp_async_wait<0>();  // only empty groups remain, but shared memory is reused below
  if (p.dependent_after_rows) allow_dependent_launch();

  int64_t col[ITEMS];
  bool active[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    col[i] = stage_col[i];
    active[i] = true;
  }
  if constexpr (DBIAS) {
    write_cta_sums<WT, VEC, ITEMS, true>(p, slot, 0, stage_col, col, active, acc_w, acc_b,
                                         block_smem);
  } else {  // (the second sums are never read: acc_w stands in for them)
    write_cta_sums<WT, VEC, ITEMS, false>(p, slot, 0, stage_col, col, active, acc_w, acc_w,
                                          block_smem);
  }
}

}  // namespace normkit::cuda
