// RMSNorm forward kernels with a quantized output (nk_quant_mode). They share the input side
// with rms_norm_fwd_kernels.cuh (loads, residual, mean square) and differ in the epilogue:
// v = s * rstd * w_eff + b is multiplied by a scale and rounded to one-byte codes.
//
// MODE is the nk_quant_mode. For BLOCK and MXFP8, a block of `block` columns is held by
// block / VEC consecutive lanes of one warp (the launcher guarantees block / VEC <= 32, that a
// row chunk starts on a block boundary and that threads_per_row * VEC is a multiple of the
// block), so a block's maximum is a sub-warp shuffle. Nothing returns early: every lane joins
// every shuffle and barrier, and lanes past the row's end contribute zeros.
#pragma once

#include <type_traits>

#include "cuda/block_scale_e4m3.h"
#include "cuda/quant.cuh"
#include "cuda/rms_norm_fwd_kernels.cuh"

namespace normkit::cuda {

// Maximum over the threads (and CTAs) that share a row.
__device__ __forceinline__ float row_max(float v, const RowShape& shape, float* scratch,
                                         float* cluster_slot) {
  v = blockDim.x <= 32 ? group_reduce(v, blockDim.x, MaxOp{}) : block_reduce(v, scratch, MaxOp{});
  if (shape.cluster_size > 1) v = cluster_reduce(v, cluster_slot, MaxOp{});
  return v;
}

// Maximum over aligned groups of `width` lanes (a power of two up to 32, the same in every
// lane), unrolled: group_reduce's loop over a runtime width cost a counter, a compare and a
// branch per step on every item of the block modes.
__device__ __forceinline__ float lane_group_max(float v, int width) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    if (offset < width) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

template <int VEC>
__device__ __forceinline__ float max_abs(const float* v) {
  float m = 0.0f;
#pragma unroll
  for (int k = 0; k < VEC; ++k) m = fmaxf(m, fabsf(v[k]));
  return m;
}

// p, with its output format the constant e4m3 where E4M3 (the launcher checked that y is
// e4m3): the kernels' runtime format tests, a compare and up to three branches per vector in
// the SASS, then fold away. (A local copy: the other fields stay reads of the parameters.)
template <bool E4M3>
__device__ __forceinline__ FwdParams with_e4m3(const FwdParams& p) {
  FwdParams fixed = p;
  if constexpr (E4M3) fixed.quant.format = QuantFormat::kE4M3;
  return fixed;
}

// Quantizes and stores one vector v (VEC values of row `row` at column `col`, `n` of them in
// the row) in a BLOCK/MXFP8/TENSOR mode, writing the block's scale where this lane starts a
// block. `factor` is the per-tensor scale (TENSOR) or the row's reciprocal scale (TOKEN).
// Every lane calls this (the block maximum is a shuffle); `active` says whether it stores.
template <int MODE, int VEC>
__device__ __forceinline__ void quantize_vector(const FwdParams& p, int64_t row, int64_t col,
                                                int64_t n, bool active, const float* v,
                                                float factor) {
  const QuantParams& q = p.quant;
  if constexpr (MODE == NK_QUANT_BLOCK || MODE == NK_QUANT_MXFP8) {
    const int lanes = q.block / VEC;
    const float m = lane_group_max(max_abs<VEC>(v), lanes);
    // A mask, not %: the runtime remainder was a dozen instructions per item in the SASS.
    const bool writes_scale = active && (threadIdx.x & (lanes - 1)) == 0;
    // Shifts: as divisions by the runtime block, these were 64-bit integer divisions per item
    // in the SASS (a 32-bit fast path and a called 64-bit routine).
    const int64_t scale_index = row * (p.shape.hidden >> q.block_shift) + (col >> q.block_shift);
    if constexpr (MODE == NK_QUANT_BLOCK) {
      const float scale = dynamic_scale(m, q.qmax, q.scale_ub);
      factor = __frcp_rn(scale);
      if (writes_scale) static_cast<float*>(q.scales)[scale_index] = scale;
    } else {
      const int e = mx_scale_exponent(m, q.mx_emax);
      factor = mx_multiplier(e);
      if (writes_scale) static_cast<uint8_t*>(q.scales)[scale_index] = mx_scale_byte(e);
    }
  }
  if (active) {
    store_quantized<VEC>(static_cast<uint8_t*>(p.y) + row * p.y_stride + col, n, v, factor,
                         q.format);
  }
}

// The items of BLOCK's 128-column blocks (16 lanes of 8-element vectors) or MXFP8's 32-column
// ones (4 lanes) where y is e4m3, on EXACT plans (every item active): the block maximum by
// fixed shuffles, not five runtime tests of the width; the scale without BLOCK's division
// (e4m3_block_scale, bit for bit dynamic_scale) or MXFP8's runtime emax, clamps and subnormal
// case (mx_e4m3_biased, bit for bit mx_scale_exponent); the scale's and the codes' addresses
// from per-thread pointers stepped per item, not 64-bit index arithmetic; the format's tests
// gone (a compare and up to three branches per vector). BLOCK quantizes two items at a time
// (quantize_pair), MXFP8 item by item (quantize) or, with MX_PAIRS, in pairs too.
template <int MODE>
struct E4m3BlockItems {
  static_assert(MODE == NK_QUANT_BLOCK || MODE == NK_QUANT_MXFP8, "the block modes");
  static constexpr bool kMx = MODE == NK_QUANT_MXFP8;
  static constexpr int kShift = kMx ? 5 : 7;  // log2 of the block: 32 or 128 columns
  static constexpr int kLanes = (1 << kShift) / 8;
  using Scale = std::conditional_t<kMx, uint8_t, float>;  // e8m0 bytes, or float32 scales

