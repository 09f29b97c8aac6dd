// The forward on rows misaligned for 16-byte vectors (odd hidden sizes, where every row starts
// somewhere else), 16-bit types only. Each row is a head of h < 8 elements, then 8-element
// vectors from column h, which are 16-byte aligned whenever x and y rows are misaligned alike
// (the launcher checks). The weight and bias, aligned at column 0, are shifted into place in
// registers from two aligned loads. Element by element, a thread issues 8 times the loads:
// 4096 x 4095 ran at 28% of copy, 43% realigned (docs/notes.md v22). Small launches, where that
// does not matter and fewer threads cost more, stay element by element (plan_fwd_realigned).
#pragma once

#include "cuda/element.cuh"
#include "cuda/kernel_params.h"
#include "cuda/reduce.cuh"
#include "cuda/rms_norm_fwd_kernels.cuh"

namespace normkit::cuda {

constexpr int kRealignVec = 8;  // 16 bytes of 16-bit elements

// Elements before the first 16-byte boundary of a row that starts at p (p 2-byte aligned).
__device__ __forceinline__ int head_elements(const void* p) {
  return static_cast<int>((16 - reinterpret_cast<uintptr_t>(p) % 16) % 16) / 2;
}

// Words of the 32 bytes a (16 bytes) then b, from halfword `shift` (0..7) on: the 16-byte window a
// 16-bit vector at a misaligned column sees.
__device__ __forceinline__ void shift_halfwords(const unsigned (&a)[4], const unsigned (&b)[4],
                                                int shift, unsigned (&out)[4]) {
  const unsigned w[8] = {a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]};
  const int q = shift >> 1;  // whole words
  unsigned pick[5];
#pragma unroll
  for (int j = 0; j < 5; ++j) {
    // Selected, not indexed: a runtime index would put w in local memory.
    pick[j] = q == 0 ? w[j] : q == 1 ? w[j + 1] : q == 2 ? w[j + 2] : w[j + 3];
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[i] = (shift & 1) ? __funnelshift_r(pick[i], pick[i + 1], 16) : pick[i];
  }
}

// The two aligned vectors of v under elements col .. col + 7 (col anywhere; those at n or past it
// read as 0), loaded, not yet shifted: shifted() waits for them. A thread loads the pairs of all
// its vectors before it shifts the first, so that their round trips overlap (shifting each pair
// as it was loaded held the next vector's loads behind it: docs/notes.md, forty-ninth session).
template <typename T>
struct ShiftedPair {
  Lanes<T, kRealignVec> a, b;
};

template <typename T>
__device__ __forceinline__ ShiftedPair<T> load_pair(const T* v, int64_t col, int64_t n) {
  const int64_t chunk = col - col % kRealignVec;
  ShiftedPair<T> s;
  s.a = load_readonly_lanes_upto<T, kRealignVec>(v + chunk, n - chunk);
  s.b = Lanes<T, kRealignVec>{};
  if (col != chunk && chunk + kRealignVec < n) {
    s.b = load_readonly_lanes_upto<T, kRealignVec>(v + chunk + kRealignVec, n - chunk - kRealignVec);
  }
  return s;
}

// Elements col .. col + 7 of the pair that load_pair(v, col, n) loaded.
template <typename T>
__device__ __forceinline__ Lanes<T, kRealignVec> shifted(const ShiftedPair<T>& s, int64_t col) {
  const int shift = static_cast<int>(col % kRealignVec);
  if (shift == 0) return s.a;
  Lanes<T, kRealignVec> out;
  shift_halfwords(s.a.lane, s.b.lane, shift, out.lane);
  return out;
}

// Elements col .. col + 7 of v, loaded and shifted at once: for a kernel that cannot hold the
// pairs (the backward's slots kernel held to 64 registers). The same as shifted(load_pair(v,
// col, n), col), written out: composed, ptxas spills 8 bytes in that kernel (sm_90, CUDA 13.0).
template <typename T>
__device__ __forceinline__ Lanes<T, kRealignVec> load_shifted(const T* v, int64_t col, int64_t n) {
  const int shift = static_cast<int>(col % kRealignVec);
  const int64_t chunk = col - shift;
  const Lanes<T, kRealignVec> a = load_readonly_lanes_upto<T, kRealignVec>(v + chunk, n - chunk);
  if (shift == 0) return a;
  Lanes<T, kRealignVec> b{};
  if (chunk + kRealignVec < n) {
    b = load_readonly_lanes_upto<T, kRealignVec>(v + chunk + kRealignVec, n - chunk - kRealignVec);
  }
  Lanes<T, kRealignVec> out;
  shift_halfwords(a.lane, b.lane, shift, out.lane);
  return out;
}

// 8 16-bit lanes into shared memory (16-byte aligned); Lanes::load reads them back.
template <typename T>
__device__ __forceinline__ void store_lanes_shared(T* to, const Lanes<T, kRealignVec>& lanes) {
  static_assert(sizeof(T) == 2, "16-bit lanes");
  *reinterpret_cast<uint4*>(to) =
      make_uint4(lanes.lane[0], lanes.lane[1], lanes.lane[2], lanes.lane[3]);
}

// The output of one element: s * rstd * (w or 1 + w, or 1) (+ b), as scale_in_place computes it.
__device__ __forceinline__ float scaled(const FwdParams& p, float s, float rstd, float w, float b) {
  float scale = 1.0f;
  if (p.weight) {
    scale = w;
    if (p.zero_centered) scale += 1.0f;
  }
  float out = s * rstd * scale;
  if (p.bias) out += b;
  return out;
}

