// RMSNorm forward with per-tensor codes in y and their transpose in y_t, in one kernel (the
// plan plan_fwd_quant_transposed; NK_TUNE_QUANT_FUSED_TRANSPOSE=1). Measured 1.2-1.6x slower
// than the two kernels at 1M+ elements (eighth session): off by default.
//
// The two-kernel path (the quantized forward, then transpose_bytes) reads y back: from HBM
// wherever y does not fit L2, so it moves 5 bytes per element for the 4 that its byte count
// has. Here a cluster of CLUSTER CTAs owns a run of 32 consecutive rows: each CTA normalizes
// 32 / CLUSTER of them one after another (the whole row in the CTA, x of the next LOOK rows
// already loaded), writes their codes to y and keeps them in its shared memory; then every CTA
// writes a share of the columns of y_t, each column as one 32-byte run (a whole sector) that it
// gathers from the cluster's tiles (distributed shared memory), 4 columns at a time.
//
// The first version kept a CTA's own 8 or 16 rows and wrote y_t runs of 8 or 16 bytes, partial
// sectors: 2x slower than the two kernels at 8192x8192 (eighth session, docs/notes.md).
#pragma once

#include <cooperative_groups.h>

#include "cuda/launch_config.h"  // kTransposedRun: rows (bytes) of one y_t run, a 32-byte sector
#include "cuda/rms_norm_fwd_quant_kernels.cuh"

namespace normkit::cuda {

// Rows of x loaded ahead of the one being normalized.
constexpr int kTransposedLookahead = 2;

// From 4 words holding 4 columns' bytes of 4 consecutive rows (a, b, c, d: byte k = column k),
// the 4 words holding each column's bytes of those rows (out[k]: byte i = row i of column k).
__device__ __forceinline__ void transpose_4x4_bytes(unsigned a, unsigned b, unsigned c, unsigned d,
                                                    unsigned (&out)[4]) {
  const unsigned ab_low = __byte_perm(a, b, 0x5140), ab_high = __byte_perm(a, b, 0x7362);
  const unsigned cd_low = __byte_perm(c, d, 0x5140), cd_high = __byte_perm(c, d, 0x7362);
  out[0] = __byte_perm(ab_low, cd_low, 0x5410);
  out[1] = __byte_perm(ab_low, cd_low, 0x7632);
  out[2] = __byte_perm(ab_high, cd_high, 0x5410);
  out[3] = __byte_perm(ab_high, cd_high, 0x7632);
}

// blockDim = (threads_per_row, 1); grid = CLUSTER CTAs per 32-row run, in clusters of CLUSTER;
// dynamic shared memory (32 / CLUSTER) x hidden bytes. The launcher guarantees hidden % 32 == 0
// (whole vectors, whole words per cluster CTA's column share), y aligned for VEC-byte stores,
// y_t and its row stride for 16-byte stores, and threads_per_row * IMAX * VEC >= hidden.
template <typename XT, typename WT, int VEC, int IMAX, int CLUSTER>
__global__ void __launch_bounds__(512) rms_norm_fwd_quant_transposed(FwdParams p) {
  static_assert(CLUSTER == 1 || CLUSTER == 2 || CLUSTER == 4 || CLUSTER == 8, "cluster");
  static_assert(VEC == 4 || VEC == 8, "16-byte vectors of x (16- or 32-bit)");
  constexpr int kRows = kTransposedRun / CLUSTER;  // this CTA's rows of the run
  extern __shared__ __align__(16) uint8_t tile[];  // [kRows][hidden]: their codes
  __shared__ float scratch[kMaxWarps];
  const RowShape& shape = p.shape;
  const QuantParams& q = p.quant;
  const int64_t hidden = shape.hidden;
  const int rank = CLUSTER == 1 ? 0 : static_cast<int>(blockIdx.x % CLUSTER);
  const int64_t run_row0 = static_cast<int64_t>(blockIdx.x / CLUSTER) * kTransposedRun;
  const int64_t r0 = run_row0 + rank * kRows;
  // 0 for the last run's CTAs past the end: they still write their share of y_t.
  const int tile_rows = static_cast<int>(
      max(static_cast<int64_t>(0), min(static_cast<int64_t>(kRows), shape.rows - r0)));
  const float factor = __ldg(q.scale);  // before any store (see rms_norm_fwd_quant_registers)

  // Row r of the tile as a RowChunk; rows past the tile are past the end (no loads, zeros):
  // another CTA reads those.
  auto tile_row = [&](int r) {
    return RowChunk<VEC>(shape, r < tile_rows ? r0 + r : shape.rows);
  };
  // x of the tile's first LOOK rows, then the weight, once per tile.
  Lanes<XT, VEC> ahead[kTransposedLookahead][IMAX];
#pragma unroll
  for (int k = 0; k < kTransposedLookahead; ++k) load_x_lanes(p, tile_row(k), ahead[k]);
  Lanes<WT, VEC> w[IMAX];
#pragma unroll
  for (int i = 0; i < IMAX; ++i) w[i] = ones_lanes<WT, VEC>();  // kept without a weight
  load_weight_lanes(p, RowChunk<VEC>(shape, 0), w);
  const float w_add = weight_add(p);

  float amax = 0.0f;
  for (int r = 0; r < tile_rows; ++r) {  // uniform across the CTA
    const int64_t row = r0 + r;
    const RowChunk<VEC> c(shape, row);
    Lanes<XT, VEC> s[IMAX];
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      s[i] = ahead[0][i];
#pragma unroll
      for (int k = 0; k + 1 < kTransposedLookahead; ++k) ahead[k][i] = ahead[k + 1][i];
    }
    load_x_lanes(p, tile_row(r + kTransposedLookahead), ahead[kTransposedLookahead - 1]);
    add_residual_lanes(p, c, s);
    const float sum_sq = cta_row_sum(sum_of_squares(s), scratch);
    const float rstd = 1.0f / sqrtf(sum_sq * shape.inv_hidden + p.eps);
    if (p.rstd && threadIdx.x == 0) p.rstd[row] = rstd;
    uint8_t* y = static_cast<uint8_t*>(p.y) + row * p.y_stride;
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (!c.active(i)) continue;
      const int64_t col = c.column(i);
      float v[VEC];
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[k] = s[i].get_float(k);
      // (the bias by plain loads: see scale_with_weight_lanes)
      scale_with_weight_lanes<WT, VEC, false, false>(p, c, i, col, w[i], w_add, rstd, v);
      amax = fmaxf(amax, max_abs<VEC>(v));
      unsigned word[(VEC + 3) / 4];
      quantize_to_words<VEC>(v, factor, q.format, word);
      // y and the tile: whole vectors (hidden % VEC == 0), word-aligned in both.
      uint8_t* in_tile = tile + r * hidden + col;
      if constexpr (VEC == 8) {
        __stcg(reinterpret_cast<uint2*>(y + col), make_uint2(word[0], word[1]));
        *reinterpret_cast<uint2*>(in_tile) = make_uint2(word[0], word[1]);
      } else {
        __stcg(reinterpret_cast<unsigned*>(y + col), word[0]);
        *reinterpret_cast<unsigned*>(in_tile) = word[0];
      }
    }
  }

  namespace cg = cooperative_groups;
  // Every tile of the cluster written before any CTA reads it.
  if constexpr (CLUSTER > 1) {
    cg::this_cluster().sync();
  } else {
    __syncthreads();
  }
  const uint8_t* tiles[CLUSTER];
