// The forward of many 16-bit rows misaligned for 16-byte vectors (odd hidden sizes), as
// rms_norm_fwd_realigned reads them (a head of h < 8 elements, then 8-element vectors from
// column h, x and y misaligned alike), but persistent, as rms_norm_bwd_realigned_slots: CTA
// `slot` walks rows slot, slot + slots, ..., slots all the rows or a multiple of 8, so that every
// row of a slot has the same head and each thread the same columns. The weight and bias are
// shifted into place once per slot, into shared memory, instead of from two loads per vector in
// every row: under ncu the realigned kernel at 4096 x 4095 ran at 116 registers (half the aligned
// kernel's occupancy) and issued about twice the instructions per byte (52 us, 43% of copy;
// twenty-eighth session). A row per group of blockDim.x threads (up to kSmallItems vectors per
// thread); no residual (the launcher's rule).
//
// blockDim.y groups per CTA (KernelFacts::fwd_realign_slot_cta_threads): group y of CTA b is
// slot b + y * gridDim.x, gridDim.x then a multiple of 8, so that every row of the CTA has the
// same head and the groups share one shifted weight and bias (with 2112 CTAs of one row group
// at 4096 x 1001 each shifted them for about 2 rows: ncu, twenty-ninth session; several groups
// measured no faster, so one is the default).
#pragma once

#include "cuda/element.cuh"
#include "cuda/kernel_params.h"
#include "cuda/launch_config.h"
#include "cuda/reduce.cuh"
#include "cuda/rms_norm_fwd_kernels.cuh"
#include "cuda/rms_norm_fwd_realigned.cuh"

namespace normkit::cuda {

// WEIGHT_ONLY: a weight, no bias, not zero-centred (the launcher's test), so each output is
// x * rstd * w with no tests at run time: the general form spends about 9 instructions per
// element on them (SASS, thirtieth session), where the kernel is short of issue slots.
//
// Dynamic shared memory: fwd_realigned_slots_smem_bytes.
template <typename XT, typename WT, typename YT, int IMAX, bool WEIGHT_ONLY>
__global__ void __launch_bounds__(512) rms_norm_fwd_realigned_slots(FwdParams p) {
  constexpr int VEC = kRealignVec;
  static_assert(sizeof(XT) == 2 && sizeof(WT) == 2 && sizeof(YT) == 2, "16-bit types only");
  __shared__ float scratch[kMaxWarps];
  __shared__ float head_x[kRealignSlotRowsMax][VEC];  // each group's row's head (head thread)
  extern __shared__ __align__(16) unsigned char slot_state[];
  const RowShape& shape = p.shape;
  const int groups = static_cast<int>(blockDim.y), group = static_cast<int>(threadIdx.y);
  const int64_t slots = static_cast<int64_t>(gridDim.x) * groups;
  const WT* weight = static_cast<const WT*>(p.weight);
  const WT* bias = static_cast<const WT*>(p.bias);
  // [cols_per_cta] each (16-byte aligned: cols_per_cta is a multiple of 8): weight, then bias.
  const int64_t cols = shape.cols_per_cta;
  WT* slot_weight = reinterpret_cast<WT*>(slot_state);
  WT* slot_bias = slot_weight + (weight ? cols : 0);
  // Every row of the CTA has the head of its first row.
  const int head = static_cast<int>(min(
      static_cast<int64_t>(head_elements(static_cast<const XT*>(p.x) +
                                         min(static_cast<int64_t>(blockIdx.x), shape.rows - 1) *
                                             p.x_stride)),
      shape.hidden));
  const int64_t col_end = shape.hidden - head;  // body columns
  const bool head_thread = threadIdx.x == 0;
  auto local = [&](int i) {
    return (i * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * VEC;
  };
  auto active = [&](int i) { return i < shape.items && local(i) < col_end; };

  {  // every pair loaded before the first is shifted (load_pair)
    ShiftedPair<WT> w[IMAX], b[IMAX];
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (group != 0 || !active(i)) continue;
      if (weight) w[i] = load_pair(weight, head + local(i), shape.hidden);
      if (bias) b[i] = load_pair(bias, head + local(i), shape.hidden);
    }
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (group != 0 || !active(i)) continue;
      if (weight) store_lanes_shared(slot_weight + local(i), shifted(w[i], head + local(i)));
      if (bias) store_lanes_shared(slot_bias + local(i), shifted(b[i], head + local(i)));
    }
  }
  // (Group 0's threads shift the weight and bias; with one group each thread reads only its own
  // entries, else every group reads them after a barrier.)
  if (groups > 1) __syncthreads();

  // Trip count uniform over the CTA (the row sum's barriers): a group past the last row sits the
  // round out.
  for (int64_t first = blockIdx.x; first < shape.rows; first += slots) {
    const int64_t row = first + static_cast<int64_t>(group) * gridDim.x;
    const bool live = row < shape.rows;
    const XT* x = static_cast<const XT*>(p.x) + row * p.x_stride;
    YT* y = static_cast<YT*>(p.y) + row * p.y_stride;
    Lanes<XT, VEC> s[IMAX];
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      s[i] = Lanes<XT, VEC>{};
      if (live && active(i)) {
        s[i] = load_lanes_upto<XT, VEC>(x + head + local(i), col_end - local(i));
      }
    }
    float sum_sq = sum_of_squares(s);
    // The head, parked in shared memory until rstd is known (registers live across the row sum
    // cost every thread).
    if (live && head_thread) {
#pragma unroll
      for (int k = 0; k < VEC - 1; ++k) {
        const float v = k < head ? to_float(x[k]) : 0.0f;
        head_x[group][k] = v;
        sum_sq += v * v;
      }
    }
    sum_sq = cta_row_sum(sum_sq, scratch);
    if (!live) continue;
    const float rstd = 1.0f / sqrtf(sum_sq * shape.inv_hidden + p.eps);
    if (p.rstd && head_thread) p.rstd[row] = rstd;
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (!active(i)) continue;
      Lanes<WT, VEC> w{}, b{};
      if (WEIGHT_ONLY || weight) w.load(slot_weight + local(i));
      if (!WEIGHT_ONLY && bias) b.load(slot_bias + local(i));
      float out[VEC];
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        out[k] = scaled_as<WEIGHT_ONLY>(p, to_float(s[i].get(k)), rstd, w.get_float(k),
                                        b.get_float(k));
      }
      store_upto<YT, VEC>(y + head + local(i), col_end - local(i), out);
    }
    if (head_thread) {
      // The head's weight and bias all loaded before its first store (a store to y may alias
      // them, so a load after it waits for it). Plain loads under the tests: __ldg was hoisted
      // above such a test in the backward's slots kernel (twenty-eighth session).
      float head_w[VEC - 1], head_b[VEC - 1];
#pragma unroll
      for (int k = 0; k < VEC - 1; ++k) {
        head_w[k] = k < head && (WEIGHT_ONLY || weight) ? to_float(weight[k]) : 0.0f;
        head_b[k] = k < head && !WEIGHT_ONLY && bias ? to_float(bias[k]) : 0.0f;
      }
#pragma unroll
      for (int k = 0; k < VEC - 1; ++k) {
        if (k < head) {
          y[k] = from_float<YT>(
              scaled_as<WEIGHT_ONLY>(p, head_x[group][k], rstd, head_w[k], head_b[k]));
        }
      }
    }
  }
}

}  // namespace normkit::cuda
