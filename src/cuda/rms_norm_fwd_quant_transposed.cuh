// RMSNorm forward with per-tensor codes in y and their transpose in y_t, in one kernel (the
// plan plan_fwd_quant_transposed; NK_TUNE_QUANT_FUSED_TRANSPOSE=1 or 2, off by default).
//
// The two-kernel path (the quantized forward, then transpose_bytes) reads y back: from HBM
// wherever y does not fit L2, so it moves 5 bytes per element for the 4 that its byte count
// has. Here a cluster of CLUSTER CTAs owns a run of 32 consecutive rows: each CTA normalizes
// 32 / CLUSTER of them one after another (the whole row in the CTA, x of the next LOOK rows
// already loaded), writes their codes to y and keeps them in its shared memory; then every CTA
// writes a share of the columns of y_t, each column as one 32-byte run (a whole sector) that it
// gathers from the cluster's tiles (distributed shared memory), 4 columns at a time.
//
// rms_norm_fwd_quant_transposed (setting 1): one run per cluster. Measured 1.2-1.6x slower
// than the two kernels at 1M+ elements (eighth session): while a CTA writes y_t it has no loads
// in flight. rms_norm_fwd_quant_transposed_persistent (setting 2; not yet run on a GPU):
// resident clusters walk the runs with two tiles each, writing run n's y_t right after run
// n + 1's first row, while the next rows' loads are in flight.
#pragma once

#include <cooperative_groups.h>

#include "cuda/async_copy.cuh"    // shared_address
#include "cuda/bulk_copy.cuh"     // cluster_arrive, cluster_wait
#include "cuda/byte_transpose.cuh"
#include "cuda/reduce.cuh"        // cluster_address
#include "cuda/launch_config.h"  // kTransposedRun: rows (bytes) of one y_t run, a 32-byte sector
#include "cuda/rms_norm_fwd_quant_kernels.cuh"

namespace normkit::cuda {

// Rows of x loaded ahead of the one being normalized.
constexpr int kTransposedLookahead = 2;

// The 32-bit shared::cluster addresses of every CTA's copy of `tile` (the same offset in each
// CTA's shared memory): 32 bits a CTA where generic pointers took 64 (the persistent kernel
// spilled with those).
template <int CLUSTER>
__device__ __forceinline__ void cluster_tiles(const uint8_t* tile, unsigned (&tiles)[CLUSTER]) {
#pragma unroll
  for (int t = 0; t < CLUSTER; ++t) {
    if constexpr (CLUSTER > 1) {
      tiles[t] = cluster_address(tile, t);
    } else {
      tiles[t] = shared_address(tile);
    }
  }
}

// The word at `address` (shared::cluster with a cluster, else this CTA's shared window). The
// "memory" clobber keeps it after the barrier that makes the tiles' stores visible.
template <int CLUSTER>
__device__ __forceinline__ unsigned load_tile_word(unsigned address) {
  unsigned v;
  if constexpr (CLUSTER > 1) {
    asm volatile("ld.shared::cluster.u32 %0, [%1];\n" : "=r"(v) : "r"(address) : "memory");
  } else {
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(address) : "memory");
  }
  return v;
}