  Scale* scales;  // this thread's first item's scale
  uint8_t* y;     // its first item's codes
  float bound;    // BLOCK's block_scale_bound(scale_ub) (MXFP8 has no bound)
  bool writer;    // MXFP8: the first lane of its block

  template <int VEC, bool EXACT>
  __device__ __forceinline__ E4m3BlockItems(const FwdParams& p, const RowChunk<VEC, EXACT>& c) {
    static_assert(VEC == 8 && EXACT, "8-element vectors, every item active");
    const int64_t col = c.column(0);
    scales = static_cast<Scale*>(p.quant.scales) + c.row * (p.shape.hidden >> kShift) +
             (col >> kShift);
    y = static_cast<uint8_t*>(p.y) + c.row * p.y_stride + col;
    bound = kMx ? 0.0f : block_scale_bound(p.quant.scale_ub);
    writer = (threadIdx.x & (kLanes - 1)) == 0;
  }

  // MXFP8's item i, values v (every lane of the warp calls this): the maximum by two shuffles.
  __device__ __forceinline__ void quantize(int i, const float* v) const {
    static_assert(kMx, "MXFP8's 4-lane blocks (BLOCK's go by quantize_pair)");
    float m = max_abs<8>(v);
#pragma unroll
    for (int offset = kLanes / 2; offset > 0; offset /= 2) {
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
    }
    float factor;
    const Scale scale = block_scale(m, factor);
    if (writer) scales[(i * blockDim.x) >> (kShift - 3)] = scale;
    store_codes(i, v, factor);
  }

  // Items i and i + 1 together (every lane of the warp calls this; `second`: whether item i + 1
  // is the thread's, the same in every lane). The first exchange swaps half blocks: the lower
  // half of a block's lanes goes on with item i's maximum, the upper half with item i + 1's, so
  // the two maxima take log2(kLanes) shuffles rather than twice that, each lane computes one
  // scale and one factor rather than two, and one more shuffle hands each lane the other item's
  // factor (BLOCK: 5 shuffles against 8; MXFP8: 3 against 4). The first lane of each half stores
  // its item's scale. The same maxima, scales and codes as item by item (a maximum does not
  // depend on its order). BLOCK measured (forty-fifth session, H100): 648 instructions per warp
  // against 687 at 8192 x 8192, 0.98-0.99x the time from 16M elements
  // (bench/results/2026-11-28T0137-h100-block-pairs). MXFP8: KernelFacts::quant_mxfp8_pairs.
  __device__ __forceinline__ void quantize_pair(int i, const float* va, const float* vb,
                                                bool second) const {
    constexpr int kHalf = kLanes / 2;
    const bool upper = (threadIdx.x & kHalf) != 0;
    const float ma = max_abs<8>(va);
    const float mb = max_abs<8>(vb);
    float m = fmaxf(upper ? mb : ma, __shfl_xor_sync(0xffffffffu, upper ? ma : mb, kHalf));
#pragma unroll
    for (int offset = kHalf / 2; offset > 0; offset /= 2) {
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
    }
    float factor;
    const Scale scale = block_scale(m, factor);
    const float other = __shfl_xor_sync(0xffffffffu, factor, kHalf);
    if ((threadIdx.x & (kHalf - 1)) == 0 && (!upper || second)) {
      scales[((i + (upper ? 1 : 0)) * blockDim.x) >> (kShift - 3)] = scale;
    }
    store_codes(i, va, upper ? other : factor);
    if (second) store_codes(i + 1, vb, upper ? factor : other);
  }

