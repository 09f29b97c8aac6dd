// The backward's dx on rows misaligned for 16-byte vectors (odd hidden sizes), 16-bit types only,
// as rms_norm_fwd_realigned reads them: each row a head of h < 8 elements, then 8-element
// vectors from column h, 16-byte aligned for x, dy, dx and dresidual_out alike (the launcher
// checks); the weight, aligned at column 0, shifted into place from two aligned loads. Rows
// that are aligned but not whole vectors (one row, or padded strides, of a hidden size not a
// multiple of 8) take it too, with no head.
//
// It writes dx only: dweight and dbias, where wanted, come from rms_norm_bwd_column_sums beside
// it (the planner uses this kernel only where that one applies). Element by element, each thread
// of the few-row backward issued ~2300 instructions at 128 registers and the kernel waited on
// them (29 x 17389: 10.7 us under ncu, issue slots 32% busy: twenty-seventh session).
#pragma once

#include "cuda/element.cuh"
#include "cuda/kernel_params.h"
#include "cuda/reduce.cuh"
#include "cuda/rms_norm_bwd_kernels.cuh"
#include "cuda/rms_norm_fwd_kernels.cuh"
#include "cuda/rms_norm_fwd_realigned.cuh"

namespace normkit::cuda {

// blockDim.x threads per CTA, one row per cluster of shape.cluster_size CTAs (one row per CTA
// without clusters), each CTA covering cols_per_cta columns of the row's body (the columns from
// h on); thread 0 of the cluster's first CTA also takes the head. dresidual_out, where given,
// has its rows misaligned as x's (the launcher checks) and is added to dx; DRES: whether it is
// given (a kernel of its own: its registers cost the others 26 at 2 vectors per thread).
// WEIGHT_ONLY: a weight, not zero-centred (the launcher's test), used as loaded with no test
// per element.
template <typename XT, typename WT, typename DYT, int IMAX, bool DRES, bool WEIGHT_ONLY = false>
__global__ void __launch_bounds__(512) rms_norm_bwd_realigned(BwdParams p) {
  constexpr int VEC = kRealignVec;
  static_assert(sizeof(XT) == 2 && sizeof(WT) == 2 && sizeof(DYT) == 2, "16-bit types only");
  if (p.early_dependent) allow_dependent_launch();  // the column sums may start beside it
  __shared__ float scratch[kMaxWarps];
  __shared__ ClusterPush cluster_push;  // with clusters
  const RowShape& shape = p.shape;
  RowChunk<VEC> c(shape);  // in body columns; blockDim.y is 1, so every row is valid
  const int64_t row = c.row;
  const XT* x = static_cast<const XT*>(p.x) + row * p.x_stride;
  const DYT* dy = static_cast<const DYT*>(p.dy) + row * p.dy_stride;
  XT* dx = static_cast<XT*>(p.dx) + row * p.dx_stride;
  const XT* dres =
      DRES ? static_cast<const XT*>(p.dresidual_out) + row * p.dresidual_out_stride : nullptr;
  const WT* weight = static_cast<const WT*>(p.weight);
  const int head = static_cast<int>(min(static_cast<int64_t>(head_elements(x)), shape.hidden));
  c.col_end = min(shape.hidden - head, c.col_end);
  const bool head_thread = c.rank == 0 && threadIdx.x == 0;

  if (shape.cluster_size > 1) cluster_push_init(cluster_push);
  // Every load before the first store (a load after a store waits for it: docs/notes.md v22).
  const float rstd = p.rstd[row];
  Lanes<XT, VEC> xs[IMAX];
  Lanes<DYT, VEC> dys[IMAX];
  ShiftedPair<WT> wp[IMAX];  // shifted into ws once every load is out
  Lanes<XT, VEC> ds[DRES ? IMAX : 1];  // dresidual_out, loaded before any store (dx may be it)
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    const int64_t col = c.column(i);
    xs[i] = Lanes<XT, VEC>{};
    dys[i] = Lanes<DYT, VEC>{};
    if constexpr (DRES) ds[i] = Lanes<XT, VEC>{};
    if (c.active(i)) {
      xs[i] = load_lanes_upto<XT, VEC>(x + head + col, c.col_end - col);
      dys[i] = load_lanes_upto<DYT, VEC>(dy + head + col, c.col_end - col);
      if (WEIGHT_ONLY || weight) wp[i] = load_pair(weight, head + col, shape.hidden);
      if constexpr (DRES) ds[i] = load_lanes_upto<XT, VEC>(dres + head + col, c.col_end - col);
    }
  }
  // The head's x, dy * weight factor and dresidual_out.
  float head_x[VEC - 1], head_g[VEC - 1], head_d[VEC - 1];
#pragma unroll
  for (int k = 0; k < VEC - 1; ++k) {
    const bool mine = head_thread && k < head;
    head_x[k] = mine ? to_float(x[k]) : 0.0f;
    head_d[k] = DRES && mine ? to_float(dres[k]) : 0.0f;
    float w = 1.0f;
    if constexpr (WEIGHT_ONLY) {
      if (mine) w = to_float(weight[k]);
    } else {
      if (mine) load_scale<WT, 1>(p, k, 1, &w);
    }
    head_g[k] = mine ? to_float(dy[k]) * w : 0.0f;
  }
  Lanes<WT, VEC> ws[IMAX];
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    ws[i] = Lanes<WT, VEC>{};  // (never an unset register times a zero: it may be NaN)
    if (c.active(i) && (WEIGHT_ONLY || weight)) ws[i] = shifted(wp[i], head + c.column(i));
  }

  // g = dy * (w, 1 + w or 1) of vector i, as the other backward kernels scale it.
  auto g_of = [&](int i, float* g) {
    float w[VEC];
    realigned_weight_scale<WEIGHT_ONLY, WT>(p, ws[i], w);
#pragma unroll
    for (int k = 0; k < VEC; ++k) g[k] = to_float(dys[i].get(k)) * w[k];
  };
  // dot = sum of dy * w * xhat over the row (as the other backward kernels: g * (x * rstd)).
  float dot = 0.0f;
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    if (!c.active(i)) continue;
    float g[VEC];
    g_of(i, g);
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      dot += g[k] * (to_float(xs[i].get(k)) * rstd);  // zeros past the row's end add 0
    }
  }
#pragma unroll
  for (int k = 0; k < VEC - 1; ++k) dot += head_g[k] * (head_x[k] * rstd);
  dot = cta_row_sum(dot, scratch);
  if (shape.cluster_size > 1) dot = cluster_push_sum(dot, cluster_push);
  const float mean = dot * shape.inv_hidden;

#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    const int64_t col = c.column(i);
    if (c.active(i)) {
      float g[VEC], out[VEC];
      g_of(i, g);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        out[k] = rstd * (g[k] - to_float(xs[i].get(k)) * rstd * mean);
        if constexpr (DRES) out[k] += to_float(ds[i].get(k));
      }
      store_upto<XT, VEC>(dx + head + col, c.col_end - col, out);
    }
  }
  if (head_thread) {
#pragma unroll
    for (int k = 0; k < VEC - 1; ++k) {
      if (k < head) {
        dx[k] = from_float<XT>(rstd * (head_g[k] - head_x[k] * rstd * mean) + head_d[k]);
      }
    }
  }
}

}  // namespace normkit::cuda
