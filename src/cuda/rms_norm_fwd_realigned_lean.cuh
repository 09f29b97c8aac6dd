// The realigned forward with fewer instructions (16-bit x, weight and y; no residual) on rows
// that a cluster splits or one CTA holds: for calls of a weight alone (RealignedLeanParams) and,
// compiled apart, the other calls (RealignedLeanGeneralParams): a weight with a bias or
// zero-centring, or no weight (with or without a bias).
// Why: at 29 x 17389 rms_norm_fwd_realigned executes 30% more instructions than a plain kernel
// of the same split (bench/few_rows_probe.cu) at the same cycles per instruction, and takes
// 0.85 us longer (ncu, forty-ninth session): on a few CTAs per SM nothing hides a warp's own
// chain.
//
// Each row is read as the 16-byte aligned vectors that overlap it (its "window"): vector j
// covers the row's elements 8j - s .. 8j - s + 7, where s is how far into its 16-byte block the
// row starts. Vector 0 is loaded whole and its first s lanes (the previous row's, or bytes of
// the same allocation before the tensor) masked; the last is loaded up to the row's end, so no
// load passes the tensor. Interior vectors are stored whole, the two end vectors lane by lane.
// The weight of vector j is the two aligned weight vectors j - 1 and j shifted by 8 - s lanes,
// loaded with x and shifted after the row sum (a switch on s, uniform over the CTA). No head
// thread, 32-bit column offsets, the small parameter block below.
//
// The sum of squares and the scaling are fwd_registers_row's (x * rstd * w per element); the
// split of the row among threads differs from the other forward kernels', so the last bits of
// rstd may differ from theirs (deterministic for a given plan, as every kernel here).
#pragma once

#include <type_traits>

#include "cuda/element.cuh"
#include "cuda/kernel_params.h"
#include "cuda/reduce.cuh"
#include "cuda/rms_norm_fwd_kernels.cuh"  // sum_of_squares, cta_row_sum

namespace normkit::cuda {

// What rms_norm_fwd_realigned_lean reads (72 bytes against FwdParams' 230 or so): the lean
// forward's block, the row's length and the plan's vectors per thread.
struct RealignedLeanParams {
  LeanFwdParams row;
  int hidden;
  int items;
};

// ... and for the other calls: a bias (shifted into place as the weight is), a zero-centred
// weight, or no weight (row.weight null: taken as zeros plus 1): each output
// x * rstd * (w + weight_add) + b, as scale_in_place has it.
struct RealignedLeanGeneralParams : RealignedLeanParams {
  const void* bias;  // may be null
  bool zero_centered;
};

// The parameters of a realigned plan's call (the launcher's FwdParams) for the lean kernel.
inline RealignedLeanParams realigned_lean_params(const FwdParams& p) {
  return RealignedLeanParams{lean_fwd_params(p), static_cast<int>(p.shape.hidden), p.shape.items};
}

inline RealignedLeanGeneralParams realigned_lean_general_params(const FwdParams& p) {
  RealignedLeanGeneralParams g;
  static_cast<RealignedLeanParams&>(g) = realigned_lean_params(p);
  g.bias = p.bias;
  g.zero_centered = p.zero_centered;
  return g;
}

// Lanes from .. from + 7 of the 16 lanes (a, b), from in 1..7 (uniform: each case is
// straight code, where shift_halfwords selects among words at run time).
template <typename T>
__device__ __forceinline__ Lanes<T, 8> lanes_from(const Lanes<T, 8>& a, const Lanes<T, 8>& b,
                                                  int from) {
  const unsigned w[8] = {a.lane[0], a.lane[1], a.lane[2], a.lane[3],
                         b.lane[0], b.lane[1], b.lane[2], b.lane[3]};
  Lanes<T, 8> out;
  switch (from) {
#define NK_LANES_FROM(F)                                                                        \
  case F:                                                                                       \
    _Pragma("unroll") for (int m = 0; m < 4; ++m) {                                              \
      out.lane[m] = (F) % 2 == 0 ? w[m + (F) / 2] : __funnelshift_r(w[m + (F) / 2],             \
                                                                    w[m + (F) / 2 + 1], 16);     \
    }                                                                                           \
    break;
    NK_LANES_FROM(1)
    NK_LANES_FROM(2)
    NK_LANES_FROM(3)
    NK_LANES_FROM(4)
    NK_LANES_FROM(5)
    NK_LANES_FROM(6)
    NK_LANES_FROM(7)
#undef NK_LANES_FROM
    default:
      out = b;
  }
  return out;
}

// Lanes k of v below `first` zeroed (first in 0..7), by masks on the 32-bit words (Lanes::set
// builds a vector in order: setting an even lane overwrites its odd neighbour).
template <typename T>
__device__ __forceinline__ Lanes<T, 8> zero_below(Lanes<T, 8> v, int first) {
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const unsigned keep =
        (2 * m >= first ? 0x0000ffffu : 0u) | (2 * m + 1 >= first ? 0xffff0000u : 0u);
    v.lane[m] &= keep;
  }
  return v;
}

