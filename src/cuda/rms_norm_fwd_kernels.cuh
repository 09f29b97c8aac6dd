// RMSNorm forward kernels. Template parameters: element types of x (and residual,
// residual_out), of weight/bias, and of y; VEC elements per access; IMAX vectors per thread.
#pragma once

#include "cuda/element.cuh"
#include "cuda/kernel_params.h"
#include "cuda/launch_config.h"  // kSmallItems, kFwdWeightFirstMaxThreads
#include "cuda/reduce.cuh"

namespace normkit::cuda {

// The column scale as one add per value: w_eff = w + weight_add(p), where the add is 1 for a
// zero-centered weight and -0.0 otherwise (w + -0.0 is w bit for bit, -0.0 and NaN included).
// Testing p.zero_centered per value cost about 7 instructions per value in the SASS against 2
// here: the forward kernels issue instructions at 80-88% of the SM's rate (ncu, sixth
// session), so instructions, not bytes, set their speed. Params: FwdParams or BwdParams.
template <typename Params>
__device__ __forceinline__ float weight_add(const Params& p) {
  return p.weight && p.zero_centered ? 1.0f : -0.0f;
}

// Lanes of ones: the weight lanes of a kernel called without a weight, so that w + add is 1.
template <typename T, int VEC>
__device__ __forceinline__ Lanes<T, VEC> ones_lanes() {
  Lanes<T, VEC> lanes;
#pragma unroll
  for (int k = 0; k < VEC; ++k) lanes.set(k, from_float<T>(1.0f));
  return lanes;
}

// Scale of column values: weight (or 1 + weight), or 1 without a weight. EXTRAS false: the
// caller knows that the weight is not zero-centered (FwdParams::weight_extras).
template <typename WT, int VEC, typename Params, bool EXTRAS = true>
__device__ __forceinline__ void load_scale(const Params& p, int64_t col, int64_t n, float* w) {
  if (p.weight) {
    load_readonly_upto<WT, VEC>(static_cast<const WT*>(p.weight) + col, n, w);
    if constexpr (EXTRAS) {
      const float add = weight_add(p);
#pragma unroll
      for (int k = 0; k < VEC; ++k) w[k] += add;
    }
  } else {
#pragma unroll
    for (int k = 0; k < VEC; ++k) w[k] = 1.0f;
  }
}

// Loads VEC elements of the normalized input s at (row, col): x, or x + residual rounded to
// XT (then also stored to residual_out).
template <typename XT, int VEC>
__device__ __forceinline__ void load_input(const FwdParams& p, int64_t row, int64_t col,
                                           int64_t n, float* s) {
  load_upto<XT, VEC>(static_cast<const XT*>(p.x) + row * p.x_stride + col, n, s);
  if (p.residual) {
    float r[VEC];
    load_upto<XT, VEC>(static_cast<const XT*>(p.residual) + row * p.residual_stride + col, n, r);
#pragma unroll
    for (int k = 0; k < VEC; ++k) s[k] = round_to<XT>(s[k] + r[k]);
    store_upto<XT, VEC>(static_cast<XT*>(p.residual_out) + row * p.residual_out_stride + col, n,
                        s);
  }
}

// Sum over the threads of this CTA that share a row. QUADS: rows of more than a warp by
// block_sum_by_quads (the warps' sums read four at a time; bit for bit the same sum), `scratch`
// then kQuadSumFloats floats, 16-byte aligned.
template <bool QUADS = false>
__device__ __forceinline__ float cta_row_sum(float v, float* scratch) {
  if (blockDim.x <= 32) return group_sum(v, blockDim.x);
  if constexpr (QUADS) return block_sum_by_quads(v, scratch);
  return block_sum(v, scratch);
}

// cta_row_sum (bit for bit) for a kernel of one row per CTA that sums once: block_reduce's
// leading barrier, which guards scratch for a next call, is left out. `warp_sums` holds
// blockDim.x / 32 floats; QUADS: that count rounded up to whole quads, 16-byte aligned, read four
// at a time (write_quad_slots, reduce_quad_slots: bit for bit the same sum).
template <bool QUADS = false>
__device__ __forceinline__ float cta_row_sum_once(float v, float* warp_sums) {
  if (blockDim.x <= 32) return group_sum(v, blockDim.x);
  v = group_sum(v, 32);
  if constexpr (QUADS) {
    const float* group = write_quad_slots(v, warp_sums);
    __syncthreads();
    return reduce_quad_slots(group, SumOp{});
  }
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  float total = SumOp::kIdentity;
  for (unsigned w = 0; w < blockDim.x / 32; ++w) total += warp_sums[w];
  return total;
}

// Sum over the threads (and CTAs) that share a row.
__device__ __forceinline__ float row_sum(float v, const RowShape& shape, float* scratch,
                                         float* cluster_slot) {
  v = cta_row_sum(v, scratch);
  if (shape.cluster_size > 1) v = cluster_sum(v, cluster_slot);
  return v;
}

// cta_row_sum of `sum` (bit for bit) and the CTA's maximum of `max` (non-negative), sharing
// barriers. `scratch` holds 2 * kRowSumFloats<QUADS> floats (QUADS: block_sum_and_max_by_quads,
// 16-byte aligned).
template <bool QUADS = false>
__device__ __forceinline__ void cta_row_sum_and_max(float& sum, float& max,
                                                    float* scratch) {
  if (blockDim.x <= 32) {
    sum = group_sum(sum, blockDim.x);
    max = group_reduce(max, blockDim.x, MaxOp{});
  } else if constexpr (QUADS) {
    block_sum_and_max_by_quads(sum, max, scratch);
  } else {
    block_sum_and_max(sum, max, scratch);
  }
}

// Scales s (VEC values at column col) into the output values, in place: s * rstd * w_eff + b.
// EXTRAS false: p.weight_extras() is false (no add, no bias).
template <typename WT, int VEC, bool EXTRAS = true>
__device__ __forceinline__ void scale_in_place(const FwdParams& p, int64_t col, int64_t n, float* s,
                                               float rstd) {
  float w[VEC];
  load_scale<WT, VEC, FwdParams, EXTRAS>(p, col, n, w);
#pragma unroll
  for (int k = 0; k < VEC; ++k) s[k] = s[k] * rstd * w[k];
  if (EXTRAS && p.bias) {
    float b[VEC];
    load_readonly_upto<WT, VEC>(static_cast<const WT*>(p.bias) + col, n, b);
#pragma unroll
    for (int k = 0; k < VEC; ++k) s[k] += b[k];
  }
}

// The part of a row one thread of a registers kernel covers: the row of threadIdx.y in CTA
// `rank` of its cluster, vector i at column col_begin + (i * blockDim.x + threadIdx.x) * VEC.
// Threads of rows past the end stay (valid false): they still join the shuffles and barriers.
//
// EXACT: the launcher guarantees that every row is valid and that every item below `items` is
// a whole vector inside the chunk (chunks_exact in launch_config.h), so `active` is one
// uniform compare and `left` the constant VEC: the per-item 64-bit range checks and the
// partial-vector branches of every load and store leave the SASS. These kernels issue
// instructions at 80-88% of the SM's rate (ncu, sixth session), so those checks cost time.
template <int VEC, bool EXACT = false>
struct RowChunk {
  int rank;
  int64_t row;
  bool valid;
  int64_t col_begin, col_end;
  int items;