 private:
  // The scale of a block whose largest |v| is m (MXFP8's e8m0 byte, or BLOCK's float32 scale),
  // and in `factor` what its values are multiplied by before rounding.
  __device__ __forceinline__ Scale block_scale(float m, float& factor) const {
    if constexpr (kMx) {
      const uint32_t biased = mx_e4m3_biased(m);
      factor = mx_e4m3_multiplier(biased);
      return mx_e4m3_scale_byte(biased);
    } else {
      const float scale = e4m3_block_scale(m, bound);
      factor = __frcp_rn(scale);
      return scale;
    }
  }

  __device__ __forceinline__ void store_codes(int i, const float* v, float factor) const {
    unsigned word[2] = {0, 0};
    quantize_words<QuantFormat::kE4M3, 8>(v, factor, word);
    __stcg(reinterpret_cast<uint2*>(y + i * blockDim.x * 8), make_uint2(word[0], word[1]));
  }
};

// v = s * rstd * w_eff (+ b) of vector i of chunk c (at column col), in place (v holds s),
// w_eff = w + w_add from weight lanes that hold ones without a weight (weight_add,
// ones_lanes); the bias, if any, loaded here: through the read-only path, or by plain loads
// (READONLY_BIAS false) in a loop over rows, where nvcc hoisted the row-invariant ld.global.nc
// of the bias out of the loop and above its null test (memcheck: reads at null + col, eighth
// session); plain loads are never speculated. BIAS false: the caller knows that p.bias is null.
template <typename WT, int VEC, bool EXACT, bool READONLY_BIAS = true, bool BIAS = true>
__device__ __forceinline__ void scale_with_weight_lanes(const FwdParams& p,
                                                        const RowChunk<VEC, EXACT>& c, int i,
                                                        int64_t col, const Lanes<WT, VEC>& w,
                                                        float w_add, float rstd, float* v) {
#pragma unroll
  for (int k = 0; k < VEC; ++k) v[k] = v[k] * rstd * (w.get_float(k) + w_add);
  if (BIAS && p.bias) {
    float b[VEC];
    if constexpr (READONLY_BIAS) {
      load_readonly_upto<WT, VEC>(static_cast<const WT*>(p.bias) + col, c.left(i), b);
    } else {
      load_upto<WT, VEC>(static_cast<const WT*>(p.bias) + col, c.left(i), b);
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] += b[k];
  }
}

// The row's reciprocal scale for TOKEN (writing the scale), else 0. `row_amax` is the largest
// |v| of the row; every thread calls this.
template <int MODE>
__device__ __forceinline__ float token_factor(const FwdParams& p, int64_t row, bool writer,
                                              float row_amax) {
  if constexpr (MODE == NK_QUANT_TOKEN) {
    const float scale = dynamic_scale(row_amax, p.quant.qmax, p.quant.scale_ub);
    if (writer) static_cast<float*>(p.quant.scales)[row] = scale;
    return __frcp_rn(scale);  // = dynamic_multiplier(scale) (both correctly rounded), no division
  } else {
    return 0.0f;
  }
}

// One HBM pass, as rms_norm_fwd_registers: the row (or the cluster CTA's chunk of it) stays in
// registers, packed in x's type. TOKEN computes v twice (once for the row maximum, once to
// store): arithmetic is cheap here, registers are not.
//
// Loads come before the first store. In the SASS, a load that follows a store in program order
// stays behind it (the compiler cannot prove that they don't alias; ld.global.nc too), so a
// weight loaded per item after the row reduction waited for the previous item's codes: one L2
// round trip per item in series (docs/notes.md, fifth session). WEIGHT_FIRST loads the weight
// of every item with x, before the reduction (TENSOR and MXFP8 always did: it also hides the
// weight's latency behind the reduction); without it, TOKEN and BLOCK load it per item after
// the reduction, as before. The launcher's choice (plan_fwd_quant, NK_TUNE_QUANT_WEIGHT_FIRST):
// WEIGHT_FIRST for 16-bit x and weights except TOKEN at the small budget, where it took ptxas
// from 62 to 79 registers (one CTA of 256 threads less per SM; bounded to 64 it spilled 96
// bytes). float32 x or weights keep the per-item loads (WEIGHT_FIRST spilled 40-420 bytes in
// TOKEN and BLOCK there: wider lanes beside 64 elements of x). The bias is still
// loaded per item (its lanes would cost 16 more registers on every path, bias or not); with
// WEIGHT_FIRST its lines are prefetched to L2 before the reduction.
//
// The small register budget of 16-byte vectors of 16-bit x and weights is bounded to 64 registers,
// 2 x 512 threads per SM (the plain forward uses 58; these kernels used 62-64 before):
// unbounded, WEIGHT_FIRST took BLOCK to 69, a step down to 3 CTAs of 256 threads per SM.
// Bounded: 64 and 4 bytes of spills.
// Not TOKEN (see above), nor narrower vectors (the bound raised their counts, 40 -> 62 for
// TOKEN at 4-byte vectors: ptxas fills what it is allowed). 0 blocks per SM = no .minnctapersm
// (an explicit 1 also moved ptxas's counts). EXACT: no per-item range checks (RowChunk), where
// the plan says so; also in rms_norm_fwd_quant_token_folded.
//
// ADD_WEIGHT false: the launcher knows that weight_add(p) is -0.0 (no zero-centered weight), and
// the add, an identity, is compiled out (one instruction of about nine per value: measured 1-2%
// faster, twelfth session). BIAS false: it knows that there is no bias, and the bias's
// predicated loads and adds leave the SASS (about 19 instructions per vector, issued though
// predicated off: ncu, fourteenth session; with both false, 3-8% faster). amax: add_amax (per
// CTA after two barriers, per CTA by ticket, or per warp: launch_config.h,
// KernelFacts::quant_amax_per_warp and quant_amax_ticket). ROW_SUM_QUADS: cta_row_sum's QUADS
// (KernelFacts::quant_row_sum_quads).
//
// `c`: this thread's rows and columns (RowChunk by blockIdx, or a ticketed grid's forward unit).
template <typename XT, typename WT, int MODE, int VEC, int IMAX, bool WEIGHT_FIRST, bool EXACT,
          bool ADD_WEIGHT = true, bool BIAS = true, bool E4M3_BLOCKS = false,
          bool MX_PAIRS = false, bool ROW_SUM_QUADS = false>
__device__ __forceinline__ void fwd_quant_registers_row(const FwdParams& p,
                                                        const RowChunk<VEC, EXACT>& c) {
  __shared__ alignas(16) float scratch[kRowSumFloats<ROW_SUM_QUADS>];
  __shared__ float cluster_slot;        // TOKEN's row maximum (cluster_reduce)
  __shared__ ClusterPush cluster_push;  // the row sum, with clusters
  __shared__ CtaAmaxTicket amax_ticket;  // with p.quant.amax_ticket (add_amax)
  const RowShape& shape = p.shape;
  const int64_t row = c.row;

  if (shape.cluster_size > 1) cluster_push_init(cluster_push);
  if (p.quant.amax_ticket) cta_amax_ticket_init(amax_ticket);
  // TENSOR's scale, before any store (it was read after the rstd store: one more L2 round trip
  // between the reduction and the first code store).
  const float tensor_factor = MODE == NK_QUANT_TENSOR ? __ldg(p.quant.scale) : 0.0f;
  Lanes<XT, VEC> s[IMAX];
  load_x_lanes</*ONE_FORM=*/true>(p, c, s);
  const unsigned amax_before =
      p.quant.amax && p.quant.amax_per_warp ? amax_seen(p.quant.amax) : 0u;
  constexpr bool kPreloadWeight =
      WEIGHT_FIRST || MODE == NK_QUANT_TENSOR || MODE == NK_QUANT_MXFP8;
  [[maybe_unused]] Lanes<WT, VEC> w[kPreloadWeight ? IMAX : 1];
  [[maybe_unused]] const float w_add = ADD_WEIGHT ? weight_add(p) : -0.0f;
  if constexpr (kPreloadWeight) {
#pragma unroll
    for (int i = 0; i < IMAX; ++i) w[i] = ones_lanes<WT, VEC>();  // kept without a weight
    load_weight_lanes(p, c, w);  // every active item, partial vectors included
    if (BIAS && p.bias) prefetch_row_params<WT, IMAX, VEC, EXACT, BIAS>(p, c);
  } else {
    prefetch_row_params<WT, IMAX, VEC, EXACT, BIAS>(p, c);
  }
  add_residual_lanes</*ONE_FORM=*/true>(p, c, s);
  float sum_sq = sum_of_squares(s);
  sum_sq = cta_row_sum<ROW_SUM_QUADS>(sum_sq, scratch);
  // Pushed to the cluster's CTAs (st.async + mbarrier) as rms_norm_fwd_registers; the two full
  // cluster barriers of cluster_sum were a MEMBAR.ALL.GPU and a wait per CTA in the SASS.
  if (shape.cluster_size > 1) sum_sq = cluster_push_sum(sum_sq, cluster_push);
  const float rstd = 1.0f / sqrtf(sum_sq * shape.inv_hidden + p.eps);
  const bool row_writer = c.valid && c.rank == 0 && threadIdx.x == 0;
  if (p.rstd && row_writer) p.rstd[row] = rstd;

  // v of vector i (zeros where inactive).
  auto values = [&](int i, float* v) {
    const int64_t col = c.column(i);
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = s[i].get_float(k);
    if (!c.active(i)) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[k] = 0.0f;
    } else if (MODE == NK_QUANT_TOKEN && !(BIAS && p.bias)) {
      // v = (s * w_eff) * rstd, as nk_quant_mode has it for TOKEN without bias (and
      // rms_norm_fwd_quant_token_folded, which the launcher prefers where it fits).
      float w_eff[VEC];
      if constexpr (kPreloadWeight) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) w_eff[k] = w[i].get_float(k) + w_add;
      } else {
        load_scale<WT, VEC>(p, col, c.left(i), w_eff);
      }
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[k] = v[k] * w_eff[k] * rstd;
    } else if constexpr (kPreloadWeight) {
      scale_with_weight_lanes<WT, VEC, EXACT, true, BIAS>(p, c, i, col, w[i], w_add, rstd, v);
    } else {
      scale_in_place<WT, VEC, ADD_WEIGHT || BIAS>(p, col, c.left(i), v, rstd);
    }
  };

  float amax = 0.0f;
  float factor = tensor_factor;
  if constexpr (MODE == NK_QUANT_TOKEN) {
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      float v[VEC];
      values(i, v);
      amax = fmaxf(amax, max_abs<VEC>(v));
    }
    factor = token_factor<MODE>(p, row, row_writer, row_max(amax, shape, scratch, &cluster_slot));
  }
  if constexpr (E4M3_BLOCKS && (MODE == NK_QUANT_BLOCK || MX_PAIRS)) {
    static_assert(IMAX % 2 == 0, "items in pairs");
    const E4m3BlockItems<MODE> items(p, c);
#pragma unroll
    for (int i = 0; i < IMAX; i += 2) {
      if (i >= c.items) break;  // (as below)
      float va[VEC], vb[VEC];
      values(i, va);
      values(i + 1, vb);  // (zeros past c.items)
      amax = fmaxf(amax, fmaxf(max_abs<VEC>(va), max_abs<VEC>(vb)));
      items.quantize_pair(i, va, vb, i + 1 < c.items);
    }
  } else if constexpr (E4M3_BLOCKS) {
    const E4m3BlockItems<MODE> items(p, c);
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (i >= c.items) break;  // (as below)
      float v[VEC];
      values(i, v);
      amax = fmaxf(amax, max_abs<VEC>(v));
      items.quantize(i, v);
    }
  } else {
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (i >= c.items) break;  // uniform across the CTA; folds away where FULL (with_full_items)
      float v[VEC];
      values(i, v);
      if constexpr (MODE != NK_QUANT_TOKEN) amax = fmaxf(amax, max_abs<VEC>(v));
      quantize_vector<MODE, VEC>(p, row, c.column(i), c.left(i), c.active(i), v, factor);
    }
  }
  if (p.quant.amax) add_amax(p.quant, amax, amax_before, scratch, amax_ticket);
}