// blockDim.x threads per CTA, a cluster of gridDim.x / rows CTAs per row (1 allowed), CTA rank
// r covering window vectors r * blockDim.x * items .. + blockDim.x * items (the planner makes
// the CTA or cluster cover the window: realigned_lean_covers). Q: RealignedLeanParams, or
// RealignedLeanGeneralParams for the general form (its bias loaded and shifted as the weight).
template <typename XT, typename WT, typename YT, int IMAX, typename Q>
__global__ void __launch_bounds__(512) rms_norm_fwd_realigned_lean(Q q) {
  constexpr bool kGeneral = std::is_same_v<Q, RealignedLeanGeneralParams>;
  const LeanFwdParams& p = q.row;
  constexpr int VEC = 8;
  static_assert(sizeof(XT) == 2 && sizeof(WT) == 2 && sizeof(YT) == 2, "16-bit types only");
  __shared__ float scratch[kMaxWarps];
  __shared__ ClusterPush cluster_push;
  unsigned ranks = 1, rank = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  ranks = cooperative_groups::this_cluster().num_blocks();
  rank = cooperative_groups::this_cluster().block_rank();
#endif
  if (ranks > 1) cluster_push_init(cluster_push);
  const int64_t row = blockIdx.x / ranks;
  const XT* x_row = static_cast<const XT*>(p.x) + row * p.x_stride;
  const int s = static_cast<int>(reinterpret_cast<uintptr_t>(x_row) % 16) / 2;
  const XT* xw = x_row - s;  // 16-byte aligned
  const WT* weight = static_cast<const WT*>(p.weight);  // null in the general form only
  const bool has_weight = !kGeneral || weight != nullptr;
  const int nvec = (s + q.hidden + VEC - 1) / VEC;  // window vectors
  const int first = static_cast<int>(rank) * static_cast<int>(blockDim.x) * q.items +
                    static_cast<int>(threadIdx.x);
  auto index = [&](int i) { return first + i * static_cast<int>(blockDim.x); };
  auto active = [&](int i) { return i < q.items && index(i) < nvec; };

  Lanes<XT, VEC> xs[IMAX];
  Lanes<WT, VEC> wa[IMAX], wb[IMAX];  // weight vectors j - 1 and j, shifted after the sum
  Lanes<WT, VEC> ba[kGeneral ? IMAX : 1], bb[kGeneral ? IMAX : 1];  // the bias's, alike
  const WT* bias = nullptr;
  if constexpr (kGeneral) bias = static_cast<const WT*>(q.bias);
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    const int j = index(i);
    xs[i] = Lanes<XT, VEC>{};
    wa[i] = wb[i] = Lanes<WT, VEC>{};
    if constexpr (kGeneral) ba[i] = bb[i] = Lanes<WT, VEC>{};
    if (active(i)) {
      if (j < nvec - 1) {
        xs[i].load(xw + j * VEC);
      } else {
        xs[i] = load_lanes_upto<XT, VEC>(xw + j * VEC, s + q.hidden - j * VEC);
      }
      const int col = j * VEC;  // weight column of lane s
      if (has_weight && col < q.hidden) {
        wb[i] = load_readonly_lanes_upto<WT, VEC>(weight + col, q.hidden - col);
      }
      if (has_weight && s != 0 && j > 0) {
        wa[i] = load_readonly_lanes_upto<WT, VEC>(weight + col - VEC, q.hidden - col + VEC);
      }
      if constexpr (kGeneral) {
        if (bias && col < q.hidden) {
          bb[i] = load_readonly_lanes_upto<WT, VEC>(bias + col, q.hidden - col);
        }
        if (bias && s != 0 && j > 0) {
          ba[i] = load_readonly_lanes_upto<WT, VEC>(bias + col - VEC, q.hidden - col + VEC);
        }
      }
    }
  }
  if (first == 0 && s != 0) xs[0] = zero_below(xs[0], s);  // the window's first vector

  float sum_sq = sum_of_squares(xs);
  sum_sq = cta_row_sum(sum_sq, scratch);
  if (ranks > 1) sum_sq = cluster_push_sum(sum_sq, cluster_push);
  const float rstd = 1.0f / sqrtf(sum_sq * p.inv_hidden + p.eps);
  if (p.rstd && first == 0) p.rstd[row] = rstd;

  YT* yw = static_cast<YT*>(p.y) + row * p.y_stride - s;
  const int last_lanes = s + q.hidden - (nvec - 1) * VEC;  // of the last vector, 1..8
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    if (!active(i)) continue;
    const int j = index(i);
    const Lanes<WT, VEC> w = s == 0 ? wb[i] : lanes_from(wa[i], wb[i], VEC - s);
    float out[VEC];
    if constexpr (kGeneral) {
      const Lanes<WT, VEC> b = s == 0 ? bb[i] : lanes_from(ba[i], bb[i], VEC - s);
      // weight_add's: w + -0.0 is w bit for bit (w + 0.0 would turn a weight of -0.0 into +0.0);
      // no weight: lanes of zeros plus 1, x * rstd * 1 being x * rstd bit for bit
      const float add = q.zero_centered || !has_weight ? 1.0f : -0.0f;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        out[k] = xs[i].get_float(k) * rstd * (w.get_float(k) + add);
        if (bias) out[k] += b.get_float(k);
      }
    } else {
#pragma unroll
      for (int k = 0; k < VEC; ++k) out[k] = xs[i].get_float(k) * rstd * w.get_float(k);
    }
    YT* to = yw + j * VEC;
    if ((j > 0 || s == 0) && j < nvec - 1) {
      store_vec<YT, VEC>(to, out);
    } else {
      const int lo = j == 0 ? s : 0, hi = j == nvec - 1 ? last_lanes : VEC;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        if (k >= lo && k < hi) to[k] = from_float<YT>(out[k]);
      }
    }
  }
}

}  // namespace normkit::cuda