  __device__ __forceinline__ explicit RowChunk(const RowShape& shape)
      // Without clusters, no division by the runtime cluster size (about 20 instructions).
      : rank(shape.cluster_size == 1 ? 0 : blockIdx.x % shape.cluster_size),
        row(static_cast<int64_t>(shape.cluster_size == 1 ? blockIdx.x
                                                          : blockIdx.x / shape.cluster_size) *
                blockDim.y +
            threadIdx.y),
        valid(EXACT || row < shape.rows),
        col_begin(rank * shape.cols_per_cta),
        col_end(min(shape.hidden, col_begin + shape.cols_per_cta)),
        items(shape.items) {}
  // Row `row_index` whole (no clusters), for kernels that choose their rows themselves: a CTA
  // walking rows, or a ticketed grid's forward unit (rms_norm_fwd_quant_ticketed).
  __device__ __forceinline__ RowChunk(const RowShape& shape, int64_t row_index)
      : rank(0),
        row(row_index),
        valid(EXACT || row_index < shape.rows),
        col_begin(0),
        col_end(shape.hidden),
        items(shape.items) {}
  __device__ __forceinline__ int64_t column(int i) const {
    return col_begin + (static_cast<int64_t>(i) * blockDim.x + threadIdx.x) * VEC;
  }
  __device__ __forceinline__ bool active(int i) const {
    if constexpr (EXACT) {
      return i < items;
    } else {
      return i < items && valid && column(i) < col_end;
    }
  }
  // Elements of the row from vector i's start (VEC or more: a whole vector).
  __device__ __forceinline__ int64_t left(int i) const {
    if constexpr (EXACT) {
      return VEC;
    } else {
      return col_end - column(i);
    }
  }
};

// `c` with `items` the constant N where FULL (every thread of the plan has N vectors): its
// per-item tests then fold away (a runtime count cost a compare and predicate per item).
template <bool FULL, int N, int VEC, bool EXACT>
__device__ __forceinline__ RowChunk<VEC, EXACT> with_full_items(RowChunk<VEC, EXACT> c) {
  if constexpr (FULL) c.items = N;
  return c;
}

// The L2 policy of the row inputs (x, residual). Only 16-byte words take one: narrower vectors
// never create it. ONE_FORM: a policy in any case (evict-normal where no hint is asked), so that
// each load compiles to one form rather than a hinted and a plain copy, both issued. The
// quantized forwards take it: 2-3% faster per block, ~1% per tensor (NK_ONE_FORM_LOADS build,
// forty-fourth session); the plain forwards were level, float32's wide rows slower (spills).
template <typename XT, int VEC, bool ONE_FORM>
__device__ __forceinline__ ReadPolicy row_read_policy(const FwdParams& p) {
  constexpr bool kWords = sizeof(XT) * VEC >= 16;
  return ReadPolicy(kWords && p.evict_first_reads, kWords && p.evict_last_reads,
                    kWords && ONE_FORM);
}

// Loads this thread's vectors of x, packed (zeros where inactive). ONE_FORM: row_read_policy.
template <bool ONE_FORM = false, typename XT, int VEC, int IMAX, bool EXACT>
__device__ __forceinline__ void load_x_lanes(const FwdParams& p, const RowChunk<VEC, EXACT>& c,
                                             Lanes<XT, VEC> (&s)[IMAX]) {
  const XT* x = static_cast<const XT*>(p.x) + c.row * p.x_stride;
  const ReadPolicy read_policy = row_read_policy<XT, VEC, ONE_FORM>(p);
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    s[i] = c.active(i) ? load_lanes_upto<XT, VEC>(x + c.column(i), c.left(i), read_policy)
                       : Lanes<XT, VEC>{};
  }
}