template <typename XT, typename WT, int MODE, int VEC, int IMAX, bool WEIGHT_FIRST = true,
          bool EXACT = false>
__global__ void __launch_bounds__(
    512, IMAX <= kSmallItems && sizeof(XT) * VEC == 16 && sizeof(XT) <= 2 && sizeof(WT) <= 2 &&
                 MODE != NK_QUANT_TOKEN
             ? 2
             : 0)
    rms_norm_fwd_quant_registers(FwdParams p) {
  fwd_quant_registers_row<XT, WT, MODE, VEC, IMAX, WEIGHT_FIRST, EXACT>(
      p, RowChunk<VEC, EXACT>(p.shape));
}

// The EXACT plans of 16-byte vectors of 16-bit x and weights at up to kSmallItems vectors per
// thread (LaunchConfig::pinned_registers), held to 56 registers, as
// rms_norm_fwd_registers_exact_small: three CTAs of 384 threads per SM (12288 columns as
// 384 x 4) and five of 224 (7168 columns), where the 64 of the 512-thread bound fit two and four.
// EXTRAS false: p.weight_extras() is false (fwd_quant_registers_row's ADD_WEIGHT and BIAS).
// FULL: every thread has kSmallItems vectors (LaunchConfig::full_items), a constant, so that
// the per-item tests of the runtime count leave the SASS.
// (No variant for e4m3 alone, as TOKEN's folded kernel has: compiled so, the per-tensor kernel
// spilled 20 bytes against 12 and ran 1-4% slower, MXFP8 1-2%, fifteenth session; the block
// modes' E4M3_BLOCKS kernels below also drop the runtime block width and scale work.)
// E4M3_BLOCKS: BLOCK where y is e4m3 in 128-column blocks, or MXFP8 where y is e4m3
// (LaunchConfig::fixed_format with KernelFacts::quant_block_e4m3 or quant_mxfp8_e4m3;
// E4m3BlockItems). MX_PAIRS: MXFP8's items in pairs (LaunchConfig::mx_pairs). ROW_SUM_QUADS:
// the row sum's warp sums read four at a time (block_sum_by_quads; LaunchConfig::row_sum_quads).
template <typename XT, typename WT, int MODE, int VEC, bool EXTRAS, bool FULL,
          bool E4M3_BLOCKS = false, bool MX_PAIRS = false, bool ROW_SUM_QUADS = false>
