// RMSNorm forward with per-tensor codes in y and their transpose in y_t, in one kernel (the
// plan plan_fwd_quant_transposed; NK_TUNE_QUANT_FUSED_TRANSPOSE=1 until it is measured).
//
// The two-kernel path (the quantized forward, then transpose_bytes) reads y back: from HBM
// wherever y does not fit L2, so it moves 5 bytes per element for the 4 that its byte count
// has. Here a CTA normalizes a tile of R consecutive rows one after another, the whole row in
// the CTA (threads_per_row x items vectors), x of the next LOOK rows already loaded; it writes
// each row's codes to y and keeps them in shared memory, then writes every column of the tile to
// y_t as one R-byte run (R = 8, 16 or 32; under 32 bytes a run fills part of a sector, the
// CTA of the neighbouring rows the rest at about the same time).
#pragma once

#include "cuda/rms_norm_fwd_quant_kernels.cuh"

namespace normkit::cuda {

// Rows of x loaded ahead of the one being normalized.
constexpr int kTransposedLookahead = 2;

// Stores R bytes, packed in R / 4 words, as one or two 16-byte words (8 bytes for R = 8).
template <int R>
__device__ __forceinline__ void store_run(uint8_t* p, const unsigned (&w)[R / 4]) {
  if constexpr (R == 8) {
    __stcg(reinterpret_cast<uint2*>(p), make_uint2(w[0], w[1]));
  } else {
#pragma unroll
    for (int j = 0; j < R / 16; ++j) {
      __stcg(reinterpret_cast<uint4*>(p) + j,
             make_uint4(w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3]));
    }
  }
}

// blockDim = (threads_per_row, 1); one CTA per R rows; dynamic shared memory R x hidden bytes.
// The launcher guarantees hidden % VEC == 0 (every vector whole), y and its row stride aligned
// for VEC-byte stores, y_t and its row stride for min(R, 16)-byte stores, and
// threads_per_row * IMAX * VEC >= hidden.
template <typename XT, typename WT, int VEC, int IMAX, int R>
__global__ void __launch_bounds__(512) rms_norm_fwd_quant_transposed(FwdParams p) {
  static_assert(R == 8 || R == 16 || R == 32, "runs of 8, 16 or 32 bytes");
  static_assert(VEC == 4 || VEC == 8, "16-byte vectors of x (16- or 32-bit)");
  extern __shared__ __align__(16) uint8_t tile[];  // [R][hidden]: the tile's codes
  __shared__ float scratch[kMaxWarps];
  const RowShape& shape = p.shape;
  const QuantParams& q = p.quant;
  const int64_t hidden = shape.hidden;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * R;
  const int tile_rows = static_cast<int>(min(static_cast<int64_t>(R), shape.rows - r0));
  const float factor = __ldg(q.scale);  // before any store (see rms_norm_fwd_quant_registers)

  // Row r of the tile as a RowChunk; rows past the tile are past the end (no loads, zeros):
  // the next tile's CTA reads those.
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
  load_weight_lanes(p, RowChunk<VEC>(shape, r0), w);
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
  __syncthreads();

  // y_t[col][r0 .. r0 + tile_rows): one thread per column; a full tile as one run.
  uint8_t* y_t = q.y_t + r0;
  for (int64_t col = threadIdx.x; col < hidden; col += blockDim.x) {
    uint8_t* to = y_t + col * q.y_t_stride;
    if (tile_rows == R) {
      unsigned run[R / 4];
#pragma unroll
      for (int j = 0; j < R / 4; ++j) {
        run[j] = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          run[j] |= static_cast<unsigned>(tile[(4 * j + k) * hidden + col]) << (8 * k);
        }
      }
      store_run<R>(to, run);
    } else {
      for (int r = 0; r < tile_rows; ++r) to[r] = tile[r * hidden + col];
    }
  }
  if (q.amax) cta_amax_to_global(amax, scratch, q.amax);
}

}  // namespace normkit::cuda