// scaled(), or with WEIGHT_ONLY (a weight, no bias, not zero-centred: the launcher's test) the
// same value with none of its tests: s * rstd * w.
template <bool WEIGHT_ONLY>
__device__ __forceinline__ float scaled_as(const FwdParams& p, float s, float rstd, float w,
                                          float b) {
  if constexpr (WEIGHT_ONLY) {
    return s * rstd * w;
  } else {
    return scaled(p, s, rstd, w, b);
  }
}

// The weight lanes as the backward scales dy by them (weight_scale: w, 1 + w, or 1), or with
// WEIGHT_ONLY (a weight, not zero-centred) as they are, with no test per element.
template <bool WEIGHT_ONLY, typename WT, typename Params>
__device__ __forceinline__ void realigned_weight_scale(const Params& p,
                                                       const Lanes<WT, kRealignVec>& lanes,
                                                       float* w) {
  if constexpr (WEIGHT_ONLY) {
#pragma unroll
    for (int k = 0; k < kRealignVec; ++k) w[k] = lanes.get_float(k);
  } else {
    weight_scale<WT, kRealignVec>(p, lanes, w);
  }
}

// blockDim = (threads per row, rows per block); a cluster of shape.cluster_size CTAs shares a row,
// each covering cols_per_cta columns of the row's body (the columns from h on). Thread (0, y) of
// the cluster's first CTA also takes the head. No residual (the launcher's rule).
// WEIGHT_ONLY: a weight, no bias, not zero-centred (the launcher's test): each output x * rstd
// * w with no tests per element.
template <typename XT, typename WT, typename YT, int IMAX, bool WEIGHT_ONLY = false>
__global__ void __launch_bounds__(512) rms_norm_fwd_realigned(FwdParams p) {
  constexpr int VEC = kRealignVec;
  static_assert(sizeof(XT) == 2 && sizeof(WT) == 2 && sizeof(YT) == 2, "16-bit types only");
  __shared__ float scratch[kMaxWarps];
  __shared__ ClusterPush cluster_push;  // with clusters
  const RowShape& shape = p.shape;
  RowChunk<VEC> c(shape);  // in body columns
  const int64_t row = c.row;
  const XT* x = static_cast<const XT*>(p.x) + (c.valid ? row * p.x_stride : 0);
  YT* y = static_cast<YT*>(p.y) + (c.valid ? row * p.y_stride : 0);
  const int head =
      c.valid ? static_cast<int>(min(static_cast<int64_t>(head_elements(x)), shape.hidden)) : 0;
  c.col_end = min(shape.hidden - head, c.col_end);
  const bool head_thread = c.valid && c.rank == 0 && threadIdx.x == 0;

  if (shape.cluster_size > 1) cluster_push_init(cluster_push);
  Lanes<XT, VEC> s[IMAX];
  ShiftedPair<WT> w[IMAX], b[IMAX];  // shifted after the row sum
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    const int64_t col = c.column(i);
    s[i] = Lanes<XT, VEC>{};
    if (c.active(i)) {
      s[i] = load_lanes_upto<XT, VEC>(x + head + col, c.col_end - col);
      if (WEIGHT_ONLY || p.weight) {
        w[i] = load_pair(static_cast<const WT*>(p.weight), head + col, shape.hidden);
      }
      if (!WEIGHT_ONLY && p.bias) {
        b[i] = load_pair(static_cast<const WT*>(p.bias), head + col, shape.hidden);
      }
    }
  }
  // The head, with its weight and bias: loaded now too, so no load waits after the reduction.
  const WT* weight = static_cast<const WT*>(p.weight);
  const WT* bias = static_cast<const WT*>(p.bias);
  float head_x[VEC - 1], head_w[VEC - 1], head_b[VEC - 1];
#pragma unroll
  for (int k = 0; k < VEC - 1; ++k) {
    const bool mine = head_thread && k < head;
    head_x[k] = mine ? to_float(x[k]) : 0.0f;
    head_w[k] = mine && (WEIGHT_ONLY || weight) ? to_float(__ldg(weight + k)) : 0.0f;
    head_b[k] = mine && !WEIGHT_ONLY && bias ? to_float(__ldg(bias + k)) : 0.0f;
  }

  float sum_sq = sum_of_squares(s);
#pragma unroll
  for (int k = 0; k < VEC - 1; ++k) sum_sq += head_x[k] * head_x[k];
  sum_sq = cta_row_sum(sum_sq, scratch);
  if (shape.cluster_size > 1) sum_sq = cluster_push_sum(sum_sq, cluster_push);
  if (!c.valid) return;
  const float rstd = 1.0f / sqrtf(sum_sq * shape.inv_hidden + p.eps);
  if (p.rstd && head_thread) p.rstd[row] = rstd;
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    const int64_t col = c.column(i);
    if (c.active(i)) {
      Lanes<WT, VEC> wv{}, bv{};
      if (WEIGHT_ONLY || p.weight) wv = shifted(w[i], head + col);
      if (!WEIGHT_ONLY && p.bias) bv = shifted(b[i], head + col);
      float out[VEC];
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        out[k] = scaled_as<WEIGHT_ONLY>(p, to_float(s[i].get(k)), rstd,
                                        WEIGHT_ONLY || p.weight ? to_float(wv.get(k)) : 0.0f,
                                        !WEIGHT_ONLY && p.bias ? to_float(bv.get(k)) : 0.0f);
      }
      store_upto<YT, VEC>(y + head + col, c.col_end - col, out);
    }
  }
  if (head_thread) {
#pragma unroll
    for (int k = 0; k < VEC - 1; ++k) {
      if (k < head) {
        y[k] = from_float<YT>(scaled_as<WEIGHT_ONLY>(p, head_x[k], rstd, head_w[k], head_b[k]));
      }
    }
  }
}

}  // namespace normkit::cuda
