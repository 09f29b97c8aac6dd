// Short dtype names used on the command line and in the tool's tables ("bf16", "fp16", "fp32"),
// and the precision order used to pick comparison tolerances.
#pragma once

#include <cstdint>
#include <string>

#include "normkit/normkit.h"

namespace nktool {

const char* short_name(nk_dtype dtype);  // "fp32", "fp16", "bf16", "e4m3", "e5m2", "int8", "e8m0"

// "e4m3", "e5m2", "int8" (and float8_ spellings). Throws std::invalid_argument.
nk_dtype parse_quant_dtype(const std::string& text);

// A quantization mode and its block size: "tensor", "token", "block"/"block128", "block64",
// "block32", "mxfp8". Throws std::invalid_argument.
struct QuantChoice {
  nk_quant_mode mode = NK_QUANT_NONE;
  int64_t block = 0;
};
QuantChoice parse_quant(const std::string& text);

// "bf16"/"bfloat16", "fp16"/"float16"/"half", "fp32"/"float32"/"float". Throws
// std::invalid_argument naming the accepted spellings.
nk_dtype parse_dtype(const std::string& text);

// The dtype with fewer significand bits (bf16 < fp16 < fp32).
nk_dtype lower_precision(nk_dtype a, nk_dtype b);

}  // namespace nktool