// Normalizes `row` (x in s, packed), writes its codes to y and to tile_row (hidden bytes);
// returns the row's largest |v|. Every thread of the CTA calls it (a CTA row sum).
template <typename XT, typename WT, int VEC, int IMAX>
__device__ __forceinline__ float quantize_row_to_tile(const FwdParams& p, int64_t row,
                                                      Lanes<XT, VEC> (&s)[IMAX],
                                                      const Lanes<WT, VEC> (&w)[IMAX],
                                                      float w_add, float factor, float* scratch,
                                                      uint8_t* tile_row) {
  const RowChunk<VEC> c(p.shape, row);
  add_residual_lanes(p, c, s);
  const float sum_sq = cta_row_sum(sum_of_squares(s), scratch);
  const float rstd = 1.0f / sqrtf(sum_sq * p.shape.inv_hidden + p.eps);
  if (p.rstd && threadIdx.x == 0) p.rstd[row] = rstd;
  uint8_t* y = static_cast<uint8_t*>(p.y) + row * p.y_stride;
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    if (!c.active(i)) continue;
    const int64_t col = c.column(i);
    float v[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = s[i].get_float(k);
    // The bias by plain loads: in a loop over rows nvcc hoisted its ld.global.nc above the
    // null test (see scale_with_weight_lanes).
    scale_with_weight_lanes<WT, VEC, false, false>(p, c, i, col, w[i], w_add, rstd, v);
    amax = fmaxf(amax, max_abs<VEC>(v));
    unsigned word[(VEC + 3) / 4];
    quantize_to_words<VEC>(v, factor, p.quant.format, word);
    // y and the tile: whole vectors (hidden % VEC == 0), word-aligned in both.
    if constexpr (VEC == 8) {
      __stcg(reinterpret_cast<uint2*>(y + col), make_uint2(word[0], word[1]));
      *reinterpret_cast<uint2*>(tile_row + col) = make_uint2(word[0], word[1]);
    } else {
      __stcg(reinterpret_cast<unsigned*>(y + col), word[0]);
      *reinterpret_cast<unsigned*>(tile_row + col) = word[0];
    }
  }
  return amax;
}

// y_t[col][run_row0 .. run_row0 + run_rows) for this CTA's share of the columns (CTA `rank` of
// CLUSTER), 4 columns per thread at a time, from the cluster's tiles (tiles[t]: rows
// t * 32 / CLUSTER onwards of the run, `hidden` bytes apart), in two halves of 16 rows (16
// bytes per column each: half the registers of a whole run, which spilled in the persistent
// kernel). Rows of the run past the end are read from tile rows never written, and not stored.
template <int CLUSTER>
__device__ __forceinline__ void store_transposed_run(const QuantParams& q,
                                                     const unsigned (&tiles)[CLUSTER],
                                                     int64_t hidden, int rank, int64_t run_row0,
                                                     int run_rows) {
  constexpr int kRows = kTransposedRun / CLUSTER;
  constexpr int kHalf = kTransposedRun / 2;
  const int64_t share = hidden / CLUSTER;  // a multiple of 4 (hidden % 32 == 0)
  const int64_t col_end = (rank + 1) * share;
  uint8_t* y_t = q.y_t + run_row0;
  for (int64_t col = rank * share + 4 * threadIdx.x; col < col_end; col += 4 * blockDim.x) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      unsigned row_words[kHalf];  // row half * 16 + r's codes of columns col .. col + 3
#pragma unroll
      for (int r = 0; r < kHalf; ++r) {
        const int run_row = half * kHalf + r;
        row_words[r] = load_tile_word<CLUSTER>(
            tiles[run_row / kRows] + static_cast<unsigned>((run_row % kRows) * hidden + col));
      }
      unsigned run[4][kHalf / 4];  // column col + k's 16 codes of this half as words
#pragma unroll
      for (int j = 0; j < kHalf / 4; ++j) {
        unsigned columns[4];
        transpose_4x4_bytes(row_words[4 * j], row_words[4 * j + 1], row_words[4 * j + 2],
                            row_words[4 * j + 3], columns);
#pragma unroll
        for (int k = 0; k < 4; ++k) run[k][j] = columns[k];
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        uint8_t* to = y_t + (col + k) * q.y_t_stride + half * kHalf;
        if (run_rows == kTransposedRun) {
          __stcg(reinterpret_cast<uint4*>(to), make_uint4(run[k][0], run[k][1], run[k][2], run[k][3]));
        } else {  // the last run: its rows only (indices known at compile time: no local memory)
#pragma unroll
          for (int r = 0; r < kHalf; ++r) {
            if (half * kHalf + r < run_rows) {
              to[r] = static_cast<uint8_t>(run[k][r / 4] >> (8 * (r % 4)));
            }
          }
        }
      }
      // The second half's loads not hoisted above the first half's stores: one half's words
      // live at a time (unrolled with both halves in flight, or as a runtime loop, the
      // persistent kernel spilled).
      asm volatile("" ::: "memory");
    }
  }
}