// Weight and bias are read after the row reduction; their first touch in a CTA would otherwise
// add an HBM round trip there (it matters for small shapes, where nothing else hides it).
// One prefetch per 128-byte line: by the thread whose vector starts in it. Unrolled over IMAX
// and tested on the offset's low 32 bits (128 divides 2^32): as a runtime loop over 64-bit
// columns with a signed remainder, this was about 170 instructions per thread in the SASS,
// a fifth of the plain forward's at 8192 x 8192.
// BIAS false: the caller knows that p.bias is null.
template <typename WT, int IMAX, int VEC, bool EXACT, bool BIAS = true>
__device__ __forceinline__ void prefetch_row_params(const FwdParams& p,
                                                    const RowChunk<VEC, EXACT>& c) {
  if (!c.valid || threadIdx.y != 0) return;
  const void* bias = BIAS ? p.bias : nullptr;
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    const int64_t col = c.column(i);
    const unsigned offset = static_cast<unsigned>(col) * sizeof(WT) % 128;
    if (c.active(i) && offset < VEC * sizeof(WT)) prefetch_params_l2<WT>(p.weight, bias, col);
  }
}

// Rows misaligned for 16-byte vectors give a thread many narrow items. Loaded one item at a
// time after the row reduction, each weight load waits for the previous item's store (the
// compiler keeps them in order): one L2 round trip per item, 12 at 29 x 17389. Such kernels
// load the weight of every item with x instead, when that is at most 16 elements per thread
// (ptxas: 75 -> 108 registers at 2-byte vectors, still one 512-thread CTA per SM). Aligned rows
// keep the L2 prefetch: on the large shapes the registers would cost CTAs per SM.
template <typename XT, int VEC, int IMAX>
constexpr bool kWeightWithX = sizeof(XT) * VEC < 16 && VEC * IMAX <= 16;

