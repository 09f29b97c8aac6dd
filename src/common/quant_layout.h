// Shapes of the quantized forward's scale outputs (see nk_quant_mode): how many columns one
// scale covers and how many scales a call writes. Host-only helpers shared by validation, the
// CPU backend, the reference and the tests. They accept quant_block 0 (the mode's default).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/quant_rules.h"
#include "normkit/normkit.h"

namespace normkit {

// Columns of a row covered by one scale: hidden (TOKEN), the block (BLOCK, MXFP8), 0 for
// NONE and TENSOR (which write no `scales`).
inline int64_t quant_block_columns(nk_quant_mode mode, int64_t quant_block, int64_t hidden) {
  switch (mode) {
    case NK_QUANT_TOKEN: return hidden;
    case NK_QUANT_BLOCK: return quant_block == 0 ? kDefaultQuantBlock : quant_block;
    case NK_QUANT_MXFP8: return kMxfp8Block;
    default: return 0;
  }
}

// Scales per row (hidden / block columns), 0 when the mode writes none.
inline int64_t quant_scales_per_row(nk_quant_mode mode, int64_t quant_block, int64_t hidden) {
  const int64_t columns = quant_block_columns(mode, quant_block, hidden);
  return columns > 0 ? hidden / columns : 0;
}

// dtype of `scales`: e8m0 bytes for MXFP8, float32 otherwise.
inline nk_dtype quant_scale_dtype(nk_quant_mode mode) {
  return mode == NK_QUANT_MXFP8 ? NK_FLOAT8_E8M0 : NK_FLOAT32;
}

// Bytes of `scales` a call writes: [rows, scales per row], dense.
inline size_t quant_scales_bytes(nk_quant_mode mode, int64_t quant_block, int64_t rows,
                                 int64_t hidden) {
  const size_t element = mode == NK_QUANT_MXFP8 ? 1 : 4;
  return static_cast<size_t>(rows * quant_scales_per_row(mode, quant_block, hidden)) * element;
}

}  // namespace normkit
