// RMSNorm forward with a per-tensor quantized output (NK_QUANT_TENSOR), pipelined: a persistent
// CTA streams its rows of x into shared memory with cp.async, kPipelineStages - 1 rows ahead per
// row group, as rms_norm_fwd_pipelined does, and quantizes each row's v = x * rstd * w_eff.
//
// Why (docs/notes.md, twenty-fifth session): the registers kernel gives each row of 12K-16K
// columns one CTA of 384-512 threads, two or three per SM, and its code epilogue is twice the
// plain forward's instructions; while a CTA quantizes and stores (and waits at amax's two
// barriers), its SM has one row's loads in flight or none. Here the next two rows' copies are in
// flight during a row's reduction and epilogue, and amax is added once per CTA, at its end.
//
// The planner takes this for 16-bit x and weights in 16-byte vectors, without residual or bias
// (KernelFacts::quant_pipelined), rows that one CTA of up to 512 threads holds at kPipelineItems
// vectors per thread. blockDim = (T, groups): row group g of CTA b walks rows b * groups + g,
// + gridDim.x * groups, ...; thread t owns vectors t, t + T, ... of the row, in shared memory as
// in registers, so it waits only for its own copies. Its weight stays packed in registers.
#pragma once

#include "cuda/async_copy.cuh"
#include "cuda/element.cuh"
#include "cuda/kernel_params.h"
#include "cuda/launch_config.h"
#include "cuda/quant.cuh"
#include "cuda/read_policy.cuh"
#include "cuda/reduce.cuh"
#include "cuda/rms_norm_fwd_kernels.cuh"
#include "cuda/stage_ring.cuh"

namespace normkit::cuda {

// ADD_WEIGHT false: the launcher knows that the weight is not zero-centered (weight_add(p) is
// -0.0, an identity), and the add is compiled out. EXACT: every thread has exactly IMAX whole
// vectors in the row (T * IMAX * VEC == hidden), and the per-item tests fold away.
template <typename XT, typename WT, int VEC, int IMAX, bool ADD_WEIGHT, bool EXACT>
__global__ void __launch_bounds__(512, 2) rms_norm_fwd_quant_tensor_pipelined(FwdParams p) {
  static_assert(sizeof(XT) * VEC == 16, "16-byte vectors of x");
  extern __shared__ __align__(16) unsigned char block_smem[];
  __shared__ float scratch[2 * kMaxWarps];  // the row sums, by parity
  __shared__ float amax_scratch[kMaxWarps];
  const RowShape& shape = p.shape;
  const StageRing st(block_smem, shape.cols_per_cta, sizeof(XT), 0, 0);
  // Vector i's first column: first + i * stride (32 bits: rows of at most 512 x IMAX vectors).
  const int first = static_cast<int>(threadIdx.x) * VEC;
  const int stride = static_cast<int>(blockDim.x) * VEC;
  auto active = [&](int i) {
    return EXACT || (i < shape.items && first + i * stride < shape.hidden);
  };
  const ReadPolicy read_policy(p.evict_first_reads, p.evict_last_reads);
  // Starts the copies of `row` into stage s (nothing past the last row), as one group.
  auto issue = [&](int64_t row, int s) {
    if (row < shape.rows) {
      const XT* x = static_cast<const XT*>(p.x) + row * p.x_stride + first;
      XT* stage = st.at<XT>(s, 0) + first;
#pragma unroll
      for (int i = 0; i < IMAX; ++i) {
        if (active(i)) cp_async_vector<XT, VEC>(stage + i * stride, x + i * stride, read_policy);
      }
    }
    cp_async_commit();
  };

  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
  int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  static_assert(kPipelineStages == 3, "the prologue assumes 3 stages");
  issue(row, 0);
  issue(row + step, 1);
  // The weight (ones without one) and the scale, loaded once, behind the first rows' copies.
  Lanes<WT, VEC> w[IMAX];
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    w[i] = ones_lanes<WT, VEC>();
    if (p.weight && active(i)) {
      w[i].load_readonly(static_cast<const WT*>(p.weight) + first + i * stride);
    }
  }
  const float w_add = ADD_WEIGHT ? weight_add(p) : -0.0f;
  const float factor = __ldg(p.quant.scale);

  float amax = 0.0f;
  int stage = 0, parity = 0;
  for (; row < shape.rows; row += step) {
    issue(row + 2 * step, stage == 0 ? 2 : stage - 1);
    cp_async_wait<kPipelineStages - 1>();  // this row's copies (this thread's own) have landed
    Lanes<XT, VEC> xs[IMAX];
    float sum_sq = 0.0f;
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (!active(i)) continue;
      xs[i].load(st.at<XT>(stage, 0) + first + i * stride);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float v = xs[i].get_float(k);
        sum_sq = fmaf(v, v, sum_sq);
      }
    }
    sum_sq = row_group_sum(sum_sq, scratch, parity);
    parity ^= 1;
    const float rstd = 1.0f / sqrtf(sum_sq * shape.inv_hidden + p.eps);
    if (p.rstd && threadIdx.x == 0) p.rstd[row] = rstd;
    uint8_t* y = static_cast<uint8_t*>(p.y) + row * p.y_stride + first;
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (!active(i)) continue;
      float v[VEC];
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[k] = xs[i].get_float(k) * rstd * (w[i].get_float(k) + w_add);
#pragma unroll
      for (int k = 0; k < VEC; ++k) amax = fmaxf(amax, fabsf(v[k]));
      store_quantized<VEC>(y + i * stride, VEC, v, factor, p.quant.format);
    }
    stage = stage == kPipelineStages - 1 ? 0 : stage + 1;
  }
  cp_async_wait<0>();  // only empty groups remain; nothing may be in flight at exit
  // Once per CTA (its own scratch: no barrier needed against the row sums' readers).
  if (p.quant.amax) cta_amax_to_global(amax, amax_scratch, p.quant.amax);
}

}  // namespace normkit::cuda
