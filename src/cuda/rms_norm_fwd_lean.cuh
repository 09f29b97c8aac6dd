// RMSNorm forward for the most common call on one wave of one-row CTAs: 16-bit x, weight and y,
// a plain weight (no zero-centred add, no bias), no residual, an EXACT plan of ITEMS whole
// 16-byte vectors per thread (LaunchConfig::lean). Why a kernel of its own: ncu (thirty-sixth
// session) counted 400-490 instructions per warp in the general kernels at 1 x 4096 and
// 128 x 4096 against 139 in torch.compile's Triton kernel, whose CTAs lived 2488 cycles per SM
// against our 4088. On one wave nothing hides a warp's chain of instructions. Here: one 64-bit
// row offset per pointer and 32-bit column offsets, no runtime tests of a residual, a bias,
// clusters or the item count, and one barrier in the block sum (scratch is not reused).
//
// The arithmetic is fwd_registers_row's with the weight loaded with x, in the same order: the
// same sum of squares, shuffles and warp order, the same rstd and scaling, so the same bits.
#pragma once

#include "cuda/element.cuh"
#include "cuda/kernel_params.h"
#include "cuda/launch_config.h"  // kFwdWeightFirstMaxThreads
#include "cuda/read_policy.cuh"
#include "cuda/reduce.cuh"
#include "cuda/rms_norm_fwd_kernels.cuh"  // sum_of_squares, cta_row_sum_once

namespace normkit::cuda {

// P: FwdParams, or the 64 bytes of LeanFwdParams (KernelFacts::fwd_lean_params). WEAK_STORES:
// y by plain st.global rather than __stcg (KernelFacts::fwd_weak_stores). ROW_SUM_QUADS:
// cta_row_sum_once's QUADS (LaunchConfig::row_sum_quads).
template <typename XT, typename WT, typename YT, int ITEMS, typename P = FwdParams,
          bool WEAK_STORES = false, bool ROW_SUM_QUADS = false>
__global__ void __launch_bounds__(kFwdWeightFirstMaxThreads, 4) rms_norm_fwd_lean(P p) {
  static_assert(sizeof(XT) == 2 && sizeof(WT) == 2 && sizeof(YT) == 2, "16-bit types");
  static_assert(kFwdWeightFirstMaxThreads % 128 == 0, "whole quads of warp sums");
  constexpr int VEC = 8;  // 16 bytes
  __shared__ alignas(16) float warp_sums[kFwdWeightFirstMaxThreads / 32];
  const unsigned row = blockIdx.x;  // one row per CTA (at most one wave of them)
  const XT* x = static_cast<const XT*>(p.x) + static_cast<int64_t>(row) * p.x_stride;
  const WT* weight = static_cast<const WT*>(p.weight);
  // Every x load carries a policy (evict-normal where none is asked): ReadPolicy's branch kept
  // a plain and a hinted copy of each load, both issued (one predicated off), and the kernel
  // took 9.02 us at 4096 x 1024 against 8.36 with one form (ncu, forty-third session).
  const uint64_t policy = read_policy_always(p.evict_first_reads, p.evict_last_reads);
  const unsigned col = threadIdx.x * VEC, step = blockDim.x * VEC;  // (32-bit offsets)
  Lanes<XT, VEC> s[ITEMS];
  Lanes<WT, VEC> w[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    s[i].load_hinted(x + col + i * step, policy);
    w[i].load_readonly(weight + col + i * step);
  }

  const float sum_sq = cta_row_sum_once<ROW_SUM_QUADS>(sum_of_squares(s), warp_sums);
  const float rstd = 1.0f / sqrtf(sum_sq * inv_hidden_of(p) + p.eps);
  if (p.rstd && threadIdx.x == 0) p.rstd[row] = rstd;
  YT* y = static_cast<YT*>(p.y) + static_cast<int64_t>(row) * p.y_stride;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    float out[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) out[k] = s[i].get_float(k) * rstd * w[i].get_float(k);
    store_vec<YT, VEC, WEAK_STORES>(y + col + i * step, out);
  }
}

}  // namespace normkit::cuda