__global__ void __maxnreg__(56) rms_norm_fwd_quant_registers_exact_small(FwdParams p) {
  static_assert(sizeof(XT) == 2 && sizeof(WT) == 2 && VEC == 8 && MODE != NK_QUANT_TOKEN,
                "16-byte vectors of 16-bit x and weights at the small budget");
  static_assert(!MX_PAIRS || (MODE == NK_QUANT_MXFP8 && E4M3_BLOCKS), "MXFP8's e4m3 kernel");
  fwd_quant_registers_row<XT, WT, MODE, VEC, kSmallItems, true, true, EXTRAS, EXTRAS,
                          E4M3_BLOCKS, MX_PAIRS, ROW_SUM_QUADS>(
      p, with_full_items<FULL, kSmallItems>(RowChunk<VEC, true>(p.shape)));
}

// NK_QUANT_TOKEN without bias, in one HBM pass and one row reduction: v is (s * w_eff) * rstd
// (nk_quant_mode), so the row maximum of |v| is (max |s * w_eff|) * rstd exactly (rounding by
// a positive factor is monotonic), and the sum of squares and max |s * w_eff| are reduced
// together. The weight is loaded with x and held in registers (the launcher takes this kernel
// where x and the weight take at most 64 bytes per thread each). A separate kernel, not a
// flag of rms_norm_fwd_quant_registers: sharing its body moved ptxas's register count for the
// other modes from 64 to 80.
// (Never called with a bias.) EXTRAS false: no zero-centered add (FwdParams::weight_extras).
// (No variant for exactly IMAX vectors, as rms_norm_fwd_quant_registers_exact_small has: at the
// 56-register cap it spilled 56 bytes and ran 2-9% slower, fourteenth session.)
// ROW_SUM_QUADS: cta_row_sum_and_max's QUADS (KernelFacts::quant_row_sum_quads).
template <typename XT, typename WT, int VEC, int IMAX, bool EXACT, bool EXTRAS = true,
          bool ROW_SUM_QUADS = false>
