// Quantized outputs of the CPU forward (see nk_quant_mode): each finished float32 row v is turned
// into y codes and its scales by the shared rules of common/quant_rules.h; y_t is written from y
// in cache-sized tiles, a group of kTransposeRows rows at a time while those rows are in cache.
#pragma once

#include <cstdint>

#include "normkit/normkit.h"

namespace normkit::cpu {

class RowQuantizer {
 public:
  // `a` is validated and resolved (quant != NK_QUANT_NONE, quant_block resolved). Reads the
  // TENSOR scale from host memory once.
  explicit RowQuantizer(const nk_rms_norm_fwd_args& a);

  // Writes row r of y (and of scales, in the dynamic modes) from v[0..hidden); returns
  // max_j |v[j]| (NaN elements ignored), for amax.
  float write_row(int64_t r, const float* v) const;

 private:
  float write_tensor(uint8_t* y, const float* v) const;
  float write_blocks(int64_t r, uint8_t* y, const float* v, int64_t block) const;
  float write_mx_blocks(int64_t r, uint8_t* y, const float* v) const;

  const nk_rms_norm_fwd_args& a_;
  float tensor_scale_ = 0.0f;
  float qmax_ = 0.0f;
};

// Rows per group that write_transposed_rows turns into y_t: groups of this many rows (a
// multiple of 8, for the 8 x 8 blocks) give each y_t row whole 64-byte runs.
constexpr int64_t kTransposeRows = 64;

// y_t[j][r] = y[r][j] (1-byte elements) for rows [r0, r1) and all columns, reading y in
// kTransposeRows x 64 tiles. Meant to run right after those rows of y were written, so that
// they are read back from this core's cache rather than from memory (rows of 4 KiB apart).
void write_transposed_rows(const nk_rms_norm_fwd_args& a, int64_t r0, int64_t r1);

}  // namespace normkit::cpu
