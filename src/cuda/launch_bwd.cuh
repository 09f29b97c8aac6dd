// Backward launcher template, included by the per-x-dtype translation units.
#pragma once

#include "cuda/launch_common.cuh"
#include "cuda/launchers.h"
#include "cuda/rms_norm_bwd_kernels.cuh"

namespace normkit::cuda {

template <typename XT, typename WT, typename DYT>
void launch_bwd(const nk_rms_norm_bwd_args& a, const LaunchConfig& cfg, float* partial_dweight,
                float* partial_dbias, cudaStream_t stream) {
  BwdParams p;
  p.shape = row_shape(a.rows, a.hidden, cfg);
  p.dy = a.dy;
  p.dy_stride = a.dy_row_stride;
  p.x = a.x;
  p.x_stride = a.x_row_stride;
  p.rstd = a.rstd;
  p.weight = a.weight;
  p.zero_centered = a.zero_centered != 0;
  p.dresidual_out = a.dresidual_out;
  p.dresidual_out_stride = a.dresidual_out_row_stride;
  p.dx = a.dx;
  p.dx_stride = a.dx_row_stride;
  p.partial_dweight = partial_dweight;
  p.partial_dbias = partial_dbias;
  dispatch_vec(cfg.vec, "rms_norm_bwd", [&](auto vec_constant) {
    constexpr int VEC = decltype(vec_constant)::value;
    if (cfg.plan == RowPlan::kStreaming) {
      launch(rms_norm_bwd_streaming<XT, WT, DYT, VEC>, cfg.grid, dim3(cfg.threads_per_row), {},
             stream, "rms_norm_bwd (streaming)", 0, p);
    } else {
      constexpr int IMAX = bwd_items_max(VEC);
      const size_t smem = sizeof(float) * bwd_group_floats(cfg.rows_per_block, cfg.cols_per_cta,
                                                           partial_dweight, partial_dbias);
      launch(rms_norm_bwd_registers<XT, WT, DYT, VEC, IMAX>, cfg.grid,
             dim3(cfg.threads_per_row, cfg.rows_per_block), {cfg.cluster_size}, stream,
             "rms_norm_bwd (registers)", smem, p);
    }
  });
  const dim3 block(32, 8);
  LaunchOptions dependent;
  dependent.dependent = true;
  const int64_t blocks = (a.hidden + 31) / 32;
  if (partial_dweight) {
    launch(reduce_partials<WT>, blocks, block, dependent, stream, "rms_norm_bwd (dweight reduction)", 0,
           static_cast<const float*>(partial_dweight), cfg.slots, a.hidden,
           static_cast<WT*>(a.dweight));
  }
  if (partial_dbias) {
    launch(reduce_partials<WT>, blocks, block, dependent, stream, "rms_norm_bwd (dbias reduction)", 0,
           static_cast<const float*>(partial_dbias), cfg.slots, a.hidden,
           static_cast<WT*>(a.dbias));
  }
}

template <typename XT>
void launch_bwd_for_x(const nk_rms_norm_bwd_args& a, const LaunchConfig& cfg,
                      float* partial_dweight, float* partial_dbias, cudaStream_t stream) {
  dispatch_dtype(a.weight_dtype, "rms_norm_bwd weight", [&](auto w) {
    dispatch_dtype(a.dy_dtype, "rms_norm_bwd dy", [&](auto dy) {
      launch_bwd<XT, decltype(w), decltype(dy)>(a, cfg, partial_dweight, partial_dbias, stream);
    });
  });
}

}  // namespace normkit::cuda