// This thread's weight lanes (left as they are without a weight).
template <typename WT, int VEC, int IMAX, bool EXACT>
__device__ __forceinline__ void load_weight_lanes(const FwdParams& p,
                                                  const RowChunk<VEC, EXACT>& c,
                                                  Lanes<WT, VEC> (&w)[IMAX]) {
  if (!p.weight) return;
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    if (c.active(i)) {
      w[i] = load_readonly_lanes_upto<WT, VEC>(static_cast<const WT*>(p.weight) + c.column(i),
                                              c.left(i));
    }
  }
}

// load_scale from weight lanes already in registers (not read without a weight).
template <typename WT, int VEC, typename Params>
__device__ __forceinline__ void weight_scale(const Params& p, const Lanes<WT, VEC>& lanes,
                                             float* w) {
  const float add = weight_add(p);
#pragma unroll
  for (int k = 0; k < VEC; ++k) w[k] = p.weight ? lanes.get_float(k) + add : 1.0f;
}

// scale_in_place with the weight already in registers (bit for bit the same arithmetic).
template <typename WT, int VEC>
__device__ __forceinline__ void scale_with_weight(const FwdParams& p, const Lanes<WT, VEC>& lanes,
                                                  int64_t col, int64_t n, float* s, float rstd) {
  float w[VEC];
  weight_scale<WT, VEC>(p, lanes, w);
#pragma unroll
  for (int k = 0; k < VEC; ++k) s[k] = s[k] * rstd * w[k];
  if (p.bias) {
    float b[VEC];
    load_readonly_upto<WT, VEC>(static_cast<const WT*>(p.bias) + col, n, b);
#pragma unroll
    for (int k = 0; k < VEC; ++k) s[k] += b[k];
  }
}

// With a residual: s = x + residual rounded to XT, stored to residual_out. All residual loads
// come before the first store (a store between two loads would keep the compiler from issuing
// the loads together: they might alias). ONE_FORM: row_read_policy.
template <bool ONE_FORM = false, typename XT, int VEC, int IMAX, bool EXACT>
__device__ __forceinline__ void add_residual_lanes(const FwdParams& p,
                                                   const RowChunk<VEC, EXACT>& c,
                                                   Lanes<XT, VEC> (&s)[IMAX]) {
  if (!p.residual) return;
  const ReadPolicy read_policy = row_read_policy<XT, VEC, ONE_FORM>(p);
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    const int64_t col = c.column(i);
    if (c.active(i)) {
      const Lanes<XT, VEC> r = load_lanes_upto<XT, VEC>(
          static_cast<const XT*>(p.residual) + c.row * p.residual_stride + col, c.left(i),
          read_policy);
      float sum[VEC];
#pragma unroll
      for (int k = 0; k < VEC; ++k) sum[k] = to_float(s[i].get(k)) + to_float(r.get(k));
      s[i] = pack_lanes<XT, VEC>(sum);
    }
  }
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    const int64_t col = c.column(i);
    XT* out = static_cast<XT*>(p.residual_out) + c.row * p.residual_out_stride + col;
    if (c.active(i)) {
      if (c.left(i) >= VEC) {
        s[i].store(out);
      } else {
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          if (k < c.left(i)) out[k] = s[i].get(k);
        }
      }
    }
  }
}