// The x of the next LOOK rows moves up one: s gets the first, the last slot loads `next`.
template <typename XT, int VEC, int IMAX>
__device__ __forceinline__ void take_next_row(const FwdParams& p, const RowChunk<VEC>& next,
                                              Lanes<XT, VEC> (&ahead)[kTransposedLookahead][IMAX],
                                              Lanes<XT, VEC> (&s)[IMAX]) {
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    s[i] = ahead[0][i];
#pragma unroll
    for (int k = 0; k + 1 < kTransposedLookahead; ++k) ahead[k][i] = ahead[k + 1][i];
  }
  load_x_lanes(p, next, ahead[kTransposedLookahead - 1]);
}

// This thread's weight lanes (ones without a weight), once per CTA.
template <typename WT, int VEC, int IMAX>
__device__ __forceinline__ void load_row_weight(const FwdParams& p, Lanes<WT, VEC> (&w)[IMAX]) {
#pragma unroll
  for (int i = 0; i < IMAX; ++i) w[i] = ones_lanes<WT, VEC>();
  load_weight_lanes(p, RowChunk<VEC>(p.shape, 0), w);
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
  const int rank = CLUSTER == 1 ? 0 : static_cast<int>(blockIdx.x % CLUSTER);
  const int64_t run_row0 = static_cast<int64_t>(blockIdx.x / CLUSTER) * kTransposedRun;
  const int64_t r0 = run_row0 + rank * kRows;
  // 0 for the last run's CTAs past the end: they still write their share of y_t.
  const int tile_rows = static_cast<int>(
      max(static_cast<int64_t>(0), min(static_cast<int64_t>(kRows), shape.rows - r0)));
  const float factor = __ldg(p.quant.scale);  // before any store (see rms_norm_fwd_quant_registers)

  // Row r of the tile as a RowChunk; rows past the tile are past the end (no loads, zeros):
  // another CTA reads those.
  auto tile_row = [&](int r) {
    return RowChunk<VEC>(shape, r < tile_rows ? r0 + r : shape.rows);
  };
  Lanes<XT, VEC> ahead[kTransposedLookahead][IMAX];
#pragma unroll
  for (int k = 0; k < kTransposedLookahead; ++k) load_x_lanes(p, tile_row(k), ahead[k]);
  Lanes<WT, VEC> w[IMAX];
  load_row_weight(p, w);
  const float w_add = weight_add(p);

  float amax = 0.0f;
  for (int r = 0; r < tile_rows; ++r) {  // uniform across the CTA
    Lanes<XT, VEC> s[IMAX];
    take_next_row(p, tile_row(r + kTransposedLookahead), ahead, s);
    amax = fmaxf(amax, quantize_row_to_tile(p, r0 + r, s, w, w_add, factor, scratch,
                                            tile + r * shape.hidden));
  }

  // Every tile of the cluster written before any CTA reads it.
  if constexpr (CLUSTER > 1) {
    cooperative_groups::this_cluster().sync();
  } else {
    __syncthreads();
  }
  unsigned tiles[CLUSTER];
  cluster_tiles<CLUSTER>(tile, tiles);
  store_transposed_run<CLUSTER>(
      p.quant, tiles, shape.hidden, rank, run_row0,
      static_cast<int>(min(static_cast<int64_t>(kTransposedRun), shape.rows - run_row0)));
  // No CTA leaves (its shared memory with it) while another still reads its tile.
  if constexpr (CLUSTER > 1) cooperative_groups::this_cluster().sync();
  if (p.quant.amax) cta_amax_to_global(amax, scratch, p.quant.amax);
}

