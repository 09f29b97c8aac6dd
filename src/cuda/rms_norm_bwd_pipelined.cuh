// RMSNorm backward, pipelined: a persistent CTA streams its rows of x, dy (and dresidual_out)
// into shared memory with cp.async, kPipelineStages rows ahead per row group, so that loads
// stay in flight while the current row is reduced and its dx stored (the registers kernel
// serializes load -> reduce -> store per row and leaves HBM idle in between).
//
// blockDim = (T, groups): each row group of T threads walks its own rows, row = slot * groups
// + group, + grid * groups, ... Thread t owns vectors t, t + T, ... of every row, in shared
// memory as in registers, so it only ever waits for its own copies. dweight/dbias partial sums
// stay in registers across rows; at the end the groups of a CTA add them in group order into
// one row of partial sums per CTA (slot = blockIdx.x), reduced over slots by reduce_partials.
#pragma once

#include "cuda/async_copy.cuh"
#include "cuda/element.cuh"
#include "cuda/kernel_params.h"
#include "cuda/launch_config.h"
#include "cuda/reduce.cuh"
#include "cuda/rms_norm_bwd_kernels.cuh"
#include "cuda/rms_norm_fwd_kernels.cuh"

namespace normkit::cuda {

// One row group's view of its pipeline stages: stage s holds, for one row, x, dy and (with a
// residual) dresidual_out, each `cols` elements (T * items * VEC, multiple of 16 bytes).
template <typename XT, typename DYT>
struct BwdStages {
  unsigned char* base;
  int64_t cols;
  int64_t stage_bytes;

  __device__ __forceinline__ BwdStages(unsigned char* block_smem, int64_t cols, bool with_dres)
      : cols(cols),
        stage_bytes(cols * static_cast<int64_t>(sizeof(XT) + sizeof(DYT) +
                                                (with_dres ? sizeof(XT) : 0))) {
    base = block_smem + threadIdx.y * kPipelineStages * stage_bytes;
  }
  __device__ __forceinline__ XT* x(int s) const {
    return reinterpret_cast<XT*>(base + s * stage_bytes);
  }
  __device__ __forceinline__ DYT* dy(int s) const {
    return reinterpret_cast<DYT*>(base + s * stage_bytes + cols * sizeof(XT));
  }
  __device__ __forceinline__ XT* dres(int s) const {
    return reinterpret_cast<XT*>(base + s * stage_bytes + cols * (sizeof(XT) + sizeof(DYT)));
  }
};

// DBIAS: dbias partial sums wanted (their registers are only allocated then).
template <typename XT, typename WT, typename DYT, int VEC, int IMAX, bool DBIAS>
__global__ void __launch_bounds__(512) rms_norm_bwd_pipelined(BwdParams p) {
  extern __shared__ __align__(16) unsigned char block_smem[];
  __shared__ float scratch[2 * kMaxWarps];
  const RowShape& shape = p.shape;
  const int64_t hidden = shape.hidden;
  const int items = shape.items;
  const bool with_dres = p.dresidual_out != nullptr;
  const BwdStages<XT, DYT> st(block_smem, shape.cols_per_cta, with_dres);
  auto column = [&](int i) { return (static_cast<int64_t>(i) * blockDim.x + threadIdx.x) * VEC; };
  auto active = [&](int i) { return i < items && column(i) < hidden; };

  // Starts the copies of `row` into stage s (nothing past the last row), as one group.
  auto issue = [&](int64_t row, int s) {
    if (row < shape.rows) {
#pragma unroll
      for (int i = 0; i < IMAX; ++i) {
        if (!active(i)) continue;
        const int64_t col = column(i);
        cp_async_vector<XT, VEC>(st.x(s) + col, static_cast<const XT*>(p.x) + row * p.x_stride + col);
        cp_async_vector<DYT, VEC>(st.dy(s) + col,
                                  static_cast<const DYT*>(p.dy) + row * p.dy_stride + col);
        if (with_dres) {
          cp_async_vector<XT, VEC>(
              st.dres(s) + col,
              static_cast<const XT*>(p.dresidual_out) + row * p.dresidual_out_stride + col);
        }
      }
    }
    cp_async_commit();
  };
  auto rstd_of = [&](int64_t row) { return row < shape.rows ? p.rstd[row] : 0.0f; };

  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
  int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  static_assert(kPipelineStages == 3, "the prologue and the rstd ring assume 3 stages");
  issue(row, 0);
  issue(row + step, 1);
  // The weight is first read after the first row lands: fetch it into L2 alongside.
  if (threadIdx.y == 0) {
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (active(i)) prefetch_params_l2<WT>(p.weight, nullptr, column(i));
    }
  }
  // rstd of this row and the next two, loaded as early as their rows' copies are started.
  float rstd_ring[3] = {rstd_of(row), rstd_of(row + step), 0.0f};