// This thread's share of the row's sum of squares.
template <typename XT, int VEC, int IMAX>
__device__ __forceinline__ float sum_of_squares(const Lanes<XT, VEC> (&s)[IMAX]) {
  float sum_sq = 0.0f;
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const float v = s[i].get_float(k);
      sum_sq += v * v;
    }
  }
  return sum_sq;
}

// One HBM pass: every thread keeps its part of the row in registers, packed in x's own type
// (half the registers of float32 for 16-bit types, so more rows in flight per SM), between the
// sum of squares and the output. blockDim = (threads per row, rows per block); a cluster of
// shape.cluster_size consecutive CTAs shares one row, each covering cols_per_cta columns.
// Weight and bias go through the read-only path, which may run ahead of the residual_out
// stores. EXACT: no per-item range checks (RowChunk), where the plan says so. EXTRAS false: the
// launcher knows that p.weight_extras() is false (no zero-centered add, no bias). WEIGHT_FIRST:
// the weight loaded with x, before the reduction (kWeightWithX, or the plan's weight_first),
// rather than prefetched to L2 and read after it. ROW_SUM_QUADS: cta_row_sum's QUADS
// (LaunchConfig::row_sum_quads). The kernels below are its entry points.
template <typename XT, typename WT, typename YT, int VEC, int IMAX, bool EXACT,
          bool EXTRAS = true, bool WEIGHT_FIRST = kWeightWithX<XT, VEC, IMAX>,
          bool ROW_SUM_QUADS = false>
__device__ __forceinline__ void fwd_registers_row(const FwdParams& p) {
  __shared__ alignas(16) float scratch[kRowSumFloats<ROW_SUM_QUADS>];
  __shared__ ClusterPush cluster_push;  // with clusters
  const RowShape& shape = p.shape;
  const RowChunk<VEC, EXACT> c(shape);
  const int64_t row = c.row;

  if (shape.cluster_size > 1) cluster_push_init(cluster_push);
  Lanes<XT, VEC> s[IMAX];
  load_x_lanes(p, c, s);
  constexpr bool kWeightFirst = WEIGHT_FIRST;
  [[maybe_unused]] Lanes<WT, VEC> w[kWeightFirst ? IMAX : 1];
  if constexpr (kWeightFirst) {
    load_weight_lanes(p, c, w);
  } else {
    prefetch_row_params<WT, IMAX, VEC, EXACT, EXTRAS>(p, c);
  }
  add_residual_lanes(p, c, s);
  float sum_sq = sum_of_squares(s);
  sum_sq = cta_row_sum<ROW_SUM_QUADS>(sum_sq, scratch);
  if (shape.cluster_size > 1) sum_sq = cluster_push_sum(sum_sq, cluster_push);
  if (!c.valid) return;
  const float rstd = 1.0f / sqrtf(sum_sq * shape.inv_hidden + p.eps);
  if (p.rstd && c.rank == 0 && threadIdx.x == 0) p.rstd[row] = rstd;
  YT* y = static_cast<YT*>(p.y) + row * p.y_stride;
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    const int64_t col = c.column(i);
    if (c.active(i)) {
      float out[VEC];
#pragma unroll
      for (int k = 0; k < VEC; ++k) out[k] = s[i].get_float(k);
      if constexpr (kWeightFirst) {
        scale_with_weight<WT, VEC>(p, w[i], col, c.left(i), out, rstd);
      } else {
        scale_in_place<WT, VEC, EXTRAS>(p, col, c.left(i), out, rstd);
      }
      store_upto<YT, VEC>(y + col, c.left(i), out);
    }
  }
}

// ROW_SUM_QUADS: as fwd_registers_row (16-bit x, weight and y, EXACT plans only).
template <typename XT, typename WT, typename YT, int VEC, int IMAX, bool EXACT = false,
          bool ROW_SUM_QUADS = false>
__global__ void __launch_bounds__(512) rms_norm_fwd_registers(FwdParams p) {
  fwd_registers_row<XT, WT, YT, VEC, IMAX, EXACT, true, kWeightWithX<XT, VEC, IMAX>,
                    ROW_SUM_QUADS>(p);
}

