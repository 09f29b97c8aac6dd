#include "dtype_names.h"

#include <stdexcept>

namespace nktool {

const char* short_name(nk_dtype dtype) {
  switch (dtype) {
    case NK_FLOAT32: return "fp32";
    case NK_FLOAT16: return "fp16";
    case NK_BFLOAT16: return "bf16";
  }
  return "invalid";
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
  }
  return 0;
}
}  // namespace

nk_dtype lower_precision(nk_dtype a, nk_dtype b) {
  return significand_bits(a) <= significand_bits(b) ? a : b;
}

}  // namespace nktool
