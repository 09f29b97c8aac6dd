#include "cpu/quantize_rows.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/quant_layout.h"
#include "common/quant_rules.h"
#include "cpu/quantize_span.h"
#include "cpu/row_ops.h"

namespace normkit::cpu {
namespace {

// The square tile transpose_tile walks: a 64 x 64 byte tile keeps its 64 source rows and 64
// destination rows in L1, and gives each y_t row a whole 64-byte run.
constexpr int64_t kTransposeTile = kTransposeRows;

// Transposes the 8 x 8 bytes of rows[0..8) in place (byte c of rows[r] <-> byte r of rows[c],
// rows read as little-endian words): three rounds that swap 4 x 4, 2 x 2 and 1 x 1 blocks.
// Element by element, the 64 x 64 tiles ran at ~0.7 GB/s (two threads; 25 ms of the 33 ms
// per-tensor forward with y_t at 4096 x 4096).
inline void transpose_8x8(uint64_t (&rows)[8]) {
  for (int i = 0; i < 4; ++i) {
    const uint64_t t = ((rows[i] >> 32) ^ rows[i + 4]) & 0x00000000ffffffffull;
    rows[i] ^= t << 32;
    rows[i + 4] ^= t;
  }
  for (int i : {0, 1, 4, 5}) {
    const uint64_t t = ((rows[i] >> 16) ^ rows[i + 2]) & 0x0000ffff0000ffffull;
    rows[i] ^= t << 16;
    rows[i + 2] ^= t;
  }
  for (int i : {0, 2, 4, 6}) {
    const uint64_t t = ((rows[i] >> 8) ^ rows[i + 1]) & 0x00ff00ff00ff00ffull;
    rows[i] ^= t << 8;
    rows[i + 1] ^= t;
  }
}

// Whether words hold their first byte lowest, as transpose_8x8 reads them.
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
#else
constexpr bool kLittleEndian = false;  // (unknown: element by element only)
#endif

// Writes the 64 bytes at `from` (64-byte aligned) to `to`. Where SSE2 and a 16-byte aligned `to`
// allow, by non-temporal stores: y_t is not read again by the forward, and plain stores first
// read each y_t line from memory (rows 4 KiB apart at 4096 x 4096, each visited once per
// 64-row group) only to overwrite it; streamed, the forward with y_t took ~6.7 ms instead of
// ~8.7 ms at 4096 x 4096. The caller orders these stores with stream_fence().
inline void store_run(uint8_t* to, const uint8_t* from) {
#if defined(__SSE2__)
  if (reinterpret_cast<uintptr_t>(to) % 16 == 0) {
    for (int k = 0; k < 4; ++k) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(to) + k,
                       _mm_load_si128(reinterpret_cast<const __m128i*>(from) + k));
    }
    return;
  }
#endif
  std::memcpy(to, from, kTransposeTile);
}

// Makes the non-temporal stores of store_run visible before any later store (so before the
// task's end is published to the thread that joins it).
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// y_t[j][r] = y[r][j] over rows [r0, r1) and columns [j0, j1) (at most kTransposeTile each),
// through two tiles of this thread's stack: the source rows copied in whole, transposed there
// (whole 8 x 8 blocks by transpose_8x8 on little-endian hosts, the ragged edges element by
// element), and the destination rows copied out whole (whole 64-byte runs by store_run).
// Transposed in place in y and y_t, the 8-byte pieces of rows a multiple of 4 KiB apart
// (4096 x 4096) kept evicting each other from L1 between the 8 visits each line took: 9 of
// the 15 ms of a per-tensor forward with y_t.
void transpose_tile(const uint8_t* y, int64_t y_stride, uint8_t* y_t, int64_t t_stride,
                    int64_t r0, int64_t r1, int64_t j0, int64_t j1) {
  alignas(64) uint8_t src[kTransposeTile][kTransposeTile];
  alignas(64) uint8_t dst[kTransposeTile][kTransposeTile];
  const int64_t rows = r1 - r0, cols = j1 - j0;
  // (Whole rows of the tile by a copy of constant size, which the compiler inlines; a call to
  // memcpy per 64 bytes cost as much as the transpose.)
  const auto copy_row = [](uint8_t* to, const uint8_t* from, int64_t n) {
    if (n == kTransposeTile) {
      std::memcpy(to, from, kTransposeTile);
    } else {
      std::memcpy(to, from, static_cast<size_t>(n));
    }
  };
  for (int64_t r = 0; r < rows; ++r) copy_row(src[r], y + (r0 + r) * y_stride + j0, cols);
  const int64_t rows8 = kLittleEndian ? rows / 8 * 8 : 0;
  const int64_t cols8 = kLittleEndian ? cols / 8 * 8 : 0;
  for (int64_t r = 0; r < rows8; r += 8) {
    for (int64_t c = 0; c < cols8; c += 8) {
      uint64_t block[8];
      for (int i = 0; i < 8; ++i) std::memcpy(&block[i], &src[r + i][c], 8);
      transpose_8x8(block);
      for (int i = 0; i < 8; ++i) std::memcpy(&dst[c + i][r], &block[i], 8);
    }
  }
  for (int64_t c = 0; c < cols; ++c) {  // the edges: columns past cols8 (all rows), rows past rows8
    for (int64_t r = c < cols8 ? rows8 : 0; r < rows; ++r) dst[c][r] = src[r][c];
  }
  for (int64_t c = 0; c < cols; ++c) {
    uint8_t* to = y_t + (j0 + c) * t_stride + r0;
    if (rows == kTransposeTile) {
      store_run(to, dst[c]);
    } else {
      copy_row(to, dst[c], rows);
    }
  }
}

}  // namespace