__device__ __forceinline__ void fwd_quant_token_folded_row(const FwdParams& p) {
  static_assert(sizeof(WT) * VEC * IMAX <= 64 && sizeof(XT) * VEC * IMAX <= 64,
                "x and the weight are held in registers");
  __shared__ alignas(16) float scratch[2 * kRowSumFloats<ROW_SUM_QUADS>];
  __shared__ ClusterPushPair cluster_push;  // with clusters
  __shared__ CtaAmaxTicket amax_ticket;      // with p.quant.amax_ticket (add_amax)
  const RowShape& shape = p.shape;
  const RowChunk<VEC, EXACT> c(shape);
  const int64_t row = c.row;

  if (shape.cluster_size > 1) cluster_push_init(cluster_push);
  if (p.quant.amax_ticket) cta_amax_ticket_init(amax_ticket);
  Lanes<XT, VEC> s[IMAX];
  load_x_lanes</*ONE_FORM=*/true>(p, c, s);
  const unsigned amax_before =
      p.quant.amax && p.quant.amax_per_warp ? amax_seen(p.quant.amax) : 0u;
  // Ones without a weight; else zeros where inactive and past the row's end, as s.
  Lanes<WT, VEC> w[IMAX];
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    w[i] = !p.weight     ? ones_lanes<WT, VEC>()
           : c.active(i) ? load_lanes_upto<WT, VEC>(static_cast<const WT*>(p.weight) + c.column(i),
                                                   c.left(i))
                         : Lanes<WT, VEC>{};
  }
  const float w_add = EXTRAS ? weight_add(p) : -0.0f;  // (fwd_quant_registers_row)
  add_residual_lanes</*ONE_FORM=*/true>(p, c, s);
  // s * w_eff of vector i; zero where s is. No branches: per-vector tests (active, partial)
  // took the kernel to 112 registers (ptxas).
  auto products = [&](int i, float* sw) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) sw[k] = s[i].get_float(k) * (w[i].get_float(k) + w_add);
  };
  float sum_sq = sum_of_squares(s);
  float largest = 0.0f;
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    float sw[VEC];
    products(i, sw);
    largest = fmaxf(largest, max_abs<VEC>(sw));
  }
  // The cluster's part pushed (no full cluster barriers: see rms_norm_fwd_quant_registers).
  cta_row_sum_and_max<ROW_SUM_QUADS>(sum_sq, largest, scratch);
  if (shape.cluster_size > 1) cluster_push_sum_and_max(sum_sq, largest, cluster_push);
  const float rstd = 1.0f / sqrtf(sum_sq * shape.inv_hidden + p.eps);
  const bool row_writer = c.valid && c.rank == 0 && threadIdx.x == 0;
  if (p.rstd && row_writer) p.rstd[row] = rstd;
  const float row_amax = largest * rstd;  // = max |v| over the row, exactly
  const float factor = token_factor<NK_QUANT_TOKEN>(p, row, row_writer, row_amax);
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    if (i >= shape.items) break;  // uniform across the CTA
    float v[VEC];
    products(i, v);
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] *= rstd;
    quantize_vector<NK_QUANT_TOKEN, VEC>(p, row, c.column(i), c.left(i), c.active(i), v, factor);
  }
  if (p.quant.amax) {
    add_amax(p.quant, c.valid ? row_amax : 0.0f, amax_before, scratch, amax_ticket);
  }
}