// The persistent form: grid = the clusters the device holds at once (at most one per run),
// cluster c taking runs c, c + clusters, ...; dynamic shared memory two tiles of
// (32 / CLUSTER) x hidden bytes, run n's rows in tile n % 2. The cluster barrier in halves:
//   rows of run n done          -> arrive A_n
//   after run n + 1's first row -> wait A_n, y_t of run n, arrive B_n
//   rows of run n + 1 done      -> wait B_n (run n + 2 may overwrite tile n % 2), arrive A_n+1
// and after the last run: wait, its y_t, arrive, wait (no CTA leaves while another reads it).
// Same launcher guarantees as rms_norm_fwd_quant_transposed.
template <typename XT, typename WT, int VEC, int IMAX, int CLUSTER>
__global__ void __launch_bounds__(512) rms_norm_fwd_quant_transposed_persistent(FwdParams p) {
  static_assert(CLUSTER == 2 || CLUSTER == 4 || CLUSTER == 8, "a cluster (split barriers)");
  static_assert(VEC == 4 || VEC == 8, "16-byte vectors of x (16- or 32-bit)");
  constexpr int kRows = kTransposedRun / CLUSTER;  // this CTA's rows of each run
  extern __shared__ __align__(16) uint8_t tile_pair[];  // [2][kRows][hidden]
  __shared__ float scratch[kMaxWarps];
  const RowShape& shape = p.shape;
  const int64_t hidden = shape.hidden;
  const int rank = static_cast<int>(blockIdx.x % CLUSTER);
  const int64_t clusters = gridDim.x / CLUSTER;
  const int64_t first_run = blockIdx.x / CLUSTER;
  const int64_t runs = (shape.rows + kTransposedRun - 1) / kTransposedRun;
  // >= 1: the grid holds at most one cluster per run.
  const int64_t my_runs = (runs - first_run + clusters - 1) / clusters;
  const int64_t positions = my_runs * kRows;  // this CTA's rows, past-the-end ones included
  auto run_row0 = [&](int64_t n) { return (first_run + n * clusters) * kTransposedRun; };
  // The row at position j of this CTA's sequence (rows of run 0, of run 1, ...); past the end:
  // shape.rows (no loads).
  auto row_at = [&](int64_t j) {
    const int64_t row = j < positions ? run_row0(j / kRows) + rank * kRows + j % kRows
                                      : shape.rows;
    return row < shape.rows ? row : shape.rows;
  };
  auto run_rows = [&](int64_t n) {
    return static_cast<int>(min(static_cast<int64_t>(kTransposedRun), shape.rows - run_row0(n)));
  };
  const float factor = __ldg(p.quant.scale);  // before any store (see rms_norm_fwd_quant_registers)

  Lanes<XT, VEC> ahead[kTransposedLookahead][IMAX];
#pragma unroll
  for (int k = 0; k < kTransposedLookahead; ++k) {
    load_x_lanes(p, RowChunk<VEC>(shape, row_at(k)), ahead[k]);
  }
  Lanes<WT, VEC> w[IMAX];
  load_row_weight(p, w);
  const float w_add = weight_add(p);
  // Run n's y_t from tile n % 2 of every CTA of the cluster.
  unsigned first_tiles[CLUSTER];
  cluster_tiles<CLUSTER>(tile_pair, first_tiles);
  auto store_run_of = [&](int64_t n) {
    unsigned tiles[CLUSTER];
    const unsigned offset = static_cast<unsigned>((n & 1) * kRows * hidden);
#pragma unroll
    for (int t = 0; t < CLUSTER; ++t) tiles[t] = first_tiles[t] + offset;
    store_transposed_run<CLUSTER>(p.quant, tiles, hidden, rank, run_row0(n), run_rows(n));
  };

  float amax = 0.0f;
  for (int64_t j = 0; j < positions; ++j) {  // uniform across the cluster's threads
    const int64_t n = j / kRows;
    const int r = static_cast<int>(j % kRows);
    Lanes<XT, VEC> s[IMAX];
    take_next_row(p, RowChunk<VEC>(shape, row_at(j + kTransposedLookahead)), ahead, s);
    const int64_t row = row_at(j);
    if (row < shape.rows) {
      amax = fmaxf(amax, quantize_row_to_tile(p, row, s, w, w_add, factor, scratch,
                                              tile_pair + ((n & 1) * kRows + r) * hidden));
    }
    if (r == 0 && n > 0) {  // run n - 1's y_t, while this run's next rows load
      cluster_wait();       // A_{n-1}
      store_run_of(n - 1);
      cluster_arrive();  // B_{n-1}
    }
    if (r == kRows - 1) {
      if (n > 0) cluster_wait();  // B_{n-1}
      cluster_arrive();           // A_n
    }
  }
  cluster_wait();  // A of the last run
  store_run_of(my_runs - 1);
  cluster_arrive();
  cluster_wait();
  if (p.quant.amax) cta_amax_to_global(amax, scratch, p.quant.amax);
}

}  // namespace normkit::cuda
