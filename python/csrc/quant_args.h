// The quantized forward's arguments as the bindings (DLPack and XLA FFI) need them: modes and 8-bit
// dtypes from the names the C API gives them (nk_quant_mode_name, nk_dtype_name), so no second
// table of names exists, and how many columns one scale covers (for output size checks).
#pragma once

#include <cstdint>
#include <string_view>

#include "normkit/normkit.h"

namespace normkit_py {

// "tensor", "token", "block", "mxfp8" (and "none"); false for any other name.
inline bool quant_mode_from_name(std::string_view name, nk_quant_mode* out) {
  for (int m = NK_QUANT_NONE; m <= NK_QUANT_MXFP8; ++m) {
    if (name == nk_quant_mode_name(static_cast<nk_quant_mode>(m))) {
      *out = static_cast<nk_quant_mode>(m);
      return true;
    }
  }
  return false;
}

// "float8_e4m3", "float8_e5m2", "int8"; false for any other name (the C API decides which
// of them a mode accepts).
inline bool quant_dtype_from_name(std::string_view name, nk_dtype* out) {
  for (nk_dtype d : {NK_FLOAT8_E4M3, NK_FLOAT8_E5M2, NK_INT8}) {
    if (name == nk_dtype_name(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

// Columns of a row one scale covers, as nk_quant_mode defines them (quant_block 0 is the
// mode's default: 128 for BLOCK, 32 for MXFP8); 0 for modes that write no `scales`. Only sizes
// output buffers: whether the block is valid is the C API's to say.
inline int64_t quant_scale_columns(nk_quant_mode mode, int64_t quant_block, int64_t hidden) {
  switch (mode) {
    case NK_QUANT_TOKEN: return hidden;
    case NK_QUANT_BLOCK: return quant_block == 0 ? 128 : quant_block;
    case NK_QUANT_MXFP8: return 32;
    default: return 0;
  }
}

// Element size of `scales`: e8m0 bytes for MXFP8, float32 otherwise.
inline nk_dtype quant_scale_dtype(nk_quant_mode mode) {
  return mode == NK_QUANT_MXFP8 ? NK_FLOAT8_E8M0 : NK_FLOAT32;
}

}  // namespace normkit_py