template <typename XT, typename WT, int VEC, int IMAX, bool EXACT = false>
__global__ void __launch_bounds__(512, 2) rms_norm_fwd_quant_token_folded(FwdParams p) {
  fwd_quant_token_folded_row<XT, WT, VEC, IMAX, EXACT>(p);
}

// rms_norm_fwd_quant_token_folded's EXACT small-budget plans of 16-byte vectors of 16-bit x and
// weights, held to 56 registers (see rms_norm_fwd_quant_registers_exact_small). E4M3: y is e4m3
// (LaunchConfig::fixed_format), so the format's tests fold away (with_e4m3). ROW_SUM_QUADS: as
// fwd_quant_token_folded_row (LaunchConfig::row_sum_quads).
template <typename XT, typename WT, int VEC, bool EXTRAS, bool E4M3, bool ROW_SUM_QUADS = false>
__global__ void __maxnreg__(56) rms_norm_fwd_quant_token_folded_exact_small(FwdParams p) {
  static_assert(sizeof(XT) == 2 && sizeof(WT) == 2 && VEC == 8,
                "16-byte vectors of 16-bit x and weights at the small budget");
  fwd_quant_token_folded_row<XT, WT, VEC, kSmallItems, true, EXTRAS, ROW_SUM_QUADS>(
      with_e4m3<E4M3>(p));
}

// Any row length: one CTA per row (blockDim = (threads, 1)). Pass 1 sums squares (writing
// residual_out); TOKEN adds a pass for the row maximum; the last pass quantizes. Later passes
// re-read the normalized input, mostly from L2. Loops run the same number of times on every
// thread so that the block shuffles see the whole warp.
template <typename XT, typename WT, int MODE, int VEC>
__global__ void __launch_bounds__(512) rms_norm_fwd_quant_streaming(FwdParams p) {
  __shared__ float scratch[kMaxWarps];
  const RowShape& shape = p.shape;
  const int64_t row = blockIdx.x;
  const int64_t step = static_cast<int64_t>(blockDim.x) * VEC;
  // Before any store (residual_out, rstd), so that it does not wait behind them.
  const float tensor_factor = MODE == NK_QUANT_TENSOR ? __ldg(p.quant.scale) : 0.0f;
  float sum_sq = 0.0f;
  for (int64_t col = threadIdx.x * VEC; col < shape.hidden; col += step) {
    float s[VEC];
    load_input<XT, VEC>(p, row, col, shape.hidden - col, s);
#pragma unroll
    for (int k = 0; k < VEC; ++k) sum_sq += s[k] * s[k];
  }
  sum_sq = block_sum(sum_sq, scratch);
  const float rstd = 1.0f / sqrtf(sum_sq * shape.inv_hidden + p.eps);
  const bool row_writer = threadIdx.x == 0;
  if (p.rstd && row_writer) p.rstd[row] = rstd;
  const XT* src = p.residual ? static_cast<const XT*>(p.residual_out) + row * p.residual_out_stride
                             : static_cast<const XT*>(p.x) + row * p.x_stride;
  // TOKEN without bias rounds v as (s * w_eff) * rstd, as rms_norm_fwd_quant_token_folded.
  const bool fold = MODE == NK_QUANT_TOKEN && !p.bias;
  auto values = [&](int64_t col, float* v) {
    if (col < shape.hidden) {
      load_upto<XT, VEC>(src + col, shape.hidden - col, v);
      if (fold) {
        float w_eff[VEC];
        load_scale<WT, VEC>(p, col, shape.hidden - col, w_eff);
#pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] = v[k] * w_eff[k] * rstd;
      } else {
        scale_in_place<WT, VEC>(p, col, shape.hidden - col, v, rstd);
      }
    } else {
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[k] = 0.0f;
    }
  };

  float amax = 0.0f;
  float factor = tensor_factor;
  if constexpr (MODE == NK_QUANT_TOKEN) {
    for (int64_t base = 0; base < shape.hidden; base += step) {
      float v[VEC];
      values(base + threadIdx.x * VEC, v);
      amax = fmaxf(amax, max_abs<VEC>(v));
    }
    factor = token_factor<MODE>(p, row, row_writer, block_reduce(amax, scratch, MaxOp{}));
  }
  for (int64_t base = 0; base < shape.hidden; base += step) {
    const int64_t col = base + threadIdx.x * VEC;
    float v[VEC];
    values(col, v);
    if constexpr (MODE != NK_QUANT_TOKEN) amax = fmaxf(amax, max_abs<VEC>(v));
    quantize_vector<MODE, VEC>(p, row, col, shape.hidden - col, col < shape.hidden, v, factor);
  }
  if (p.quant.amax) cta_amax_to_global(amax, scratch, p.quant.amax);
}