#pragma unroll
  for (int t = 0; t < CLUSTER; ++t) {
    if constexpr (CLUSTER > 1) {
      tiles[t] = cg::this_cluster().map_shared_rank(tile, t);
    } else {
      tiles[t] = tile;
    }
  }

  // y_t[col][run_row0 .. run_row0 + 32): this CTA's share of the columns, 4 per thread at a
  // time. Rows of the run past the end are read from tiles never written, and not stored.
  const int run_rows = static_cast<int>(
      min(static_cast<int64_t>(kTransposedRun), shape.rows - run_row0));
  const int64_t share = hidden / CLUSTER;  // a multiple of 4 (hidden % 32 == 0)
  const int64_t col_end = (rank + 1) * share;
  uint8_t* y_t = q.y_t + run_row0;
  for (int64_t col = rank * share + 4 * threadIdx.x; col < col_end; col += 4 * blockDim.x) {
    unsigned row_words[kTransposedRun];  // row r's codes of columns col .. col + 3
#pragma unroll
    for (int r = 0; r < kTransposedRun; ++r) {
      row_words[r] = *reinterpret_cast<const unsigned*>(tiles[r / kRows] +
                                                         (r % kRows) * hidden + col);
    }
    unsigned run[4][kTransposedRun / 4];  // column col + k's 32 codes as words
#pragma unroll
    for (int j = 0; j < kTransposedRun / 4; ++j) {
      unsigned columns[4];
      transpose_4x4_bytes(row_words[4 * j], row_words[4 * j + 1], row_words[4 * j + 2],
                          row_words[4 * j + 3], columns);
#pragma unroll
      for (int k = 0; k < 4; ++k) run[k][j] = columns[k];
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      uint8_t* to = y_t + (col + k) * q.y_t_stride;
      if (run_rows == kTransposedRun) {
        __stcg(reinterpret_cast<uint4*>(to), make_uint4(run[k][0], run[k][1], run[k][2], run[k][3]));
        __stcg(reinterpret_cast<uint4*>(to) + 1,
               make_uint4(run[k][4], run[k][5], run[k][6], run[k][7]));
      } else {  // the last run: its rows only (indices known at compile time: run stays in registers)
#pragma unroll
        for (int r = 0; r < kTransposedRun; ++r) {
          if (r < run_rows) to[r] = static_cast<uint8_t>(run[k][r / 4] >> (8 * (r % 4)));
        }
      }
    }
  }
  // No CTA leaves (its shared memory with it) while another still reads its tile.
  if constexpr (CLUSTER > 1) cg::this_cluster().sync();
  if (q.amax) cta_amax_to_global(amax, scratch, q.amax);
}

}  // namespace normkit::cuda