RowQuantizer::RowQuantizer(const nk_rms_norm_fwd_args& a) : a_(a), qmax_(quant_qmax(a.y_dtype)) {
  const bool block_mode = a.quant == NK_QUANT_BLOCK || a.quant == NK_QUANT_MXFP8;
  const bool bad = qmax_ == 0.0f || (a.quant == NK_QUANT_TENSOR && !a.scale) ||
                   (a.quant != NK_QUANT_TENSOR && !a.scales) ||
                   (block_mode && (a.quant_block <= 0 || a.hidden % a.quant_block != 0)) ||
                   (a.y_t && a.y_t_row_stride < a.rows);
  if (bad) {
    throw Error(NK_ERROR_INTERNAL, std::string("cpu::rms_norm_fwd: quantization arguments were "
                                               "not validated (quant ") +
                                       nk_quant_mode_name(a.quant) + ", y_dtype " +
                                       nk_dtype_name(a.y_dtype) + ")");
  }
  if (a.quant == NK_QUANT_TENSOR) tensor_scale_ = *a.scale;
}

float RowQuantizer::write_row(int64_t r, const float* v) const {
  uint8_t* y = static_cast<uint8_t*>(a_.y) + r * a_.y_row_stride;
  switch (a_.quant) {
    case NK_QUANT_TENSOR: return write_tensor(y, v);
    case NK_QUANT_TOKEN: return write_blocks(r, y, v, a_.hidden);
    case NK_QUANT_BLOCK: return write_blocks(r, y, v, a_.quant_block);
    case NK_QUANT_MXFP8: return write_mx_blocks(r, y, v);
    default: break;
  }
  throw Error(NK_ERROR_INTERNAL, "cpu::RowQuantizer: unexpected quant mode " +
                                     std::to_string(static_cast<int>(a_.quant)));
}

float RowQuantizer::write_tensor(uint8_t* y, const float* v) const {
  quantize_span(y, v, a_.hidden, tensor_scale_, a_.y_dtype);
  return abs_max(v, a_.hidden);
}

// TOKEN (block = hidden) and BLOCK: scale = dynamic_scale(block amax), y = Q(v * (1 / scale)).
float RowQuantizer::write_blocks(int64_t r, uint8_t* y, const float* v, int64_t block) const {
  float* scales = static_cast<float*>(a_.scales) + r * (a_.hidden / block);
  return quantize_scaled_blocks(y, scales, v, a_.hidden, block, qmax_, a_.scale_ub, a_.y_dtype);
}

// MXFP8: per 32 elements, e from the block amax, scale byte e + 127, y = Q(v * 2^-e).
float RowQuantizer::write_mx_blocks(int64_t r, uint8_t* y, const float* v) const {
  uint8_t* scales = static_cast<uint8_t*>(a_.scales) + r * (a_.hidden / kMxfp8Block);
  return quantize_mx_blocks(y, scales, v, a_.hidden, a_.y_dtype);
}

void write_transposed_rows(const nk_rms_norm_fwd_args& a, int64_t r0, int64_t r1) {
  const uint8_t* y = static_cast<const uint8_t*>(a.y);
  uint8_t* y_t = static_cast<uint8_t*>(a.y_t);
  for (int64_t j0 = 0; j0 < a.hidden; j0 += kTransposeTile) {
    const int64_t j1 = std::min(a.hidden, j0 + kTransposeTile);
    for (int64_t t0 = r0; t0 < r1; t0 += kTransposeRows) {
      const int64_t t1 = std::min(r1, t0 + kTransposeRows);
      transpose_tile(y, a.y_row_stride, y_t, a.y_t_row_stride, t0, t1, j0, j1);
    }
  }
  stream_fence();
}

}  // namespace normkit::cpu