// BLOCK and MXFP8 when the rows are not aligned for vectors of block / 32 elements (so a block
// would span more than a warp): one CTA per row, one element per access, block maxima in shared
// memory through an integer atomicMax on the bits of |v| (order-independent, so deterministic;
// NaN skipped, as fmaxf does in the shuffle path). Only misaligned rows come here: simple over
// fast. Dynamic shared memory: hidden / block unsigned.
template <typename XT, typename WT, int MODE>
__global__ void __launch_bounds__(256) rms_norm_fwd_quant_blocks_unaligned(FwdParams p) {
  extern __shared__ unsigned block_max_bits[];
  __shared__ float scratch[kMaxWarps];
  const RowShape& shape = p.shape;
  const QuantParams& q = p.quant;
  const int64_t row = blockIdx.x;
  const int64_t nblocks = shape.hidden / q.block;
  for (int64_t b = threadIdx.x; b < nblocks; b += blockDim.x) block_max_bits[b] = 0;
  float sum_sq = 0.0f;
  for (int64_t col = threadIdx.x; col < shape.hidden; col += blockDim.x) {
    float s[1];
    load_input<XT, 1>(p, row, col, 1, s);
    sum_sq += s[0] * s[0];
  }
  sum_sq = block_sum(sum_sq, scratch);  // its barriers also order the zeroing above
  const float rstd = 1.0f / sqrtf(sum_sq * shape.inv_hidden + p.eps);
  if (p.rstd && threadIdx.x == 0) p.rstd[row] = rstd;
  const XT* src = p.residual ? static_cast<const XT*>(p.residual_out) + row * p.residual_out_stride
                             : static_cast<const XT*>(p.x) + row * p.x_stride;
  auto value = [&](int64_t col) {
    float v[1];
    load_upto<XT, 1>(src + col, 1, v);
    scale_in_place<WT, 1>(p, col, 1, v, rstd);
    return v[0];
  };
  float amax = 0.0f;
  for (int64_t col = threadIdx.x; col < shape.hidden; col += blockDim.x) {
    const float a = fabsf(value(col));
    if (a == a) {
      amax = fmaxf(amax, a);
      atomicMax(&block_max_bits[col / q.block], __float_as_uint(a));
    }
  }
  __syncthreads();
  for (int64_t col = threadIdx.x; col < shape.hidden; col += blockDim.x) {
    const float v = value(col);
    const float m = __uint_as_float(block_max_bits[col / q.block]);
    const int64_t scale_index = row * nblocks + col / q.block;
    float factor;
    if constexpr (MODE == NK_QUANT_BLOCK) {
      const float scale = dynamic_scale(m, q.qmax, q.scale_ub);
      factor = __frcp_rn(scale);
      if (col % q.block == 0) static_cast<float*>(q.scales)[scale_index] = scale;
    } else {
      const int e = mx_scale_exponent(m, q.mx_emax);
      factor = mx_multiplier(e);
      if (col % q.block == 0) static_cast<uint8_t*>(q.scales)[scale_index] = mx_scale_byte(e);
    }
    store_quantized<1>(static_cast<uint8_t*>(p.y) + row * p.y_stride + col, 1, &v, factor, q.format);
  }
  if (q.amax) cta_amax_to_global(amax, scratch, q.amax);
}

}  // namespace normkit::cuda
