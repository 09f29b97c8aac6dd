#include "dtype_names.h"

#include <stdexcept>

namespace nktool {

const char* short_name(nk_dtype dtype) {
  switch (dtype) {
    case NK_FLOAT32: return "fp32";
    case NK_FLOAT16: return "fp16";
    case NK_BFLOAT16: return "bf16";
    case NK_FLOAT8_E4M3: return "e4m3";
    case NK_FLOAT8_E5M2: return "e5m2";
    case NK_INT8: return "int8";
    case NK_FLOAT8_E8M0: return "e8m0";
  }
  return "invalid";
}

nk_dtype parse_quant_dtype(const std::string& text) {
  if (text == "e4m3" || text == "fp8_e4m3" || text == "float8_e4m3") return NK_FLOAT8_E4M3;
  if (text == "e5m2" || text == "fp8_e5m2" || text == "float8_e5m2") return NK_FLOAT8_E5M2;
  if (text == "int8") return NK_INT8;
  throw std::invalid_argument("unknown quantized dtype '" + text + "': expected e4m3, e5m2 or int8");
}

QuantChoice parse_quant(const std::string& text) {
  if (text == "tensor") return {NK_QUANT_TENSOR, 0};
  if (text == "token") return {NK_QUANT_TOKEN, 0};
  if (text == "block" || text == "block128") return {NK_QUANT_BLOCK, 128};
  if (text == "block64") return {NK_QUANT_BLOCK, 64};
  if (text == "block32") return {NK_QUANT_BLOCK, 32};
  if (text == "mxfp8") return {NK_QUANT_MXFP8, 32};
  throw std::invalid_argument("unknown quantization '" + text +
                              "': expected tensor, token, block (= block128), block64, block32 "
                              "or mxfp8");
}

nk_dtype parse_dtype(const std::string& text) {
  if (text == "bf16" || text == "bfloat16") return NK_BFLOAT16;
  if (text == "fp16" || text == "float16" || text == "half") return NK_FLOAT16;
  if (text == "fp32" || text == "float32" || text == "float") return NK_FLOAT32;
  throw std::invalid_argument("unknown dtype '" + text + "': expected bf16, fp16 or fp32");
}

namespace {
int significand_bits(nk_dtype dtype) {
  switch (dtype) {
    case NK_FLOAT32: return 24;
    case NK_FLOAT16: return 11;
    case NK_BFLOAT16: return 8;
    default: return 0;  // quantized dtypes are outputs only
  }
}
}  // namespace

nk_dtype lower_precision(nk_dtype a, nk_dtype b) {
  return significand_bits(a) <= significand_bits(b) ? a : b;
}

}  // namespace nktool
