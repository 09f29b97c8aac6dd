// Transpose of a matrix of one-byte codes (the quantized y into y_t) through 64 x 64 tiles in
// shared memory, so that both the reads of src rows and the writes of dst rows are runs of
// 16-byte words. The caller runs it right after the forward wrote src, while src is in L2.
#pragma once

#include <cstdint>

namespace normkit::cuda {

constexpr int kTransposeTile = 64;
constexpr int kTransposeThreads = 256;  // 4 threads x 16 bytes per tile row

struct TransposeParams {
  const uint8_t* src;
  int64_t src_stride;  // bytes between rows of src
  uint8_t* dst;        // dst[c][r] = src[r][c]
  int64_t dst_stride;  // bytes between rows of dst
  int64_t rows, cols;  // of src
  bool wide_loads;     // src, src_stride and cols allow 16-byte loads
  bool wide_stores;    // dst, dst_stride and rows allow 16-byte stores
};

__global__ void __launch_bounds__(kTransposeThreads) transpose_bytes(TransposeParams p) {
  // Rows padded by 4 bytes: the column reads of the second phase then spread over banks.
  __shared__ __align__(16) uint8_t tile[kTransposeTile][kTransposeTile + 4];
  const int64_t col_tiles = (p.cols + kTransposeTile - 1) / kTransposeTile;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x / col_tiles) * kTransposeTile;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x % col_tiles) * kTransposeTile;
  const int part = (threadIdx.x % 4) * 16;  // byte offset of this thread's 16 in a tile row

  {
    const int r = threadIdx.x / 4;  // tile row
    const int64_t row = r0 + r, col = c0 + part;
    const uint8_t* from = p.src + row * p.src_stride + col;
    if (row < p.rows && col < p.cols) {
      if (p.wide_loads) {
        const uint4 w = __ldcs(reinterpret_cast<const uint4*>(from));  // last use of src
        unsigned* to = reinterpret_cast<unsigned*>(&tile[r][part]);
        to[0] = w.x, to[1] = w.y, to[2] = w.z, to[3] = w.w;
      } else {
        for (int k = 0; k < 16 && col + k < p.cols; ++k) tile[r][part + k] = from[k];
      }
    }
  }
  __syncthreads();
  {
    const int c = threadIdx.x / 4;  // tile column = dst row
    const int64_t dst_row = c0 + c, dst_col = r0 + part;
    if (dst_row >= p.cols || dst_col >= p.rows) return;
    uint8_t* to = p.dst + dst_row * p.dst_stride + dst_col;
    if (p.wide_stores) {
      unsigned w[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        w[j] = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) w[j] |= static_cast<unsigned>(tile[part + 4 * j + k][c]) << (8 * k);
      }
      __stcg(reinterpret_cast<uint4*>(to), make_uint4(w[0], w[1], w[2], w[3]));
    } else {
      for (int k = 0; k < 16 && dst_col + k < p.rows; ++k) to[k] = tile[part + k][c];
    }
  }
}

}  // namespace normkit::cuda