// The EXACT plans of 16-bit x at up to kSmallItems vectors per thread, held to 56 registers so
// that three CTAs of 384 threads (12288 bf16 columns as 384 x 4) fit an SM. Under the bound of
// 512 threads ptxas gave this code 53 or 64 registers depending on unrelated changes elsewhere
// (eleventh session: at 64, two CTAs per SM, 4096 x 12288 forward 72.7 -> 75 us). (__maxnreg__
// does not combine with __launch_bounds__, and as the only bound on the other kernels it let
// ptxas take 82-90 registers where 63-64 fit two CTAs of 512 threads.) EXTRAS, ROW_SUM_QUADS:
// as fwd_registers_row.
template <typename XT, typename WT, typename YT, int VEC, int IMAX, bool EXTRAS,
          bool ROW_SUM_QUADS = false>
__global__ void __maxnreg__(56) rms_norm_fwd_registers_exact_small(FwdParams p) {
  static_assert(IMAX <= kSmallItems && sizeof(XT) == 2, "16-bit x at the small budget");
  fwd_registers_row<XT, WT, YT, VEC, IMAX, true, EXTRAS, kWeightWithX<XT, VEC, IMAX>,
                    ROW_SUM_QUADS>(p);
}

// The EXACT plans of 16-bit types on few CTAs per SM with the weight loaded with x
// (LaunchConfig::weight_first): one wave of CTAs, each with a row's single round trip. Bound
// to 4 CTAs of kFwdWeightFirstMaxThreads per SM (64 registers; ptxas took 64 under a bound of
// 512 threads as well, thirty-sixth session).
template <typename XT, typename WT, typename YT, int VEC, int IMAX>
__global__ void __launch_bounds__(kFwdWeightFirstMaxThreads, 4)
    rms_norm_fwd_registers_weight_first(FwdParams p) {
  static_assert(IMAX <= kSmallItems && sizeof(XT) == 2, "16-bit x at the small budget");
  fwd_registers_row<XT, WT, YT, VEC, IMAX, true, true, true>(p);
}

// The EXACT plans of 16-bit x at up to 2 vectors per thread, held to fewer registers than
// the kernels compiled for 4 (LaunchConfig::register_bound): more warps per SM to hide each
// row's load latency with. (A template parameter cannot set __maxnreg__: one kernel per bound.)
template <typename XT, typename WT, typename YT, int VEC, bool EXTRAS>
__global__ void __maxnreg__(40) rms_norm_fwd_registers_exact_40(FwdParams p) {
  static_assert(sizeof(XT) == 2, "16-bit x");
  fwd_registers_row<XT, WT, YT, VEC, 2, true, EXTRAS>(p);
}
template <typename XT, typename WT, typename YT, int VEC, bool EXTRAS>
__global__ void __maxnreg__(32) rms_norm_fwd_registers_exact_32(FwdParams p) {
  static_assert(sizeof(XT) == 2, "16-bit x");
  fwd_registers_row<XT, WT, YT, VEC, 2, true, EXTRAS>(p);
}

// fwd_registers_row for EXACT plans of one CTA per row, at ROWS rows per row group
// (LaunchConfig::rows_per_group): CTA b's row group y takes rows (b * ROWS + r) * blockDim.y + y,
// r < ROWS. Every row's x loads are issued before the first reduction, so each thread has ROWS
// rows of loads in flight on a grid ROWS times smaller. Each row's arithmetic is
// fwd_registers_row's, in the same order: the same bits. Held to 64 registers (4 CTAs of 256
// threads per SM; under the 512-thread bound ptxas took 80, 3 CTAs). WEAK: y by plain st.global
// rather than __stcg (KernelFacts::fwd_weak_stores). ROW_SUM_QUADS: block_sums' QUADS (bit for
// bit; LaunchConfig::row_sum_quads).
template <typename XT, typename WT, typename YT, int VEC, int IMAX, int ROWS, bool EXTRAS,
          bool WEAK = false, bool ROW_SUM_QUADS = false>