  float acc_w[IMAX][VEC], acc_b[IMAX][VEC];
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc_w[i][k] = acc_b[i][k] = 0.0f;
  }

  int stage = 0, parity = 0;
  for (; row < shape.rows; row += step) {
    issue(row + 2 * step, stage == 0 ? 2 : stage - 1);
    rstd_ring[2] = rstd_of(row + 2 * step);
    cp_async_wait<kPipelineStages - 1>();  // this row's copies (this thread's own) have landed
    const float rstd = rstd_ring[0];

    Lanes<XT, VEC> xs[IMAX];
    Lanes<DYT, VEC> dys[IMAX];
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (!active(i)) continue;
      const int64_t col = column(i);
      xs[i].load(st.x(stage) + col);
      dys[i].load(st.dy(stage) + col);
      float w[VEC];
      load_scale<WT, VEC>(p, col, VEC, w);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float dy = to_float(dys[i].get(k));
        const float xhat = to_float(xs[i].get(k)) * rstd;
        acc_w[i][k] += dy * xhat;
        if constexpr (DBIAS) acc_b[i][k] += dy;
        dot += dy * w[k] * xhat;
      }
    }
    const float mean = row_group_sum(dot, scratch, parity) * shape.inv_hidden;
    parity ^= 1;
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (!active(i)) continue;
      const int64_t col = column(i);
      float w[VEC], dx[VEC];
      load_scale<WT, VEC>(p, col, VEC, w);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float xhat = to_float(xs[i].get(k)) * rstd;
        dx[k] = rstd * (to_float(dys[i].get(k)) * w[k] - xhat * mean);
      }
      if (with_dres) {
        Lanes<XT, VEC> d;
        d.load(st.dres(stage) + col);
#pragma unroll
        for (int k = 0; k < VEC; ++k) dx[k] += to_float(d.get(k));
      }
      store_vec<XT, VEC>(static_cast<XT*>(p.dx) + row * p.dx_stride + col, dx);
    }
    rstd_ring[0] = rstd_ring[1];
    rstd_ring[1] = rstd_ring[2];
    stage = stage == kPipelineStages - 1 ? 0 : stage + 1;
  }
  cp_async_wait<0>();  // only empty groups remain, but shared memory is reused below

  const bool want_w = p.want_dweight();
  if (!want_w && !DBIAS) return;
  // Each group parks its sums in shared memory ([group][column], dweight then dbias); group 0
  // adds them in group order.
  const int64_t cols = shape.cols_per_cta;
  float* parked = reinterpret_cast<float*>(block_smem);
  float* parked_b = parked + blockDim.y * cols;
  __syncthreads();
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    if (!active(i)) continue;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      parked[threadIdx.y * cols + column(i) + k] = acc_w[i][k];
      if constexpr (DBIAS) parked_b[threadIdx.y * cols + column(i) + k] = acc_b[i][k];
    }
  }
  __syncthreads();
  if (threadIdx.y != 0) return;
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    if (!active(i)) continue;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const int64_t c = column(i) + k;
      float total_w = 0.0f, total_b = 0.0f;
      for (int g = 0; g < static_cast<int>(blockDim.y); ++g) {
        total_w += parked[g * cols + c];
        if constexpr (DBIAS) total_b += parked_b[g * cols + c];
      }
      write_slot_sums<WT>(p, blockIdx.x, c, total_w, total_b);
    }
  }
}

}  // namespace normkit::cuda
