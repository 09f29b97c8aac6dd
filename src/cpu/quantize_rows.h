// Quantized outputs of the CPU forward (see nk_quant_mode): each finished float32 row v is turned
// into y codes and its scales by the shared rules of common/quant_rules.h; y_t is written from y
// afterwards in cache-sized tiles.
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

// y_t[j][r] = y[r][j] for the whole tensor (1-byte elements), in parallel over column tiles.
void write_transposed(const nk_rms_norm_fwd_args& a);

}  // namespace normkit::cpu