__global__ void __maxnreg__(64) rms_norm_fwd_registers_rows(FwdParams p) {
  // (rows of more than a warp)
  __shared__ alignas(16) float scratch[ROWS * kRowSumFloats<ROW_SUM_QUADS>];
  const RowShape& shape = p.shape;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * ROWS * blockDim.y + threadIdx.y;
  const auto chunk = [&](int r) {
    return RowChunk<VEC, true>(shape, first + static_cast<int64_t>(r) * blockDim.y);
  };
  Lanes<XT, VEC> s[ROWS][IMAX];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) load_x_lanes(p, chunk(r), s[r]);
  prefetch_row_params<WT, IMAX, VEC, true, EXTRAS>(p, chunk(0));
  // (Row by row: the residual loads of a row wait for the residual_out stores of the one
  // before, which they might alias; all rows' at once would hold 2 x ROWS x IMAX vectors.)
#pragma unroll
  for (int r = 0; r < ROWS; ++r) add_residual_lanes(p, chunk(r), s[r]);
  float sum_sq[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) sum_sq[r] = sum_of_squares(s[r]);
  if (blockDim.x <= 32) {  // (cta_row_sum's two cases, the rows' barriers shared)
#pragma unroll
    for (int r = 0; r < ROWS; ++r) sum_sq[r] = group_sum(sum_sq[r], blockDim.x);
  } else {
    block_sums<ROWS, ROW_SUM_QUADS>(sum_sq, scratch);
  }
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const RowChunk<VEC, true> c = chunk(r);
    const float rstd = 1.0f / sqrtf(sum_sq[r] * shape.inv_hidden + p.eps);
    if (p.rstd && threadIdx.x == 0) p.rstd[c.row] = rstd;
    YT* y = static_cast<YT*>(p.y) + c.row * p.y_stride;
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (c.active(i)) {
        const int64_t col = c.column(i);
        float out[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) out[k] = s[r][i].get_float(k);
        scale_in_place<WT, VEC, EXTRAS>(p, col, VEC, out, rstd);
        store_vec<YT, VEC, WEAK>(y + col, out);  // (EXACT: whole vectors)
      }
    }
  }
}

// Any row length: one CTA per row; pass 1 sums squares (and writes residual_out), pass 2
// re-reads the normalized input, mostly from L2, and writes y. blockDim = (threads, 1).
template <typename XT, typename WT, typename YT, int VEC>
__global__ void __launch_bounds__(512) rms_norm_fwd_streaming(FwdParams p) {
  __shared__ float scratch[kMaxWarps];
  const RowShape& shape = p.shape;
  const int64_t row = blockIdx.x;
  const int64_t step = static_cast<int64_t>(blockDim.x) * VEC;
  float sum_sq = 0.0f;
  for (int64_t col = threadIdx.x * VEC; col < shape.hidden; col += step) {
    float s[VEC];
    load_input<XT, VEC>(p, row, col, shape.hidden - col, s);
#pragma unroll
    for (int k = 0; k < VEC; ++k) sum_sq += s[k] * s[k];
  }
  sum_sq = block_sum(sum_sq, scratch);
  const float rstd = 1.0f / sqrtf(sum_sq * shape.inv_hidden + p.eps);
  if (p.rstd && threadIdx.x == 0) p.rstd[row] = rstd;
  // The normalized input now lives in residual_out when a residual was added (this thread
  // wrote exactly these elements in pass 1).
  const XT* src = p.residual ? static_cast<const XT*>(p.residual_out) + row * p.residual_out_stride
                             : static_cast<const XT*>(p.x) + row * p.x_stride;
  for (int64_t col = threadIdx.x * VEC; col < shape.hidden; col += step) {
    float s[VEC];
    load_upto<XT, VEC>(src + col, shape.hidden - col, s);
    scale_in_place<WT, VEC>(p, col, shape.hidden - col, s, rstd);
    store_upto<YT, VEC>(static_cast<YT*>(p.y) + row * p.y_stride + col, shape.hidden - col, s);
  }
}

}  // namespace normkit::cuda
